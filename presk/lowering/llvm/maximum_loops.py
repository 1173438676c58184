"""Running maxima in vectors: a loop of `acc = maximum(acc, x)` with the processor's cheap maximum.

`arith.maximumf` is IEEE 754-2019's maximum (NaN if either operand is NaN,
+0 above −0); x86's `vmaxps` is not (it returns its second operand when
either is NaN or both are zeros), so `llvm.maximum` costs six instructions
a vector, and LLVM's final reduction across lanes is a serial chain of
scalar steps: a softmax spent as long on its rows' maxima as on their
exponentials. Yet the two agree wherever it matters: over values without
NaN, `vmaxps` picks an element no other exceeds, which is the maximum
unless the maximum is zero (then its sign may be wrong). So the loop runs
as vectors of `vmaxps` (`select(a > b, a, b)`, which LLVM emits as one),
counts NaNs aside, reduces the lanes by a tree of the same, and takes the
result only when no NaN was seen and it is not zero; otherwise (rare) it
runs the loop as written. Either way the result is the maximum's bits, and
the last iterations (fewer than a vector) and the initial value join it
through `llvm.maximum` itself.

A masked running maximum (the masked softmax's row maxima), a loop
yielding `select(m, maximum(acc, x), acc)` (or `select(m, acc,
maximum(acc, x))`, kept when m is false), takes the same path with the term
`select(m, x, −inf)`: wherever the check above trusts the vectors, the two
give the same bits. Where m is true both are `maximum(acc, x)`. Where m is
false the loop keeps acc and the vector path takes `maximum(acc, −inf)`,
which is acc itself for every acc but NaN: −inf is below every other
value, `maximum(−inf, −inf)` is −inf, and ±0 stay as they are (−inf
compares below both zeros, so no sign question arises). acc is never NaN on
the trusted path: the initial value must be ordered (checked, else the loop
runs as written), a masked NaN becomes −inf and is neither seen nor
propagated (the loop as written ignores it too), and an unmasked NaN is
counted and sends the loop to its exact form. The maximum over the unmasked
terms, the initial value and some −infs is then the maximum over the
unmasked terms and the initial value, whose bits are unique unless it is a
zero, which is the case refused above; a fully masked block yields −inf
from the vectors and `maximum(init, −inf)` = init, as the loop as written.

Only in the variant with disjoint buffers (`assume_disjoint`), like the
other vectorised loops.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.ir import Operation, SSAValue

from presk.dialects.psk_kernel import PARALLEL
from presk.analysis import trip_count
from presk.lowering.llvm.vector_body import inside
from presk.lowering.llvm.irtypes import I32, I64
from presk.lowering.llvm.loops import ScalarLoops
from presk.analysis import constant_int
from presk.lowering.llvm.target import intrinsic
from presk.lowering.llvm.vector_body import vector_body

__all__ = ["MaximumLoops", "RunningMaximum", "running_maximum"]

ACCUMULATORS = 4
"""Independent vectors of maxima: `vmaxps` has a latency of several cycles and the loop one load a step."""


@dataclass(frozen=True)
class RunningMaximum:
    """How `running_maximum` vectorises one loop."""

    lanes: int
    maximum: Operation
    """The loop's `arith.maximumf` (done on vectors instead)."""
    term: SSAValue
    """Its operand that is not the running value: what each iteration brings."""
    vector_loads: frozenset[Operation]
    mask: Operation | None = None
    """The masked form's `arith.select` (then the term taken is `select(m, term, −inf)`), or None."""
    keep_when_true: bool = False
    """Whether the mask's true side keeps the running value (`select(m, acc, maximum(acc, x))`)."""


def running_maximum(loop: scf.ForOp, vector_bits: int) -> RunningMaximum | None:
    """A plan to run a loop whose one running value is `maximum(acc, term)` as vectors, or None.

    The loop: serial, constant bounds, step 1, at least `lanes · ACCUMULATORS`
    iterations, one running f32 or f64 value yielded as `arith.maximumf` of
    itself and a term that varies along the loop; the rest of the body
    vectorisable along it (`vector_body`) and storing nothing.
    """
    if PARALLEL in loop.attributes or len(loop.iter_args) != 1 or constant_int(loop.step) != 1:
        return None
    count = trip_count(loop)
    block = loop.body.block
    acc = block.args[1]
    if count is None or constant_int(loop.lb) is None or not isinstance(acc.type, Float32Type | Float64Type):
        return None
    lanes = vector_bits // (32 if isinstance(acc.type, Float32Type) else 64)
    if lanes < 2 or count < lanes * ACCUMULATORS:
        return None
    terminator = block.last_op
    if not isinstance(terminator, scf.YieldOp):
        return None
    maximum = terminator.operands[0].owner
    mask: Operation | None = None
    keep_when_true = False
    if isinstance(maximum, Operation) and maximum.name == "arith.select" and maximum.parent_block() is block:
        # The masked form: select(m, maximum(acc, x), acc) or select(m, acc, maximum(acc, x)).
        mask = maximum
        condition, if_true, if_false = mask.operands
        if if_false is acc and if_true is not acc:
            chosen = if_true
        elif if_true is acc and if_false is not acc:
            chosen, keep_when_true = if_false, True
        else:
            return None
        maximum = chosen.owner
        if condition is acc or not mask.results[0].has_one_use():
            return None
    if not isinstance(maximum, Operation) or maximum.name != "arith.maximumf" or maximum.parent_block() is not block:
        return None
    a, b = maximum.operands
    term = b if a is acc else a if b is acc else None
    if term is None or term is acc or not maximum.results[0].has_one_use():
        return None
    if sum(1 for _ in acc.uses) != (1 if mask is None else 2):
        return None
    body = vector_body(loop, [maximum] if mask is None else [maximum, mask], [acc])
    if body is None:
        return None
    kinds, vector_loads, stores = body
    if stores or kinds.get(term) != "v":
        return None
    if mask is not None:
        condition = mask.operands[0]
        known = kinds.get(condition, "u" if not inside(condition, block) else "?")
        if known not in ("u", "v"):
            return None
    return RunningMaximum(lanes, maximum, term, vector_loads, mask, keep_when_true)


class MaximumLoops(ScalarLoops):
    """Loops of a running maximum translated by a `RunningMaximum` plan."""

    def maximum_loop(
        self, op: scf.ForOp, plan: RunningMaximum, lb: ir.Value, ub: ir.Value, init: ir.Value
    ) -> ir.Value:
        """The loop's result: vectors of `vmaxps` over whole groups of iterations, checked (see the module)."""
        b = self.builder
        lanes, width = plan.lanes, plan.lanes * ACCUMULATORS
        first, count = constant_int(op.lb), trip_count(op)
        assert first is not None and count is not None
        whole = count - count % width
        vector = ir.VectorType(init.type, lanes)
        # NaNs seen so far, as the compare's own masks (all ones in a lane that saw one), or-ed as vectors.
        flags = ir.VectorType(I32 if isinstance(init.type, ir.FloatType) else I64, lanes)
        before = b.block
        label, body, exit_ = self.new_loop("maximum")
        b.branch(body)  # whole >= width: at least one group
        b.position_at_end(body)
        iv = b.phi(I64, name=f"{label}.i")
        iv.add_incoming(lb, before)
        maxima = []
        for _ in range(ACCUMULATORS):
            phi = b.phi(vector)
            phi.add_incoming(ir.Constant(vector, [init.type(float("-inf"))] * lanes), before)
            maxima.append(phi)
        seen = b.phi(flags)
        seen.add_incoming(ir.Constant(flags, [0] * lanes), before)
        block = op.body.block
        updated, terms = [], []
        with self.in_vector_form(plan.vector_loads, lanes):
            for u in range(ACCUMULATORS):
                self.values[block.args[0]] = b.add(iv, I64(u * lanes), flags=["nuw", "nsw"]) if u else iv
                for inner in block.ops:
                    if inner is not block.last_op and inner is not plan.maximum and inner is not plan.mask:
                        self.op(inner)
                x = self.splat(self.value(plan.term), lanes)
                if plan.mask is not None:
                    bottom = ir.Constant(vector, [init.type(float("-inf"))] * lanes)
                    condition = self.value(plan.mask.operands[0])
                    x = b.select(condition, bottom, x) if plan.keep_when_true else b.select(condition, x, bottom)
                updated.append(_machine_max(b, maxima[u], x))
                terms.append(x)
        nans = seen
        for u in range(0, ACCUMULATORS, 2):  # one compare for two terms: unordered if either is NaN
            pair = b.fcmp_unordered("uno", terms[u], terms[min(u + 1, ACCUMULATORS - 1)])
            nans = b.or_(nans, b.sext(pair, flags))
        latch = b.block
        following = b.add(iv, I64(width), name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, I64(first + whole)), body, exit_)
        iv.add_incoming(following, latch)
        for phi, value in zip([*maxima, seen], [*updated, nans]):
            phi.add_incoming(value, latch)
        self.leave_loop(exit_)

        top = updated[0]
        for u in range(1, ACCUMULATORS):
            top = _machine_max(b, top, updated[u])
        half = lanes // 2
        while half:
            mask = ir.Constant(ir.VectorType(I32, lanes), [(i + half) % lanes for i in range(lanes)])
            top = _machine_max(b, top, b.shuffle_vector(top, top, mask))
            half //= 2
        top = b.extract_element(top, I32(0))
        bits = ir.IntType(lanes * flags.element.width)
        any_nan = b.icmp_unsigned("!=", b.bitcast(nans, bits), bits(0))
        trusted = b.and_(b.not_(any_nan), b.fcmp_ordered("!=", top, init.type(0.0)))
        if plan.mask is not None:  # maximum(acc, −inf) is acc but for a NaN acc: refuse a NaN start
            trusted = b.and_(trusted, b.fcmp_ordered("ord", init, init))
        joined = b.call(intrinsic(self.module, "llvm.maximum", init.type, 2), [init, top])
        fast_exit = b.block
        exact, done = self.fn.append_basic_block(f"{label}.exact"), self.fn.append_basic_block(f"{label}.done")
        b.cbranch(trusted, done, exact)
        b.position_at_end(exact)
        (recomputed,) = self.scalar_loop(op, lb, I64(first + whole), self.value(op.step), [init])
        exact_exit = b.block
        b.branch(done)
        b.position_at_end(done)
        result = b.phi(init.type)
        result.add_incoming(joined, fast_exit)
        result.add_incoming(recomputed, exact_exit)
        if whole == count:
            return result
        (tail,) = self.scalar_loop(op, I64(first + whole), ub, self.value(op.step), [result])
        return tail


def _machine_max(b: ir.IRBuilder, a: ir.Value, x: ir.Value) -> ir.Value:
    """`a > x ? a : x`: x86's `maxps` (the maximum over values without NaN, up to the sign of a zero)."""
    return b.select(b.fcmp_ordered(">", a, x), a, x)
