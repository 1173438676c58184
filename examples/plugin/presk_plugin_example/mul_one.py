"""`psk-mul-one`: multiplying by the constant 1.0 is the identity.

`psk_core.mul %x, %one`, where `%one = psk_core.constant 1.0`, is replaced by
`%x`. A rewrite must never change the type of a value its users see, so the
pattern also checks that the product has `%x`'s type: a multiplication that
broadcasts `%x` to a larger tensor is not the identity. The constant is left
in place; run `dce` afterwards to remove it once nothing uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from presk.dialects.psk_core import ConstantOp, MulOp


def is_one(value: SSAValue) -> bool:
    """Whether `value` is defined by `psk_core.constant 1.0`."""
    owner = value.owner
    return isinstance(owner, ConstantOp) and owner.value.value.data == 1.0


class FoldMulByOne(RewritePattern):
    """`x * 1.0 -> x` (and `1.0 * x -> x`) when the product has x's type."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter) -> None:
        for kept, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if is_one(other) and kept.type == op.result.type:
                rewriter.replace(op, [], [kept])
                return


@dataclass(frozen=True)
class MulOnePass(ModulePass):
    """Fold every multiplication by the constant 1.0."""

    name = "psk-mul-one"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FoldMulByOne()).rewrite_module(op)
