"""Whether a loop body can run as vectors along its loop: the analysis the vectorised loops share.

`presk.lowering.llvm.running_sums`, `presk.lowering.llvm.maximum_loops` and
`presk.lowering.llvm.streaming_stores` vectorise loops LLVM leaves scalar or
vectorises poorly; all first ask the same question of the body (everything
but the running values): is every value either the same in every
iteration, an index affine in the induction variable, or a vector of
consecutive elements along it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, SSAValue

from presk.analysis import constant_int

__all__ = ["ELEMENTWISE", "inside", "lane_slope", "vector_body"]

ELEMENTWISE = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf", "arith.maximumf", "arith.minimumf",
    "arith.cmpf", "arith.select", "arith.extf", "arith.truncf", "math.fma", "math.absf", "math.sqrt",
    "math.exp", "math.log", "math.tanh", "math.erf", "arith.extui", "arith.cmpi",
})  # fmt: skip
"""The ops that compute lane by lane, the same in a vector as in scalars."""


def _row_major_strides(t: MemRefType) -> list[int]:
    strides, running = [], 1
    for size in reversed(t.get_shape()):
        strides.append(running)
        running *= size
    return strides[::-1]


def inside(v: SSAValue, block: Block) -> bool:
    """Whether `v` is defined in `block` (or a block nested in it)."""
    owner = v.owner
    at = owner if isinstance(owner, Block) else owner.parent_block()
    while at is not None:
        if at is block:
            return True
        parent = at.parent_op()
        at = parent.parent_block() if parent is not None else None
    return False


def lane_slope(v: SSAValue, iv: SSAValue) -> int:
    """How much the index `v` grows per iteration of the loop counted by `iv` (0: not at all).

    Read from the index arithmetic the kernel builder emits (sums, differences, products by constants,
    casts); a vector loop body compares such an index lane by lane, lane j at v + j · slope.
    """
    if v is iv:
        return 1
    owner = v.owner
    if not isinstance(owner, Operation):
        return 0
    name = owner.name
    if name == "arith.index_cast":
        return lane_slope(owner.operands[0], iv)
    if name in ("arith.addi", "arith.subi"):
        x, y = (lane_slope(o, iv) for o in owner.operands)
        return x + y if name == "arith.addi" else x - y
    if name == "arith.muli":
        x, y = owner.operands
        cx, cy = constant_int(x), constant_int(y)
        if cx is not None:
            return cx * lane_slope(y, iv)
        if cy is not None:
            return cy * lane_slope(x, iv)
    return 0


def vector_body(
    loop: scf.ForOp, skip: Sequence[Operation], accs: Sequence[SSAValue], in_place: bool = False
) -> tuple[dict[SSAValue, str], frozenset[Operation], frozenset[Operation]] | None:
    """Whether the loop's body (but `skip`) runs as vectors along the loop: (kinds, vector loads, stores), or None.

    Kinds: "u" the same in every iteration, "a" an index affine in the
    induction variable (its step per iteration in `slope`), "v" varying
    otherwise (a vector). Allowed: elementwise arithmetic, index arithmetic
    affine in the induction variable, loads and stores at consecutive
    addresses along it (a load may also read one address), no buffer both
    loaded and stored (with `in_place`, one that every load and store
    reaches at the same indices: each iteration reads and writes its own
    element), no nested loop, no use of `accs` but in `skip`.
    """
    block = loop.body.block
    iv = block.args[0]
    terminator = block.last_op
    kinds: dict[SSAValue, str] = {iv: "a"}
    slope: dict[SSAValue, int] = {iv: 1}
    constants: dict[SSAValue, int] = {}
    loaded: set[SSAValue] = set()
    stored: set[SSAValue] = set()
    vector_loads: set[Operation] = set()
    stores: set[Operation] = set()
    places: dict[SSAValue, set[tuple[SSAValue, ...]]] = {}

    def kind(v: SSAValue) -> str:
        if v in accs:
            return "acc"
        return kinds.get(v, "u" if v.owner is not loop and not inside(v, block) else "?")

    def linear_slope(indices: Sequence[SSAValue], t: MemRefType) -> int | None:
        total = 0
        for index, stride in zip(indices, _row_major_strides(t)):
            k = kind(index)
            if k == "v" or k == "?":
                return None
            total += slope.get(index, 0) * stride
        return total

    for op in block.ops:
        if op is terminator or op in skip:
            continue
        if op.regions:
            return None
        operand_kinds = [kind(v) for v in op.operands]
        if "acc" in operand_kinds or "?" in operand_kinds:
            return None
        name = op.name
        if name == "arith.constant":
            kinds[op.results[0]] = "u"
            value = constant_int(op.results[0])
            if value is not None:
                constants[op.results[0]] = value
        elif name in ("arith.addi", "arith.subi", "arith.muli", "arith.index_cast"):
            if "v" in operand_kinds:
                if name != "arith.index_cast":
                    return None
                kinds[op.results[0]] = "v"
            elif "a" not in operand_kinds:
                kinds[op.results[0]] = "u"
            elif name == "arith.index_cast":
                kinds[op.results[0]], slope[op.results[0]] = "a", slope[op.operands[0]]
            elif name in ("arith.addi", "arith.subi"):
                x, y = (slope.get(v, 0) for v in op.operands)
                kinds[op.results[0]], slope[op.results[0]] = "a", x + y if name == "arith.addi" else x - y
            else:
                x, y = op.operands
                if kind(x) == "u" and x in constants:
                    kinds[op.results[0]], slope[op.results[0]] = "a", constants[x] * slope[y]
                elif kind(y) == "u" and y in constants:
                    kinds[op.results[0]], slope[op.results[0]] = "a", constants[y] * slope[x]
                else:
                    return None
        elif name == "memref.load":
            buffer, *indices = op.operands
            step_of = linear_slope(indices, buffer.type)
            if step_of is None:
                return None
            loaded.add(buffer)
            places.setdefault(buffer, set()).add(tuple(indices))
            if step_of == 0:
                kinds[op.results[0]] = "u"
            elif step_of == 1:
                kinds[op.results[0]] = "v"
                vector_loads.add(op)
            else:
                return None
        elif name == "memref.store":
            value, buffer, *indices = op.operands
            if kind(value) != "v" or linear_slope(indices, buffer.type) != 1:
                return None
            stored.add(buffer)
            places.setdefault(buffer, set()).add(tuple(indices))
            stores.add(op)
        elif name == "arith.minsi":  # a shifted last block's start: the same in every iteration, or refused
            if set(operand_kinds) != {"u"}:
                return None
            kinds[op.results[0]] = "u"
        elif name in ELEMENTWISE:
            if "a" in operand_kinds:
                if name != "arith.cmpi":
                    return None
                kinds[op.results[0]] = "v"  # a counter compared: lane by lane (`lane_slope`)
            else:
                kinds[op.results[0]] = "v" if "v" in operand_kinds else "u"
        else:
            return None
    if any(not in_place or len(places[buffer]) != 1 for buffer in loaded & stored):
        return None
    return kinds, frozenset(vector_loads), frozenset(stores)
