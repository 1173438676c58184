"""Running sums in vectors: loops of ordered float sums, `lanes` iterations at a time.

LLVM does not vectorise a float sum without reassociation, which the
numerics policy forbids (sums in increasing index order), so a row's sum is
a chain of dependent scalar additions, and the exponentials of a softmax
feeding it are computed one at a time. A serial loop whose running values
are all `acc + term` (the blocked rows of `presk.lowering.softmax` and
`nests.emit_reduction`: one sum per row of a block) runs `lanes` iterations
at a time: the terms are computed as vectors along the loop (16
exponentials of one row in one zmm), the block of vectors is transposed in
registers (perfect shuffles), and column i is added to the vector of
running sums (lane j: row j) in order, so every row still receives its
terms one by one in increasing order. A loop whose terms are
transcendentals also prefetches the next block
(`presk.lowering.llvm.memory.MemoryAccess.prefetch`).

Only in the variant with disjoint buffers (`assume_disjoint`); the other
keeps every loop as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.ir import Operation, SSAValue

from presk.dialects.psk_kernel import PARALLEL
from presk.analysis import trip_count
from presk.lowering.llvm.irtypes import I32, I64
from presk.lowering.llvm.loops import ScalarLoops
from presk.lowering.llvm.math_calls import MATH
from presk.analysis import constant_int
from presk.lowering.llvm.vector_body import vector_body

__all__ = ["OrderedSums", "RunningSumLoops", "ordered_sums", "transpose"]


@dataclass(frozen=True)
class OrderedSums:
    """How `ordered_sums` vectorises one loop of running sums."""

    lanes: int
    """Iterations per block: the terms are `<lanes x T>` vectors along the loop."""
    group: int
    """Sums per running vector: `lanes` is a multiple of it."""
    adds: frozenset[Operation]
    """The `arith.addf` of each running value (done on the transposed columns instead)."""
    terms: tuple[SSAValue, ...]
    """What each iteration adds to each running value, in the order of the loop's results."""
    vector_loads: frozenset[Operation]
    """Loads of `lanes` consecutive elements (the others read one element, the same in every lane)."""


def ordered_sums(loop: scf.ForOp, vector_bits: int) -> OrderedSums | None:
    """A plan to run a loop of running sums `lanes` iterations at a time, or None.

    The loop: serial, constant bounds with step 1, every running value a
    float of one type updated once per iteration by `acc + term` (or
    `term + acc`) where no term depends on a running value; the rest of
    the body vectorisable along the loop (`vector_body`). Then iterations
    are independent except for the sums, and every sum still receives its
    terms one at a time in increasing order: the same bits. What changes is
    that the terms are computed in vectors (`exp` in zmm registers) and that
    several sums (rows of a block, see `presk.lowering.softmax`) advance
    together in the lanes of one vector after a register transpose.
    """
    if PARALLEL in loop.attributes or not loop.iter_args:
        return None
    count, first, step = trip_count(loop), constant_int(loop.lb), constant_int(loop.step)
    if count is None or first is None or step != 1:
        return None
    block = loop.body.block
    accs = list(block.args[1:])
    element = accs[0].type
    if not all(a.type == element for a in accs) or not isinstance(element, Float32Type | Float64Type):
        return None
    bits = 32 if isinstance(element, Float32Type) else 64
    widest = max(vector_bits // bits, 1)
    if widest < 2:
        return None
    group = 1
    while group * 2 <= min(len(accs), widest) and len(accs) % (group * 2) == 0:
        group *= 2
    lanes = max(group, min(widest, 256 // bits))
    if count < lanes:
        return None
    terminator = block.last_op
    if not isinstance(terminator, scf.YieldOp):
        return None
    adds: list[Operation] = []
    terms: list[SSAValue] = []
    for acc, y in zip(accs, terminator.operands):
        owner = y.owner
        if not isinstance(owner, Operation) or owner.name != "arith.addf" or owner.parent_block() is not block:
            return None
        a, b = owner.operands
        term = b if a is acc else a if b is acc else None
        if term is None or term is acc or not acc.has_one_use() or not y.has_one_use():
            return None
        adds.append(owner)
        terms.append(term)
    body = vector_body(loop, adds, accs)
    if body is None:
        return None
    kinds, vector_loads, _stores = body
    if any(kinds.get(t, "u") not in ("u", "v") for t in terms):
        return None
    return OrderedSums(lanes, group, frozenset(adds), tuple(terms), vector_loads)


def _lanes_of(builder: ir.IRBuilder, x: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes `[start, start + count)` of vector `x` (a scalar when count is 1; `x` itself when all)."""
    if count == 1:
        return builder.extract_element(x, I32(start))
    if start == 0 and count == x.type.count:
        return x
    mask = ir.Constant(ir.VectorType(I32, count), list(range(start, start + count)))
    return builder.shuffle_vector(x, x, mask)


def transpose(builder: ir.IRBuilder, rows: Sequence[ir.Value]) -> list[ir.Value]:
    """The columns of a square of `n` vectors of `n` lanes (`n` a power of two): column i, lane j = rows[j][i].

    Perfect shuffles: log2(n) rounds, each interleaving row i with row
    i + n/2 (their low halves, then their high halves). One scalar (n = 1)
    is its own column.
    """
    n = len(rows)
    rows = list(rows)
    if n == 1:
        return rows
    half = n // 2
    low = ir.Constant(ir.VectorType(I32, n), [x for p in range(half) for x in (p, n + p)])
    high = ir.Constant(ir.VectorType(I32, n), [x for p in range(half, n) for x in (p, n + p)])
    for _ in range(n.bit_length() - 1):
        shuffled = []
        for i in range(half):
            a, b = rows[i], rows[i + half]
            shuffled += [builder.shuffle_vector(a, b, low), builder.shuffle_vector(a, b, high)]
        rows = shuffled
    return rows


class RunningSumLoops(ScalarLoops):
    """Loops of running sums translated by an `OrderedSums` plan."""

    def ordered_sum_loop(
        self, op: scf.ForOp, plan: OrderedSums, lb: ir.Value, ub: ir.Value, inits: Sequence[ir.Value]
    ) -> list[ir.Value]:
        """A loop of running sums with `plan.lanes` iterations at a time (see `ordered_sums`).

        Each block of iterations computes every sum's terms as vectors along
        the loop, transposes them (lane j of column i: sum j's term at
        iteration i), and adds the columns to the sums in order; the last
        iterations (fewer than a block) run as written.
        """
        b = self.builder
        lanes, group = plan.lanes, plan.group
        first, count = constant_int(op.lb), trip_count(op)
        assert first is not None and count is not None
        whole = count - count % lanes
        label, body, exit_ = self.new_loop("sums")
        element = inits[0].type
        starts = []
        for g in range(0, len(inits), group):
            if group == 1:
                starts.append(inits[g])
                continue
            start = ir.Constant(ir.VectorType(element, group), ir.Undefined)
            for j in range(group):
                start = b.insert_element(start, inits[g + j], I32(j))
            starts.append(start)
        before = b.block
        b.branch(body)  # whole >= lanes: at least one block
        b.position_at_end(body)
        iv = b.phi(I64, name=f"{label}.i")
        iv.add_incoming(lb, before)
        sums: list[ir.Value] = []  # one running vector (or scalar) per group of `group` sums
        phis = []
        for start in starts:
            phi = b.phi(start.type)
            phi.add_incoming(start, before)
            phis.append(phi)
            sums.append(phi)

        block = op.body.block
        self.values[block.args[0]] = iv
        self.prefetching = any(inner.name in MATH and inner.name != "math.sqrt" for inner in block.ops)
        try:
            with self.in_vector_form(plan.vector_loads, lanes):
                for inner in block.ops:
                    if inner is block.last_op or inner in plan.adds:
                        continue
                    self.op(inner)
                terms = [self.splat(self.value(t), lanes) for t in plan.terms]
        finally:
            self.prefetching = False
        for n, g in enumerate(range(0, len(terms), group)):
            rows = terms[g : g + group]
            for chunk in range(0, lanes, group):
                columns = transpose(b, [_lanes_of(b, r, chunk, group) for r in rows])
                for column in columns:
                    sums[n] = b.fadd(sums[n], column)
        latch = b.block
        following = b.add(iv, I64(lanes), name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, I64(first + whole)), body, exit_)
        iv.add_incoming(following, latch)
        for phi, value in zip(phis, sums):
            phi.add_incoming(value, latch)
        self.leave_loop(exit_)
        totals: list[ir.Value] = []
        for value in sums:
            if group == 1:
                totals.append(value)
            else:
                totals.extend(b.extract_element(value, I32(j)) for j in range(group))
        if whole == count:
            return totals
        step = self.value(op.step)
        return self.scalar_loop(op, I64(first + whole), ub, step, totals)
