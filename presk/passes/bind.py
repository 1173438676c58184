"""`psk-bind`: specialise symbolic sizes to integers.

`psk-bind{dims="B=2,T=8" consts="D=64"}` binds the listed dimension
variables and every compile-time constant (its declared value, or the one
given in `consts`), rewrites every type of the module with those integers,
and removes the `psk_core.const_dim` declarations it has used up. Dimension
variables not listed stay symbolic, so a program can be bound in stages.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    TypeConversionPattern,
    op_type_rewrite_pattern,
)

from presk import sizes
from presk.dialects.psk_core import ConstantOp, ConstDimOp, SizeOp
from presk.dialects.psk_core_types import PSKType, Size, map_type


class BindSizesInTypes(TypeConversionPattern):
    """Replace every bound size name in PSK-Core types (and function signatures) by its integer."""

    def __init__(self, env: dict[str, int]) -> None:
        super().__init__()
        self.env = env
        self._converted: dict[Attribute, Attribute | None] = {}
        """Each type converted once: a program repeats its types (a parameter record at every call), and
        rebuilding a record rebuilds and verifies every type inside it."""

    def bind(self, size: Size) -> Size:
        return self.env.get(size, size) if isinstance(size, str) else size

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        """xDSL's conversion, keeping the op's source location (it makes a new op without one)."""
        block, previous, location = op.parent_block(), op.prev_op, op.location
        super().match_and_rewrite(op, rewriter)
        if op.parent_block() is None and block is not None:
            replacement = previous.next_op if previous is not None else block.first_op
            if replacement is not None:
                replacement.location = location

    def convert_type(self, typ: Attribute, /) -> Attribute | None:
        if typ in self._converted:
            return self._converted[typ]
        converted = self._converted[typ] = self._convert(typ)
        return converted

    def _convert(self, typ: Attribute) -> Attribute | None:
        if isinstance(typ, FunctionType):
            inputs = [self.convert_type(t) or t for t in typ.inputs.data]
            outputs = [self.convert_type(t) or t for t in typ.outputs.data]
            return FunctionType.from_lists(inputs, outputs)
        if isinstance(typ, PSKType):
            return map_type(typ, self.bind)
        return None


class BindSizeValue(RewritePattern):
    """`psk_core.size N` of a bound size becomes the constant it names."""

    def __init__(self, env: dict[str, int]) -> None:
        self.env = env

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SizeOp, rewriter: PatternRewriter) -> None:
        if (value := self.env.get(op.size.data)) is not None:
            rewriter.replace(op, ConstantOp(float(value), op.result.type))


@dataclass(frozen=True)
class BindSizes(ModulePass):
    """Specialise dimension variables and constants to integers."""

    name = "psk-bind"

    dims: str = ""
    """Dimension variables to bind, `B=2,T=8`."""
    consts: str = ""
    """Overrides of declared constants, `D=64`; every constant is bound either way."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dims = sizes.parse_bindings([self.dims], "dims")
        consts = sizes.parse_bindings([self.consts], "consts")
        env = sizes.resolve(op, consts, dims, flags=("consts", "dims"))
        PatternRewriteWalker(BindSizesInTypes(env), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(BindSizeValue(env), apply_recursively=False).rewrite_module(op)
        for decl in [d for d in op.walk() if isinstance(d, ConstDimOp)]:
            decl.detach()
            decl.erase()
