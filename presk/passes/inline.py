"""`psk-inline`: replace every `func.call` by the body of its callee.

Callees stay in the module (they may be entries of their own); a recursive
call cannot be inlined and is reported rather than half-rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable

from presk.ir.calls import callees, reachable_functions
from presk.ir.locations import error_at


def _calls_itself(callee: func.FuncOp) -> bool:
    """True when the callee reaches itself through calls, folds or gradient requests (directly or not)."""
    module = callee.parent_op()
    if not isinstance(module, ModuleOp):
        return False
    return callee.sym_name.data in reachable_functions(module, callees(callee))


class InlineCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.CallOp, rewriter: PatternRewriter) -> None:
        callee = SymbolTable.lookup_symbol(op, op.callee)
        if not isinstance(callee, func.FuncOp) or callee.is_declaration:
            raise error_at(op, "E3003", f"psk-inline: @{op.callee.string_value()} has no body to inline")
        if _calls_itself(callee):
            raise error_at(op, "E3003", f"psk-inline: @{op.callee.string_value()} is recursive and cannot be inlined")
        body = callee.body.clone()
        block = body.blocks.first
        assert block is not None
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        results = list(ret.arguments)
        ret.detach()
        ret.erase(safe_erase=False)
        rewriter.inline_block(block, InsertPoint.before(op), op.arguments)
        rewriter.replace(op, [], results)


@dataclass(frozen=True)
class InlineCalls(ModulePass):
    """Inline every call, to a fixed point (calls inside inlined bodies too)."""

    name = "psk-inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(InlineCall()).rewrite_module(op)
