"""`presk plan`: choose a layout for every contraction and softmax nest of an entry, statically.

Nothing is compiled or timed: each nest's layout space (`presk.tuning.space`)
is priced by a calibrated cost profile (`presk.cost`), and the cheapest
legal point of each nest is written as a realization plan.

How. The entry is realized and lowered once at its default layouts, to learn
which nests it launches and how often (a fold's layers, repeated calls): a
nest's price in the plan is its launches times its predicted time, since a
nest launched 24 times outweighs one launched once. Each nest is then lowered
*in isolation*: a module of one function whose body is the nest's primitive
(`psk_core.dot`, `psk_core.ein`, `psk_core.softmax` with its mask) on its
operand types at the captured sizes, under each point of its space, through
the real pipeline (`presk.pipeline.lower`), so that the kernels priced are
the kernels the plan will run (a packed point's price includes its pack
kernel). Lowering is the expensive step (tens of milliseconds a point), so
prices are cached by (nest shape, point): the four projections of an
attention with the same shapes are priced once.

A nest may be launched at several shapes (its kernel keyed by its operands'
buffer types). It gets one layout, legal at every shape, whose
launch-weighted predicted time summed over the shapes is least. Points the
checks refuse (E7002: `psk-verify-layout`'s conditions, statically, then the
lowering's own guards) are dropped and counted. Ties keep the point first in
the space's order (the simplest).

A profile of another machine is used with a warning: its constants describe
that machine, so the plan is advisory here. A group (type, lanes, workers)
the profile has no constants for is an error naming the nest, never a guess.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Region

from presk.cost.kernel_cost import default_split
from presk.cost.models import PROFILE_ERROR, Constants, predict_many
from presk.cost.profile import Profile, load_profile
from presk.cost.quantities import kernel_terms
from presk.cost.terms import KernelTerms, MachineDesc
from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_realize import LayoutAttr, NestOp
from presk.interp.reference import find_entry
from presk.ir.context import presk_context
from presk.lowering.realize_to_kernel import LowerToKernel
from presk.passes.verify_layout import LayoutViolation, layout_violation
from presk.pipeline import lower, realize
from presk.plans import Plan, parse_plan
from presk.target import Machine, target_machine
from presk.tuning.calibration import Progress
from presk.tuning.space import SPACES, Point, nest_space, point_key

__all__ = [
    "Isolated",
    "Nest",
    "NestChoice",
    "PlanResult",
    "Pricer",
    "capture",
    "choose",
    "isolate",
    "make_plan",
    "plan_text",
    "profile_constants",
    "report",
]

PLANNED_KINDS = ("contraction", "softmax")
ISOLATED_FUNCTION = "nest"


# --------------------------------------------------------------------------
# A nest in isolation.


@dataclass
class Isolated:
    """One nest at one shape: the module of its primitive alone, realized as the program realizes it.

    `site` is the realized nest of that module: the static checks set its
    layout to each point in turn, without lowering anything.
    """

    module: ModuleOp
    site: NestOp
    storage: str
    """The nest's storage type (its realization's)."""
    operand_storage: str
    """The type its operands are stored in (the isolated function's arguments, the realization's default)."""
    key: str

    @property
    def name(self) -> str:
        return self.site.site_name

    def plan(self, point: Point) -> Plan:
        realization: Any = self.storage
        if self.operand_storage != self.storage:
            realization = {"default": self.operand_storage, self.name: self.storage}
        return parse_plan({"realization": realization, "layout": {self.name: point}}, "presk plan")

    def describe(self) -> str:
        """`[i: 64, k: 64] · [k2: 64, j: 64] in f32`: the operands and the type, for the report."""
        shapes = " · ".join(_axes(o.type) for o in self.site.primitive.operands)
        return f"{shapes} in {self.storage}"

    def violation(self, point: Point, machine: Machine) -> LayoutViolation | None:
        """The first condition `point` breaks at this shape (the second check, `psk-verify-layout`)."""
        original = self.site.layout
        self.site.layout = LayoutAttr(point)
        try:
            return layout_violation(self.site, {}, machine)
        finally:
            self.site.layout = original


def _axes(t: Any) -> str:
    text = str(t)
    start, end = text.find("<"), text.rfind(">")
    return text[start + 1 : end] if start >= 0 and end > start else text


def isolate(nest: NestOp, operand_storage: str | None = None) -> Isolated:
    """The module `func.func @nest(operands) { primitive }` of `nest` (its sizes bound), realized alone."""
    primitive = nest.primitive
    types = [v.type for v in primitive.operands]
    block = Block(arg_types=types)
    mapping = {}
    for value, arg in zip(primitive.operands, block.args):
        mapping.setdefault(value, arg)
    clone = primitive.clone(value_mapper=mapping)
    block.add_op(clone)
    block.add_op(func.ReturnOp(clone.results[0]))
    module = ModuleOp([func.FuncOp(ISOLATED_FUNCTION, (types, [clone.results[0].type]), Region(block))])
    storage = nest.realization.storage_name if nest.realization is not None else "f64"
    operands = operand_storage or storage
    realized = realize(module, {}, parse_plan({"realization": storage}, "presk plan"))
    site = next(op for op in realized.walk() if isinstance(op, NestOp))
    return Isolated(module, site, storage, operands, f"{module}|{storage}|{operands}")


# --------------------------------------------------------------------------
# Which nests the entry launches, and how often.


@dataclass
class Nest:
    """A nest of the entry: each shape it is launched at, with its launches per run of the entry."""

    site: str
    kind: str
    shapes: list[tuple[Isolated, int]]

    @property
    def launches(self) -> int:
        return sum(n for _, n in self.shapes)


def _element_name(t: MemRefType) -> str:
    name = str(t.element_type)
    return {"bf16": "bf16", "f32": "f32", "f64": "f64"}.get(name, name)


def capture(module: ModuleOp, entry: str, env: Mapping[str, int], plan: Plan) -> list[Nest]:
    """The contraction and softmax nests `entry` launches, in launch order, with their shapes and launches.

    The program is realized under `plan` (no layout) and its host program
    built; each launch of a nest's kernel is one launch at that kernel's
    buffer types (a fold launches its layers' kernel once per layer).
    """
    find_entry(module, entry)
    realized = realize(module, env, plan)
    nests = {op.site_name: op for op in realized.walk() if isinstance(op, NestOp) and op.kind in PLANNED_KINDS}
    lowered = realized.clone()
    LowerToKernel(entry=entry).apply(presk_context(), lowered)
    kernels = {op.sym_name.data: op for op in lowered.ops if isinstance(op, kernel.KernelOp)}
    counts: dict[str, dict[str, int]] = {}
    for op in lowered.walk():
        if isinstance(op, kernel.LaunchOp):
            site = op.attributes["site"].data  # type: ignore[attr-defined]
            if site in nests:
                name = op.kernel.string_value()
                per_site = counts.setdefault(site, {})
                per_site[name] = per_site.get(name, 0) + 1
    out: list[Nest] = []
    isolated: dict[str, Isolated] = {}
    for site, per_kernel in counts.items():
        shapes: list[tuple[Isolated, int]] = []
        for name, launches in per_kernel.items():
            operand_storage = _element_name(kernels[name].buffers[0])
            iso = isolate(nests[site], operand_storage)
            iso = isolated.setdefault(iso.key, iso)
            shapes.append((iso, launches))
        out.append(Nest(site, nests[site].kind, shapes))
    return out


# --------------------------------------------------------------------------
# Pricing.


def profile_constants(profile: Profile, path: str) -> Constants:
    constants = profile.layout or profile.roofline
    if constants is None:
        raise PreskError(PROFILE_ERROR, f"{path} has no fitted constants: run `presk refit {path}` first")
    return constants


@dataclass
class Pricer:
    """Predicted seconds of one launch of a nest at a shape under a point, cached by (shape, point)."""

    constants: Constants
    desc: MachineDesc
    rules: frozenset[str]
    machine: Machine
    cache: dict[tuple[str, str], float | LayoutViolation | PreskError] = field(default_factory=dict)
    lowered: int = 0

    def cached(self, iso: Isolated, point: Point) -> bool:
        return (iso.key, point_key(point)) in self.cache

    def price(self, iso: Isolated, point: Point) -> float | PreskError:
        """Seconds, or the E7002 the lowering refused the point with."""
        key = (iso.key, point_key(point))
        if key not in self.cache:
            self.cache[key] = self._price(iso, point)
        value = self.cache[key]
        assert not isinstance(value, LayoutViolation)
        return value

    def terms(self, iso: Isolated, point: Point) -> list[tuple[KernelTerms, int]]:
        """Each kernel the point lowers to, with its launches per launch of the nest (a pack: one)."""
        kernels = lower(iso.module, ISOLATED_FUNCTION, {}, iso.plan(point), fuse_launches=False)
        self.lowered += 1
        by_name = {op.sym_name.data: op for op in kernels.ops if isinstance(op, kernel.KernelOp)}
        launches: dict[str, int] = {}
        for op in kernels.walk():
            if isinstance(op, kernel.LaunchOp):
                name = op.kernel.string_value()
                launches[name] = launches.get(name, 0) + 1
        out = []
        for name, count in launches.items():
            k = by_name[name]
            out.append((kernel_terms(k, self.desc, default_split(k, self.machine), self.rules), count))
        return out

    def _price(self, iso: Isolated, point: Point) -> float | PreskError:
        try:
            terms = self.terms(iso, point)
        except PreskError as error:
            if error.code != "E7002":
                raise
            return error
        seconds = predict_many(self.constants, [t for t, _ in terms])
        return float(sum(s * n for s, (_, n) in zip(seconds, terms)))


# --------------------------------------------------------------------------
# Choosing.


@dataclass
class NestChoice:
    """What `presk plan` chose for one nest, and how sure the model is of it."""

    nest: Nest
    point: Point
    seconds: float
    """Predicted seconds per run of the entry: the nest's launches at each shape times their prices."""
    priced: int
    """Points legal at every shape and priced."""
    refused: int
    """Points of the space some check refused at some shape."""
    within: int
    """Points whose predicted time is within 1 + u of the chosen one's (the chosen one included)."""
    conditions: dict[str, int] = field(default_factory=dict)
    """Refusals by condition (`3`, `4`, ..., `lowering`)."""


def _legal(nest: Nest, machine: Machine, space: str) -> tuple[list[Point], dict[str, int]]:
    """The points of the nest's space legal at every shape (statically), in the space's order, and refusals."""
    spaces = [nest_space(iso.site, {}, machine, space) for iso, _ in nest.shapes]
    others = [{point_key(p) for p in s} for s in spaces[1:]]
    legal: list[Point] = []
    conditions: dict[str, int] = {}
    for point in spaces[0]:
        key = point_key(point)
        if not all(key in other for other in others):
            conditions["shape"] = conditions.get("shape", 0) + 1
            continue
        found = next((v for iso, _ in nest.shapes if (v := iso.violation(point, machine)) is not None), None)
        if found is not None:
            label = str(found.condition)
            conditions[label] = conditions.get(label, 0) + 1
            continue
        legal.append(point)
    return legal, conditions


def choose(
    nests: Sequence[Nest], pricer: Pricer, u: float, space: str = "quick", progress_stream: TextIO | None = None
) -> list[NestChoice]:
    """The cheapest legal point of every nest (launch-weighted over its shapes), with how many come close."""
    if space not in SPACES:
        raise PreskError("E4001", f"--space {space}: expected one of {', '.join(SPACES)}")
    legal = [_legal(nest, pricer.machine, space) for nest in nests]
    todo = {(iso.key, point_key(p)) for nest, (points, _) in zip(nests, legal) for iso, _ in nest.shapes
            for p in points if not pricer.cached(iso, p)}  # fmt: skip
    progress = Progress(len(todo), label="pricing", stream=progress_stream or sys.stderr)
    try:
        return _choose(nests, legal, todo, pricer, u, space, progress)
    finally:
        progress.close()


def _choose(
    nests: Sequence[Nest],
    legal: Sequence[tuple[list[Point], dict[str, int]]],
    todo: set[tuple[str, str]],
    pricer: Pricer,
    u: float,
    space: str,
    progress: Progress,
) -> list[NestChoice]:
    seen: set[tuple[str, str]] = set()
    choices = []
    for nest, (points, conditions) in zip(nests, legal):
        priced: list[tuple[Point, float]] = []
        for point in points:
            total: float | None = 0.0
            for iso, launches in nest.shapes:
                key = (iso.key, point_key(point))
                fresh = key in todo and key not in seen
                try:
                    value = pricer.price(iso, point)
                except PreskError as error:
                    if error.code == PROFILE_ERROR:
                        raise PreskError(PROFILE_ERROR, f"nest \"{nest.site}\" ({iso.describe()}), layout "
                                         f"{json.dumps(point)}: {error.message}") from None  # fmt: skip
                    raise
                if fresh:
                    seen.add(key)
                    progress.step(nest.site)
                if isinstance(value, PreskError):
                    total = None
                    break
                total += launches * value  # type: ignore[operator]
            if total is None:
                conditions["lowering"] = conditions.get("lowering", 0) + 1
                continue
            priced.append((point, total))
        if not priced:
            raise PreskError("E7002", f"nest \"{nest.site}\": no point of its {space} space is legal at every shape "
                             "it is launched at")  # fmt: skip
        best_point, best = min(priced, key=lambda pair: pair[1])  # min keeps the first of equals
        within = sum(1 for _, seconds in priced if seconds <= best * (1 + u))
        refused = sum(conditions.values())
        choices.append(NestChoice(nest, best_point, best, len(priced), refused, within, dict(conditions)))
    return choices


# --------------------------------------------------------------------------
# The command's work, and its report.


@dataclass
class PlanResult:
    plan: dict[str, Any]
    choices: list[NestChoice]
    u: float
    lowered: int
    profile_path: str
    space: str


def make_plan(
    module: ModuleOp,
    entry: str,
    env: Mapping[str, int],
    realization: str,
    profile_path: str,
    space: str = "quick",
    warn: TextIO | None = None,
    plan_dir: str = ".",
) -> PlanResult:
    """The plan of `entry` at `env` under `profile_path`'s model (see the module docstring)."""
    find_entry(module, entry)
    if space not in SPACES:
        raise PreskError("E4001", f"--space {space}: expected one of {', '.join(SPACES)}")
    profile = load_profile(profile_path)
    constants = profile_constants(profile, profile_path)
    machine = target_machine()
    if profile.machine and profile.machine != machine.key():
        parts = profile.machine.split("|")
        other = parts[1] if len(parts) > 1 and parts[1] else profile.machine
        (warn or sys.stderr).write(
            f"presk plan: warning: {profile_path} was measured on another machine ({other}); "
            f"this one is {machine.cpu_name}: the plan is advisory here\n"
        )
    desc = profile.machine_desc or MachineDesc.of(machine)
    base = parse_plan({"realization": realization}, "--realize")
    nests = capture(module, entry, env, base)
    pricer = Pricer(constants, desc, frozenset(profile.rules), machine)
    u = profile.u if profile.u is not None else 0.0
    choices = choose(nests, pricer, u, space)
    plan: dict[str, Any] = {
        "realization": _relative_realization(realization, plan_dir),
        "profile": profile_path,
        "layout": {choice.nest.site: choice.point for choice in choices},
    }
    return PlanResult(plan, choices, u, pricer.lowered, profile_path, space)


def _relative_realization(realization: str, plan_dir: str) -> str:
    """`@FILE` as the plan reads it: relative to the plan's folder, not to where the command ran."""
    if not realization.startswith("@"):
        return realization
    return "@" + os.path.relpath(os.path.abspath(realization[1:]), os.path.abspath(plan_dir or "."))


def plan_text(plan: Mapping[str, Any]) -> str:
    """The plan as JSON, one line per nest's layout, so that a plan of thirty nests reads as a table."""
    head = {k: v for k, v in plan.items() if k != "layout"}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    layout = list(plan.get("layout", {}).items())
    if not layout:
        return "\n".join(lines + ['  "layout": {}', "}"]) + "\n"
    lines.append('  "layout": {')
    lines += [f"    {json.dumps(site)}: {json.dumps(point)}{',' if i < len(layout) - 1 else ''}"
              for i, (site, point) in enumerate(layout)]  # fmt: skip
    return "\n".join(lines + ["  }", "}"]) + "\n"


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} µs"


def report(result: PlanResult) -> Iterable[str]:
    """Per nest: its launches and shapes, the point chosen, its predicted time, and how many come close."""
    yield (f"{len(result.choices)} nests, space {result.space}, profile {result.profile_path} "
           f"(u = {result.u:.3g}); {result.lowered} points lowered")  # fmt: skip
    total = 0.0
    for choice in result.choices:
        nest = choice.nest
        total += choice.seconds
        shapes = "; ".join(f"{n} × {iso.describe()}" for iso, n in nest.shapes)
        yield f"{nest.site} ({nest.kind}): {shapes}"
        yield f"  {json.dumps(choice.point)}"
        refused = ", ".join(f"{k}: {v}" for k, v in sorted(choice.conditions.items()))
        yield (f"  predicted {_time(choice.seconds / max(nest.launches, 1))} a launch, {_time(choice.seconds)} a run; "
               f"{choice.within} of {choice.priced} points within 1 + u; {choice.refused} refused"
               + (f" ({refused})" if refused else ""))  # fmt: skip
    yield f"predicted for the planned nests: {_time(total)} a run"
