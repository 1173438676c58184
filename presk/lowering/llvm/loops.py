"""`scf.for` as LLVM loops: the loop as written, and the bounds of the split loop.

Loops are guarded do-while loops (`lb < ub` tested once, then a body whose
latch increments the induction variable with `add nuw nsw` and tests it):
the rotated form LLVM's loop passes expect, with a canonical induction
variable (a phi from `lb` by a constant step), and `iter_args` as header
phis; a loop's results are exit phis merging the initial values (loop not
entered) and the last yields. With constant bounds the guard folds away.

The split loop (`presk.analysis.split_loop`) runs only the
iterations `[lo, hi)` of the call, clamped to its trip count (`split_bounds`).

A register tile's k loop (`presk.analysis.is_register_tile_loop`) asks LLVM
to unroll it `TILE_UNROLL` times (`llvm.loop.unroll.count`): its body is
already as wide as the registers, so LLVM's own threshold leaves it rolled,
and its three loop instructions per k then share the 4–6 issue slots a
cycle with the tile's m broadcasts, n/L loads and m·n/L FMAs. Unrolling
repeats the body in order; every accumulator's chain is unchanged.

A short chain of FMAs (`is_short_fma_chain`: a loop with `iter_args`
whose running value comes from `math.fma`, or from such a loop inside it,
at most `FULL_UNROLL_OPS` ops unrolled) is unrolled whole
(`llvm.loop.unroll.full`): a contraction at its default layout sums its
k terms in such loops inside the parallel loops over its output, and once
they are unrolled the innermost parallel loop is one LLVM vectorises, each
lane its own element's chain in the same order. LLVM's own threshold, held
low for compile time (`presk.jit.codegen.UNROLL_THRESHOLD`), leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir
from xdsl.dialects import scf

from presk.analysis import constant_int, is_register_tile_loop, trip_count
from presk.lowering.llvm.base import TranslatorBase
from presk.lowering.llvm.errors import fail
from presk.lowering.llvm.irtypes import I32, I64

__all__ = ["FULL_UNROLL_OPS", "TILE_UNROLL", "ScalarLoops", "is_short_fma_chain", "unrolled_ops"]

FULL_UNROLL_OPS = 400
"""The most ops a short chain of FMAs unrolls into. The small GPT's gradient at its default layouts (B=4, T=32,
D=64, f32, 2 threads, Xeon with AVX-512): its weight gradients' 4 × 32 terms (384 ops) ran 7× faster unrolled,
the whole call 16.3 → 7.3 ms; its 41 kernels compiled in 3.1–3.2 s instead of 2.4–2.5 (docs/performance.md,
"LLVM's own unrolling held to small loops")."""

TILE_UNROLL = 4
"""How many times LLVM unrolls a register tile's k loop. Measured on the Xeon host lowering for
x86-64-v3 (f32 GEMM, N = 1024, one thread, tile [6, 16] at 8 lanes, CPU time, side by side): 94 →
100 GFLOP/s (order JI, packed) and 95 → 101 (k-block 128, KIJ, packed), numpy 104–107."""


def unrolled_ops(loop: scf.ForOp) -> int | None:
    """The ops of `loop` unrolled whole, the loops inside it unrolled too (yields left out); None if a trip
    count is not a constant."""
    trips = trip_count(loop)
    if trips is None:
        return None
    body = 0
    for op in loop.body.block.ops:
        if isinstance(op, scf.ForOp):
            inner = unrolled_ops(op)
            if inner is None:
                return None
            body += inner
        elif not isinstance(op, scf.YieldOp):
            body += 1
    return trips * body


def is_short_fma_chain(loop: scf.ForOp) -> bool:
    """Whether `loop` carries one running sum of FMAs (its own, or a loop's inside it: a contraction's k terms)
    and unrolls whole into at most `FULL_UNROLL_OPS` ops."""
    last = loop.body.block.last_op
    if not loop.iter_args or last is None or len(last.operands) != 1:
        return False
    producer = last.operands[0].owner
    if not (isinstance(producer, scf.ForOp) or getattr(producer, "name", "") == "math.fma"):
        return False
    size = unrolled_ops(loop)
    return size is not None and size <= FULL_UNROLL_OPS


class ScalarLoops(TranslatorBase):
    """Loops as they are written, one iteration at a time."""

    def scalar_loop(
        self, op: scf.ForOp, lb: ir.Value, ub: ir.Value, step: ir.Value, inits: Sequence[ir.Value]
    ) -> list[ir.Value]:
        """The loop as it is written: a guarded do-while loop; returns its results."""
        b = self.builder
        before = b.block
        label, body, exit_ = self.new_loop()
        guarded = not (isinstance(lb, ir.Constant) and isinstance(ub, ir.Constant) and lb.constant < ub.constant)
        if not guarded:
            b.branch(body)  # constant bounds, at least one iteration
        else:
            b.cbranch(b.icmp_signed("<", lb, ub), body, exit_)

        b.position_at_end(body)
        iv = b.phi(I64, name=f"{label}.i")
        iv.add_incoming(lb, before)
        carried = []
        for init in inits:
            phi = b.phi(init.type)
            phi.add_incoming(init, before)
            carried.append(phi)
        block = op.body.block
        self.values[block.args[0]] = iv
        for arg, phi in zip(block.args[1:], carried):
            self.values[arg] = phi
        ops = list(block.ops)
        terminator = ops[-1] if ops and ops[-1].name == "scf.yield" else None
        for inner in ops if terminator is None else ops[:-1]:
            self.op(inner)
        yielded = [self.value(v) for v in terminator.operands] if terminator is not None else []
        if len(yielded) != len(inits):
            raise fail(self.kernel, f"a loop with {len(inits)} iter_args yields {len(yielded)} values")
        latch = b.block
        following = b.add(iv, step, name=f"{label}.next", flags=["nuw", "nsw"])
        backedge = b.cbranch(b.icmp_signed("<", following, ub), body, exit_)
        if is_register_tile_loop(op):
            backedge.set_metadata("llvm.loop", self.loop_metadata(TILE_UNROLL))
        elif is_short_fma_chain(op):
            backedge.set_metadata("llvm.loop", self.loop_metadata(None))
        iv.add_incoming(following, latch)
        for phi, value in zip(carried, yielded):
            phi.add_incoming(value, latch)

        self.leave_loop(exit_)
        results = []
        for init, value in zip(inits, yielded):
            if guarded:
                phi = b.phi(init.type)
                phi.add_incoming(init, before)
                phi.add_incoming(value, latch)
                results.append(phi)
            else:
                results.append(value)
        return results

    def split_bounds(self, op: scf.ForOp, lb: ir.Value, ub: ir.Value, step: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The induction values of iterations `[max(lo, 0), min(hi, n))` of the split loop."""
        b = self.builder
        n = trip_count(op)
        first_value, step_value, last_value = (constant_int(v) for v in (op.lb, op.step, op.ub))
        assert n is not None and first_value is not None and step_value is not None and last_value is not None
        lo, hi = self.fn.args[1], self.fn.args[2]
        first = b.select(b.icmp_signed(">", lo, I64(0)), lo, I64(0), name="first")
        last = b.select(b.icmp_signed("<", hi, I64(n)), hi, I64(n), name="last")

        def induction(k: ir.Value, name: str) -> ir.Value:  # lb + k * step
            if step_value != 1:
                k = b.mul(k, step, flags=["nsw"])
            return k if first_value == 0 else b.add(lb, k, name=name, flags=["nsw"])

        start, end = induction(first, "start"), induction(last, "end")
        if first_value + n * step_value != last_value:  # the last step overshoots ub
            end = b.select(b.icmp_signed("<", end, ub), end, ub, name="end")
        return start, end

    def loop_metadata(self, unroll: int | None) -> ir.MDValue:
        """A loop ID asking for `unroll` copies of the body, `!{!self, !{"llvm.loop.unroll.count", i32 n}}`,
        or (None) for the whole loop unrolled, `!{!self, !{"llvm.loop.unroll.full"}}`.

        LLVM recognises a loop ID only when its first operand is the node
        itself, which `Module.add_metadata` (uniquing its nodes) cannot
        build; the node is made and then pointed at itself."""
        if unroll is None:
            count = self.metadata(ir.MetaDataString(self.module, "llvm.loop.unroll.full"))
        else:
            count = self.metadata(ir.MetaDataString(self.module, "llvm.loop.unroll.count"), I32(unroll))
        loop_id = ir.MDValue(self.module, [count], name=str(len(self.module.metadata)))
        loop_id.operands = (loop_id, count)
        return loop_id
