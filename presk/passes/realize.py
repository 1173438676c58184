"""`psk-realize`: give every launch its realization and its layout, and check the plan first.

`psk-realize{realization=f32}` realizes every site uniformly;
`realization=@R.json` reads a record of types per site; `plan=P.json` reads
a whole plan (realization and layouts; not with `realization`). Each site
gets `realize <storage, arith>` and a layout: the decisions the plan states
and, marked `default(...)`, the defaults of the others at the site's types.

The plan's first check runs here, before anything executes: every nest the
plan names exists and is a nest, and states only decisions of its kind and
values of their domains (an epilogue only on a product one add alone reads,
launched by itself, of the product's storage type). A violation is E7002,
placed at the nest; nothing is ever ignored. Conditions that need the
launch shapes are checked when the nest is lowered.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from presk.diagnostics import PlanWarning, PreskError
from presk import sizes
from presk.dialects.psk_realize import (
    DEFAULT_ATTRIBUTE,
    LayoutAttr,
    RealizationAttr,
    SiteOp,
    is_real_valued,
    layout_error,
    resolved_defaults,
)
from presk.dialects.psk_realize_layout import FULL_LANES, Json, layout_violation, tile_registers
from presk.dialects.psk_realize_nests import LAUNCHING_OPS, is_elementwise
from presk.ir.locations import error_at
from presk.ir.verify import exception_message
from presk.plans import Plan, plan_from_options
from presk.target import Machine, target_machine


def with_full_lanes(decisions: dict[str, Json], storage: str) -> dict[str, Json]:
    """`decisions` with `"lanes": "full"` made the target's register width for `storage` (1 for bf16).

    Resolved here, where the plan meets the machine, so that every later
    check and pass reads a number, and one that the target has.
    """
    if decisions.get("lanes") != FULL_LANES:
        return decisions
    return {**decisions, "lanes": target_machine().register_width(storage)}


def spilling_tile(decisions: dict[str, Json], machine: Machine) -> str | None:
    """How a vectorized register tile overflows `machine`'s vector registers, or None if it fits (or is no such tile).

    Such a tile is a valid point with the default's bits, so it is no E7002;
    but its running sums live on the stack, and a plan written for 32
    registers runs that way on 16 without a word (the course GPT's training
    step under its AVX-512 plan on `x86-64-v3`: 1.80× torch eager, against
    1.07× with tiles for 16 registers).
    """
    tile, lanes = decisions.get("tile"), decisions.get("lanes")
    if not (isinstance(tile, list) and len(tile) == 2 and all(isinstance(t, int) for t in tile)):
        return None
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 2 or tile[1] % lanes:
        return None
    needed = tile_registers(tile, lanes)
    if needed <= machine.vector_registers:
        return None
    return f"tile {tile} at {lanes} lanes: {needed} vectors live per k"


def _warn_of_spilling_tiles(plan: Plan, spilling: dict[str, str], machine: Machine) -> None:
    """One `PlanWarning` for every tile of `plan` that spills on `machine` (`spilling_tile`), the first three named."""
    if not spilling:
        return
    named = "; ".join(f"\"{nest}\" ({how})" for nest, how in list(spilling.items())[:3])
    more = f"; and {len(spilling) - 3} more" if len(spilling) > 3 else ""
    warnings.warn(
        PlanWarning(
            f"{plan.source}: {len(spilling)} nest{'s' if len(spilling) > 1 else ''} with register tiles that need more "
            f"than the {machine.vector_registers} vector registers of this target ({machine.cpu_name}), so that their "
            f"running sums spill on every k: {named}{more}. Use a plan for this register file, or tiles of at most "
            f"{machine.vector_registers} vectors (docs/layouts.md, \"Tiles and registers\")"
        ),
        stacklevel=3,
    )


def sites_of(module: ModuleOp) -> dict[str, SiteOp]:
    return {op.site_name: op for op in module.walk() if isinstance(op, SiteOp)}


def _check_fused(module: ModuleOp) -> None:
    for func in (f for f in module.walk() if isinstance(f, FuncOp) and f.body.blocks):
        for op in func.body.block.ops:
            if is_elementwise(op) or isinstance(op, LAUNCHING_OPS):
                raise error_at(op, "E3003", "psk-realize realizes launches: run psk-fuse first (it makes them)")


def _unknown_nest(plan: Plan, module: ModuleOp, nest: str) -> PreskError:
    function, slash, binding = nest.partition("/%")
    funcs = {f.sym_name.data: f for f in module.walk() if isinstance(f, FuncOp)}
    if not (function and slash and binding):
        reason = "a nest is named \"<function>/%<n>\", the binding as `presk dump --stage core` prints it"
    elif function not in funcs:
        reason = f"the program has no function @{function}"
    else:
        nests = [s for s in sites_of(module) if s.startswith(function + "/%")]
        reason = (
            f"@{function} has no nest there (a value inside a fusion group, a view or a structural value is none); "
            f"its nests are {', '.join(nests) or 'none'}"
        )
    return PreskError("E7002", f"{plan.source}: nest \"{nest}\": {reason}")


def apply_plan(module: ModuleOp, plan: Plan) -> None:
    """Realize every site and attach every layout, refusing an ill-formed plan with E7002."""
    _check_fused(module)
    sites = sites_of(module)
    env = sizes.resolve(module)
    plan.realization.check_sites(sites)
    machine = target_machine()
    spilling: dict[str, str] = {}
    for site, op in sites.items():
        if is_real_valued(op.result.type):
            op.realization = RealizationAttr.uniform(plan.realization.type_of(site))
    for nest, decisions in plan.layout.items():
        if nest not in sites:
            raise _unknown_nest(plan, module, nest)
        if (violation := layout_violation(sites[nest].kind, decisions)) is not None:
            raise error_at(sites[nest], "E7002", f"{plan.source}: " + layout_error(nest, *violation)[len("E7002: ") :])
        resolved = with_full_lanes(decisions, plan.realization.type_of(nest))
        if (how := spilling_tile(resolved, machine)) is not None:
            spilling[nest] = how
        sites[nest].layout = LayoutAttr(resolved)
    for op in sites.values():
        try:
            op.verify_()
        except VerifyException as error:
            message = exception_message(error)
            code, _, text = message.partition(": ") if message.startswith("E7002") else ("E2001", "", message)
            raise error_at(op, code, f"{plan.source}: {text}") from None
        layout = op.layout or LayoutAttr({})
        op.layout = layout.with_defaults(resolved_defaults(op, env))
    if plan.warns_of_spills:
        _warn_of_spilling_tiles(plan, spilling, machine)
    module.attributes[DEFAULT_ATTRIBUTE] = StringAttr(plan.realization.default)
    if plan.profile is not None:
        module.attributes["psk_realize.profile"] = StringAttr(plan.profile)


@dataclass(frozen=True)
class RealizeSites(ModulePass):
    """Realize every launch and attach its layout (`realization=f32` or `plan=P.json`)."""

    name = "psk-realize"

    realization: str = ""
    """`f64`, `f32`, `bf16` or `@FILE` (a record of types per site); f64 when neither option is given."""
    plan: str = ""
    """A plan file (JSON), in place of `realization`."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_plan(op, plan_from_options(self.realization or None, self.plan or None))
