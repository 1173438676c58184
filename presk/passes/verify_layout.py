"""`psk-verify-layout`: the plan's second check, at the launch shapes and realization (E7002).

The first check (`psk-realize`, `presk.dialects.psk_realize`) refuses what a
layout shows alone: a nest that does not exist, a decision its kind lacks,
a value outside its domain, an epilogue whose add is not launched alone.
This one evaluates a site's layout (the decisions its plan states, over the
defaults of the others at its bound shapes, `resolved_defaults`) against
the sizes it is launched at, its realization and the machine, as the seed's
"Well-formedness" section lists them:

- condition 3: the tile and the k-block are no larger than their axes
  (m_i ≤ I, n_j ≤ J, kblock ≤ K, jblock ≤ J); where they do not divide them the
  lowering shifts the last tile back to end at the axis's end and cuts the
  last k-block short, except that a J block loop the k-block loop
  encloses keeps its tile dividing J (n_j | J), since there the running
  sums wait in the output and an overlapping tile would add a block twice
  (an I block loop's last tile clamps its rows past the end instead: the
  columns are the lanes); a row-wise contraction has no tile, k-block,
  J-block, order or pack; `"pack": "both"` needs a tile of more than one
  row, dividing I where the k-block loop encloses the I block loop (operand
  0's panel holds whole blocks of rows, and such a loop clamps its last
  tile's rows instead of shifting it back);
- condition 4: lanes are 1 or one of the machine's register widths for the
  storage type (`Machine.lane_widths`), divide the tile's n_j, and on an NT
  contraction need the pack;
- condition 5: a split's workers are the machine's or half of them
  (`Machine.allowed_workers`);
- condition 7: a running sum kept in the output buffer (the row-wise form,
  or a k-block loop enclosing the I or J block loop) and two softmax passes
  need the storage type to be the arithmetic type: none of them on bf16;
- condition 8: the split's loop at its depth is parallel, with two
  iterations or more;
- condition 9 of the seed (a pack only on an NT contraction) is lifted:
  on an NN contraction a pack copies operand 1 to a blocked panel
  (`presk.passes.pack`), so any tiled contraction may state it;
- the epilogue's: the add's other operand broadcasts into the product's
  output along J, I or the outer axes without widening it, and where the
  tile has lanes it runs along J as its innermost axis or not at all (with
  the structural conditions of the first check, evaluated again).

The loops a split's depth counts are the nest's loops outermost first: for a
tiled contraction its outer axes, then the loop over blocks of J where
there is a J-block, then its block loops in `order` (the I
and J block loops, and the k-block loop, which sums), then the loop over K;
for a row-wise one its outer axes, I, K, J; for a softmax or a reduction
the kept axes, then the reduced ones; for a group or any other nest the
axes of its result. At the default order that is the outer axes, then the I
block loop, then the J block loop, and the depth indexes the parallel loops.

Two defaults are the executor's and are not checked here: `lanes = "widest"`
(the executor takes the widest register that fits, or one) and
`split = "executor"`. A condition that needs a size the environment does
not bind is not decided here: it is decided when the nest is launched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from presk import sizes
from presk.target import Machine, target_machine
from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, Size, TensorType, leaves
from presk.dialects.psk_realize import (
    GroupOp,
    NestOp,
    SiteOp,
    epilogue_violation,
    layout_error,
    resolved_defaults,
)
from presk.dialects.psk_realize_layout import BOTH_PACKS, default_layout, packs_operand_1
from presk.dialects.psk_realize_layout import layout_violation as first_check_violation
from presk.dialects.psk_realize_nests import Contraction, NestKind, contraction
from presk.ir.locations import error_at
from presk.lowering.contraction import TiledLayout, tiled_layout
from presk.lowering.row_blocks import jam_factor
from presk.lowering.softmax import SEGMENT_ROWS, CausalMask, causal_axes, causal_segments

Json = Any

CONDITIONS: tuple[int | str, ...] = (3, 4, 5, 7, 8, "epilogue")
"""The conditions this check evaluates, in the order it evaluates them."""

FIRST_CHECK = "first check"
"""The `condition` of a violation the plan's first check would have refused (a layout not yet checked)."""

UNBOUND = "at launch"
"""What `default_layout` gives for a decision that depends on an unbound size."""


@dataclass(frozen=True)
class LayoutViolation:
    """Why a nest's layout cannot be launched: the seed's condition, the decision, the reason."""

    condition: int | str
    """3, 4, 5, 7, 8 or 9; `"epilogue"` for the epilogue's conditions; `FIRST_CHECK` otherwise."""
    decision: str
    reason: str

    @property
    def text(self) -> str:
        """`condition 4: lanes = 8 do not divide the tile's n_j = 4`."""
        if isinstance(self.condition, int):
            return f"condition {self.condition}: {self.reason}"
        if self.condition == "epilogue":
            return f"the epilogue's condition: {self.reason}"
        return self.reason

    def message(self, site: str) -> str:
        """The whole E7002 message, in `layout_error`'s format."""
        return layout_error(site, self.decision, self.text)


# --------------------------------------------------------------------------
# Sizes, types and the layout at launch.


def bound(size: Size, env: Mapping[str, int]) -> int | None:
    """The integer a size is launched at, or None while it is unbound."""
    if isinstance(size, int):
        return size
    if size in env:
        return env[size]
    try:
        return sizes.evaluate(sizes.parse_size_expr(size), env, size)
    except (ValueError, PreskError):
        return None


def site_types(site: SiteOp) -> tuple[str, str]:
    """The site's (storage, arithmetic) type names; f64 for an unrealized site, as its defaults assume."""
    if site.realization is None:
        return "f64", "f64"
    return site.realization.storage_name, site.realization.arith_name


def _bound_contraction(shape: Contraction, env: Mapping[str, int]) -> Contraction:
    j, k = bound(shape.j_size, env), bound(shape.k_size, env)
    return replace(shape, j_size=shape.j_size if j is None else j, k_size=shape.k_size if k is None else k)


def launch_layout(site: SiteOp, env: Mapping[str, int], kind: NestKind | None = None) -> dict[str, Json]:
    """Every decision of the site at launch: the stated ones over `resolved_defaults(site, env)`.

    A default that `resolved_defaults` leaves `"at launch"` (J bound through
    an expression) is resolved again from the bound contraction. A decision
    the stated form brings and the defaults lack (a tile stated on a dot
    whose default form is row-wise) takes its neutral value: tile [1, 1],
    no k-block, order "IJ" (with a k-block "IJK"), one lane, no pack.
    """
    kind = site.kind if kind is None else kind  # a caller that knows it saves reading it again
    defaults = resolved_defaults(site, env)
    if any(value == UNBOUND for value in defaults.values()) and isinstance(site, NestOp):
        shape = contraction(site.primitive)
        if shape is not None:
            defaults = default_layout(kind, _bound_contraction(shape, env), site_types(site)[0])
    layout = {**defaults, **_stated(site)}
    if kind == "contraction":
        layout.setdefault("form", "tiled")
        if layout["form"] == "tiled":
            for name, neutral in (("tile", [1, 1]), ("kblock", "none"), ("lanes", 1), ("pack", False)):
                if layout.get(name) in (None, UNBOUND):
                    layout[name] = neutral
            order = layout.get("order")
            if order in (None, UNBOUND):
                order = "IJ"
            if layout["kblock"] != "none" and "K" not in order:
                order += "K"  # the default order with a k-block is "IJK"
            if layout["kblock"] == "none":
                order = order.replace("K", "")
            layout["order"] = order
    return layout


def _stated(site: SiteOp) -> dict[str, Json]:
    return site.layout.stated if site.layout is not None else {}


# --------------------------------------------------------------------------
# The loops a split divides.


@dataclass(frozen=True)
class Loop:
    """One loop of a nest, outermost first: what it runs over, how often, and whether it is parallel."""

    what: str
    iterations: int | None
    parallel: bool


def _axis_loops(t: Attribute, env: Mapping[str, int], skip: tuple[str, ...] = ()) -> list[Loop]:
    if not isinstance(t, TensorType | IndexTensorType):
        return []
    return [Loop(f"the loop over {name}", bound(size, env), True) for name, size in t.axes if name not in skip]


def _summed_loops(t: Attribute, names: tuple[str, ...] | list[str], env: Mapping[str, int]) -> list[Loop]:
    if not isinstance(t, TensorType | IndexTensorType):
        return []
    return [
        Loop(f"the loop over {name}, which sums", bound(size, env), False) for name, size in t.axes if name in names
    ]


def contraction_loops(site: NestOp, shape: Contraction, layout: Mapping[str, Json], env: Mapping[str, int]) -> list[Loop]:
    """A contraction's loops: outer axes, then the block loops in `order`, then K (row-wise: I, K, J).

    A TN contraction's summed axes besides K (`Contraction.k_outer`) loop
    just outside K's loops: at the k-block loop's place in the order where
    it encloses I or J, else after the I and J block loops.
    """
    out = site.result.type
    assert isinstance(out, TensorType)
    loops = [Loop(f"the loop over {name}", bound(out.size_of(name), env), True) for name in shape.outer]
    i_size, j_size, k_size = bound(out.size_of(shape.i), env), bound(out.size_of(shape.j), env), bound(shape.k_size, env)
    summed_outer = [
        Loop(f"the loop over {name}, which sums", bound(_operand_size(site, name), env), False) for name in shape.k_outer
    ]
    if layout.get("form") == "row-wise":
        return [
            *loops,
            Loop(f"the loop over I ({shape.i})", i_size, True),
            *summed_outer,
            Loop(f"the loop over K ({shape.k}), which sums", k_size, False),
            Loop(f"the loop over J ({shape.j})", j_size, True),
        ]
    m, n = layout["tile"]
    kblock = layout["kblock"]
    tiled = tiled_layout(layout)
    j_loop = _block_loop("J", shape.j, n, j_size, tiled)
    if tiled.jblock is not None:
        blocks_of_j, j_loop = _jblock_loops(shape, j_size, tiled)
        loops.append(blocks_of_j)
    blocks = {
        "I": _block_loop("I", shape.i, m, i_size, tiled),
        "J": j_loop,
        "K": Loop(
            f"the k-block loop ({shape.k} in blocks of {kblock}), which sums",
            _quotient(k_size, kblock if isinstance(kblock, int) else 1),
            False,
        ),
    }
    order = layout["order"]
    sums_in_output = isinstance(kblock, int) and order[-1] != "K"
    for letter in order if sums_in_output else order.replace("K", ""):
        loops += [*summed_outer, blocks[letter]] if letter == "K" else [blocks[letter]]
    if not sums_in_output:
        loops += summed_outer
        if isinstance(kblock, int):
            loops.append(blocks["K"])
    inner = kblock if isinstance(kblock, int) else k_size
    return [*loops, Loop(f"the loop over K ({shape.k}), which sums", inner, False)]


def _block_loop(
    letter: str, axis: str, block: int, extent: int | None, tiled: TiledLayout, tiles: int | None = None
) -> Loop:  # fmt: skip
    """The I or J block loop; serial where its shifted last tile waits on the k-block loop inside it.

    `tiles`, where given, is its iterations: a J block loop within a block of J runs that block's tiles."""
    what = f"the {letter} block loop ({axis} in blocks of {block})"
    count = _quotient(extent, block) if tiles is None else tiles
    if tiled.block_loop_parallel(letter, extent):
        return Loop(what, count, True)
    why = "whose last tile, shifted back over the one before it, reads back their shared sums between blocks of K"
    return Loop(f"{what}, {why}", count, False)


def _jblock_loops(shape: Contraction, j_size: int | None, tiled: TiledLayout) -> tuple[Loop, Loop]:
    """The loop over blocks of J, and the J block loop over one block's tiles inside it.

    Where the blocks do not divide J's tiles, the J block loop's bounds
    follow the block (the last one is cut short), so no split can move it
    above the loop over blocks: it is not splittable, as a serial loop is not.
    """
    assert tiled.jblock is not None
    n, per_block = tiled.n, tiled.jblock // tiled.n
    tiles = _quotient(j_size, n)
    what = f"the loop over blocks of J ({shape.j} in blocks of {tiled.jblock} columns)"
    parallel = tiled.jblock_loop_parallel(j_size)
    if not parallel:
        what += ", whose last tile, shifted back over the one before it, reads back their shared sums between blocks of K"
    blocks_of_j = Loop(what, _quotient(tiles, per_block), parallel)
    j_loop = _block_loop("J", shape.j, n, j_size, tiled, per_block if tiles is None else min(per_block, tiles))
    if tiles is None or tiles % per_block:
        j_loop = Loop(f"{j_loop.what}, whose bounds follow the block of J (the last block is cut short)", j_loop.iterations, False)
    return blocks_of_j, j_loop


def _causal_segments(op: core.SoftmaxOp, leaf: Attribute, env: Mapping[str, int]) -> list[tuple[int, int, int]] | None:
    """The segments `presk.lowering.softmax` runs a causally masked softmax's rows in, or None."""
    if op.mask is None or not isinstance(leaf, TensorType):
        return None
    axes = causal_axes(op.mask)
    if axes is None:
        return None
    counts = {name: bound(size, env) for name, size in leaf.axes}
    if any(v is None for v in counts.values()):
        return None
    rows = [name for name in leaf.names if name != op.axis.data]
    return causal_segments(CausalMask(*axes), rows, op.axis.data, counts)  # type: ignore[arg-type]


def _operand_size(site: NestOp, name: str) -> Size:
    """The extent of a summed axis of a nest's primitive, read off the operand that carries it."""
    for operand in site.primitive.operands:
        t = operand.type
        if isinstance(t, TensorType) and name in t.names:
            return t.size_of(name)
    raise AssertionError(f"no operand carries {name}")


def _quotient(size: int | None, block: int) -> int | None:
    """A block loop's iterations: ⌈size / block⌉ (the last block shifted back, or a k-block cut short)."""
    return None if size is None else -(-size // block)


def site_loops(site: SiteOp, layout: Mapping[str, Json], env: Mapping[str, int], leaf: Attribute) -> list[Loop]:
    """The loops of `site`'s kernel for one leaf of its result, outermost first."""
    if isinstance(site, GroupOp):
        return _axis_loops(leaf, env)
    assert isinstance(site, NestOp)
    op = site.primitive
    shape = contraction(op)
    if shape is not None:
        return contraction_loops(site, _bound_contraction(shape, env), layout, env)
    if isinstance(op, core.SoftmaxOp):
        axis = op.axis.data
        kept = _axis_loops(leaf, env, skip=(axis,))
        if kept and kept[-1].iterations is not None:
            # The three passes run the innermost kept axis in blocks of rows (`row_blocks`), and either form a
            # causal mask's rows in segments, each a loop of its own (`causal_segments`): no one loop to split.
            jam = jam_factor(kept[-1].iterations) if layout.get("passes") != 2 else 1
            if _causal_segments(op, leaf, env) is not None:
                kept[-1] = Loop(f"{kept[-1].what} in segments of {SEGMENT_ROWS} rows under the causal mask, "
                                "each segment a loop of its own", kept[-1].iterations // jam, False)  # fmt: skip
            elif jam > 1:
                kept[-1] = Loop(f"{kept[-1].what} in blocks of {jam} rows", kept[-1].iterations // jam, True)
        return [*kept, *_summed_loops(leaf, (axis,), env)]
    if isinstance(op, core.ReductionOp):
        return [*_axis_loops(leaf, env), *_summed_loops(op.operand.type, op.axes, env)]
    if isinstance(op, core.CrossEntropyOp):
        logits = op.operands[0].type
        names = logits.names if isinstance(logits, TensorType) else ()
        return _summed_loops(logits, names, env)  # every row is summed into one mean
    if isinstance(op, core.SumToOp):
        x = op.operands[0].type
        kept = leaf.names if isinstance(leaf, TensorType) else ()
        summed = [n for n in x.names if n not in kept] if isinstance(x, TensorType) else []
        return [*_axis_loops(leaf, env), *_summed_loops(x, summed, env)]
    if isinstance(op, core.EinOp):
        return [*_axis_loops(leaf, env), *_summed_loops(op.inputs[0].type, op.summed, env)]
    return _axis_loops(leaf, env)


# --------------------------------------------------------------------------
# The conditions.


def layout_violation(site: SiteOp, env: Mapping[str, int], machine: Machine) -> LayoutViolation | None:
    """The first condition the site's layout violates at its bound shapes and realization, or None.

    Conditions are evaluated in the order 3, 4, 5, 7, 8, then the
    epilogue's. A layout the first check would refuse is reported as it
    would (condition `FIRST_CHECK`), so that nothing outside the domains is
    evaluated.
    """
    stated = _stated(site)
    kind = site.kind
    if (first := first_check_violation(kind, stated)) is not None:
        return LayoutViolation(FIRST_CHECK, *first)
    layout = launch_layout(site, env, kind)
    storage, arith = site_types(site)
    shape = contraction(site.primitive) if isinstance(site, NestOp) else None
    checks: list[Callable[[], LayoutViolation | None]]
    if isinstance(site, NestOp) and shape is not None:
        shape = _bound_contraction(shape, env)
        if layout.get("form") == UNBOUND:
            # J is unbound, so the form (tiled or row-wise) is decided at launch, and with it 3, 4, 7 and 8.
            checks = [
                lambda: _condition_5(layout, machine),
                lambda: _structural_epilogue(site, layout),
            ]
        else:
            checks = [
                lambda: _condition_3(site, shape, layout, stated, env),
                lambda: _condition_4(shape, layout, storage, machine),
                lambda: _condition_5(layout, machine),
                lambda: _condition_7_contraction(layout, storage, arith),
                lambda: _condition_8(site, layout, env),
                lambda: _epilogue(site, shape, layout, env),
            ]
    elif kind == "softmax":
        checks = [
            lambda: _condition_5(layout, machine),
            lambda: _condition_7_softmax(layout, storage, arith),
            lambda: _condition_8(site, layout, env),
        ]
    else:
        checks = [lambda: _condition_5(layout, machine), lambda: _condition_8(site, layout, env)]
    for check in checks:
        if (violation := check()) is not None:
            return violation
    return None


ROW_WISE_NEUTRAL: dict[str, Json] = {"tile": [1, 1], "kblock": "none", "jblock": "none", "order": "IJ", "pack": False}
"""What a row-wise contraction may state of the tiled form's decisions: their neutral values."""

_NOUNS = {
    "tile": "the tile is", "kblock": "the k-block is", "jblock": "the J-block is", "order": "the order is",
    "pack": "the pack is",
}  # fmt: skip


def _condition_3(
    site: NestOp, shape: Contraction, layout: Mapping[str, Json], stated: Mapping[str, Json], env: Mapping[str, int]
) -> LayoutViolation | None:
    out = site.result.type
    assert isinstance(out, TensorType)
    if layout.get("form") == UNBOUND:
        return None
    if layout.get("form") == "row-wise":
        for name, neutral in ROW_WISE_NEUTRAL.items():
            if name in stated and stated[name] != neutral:
                why = ""
                if "form" not in stated:
                    why = (
                        f"; the form is row-wise by default here, since J ({shape.j}) = {_show_size(shape.j_size)} "
                        "is not a multiple of eight: state \"form\": \"tiled\" for a tile"
                    )
                return LayoutViolation(
                    3, name,
                    "a row-wise contraction keeps its running sums in the output row and has no tile, k-block, "
                    f"J-block, order or pack, but {_NOUNS[name]} {_show(stated[name])}{why}",
                )  # fmt: skip
        return None
    m, n = layout["tile"]
    i_size, j_size = bound(out.size_of(shape.i), env), bound(out.size_of(shape.j), env)
    axes = (("I", "m_i", m, shape.i, i_size), ("J", "n_j", n, shape.j, j_size))
    for letter, name, block, axis, size in axes:
        if size is not None and block > size:
            return LayoutViolation(
                3, "tile",
                f"the tile's {name} = {block} exceeds {letter} ({axis}) = {size}: a tile is no larger than its axes "
                "(one that does not divide an axis ends its last block at the axis's end, shifted back)",
            )  # fmt: skip
    jblock = layout.get("jblock", "none")  # a multiple of every n_j of the domain: it holds whole tiles
    if isinstance(jblock, int) and j_size is not None and jblock > j_size:
        return _block_exceeds_axis("jblock", "J-block", jblock, "J", shape.j, j_size, "runs J in one block")
    kblock, k_size = layout["kblock"], bound(shape.k_size, env)
    order = layout.get("order", "IJ")
    if isinstance(kblock, int) and "K" in order:
        enclosed = order[order.index("K") + 1 :]
        if "J" in enclosed and j_size is not None and j_size % n:
            return LayoutViolation(
                3, "tile",
                f"the tile's n_j = {n} does not divide J ({shape.j}) = {j_size}, and with the order "
                f"{_show(order)} the k-block loop encloses the J block loop: the running sums wait in the "
                "output buffer from one block of K to the next, where a last tile shifted back over the one "
                "before it would add their shared elements' block twice",
            )  # fmt: skip
    if isinstance(kblock, int) and k_size is not None and kblock > k_size:
        return _block_exceeds_axis("kblock", "k-block", kblock, "K", shape.k, k_size, "sums K in one block")
    if layout.get("pack") == BOTH_PACKS:
        return _operand_0_panel(shape, tiled_layout(layout), i_size)
    return None


def _operand_0_panel(shape: Contraction, tiled: TiledLayout, i_size: int | None) -> LayoutViolation | None:
    """Condition 3 for `"pack": "both"`: operand 0's panel holds whole blocks of the tile's m_i rows.

    An I block loop that the k-block loop encloses clamps its last tile's
    rows past I's end to the last row instead of shifting the tile back
    (`TiledLayout.clamps_rows`), and a panel block holds m_i consecutive
    rows, so there the tile must divide I.
    """
    if tiled.m == 1:
        return LayoutViolation(
            3, "pack",
            "the pack \"both\" copies operand 0 to a panel of the tile's m_i rows, and this tile has one row, whose "
            "operand 0 elements are consecutive already: state \"pack\": true",
        )  # fmt: skip
    if tiled.clamps_rows(i_size):
        return LayoutViolation(
            3, "pack",
            f"the pack \"both\" copies operand 0 to a panel of whole blocks of the tile's m_i = {tiled.m} rows, which do "
            f"not divide I ({shape.i}) = {i_size}, and with the order {_show(tiled.order)} the k-block loop encloses the I "
            "block loop, whose last tile clamps its rows past I's end to the last row: no block of the panel holds them",
        )  # fmt: skip
    return None


def _block_exceeds_axis(
    decision: str, noun: str, block: int, letter: str, axis: str, size: int, unblocked: str
) -> LayoutViolation:  # fmt: skip
    """Condition 3 for a k-block or J-block larger than its axis (one smaller need not divide it)."""
    return LayoutViolation(
        3, decision,
        f"the {noun} of {block} exceeds {letter} ({axis}) = {size}: a {noun} is no larger than {letter} "
        f'(one that does not divide {letter} cuts its last block short; "none" {unblocked})',
    )  # fmt: skip


def _condition_4(shape: Contraction, layout: Mapping[str, Json], storage: str, machine: Machine) -> LayoutViolation | None:
    lanes = layout.get("lanes")
    if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes == 1:
        return None  # one lane, or the executor's widest ("widest")
    if layout.get("form") == "row-wise":
        return LayoutViolation(
            4, "lanes", f"lanes = {lanes} run across a tile's columns, and a row-wise contraction has no tile: its lanes are 1"
        )
    widths = machine.lane_widths(storage)
    if not widths:
        return LayoutViolation(
            4, "lanes", f"lanes = {lanes}, but {storage} has no vector lanes on this machine (it computes one element at a time): its lanes are 1"
        )  # fmt: skip
    if lanes not in widths:
        return LayoutViolation(
            4, "lanes",
            f"lanes = {lanes} is not a register width of this machine for {storage}: lanes are {_or((1, *widths))}",
        )  # fmt: skip
    n = layout["tile"][1]
    if n % lanes:
        return LayoutViolation(4, "lanes", f"lanes = {lanes} do not divide the tile's n_j = {n}")
    if shape.nt and not packs_operand_1(layout.get("pack")):
        return LayoutViolation(
            4, "lanes",
            f"lanes = {lanes} on an NT contraction need the pack: operand 1 carries K ({shape.k}) innermost, "
            f"so J ({shape.j}) is not contiguous; state \"pack\": true",
        )  # fmt: skip
    return None


def _condition_5(layout: Mapping[str, Json], machine: Machine) -> LayoutViolation | None:
    split = layout.get("split")
    if not isinstance(split, dict):
        return None  # "none", or the executor's
    workers, allowed = split["workers"], machine.allowed_workers()
    if workers in allowed:
        return None
    own = machine.workers()
    return LayoutViolation(
        5, "split", f"a split's workers are this machine's {own} or half of them ({max(1, own // 2)}), not {workers}"
    )


_SPILL = "which needs the storage type to be the arithmetic type"


def _condition_7_contraction(layout: Mapping[str, Json], storage: str, arith: str) -> LayoutViolation | None:
    if storage == arith:
        return None
    where = f"the output buffer, stored in {storage} while the arithmetic is {arith}"
    if layout.get("form") == "row-wise":
        return LayoutViolation(
            7, "form", f"the row-wise form keeps each running sum in {where}, from one k to the next, {_SPILL}"
        )
    order, kblock = layout.get("order", "IJ"), layout.get("kblock", "none")
    if kblock != "none" and "K" in order and not order.endswith("K"):
        enclosed = " and ".join(f"the {letter} block loop" for letter in order[order.index("K") + 1 :])
        return LayoutViolation(
            7, "order",
            f"with the order {_show(order)} the k-block loop encloses {enclosed}, so each running sum is kept in "
            f"{where}, from one block of K to the next, {_SPILL}",
        )  # fmt: skip
    return None


def _condition_7_softmax(layout: Mapping[str, Json], storage: str, arith: str) -> LayoutViolation | None:
    if storage == arith or layout.get("passes") != 2:
        return None
    return LayoutViolation(
        7, "passes",
        f"two passes store exp(x − m) in the output buffer, stored in {storage} while the arithmetic is {arith}, "
        f"and divide it in place, {_SPILL}",
    )  # fmt: skip


def _condition_8(site: SiteOp, layout: Mapping[str, Json], env: Mapping[str, int]) -> LayoutViolation | None:
    split = layout.get("split")
    if not isinstance(split, dict):
        return None
    depth = split["depth"]
    for path, leaf in leaves(site.result.type):
        at = f" (at leaf {'.'.join(map(str, path))})" if path else ""
        loops = site_loops(site, layout, env, leaf)
        if depth >= len(loops):
            if not loops:
                shape = "computes one value, without a loop"
            else:
                shape = f"has {_count(len(loops), 'loop')} ({', '.join(loop.what for loop in loops)})"
            return LayoutViolation(8, "split", f"the nest{at} {shape}: there is no loop at depth {depth} to split")
        loop = loops[depth]
        if not loop.parallel:
            return LayoutViolation(
                8, "split", f"the split's loop at depth {depth}{at} is {loop.what}, so it is not parallel"
            )
        if loop.iterations is not None and loop.iterations < 2:
            return LayoutViolation(
                8, "split",
                f"the split's loop at depth {depth}{at} is {loop.what}, with {_count(loop.iterations, 'iteration')}; "
                "a split divides a loop of two iterations or more",
            )  # fmt: skip
    return None


def _epilogue(site: NestOp, shape: Contraction, layout: Mapping[str, Json], env: Mapping[str, int]) -> LayoutViolation | None:
    if layout.get("epilogue") is not True:
        return None
    if (structural := _structural_epilogue(site, layout)) is not None:
        return structural
    other = _added_operand(site)
    out = site.result.type
    if other is None or not isinstance(other.type, TensorType) or not isinstance(out, TensorType):
        return None
    operand = other.type
    out_sizes = {name: bound(size, env) for name, size in out.axes}
    for name, size in operand.axes:
        if name not in out_sizes:
            return LayoutViolation(
                "epilogue", "epilogue",
                f"the add's other operand carries {name}, which the product's output [{', '.join(out.names)}] "
                "lacks: it would widen the output; it broadcasts along J, I or the outer axes",
            )  # fmt: skip
        mine, theirs = bound(size, env), out_sizes[name]
        if mine is not None and theirs is not None and mine != theirs:
            return LayoutViolation(
                "epilogue", "epilogue",
                f"the add's other operand has {name} = {mine} where the product's output has {name} = {theirs}: "
                "it does not broadcast into the output without widening it",
            )  # fmt: skip
    lanes = layout.get("lanes")
    if (
        layout.get("form") != "row-wise"
        and isinstance(lanes, int) and not isinstance(lanes, bool) and lanes > 1
        and shape.j in operand.names and operand.names[-1] != shape.j
    ):  # fmt: skip
        return LayoutViolation(
            "epilogue", "epilogue",
            f"the tile has lanes = {lanes} along J ({shape.j}), and the add's other operand "
            f"[{', '.join(operand.names)}] carries J but not as its innermost axis: with lanes it runs along J "
            "as its innermost axis or not at all",
        )  # fmt: skip
    return None


def _structural_epilogue(site: NestOp, layout: Mapping[str, Json]) -> LayoutViolation | None:
    """The first check's epilogue conditions, evaluated again on the program as it is launched."""
    if layout.get("epilogue") is not True or (reason := epilogue_violation(site)) is None:
        return None
    return LayoutViolation("epilogue", "epilogue", reason)


def _added_operand(site: NestOp) -> SSAValue | None:
    uses = list(site.result.uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, core.AddOp):
        return None
    add: Operation = uses[0].operation
    return add.operands[1 - uses[0].index]


# --------------------------------------------------------------------------
# Phrasing.


def _show(value: Json) -> str:
    return json.dumps(value)


def _show_size(size: Size) -> str:
    return str(size)


def _or(widths: tuple[int, ...]) -> str:
    items = [str(w) for w in widths]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------
# The pass.


def check_layouts(module: ModuleOp, env: Mapping[str, int] | None = None, machine: Machine | None = None) -> None:
    """Refuse, with E7002 placed at the nest, the first site whose layout cannot be launched.

    `env` binds the sizes the types still name (default: the module's
    declared constants); `machine` defaults to the host.
    """
    env = sizes.resolve(module) if env is None else env
    machine = target_machine() if machine is None else machine
    for site in (op for op in module.walk() if isinstance(op, SiteOp)):
        if (violation := layout_violation(site, env, machine)) is not None:
            raise error_at(site, "E7002", violation.message(site.site_name)[len("E7002: ") :])


@dataclass(frozen=True)
class VerifyLayouts(ModulePass):
    """Check every nest's layout at its launch shapes, realization and this machine (E7002)."""

    name = "psk-verify-layout"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_layouts(op)
