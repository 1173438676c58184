"""Which iterations a call of a kernel runs, and what it writes.

Every kernel is called as `kernel(args, lo, hi)` (`presk.jit.engine`). Its
*split loop* (`split_loop`: its outermost `scf.for` when that loop is the
only loop at the top of the body, is marked `psk_kernel.parallel`, yields
nothing, and no store sits beside it) runs its iterations `[lo, hi)`,
clamped to `[0, trip count)`; the ops around it run in every call (they are
constants, index arithmetic and loads). A kernel without a split loop has
one iteration: it runs entirely when `lo <= 0 < hi`, so the executor calls
it with (0, 1). `launch_iterations(kernel)` is that `n`: the executor's
`[0, n)`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue

from presk.dialects.psk_kernel import PARALLEL, KernelOp

__all__ = [
    "STORE_OPS", "affine_index", "attr", "block_trip_count", "constant_int", "index_range", "is_register_tile_loop",
    "launch_iterations", "loop_trips", "sets_inner_bounds", "split_loop", "trip_count", "written_buffers",
]  # fmt: skip

STORE_OPS = ("memref.store", "vector.store")
"""The ops by which a kernel writes a buffer (its second operand)."""


def attr(op: Operation, name: str) -> Attribute | None:
    """A property or attribute of `op` (xDSL attributes can be falsy: test against None)."""
    value = op.properties.get(name)
    return value if value is not None else op.attributes.get(name)


def constant_int(value: SSAValue) -> int | None:
    """The integer `value` is, when an `arith.constant` defines it; else None."""
    owner = value.owner
    if isinstance(owner, Operation) and owner.name == "arith.constant":
        value_attr = attr(owner, "value")
        if isinstance(value_attr, IntegerAttr):
            return value_attr.value.data
    return None


def trip_count(loop: scf.ForOp) -> int | None:
    """Iterations of an `scf.for` with constant bounds (None if a bound is not a constant)."""
    lb, ub, step = (constant_int(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -((lb - ub) // step))


def block_trip_count(loop: scf.ForOp) -> int | None:
    """Iterations of a full block of a strip-mined loop (`psk-split` under a serial loop), else None.

    Such a loop runs `[lb, min(lb + span, ub))` with `span` and the step
    constants and `lb` the block's start, which depends on the loop of
    blocks around it; every block but the last runs ⌈span / step⌉."""
    upper = loop.ub.owner
    if not (isinstance(upper, Operation) and upper.name == "arith.minsi"):
        return None
    past = upper.operands[0].owner
    if not (isinstance(past, Operation) and past.name == "arith.addi" and past.operands[0] is loop.lb):
        return None
    span, step = constant_int(past.operands[1]), constant_int(loop.step)
    if span is None or step is None or step <= 0:
        return None
    return -(-span // step)


def sets_inner_bounds(loop: scf.ForOp) -> bool:
    """Whether a loop inside `loop` takes its bounds from `loop`'s counter (a strip-mined block's loop of blocks).

    Such a loop's iterations cannot run as one vector of counters: each
    iteration's inner loop has bounds of its own."""
    counter = loop.body.block.args[0]

    def follows(value: SSAValue) -> bool:
        if value is counter:
            return True
        owner = value.owner
        return isinstance(owner, Operation) and owner.name.startswith("arith.") and any(map(follows, owner.operands))

    return any(
        follows(bound) for inner in loop.walk() if isinstance(inner, scf.ForOp) and inner is not loop
        for bound in (inner.lb, inner.ub, inner.step)
    )  # fmt: skip


def loop_trips(loop: scf.ForOp) -> int | None:
    """A loop's iterations for the analyses that price it: its trip count, or a strip-mined block's."""
    count = trip_count(loop)
    return count if count is not None else block_trip_count(loop)


def split_loop(kernel: KernelOp) -> scf.ForOp | None:
    """The loop whose iterations `[lo, hi)` a call runs, or None (the kernel is one iteration).

    The only `scf.for` at the top of the body, marked parallel, without results,
    with constant bounds, and with no store beside it (a store outside the
    loop would run in every chunk).
    """
    loops = [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1:
        return None
    loop = loops[0]
    if PARALLEL not in loop.attributes or loop.results or trip_count(loop) is None:
        return None
    if any(op.name in STORE_OPS for op in kernel.body.block.ops):
        return None
    return loop


def launch_iterations(kernel: KernelOp) -> int:
    """`n`: the executor runs the kernel over `[0, n)` (the split loop's trip count, else 1)."""
    loop = split_loop(kernel)
    if loop is None:
        return 1
    count = trip_count(loop)
    assert count is not None
    return count


def written_buffers(kernel: KernelOp) -> frozenset[int]:
    """Indices of the buffers the kernel stores to (its outputs).

    Read from each argument's uses (a store's operand 1 is its buffer), not from a walk of every op: a
    merged kernel holds thousands of ops and a few dozen accesses."""
    return frozenset(
        i
        for i, arg in enumerate(kernel.body.block.args)
        if any(use.index == 1 and use.operation.name in STORE_OPS for use in arg.uses)
    )


def is_register_tile_loop(loop: scf.ForOp) -> bool:
    """Whether `loop` is a register tile's k loop: its own body (not a nested loop's) holds `vector.fma`s.

    `psk-vectorize` makes a tiled contraction's k loop a body of broadcasts,
    vector loads and one `vector.fma` per accumulator; no other loop of a
    PSK-Kernel program holds a `vector.fma`."""
    return any(op.name == "vector.fma" for op in loop.body.block.ops)


def affine_index(
    value: SSAValue, counters: Sequence[SSAValue], memo: dict[SSAValue, tuple[tuple[int, ...], int] | None] | None = None
) -> tuple[tuple[int, ...], int] | None:
    """`value` as `Σ coefs[j]·counters[j] + const`, followed through index constants and `arith.addi`,
    `subi` and `muli` by a constant; None for anything else (a loaded index, a division, another counter).

    `memo` keeps the forms found, for callers asking about many indices over the same `counters`."""
    if memo is not None:
        if value not in memo:
            memo[value] = _affine_index(value, counters, memo)
        return memo[value]
    return _affine_index(value, counters, None)


def _affine_index(
    value: SSAValue, counters: Sequence[SSAValue], memo: dict[SSAValue, tuple[tuple[int, ...], int] | None] | None
) -> tuple[tuple[int, ...], int] | None:
    if value in counters:
        coefs = [0] * len(counters)
        coefs[list(counters).index(value)] = 1
        return tuple(coefs), 0
    constant = constant_int(value)
    if constant is not None:
        return (0,) * len(counters), constant
    owner = value.owner
    if not isinstance(owner, Operation) or owner.name not in ("arith.addi", "arith.subi", "arith.muli"):
        return None
    forms = [affine_index(operand, counters, memo) for operand in owner.operands]
    if len(forms) != 2 or forms[0] is None or forms[1] is None:
        return None
    (a, ca), (b, cb) = forms  # type: ignore[misc]
    if owner.name == "arith.muli":
        if any(b):
            (a, ca), (b, cb) = (b, cb), (a, ca)
        if any(b):
            return None  # a product of two counters
        return tuple(cb * x for x in a), cb * ca
    sign = 1 if owner.name == "arith.addi" else -1
    return tuple(x + sign * y for x, y in zip(a, b)), ca + sign * cb


def index_range(value: SSAValue) -> tuple[int, int] | None:
    """The least and the greatest value an index takes, when it is affine (`affine_index`) in the counters of
    the loops around it and every one of those loops has constant bounds; None otherwise.

    A call's split loop runs a part of its iterations (`split_loop`), never more, so its bounds bound it too."""
    counters: list[SSAValue] = []
    spans: list[tuple[int, int]] = []
    loop = value.owner.parent_op()  # the loop whose counter it is, or the op around its definition
    while loop is not None:
        if isinstance(loop, scf.ForOp):
            trips, lb, step = trip_count(loop), constant_int(loop.lb), constant_int(loop.step)
            if trips is None or lb is None or step is None or trips < 1:
                return None
            counters.append(loop.body.block.args[0])
            last = lb + step * (trips - 1)
            spans.append((min(lb, last), max(lb, last)))
        loop = loop.parent_op()
    form = affine_index(value, counters)
    if form is None:
        return None
    coefs, const = form
    low = const + sum(min(c * a, c * b) for c, (a, b) in zip(coefs, spans, strict=True))
    high = const + sum(max(c * a, c * b) for c, (a, b) in zip(coefs, spans, strict=True))
    return low, high
