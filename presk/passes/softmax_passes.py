"""`psk-softmax-passes`: a softmax's rows in the layout's two or three passes.

Three (the default, `presk.lowering.softmax`): the maximum, the sum of
exponentials, the quotients; when the output holds the arithmetic type the
second pass stores each exponential and the third divides it in place. Two
(`presk.lowering.softmax_two_pass`): the maximum, then exp(x − m) stored
while summing, then divided in place: the stored exponential is read back
exactly only when storage = arithmetic type (the seed's condition 7,
checked before lowering). With a mask, both give refused positions 0 and an
all-refused row zeros. Both sum each row in order, so they give the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from presk.dialects.psk_kernel_structured import SoftmaxOp
from presk.lowering import nests, softmax, softmax_two_pass
from presk.lowering.kernel_builder import KernelBuilder
from presk.passes.kernel_layout import consume, kernel_of, resolved


class LowerSoftmax(RewritePattern):
    """`psk_kernel.softmax` → its passes over each row."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SoftmaxOp, rewriter: PatternRewriter) -> None:
        k = kernel_of(op)
        block = k.body.block
        assert block.last_op is op, "a structured softmax is its kernel's last op"
        two = resolved(k).get("passes") == 2
        x = nests.Operand(op.x_type, buffer=op.x)
        mask: softmax.Mask | None = None
        if op.causal is not None:
            mask = softmax.CausalMask(*(n.data for n in op.causal.data))
        elif op.mask is not None:
            mask = softmax.LoadedMask(nests.Operand(op.mask_type, buffer=op.mask))  # type: ignore[arg-type]
        out, arith_type, xt, axis = op.out, op.arith_type, op.x_type, op.axis.data
        rewriter.erase(op, safe_erase=False)
        emit = softmax_two_pass.emit_softmax_two_pass if two else softmax.emit_softmax
        emit(KernelBuilder(block), xt, axis, x, mask, out, arith_type)  # type: ignore[arg-type]
        consume(k, ["passes"])


@dataclass(frozen=True)
class SoftmaxPasses(ModulePass):
    """Every structured softmax lowered to loops in its layout's passes."""

    name = "psk-softmax-passes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(LowerSoftmax(), apply_recursively=False).rewrite_module(op)
