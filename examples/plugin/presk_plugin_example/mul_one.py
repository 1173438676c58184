"""`psk-mul-one`: multiplying by the constant 1.0 is the identity.

The constant is left in place: removing operations nobody uses is `dce`'s
job, so the pipeline is `psk-mul-one,dce`.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker

from presk_plugin_example.patterns import FoldMulByOne


@dataclass(frozen=True)
class MulOnePass(ModulePass):
    """Fold every multiplication by the constant 1.0."""

    name = "psk-mul-one"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FoldMulByOne()).rewrite_module(op)
