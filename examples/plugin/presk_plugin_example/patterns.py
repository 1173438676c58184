"""The rewrite pattern of `psk-mul-one`: `x * 1.0 -> x` (and `1.0 * x -> x`)."""

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from presk.dialects.psk_core import ConstantOp, MulOp


def is_one(value: SSAValue) -> bool:
    """Whether `value` is defined by `psk_core.constant 1.0`."""
    owner = value.owner
    return isinstance(owner, ConstantOp) and owner.value.value.data == 1.0


class FoldMulByOne(RewritePattern):
    """Replace a product by its other factor when one factor is 1.0 and the types agree."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter) -> None:
        for kept, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if is_one(other) and kept.type == op.result.type:
                rewriter.replace_op(op, [], [kept])
                return
