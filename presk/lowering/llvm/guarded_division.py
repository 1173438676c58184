"""Divisions of often-subnormal numerators, in vectors, the exact method only where a vector needs it.

An `arith.divf` marked `psk_kernel.subnormal_numerator` (the softmax's
exponentials over their row's sum) is exact both ways: the `fdiv`
instruction, and `mathlib_spec.divide`, which forms subnormal quotients
from integers and normal numbers. The instruction is some 30 instructions
cheaper, but x86 finishes it in microcode, 6-15x slower, when a lane's
numerator or quotient is subnormal. In vector form each vector of
numerators takes the instruction when no lane's quotient is below the
normal range but for zeros (0 < |a| < b * 2**(1-bias)), and calls the
exact method when one is: rows of a narrow range never pay for the
method, rows of a wide one never for the microcode, and the exponentials
of a wide row that are exactly 0 take the instruction.

The exact method is a function of its own (`noinline`, `cold`,
`mathlib.branch_to_exact`): inline, LLVM would hoist its dozen vector
constants out of the whole kernel and keep them in registers through the
softmax's other passes, which then spill.

LLVM's loop vectoriser would turn the branch into both paths and a blend,
so the parallel loop around such a division runs as vectors of the
target's width here (`guarded_division`), and its last iterations as
written (scalar code takes the exact method unconditionally).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.ir import Operation

from presk.analysis import constant_int
from presk.dialects.psk_kernel import PARALLEL, SUBNORMAL_NUMERATOR
from presk.lowering.llvm.irtypes import I64
from presk.lowering.llvm.loops import ScalarLoops
from presk.lowering.llvm.target import intrinsic
from presk.lowering.llvm.math_calls import emit_divide
from presk.lowering.llvm.vector_body import vector_body
from presk.lowering.mathlib import branch_to_exact
from presk.lowering.mathlib_spec import F32, F64
from presk.target import Machine

__all__ = ["GuardedDivision", "GuardedDivisionLoops", "emit_guarded_divide", "guarded_division"]


@dataclass(frozen=True)
class GuardedDivision:
    """How `guarded_division` vectorises one parallel loop."""

    lanes: int
    """Iterations per vector: the target's vector width in the division's type."""
    vector_loads: frozenset[Operation]
    """Loads of `lanes` consecutive elements (the others read one element, the same in every lane)."""


def guarded_division(loop: scf.ForOp, machine: Machine) -> GuardedDivision | None:
    """A plan to run a parallel loop holding a marked division as vectors, or None.

    The loop: parallel, step 1, without running values, its body
    vectorisable along it (`vector_body`; a two-pass softmax divides its
    output in place), holding an `arith.divf` marked `SUBNORMAL_NUMERATOR`
    of f32 or f64.
    """
    if PARALLEL not in loop.attributes or loop.iter_args or constant_int(loop.step) != 1:
        return None
    divisions = [op for op in loop.body.block.ops if op.name == "arith.divf" and SUBNORMAL_NUMERATOR in op.attributes]
    if not divisions:
        return None
    element = divisions[0].results[0].type
    if not isinstance(element, Float32Type | Float64Type):
        return None
    lanes = machine.vector_bits // (32 if isinstance(element, Float32Type) else 64)
    if lanes < 2:
        return None
    body = vector_body(loop, [], [], in_place=True)
    if body is None:
        return None
    _kinds, vector_loads, _stores = body
    return GuardedDivision(lanes, vector_loads)


def emit_guarded_divide(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """`a / b` of vectors: `fdiv`, unless a lane's quotient is below the normal range: then the exact method.

    A zero numerator is no such lane: `fdiv` of ±0 by a positive b is the ±0
    the method gives, with nothing subnormal. A wide row's exponentials are
    mostly exactly 0 (e**x rounds to +0 below about −104 in f32), and each
    vector holding one took the method: attention's masked softmax at
    [8, 6, 256, 256] f32 on scores of a large spread ran 1.8× its time on
    narrow ones.
    """
    fmt = F32 if isinstance(a.type.element, ir.FloatType) else F64
    fabs = intrinsic(builder.module, "llvm.fabs", a.type, 1)
    threshold = builder.fmul(b, ir.Constant(a.type, [fmt.min_normal] * a.type.count))
    magnitude = builder.call(fabs, [a])
    nonzero = builder.fcmp_ordered("!=", magnitude, ir.Constant(a.type, [0.0] * a.type.count))
    small = builder.and_(builder.fcmp_ordered("<", magnitude, threshold), nonzero)
    return branch_to_exact(builder, small, lambda inner: inner.fdiv(a, b), "presk.divide.exact", [a, b],
                           lambda inner, args: emit_divide(inner, *args))  # fmt: skip


class GuardedDivisionLoops(ScalarLoops):
    """Parallel loops translated by a `GuardedDivision` plan."""

    def guarded_division_loop(
        self, op: scf.ForOp, plan: GuardedDivision, lb: ir.Value, ub: ir.Value, step: ir.Value
    ) -> None:
        """Iterations `[lb, end)` as vectors of `plan.lanes` (`end` after the last whole vector), `[end, ub)` as written."""
        b = self.builder
        lanes = plan.lanes
        count = b.select(b.icmp_signed(">", ub, lb), b.sub(ub, lb), I64(0))
        end = b.add(lb, b.sub(count, b.and_(count, I64(lanes - 1))))
        before = b.block
        label, body, exit_ = self.new_loop("divide")
        b.cbranch(b.icmp_signed("<", lb, end), body, exit_)
        b.position_at_end(body)
        index = b.phi(I64, name=f"{label}.i")
        index.add_incoming(lb, before)
        block = op.body.block
        self.values[block.args[0]] = index
        with self.in_vector_form(plan.vector_loads, lanes):
            for inner in block.ops:
                if inner is not block.last_op:
                    self.op(inner)
        latch = b.block
        following = b.add(index, I64(lanes), name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, end), body, exit_)
        index.add_incoming(following, latch)
        self.leave_loop(exit_)
        self.scalar_loop(op, end, ub, step, [])
