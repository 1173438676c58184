"""`psk-tile`: a contraction's loop nest at its layout's form, tile, k-block, J-block, order and lanes.

The pattern rewrites each structured `psk_kernel.contract` into the loops
of `presk.lowering.contraction`: the tiled form (block loops over I and J
in the layout's order, the tile's [m, n] running sums in registers, the
k-block loop outside or inside them) or the row-wise form (the running sums
in the output row). The layout's lanes are recorded on the column loop
(`psk_kernel.lanes`), for `psk-vectorize`. A split of the row-wise form's
J loop, whose depth is outer + 2 inside the serial k loop, needs that loop
outermost: the loops are emitted J-first and the pending split restated at
depth 0 for `psk-split`. Every form sums each output element's chain in
increasing k, so every point computes the default's bits; a tile that does
not divide its axis shifts its last block back (the overlap is computed
again, with the same bits) and a k-block that does not divide K cuts its
last block short.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from presk.dialects.psk_core_types import TensorType
from presk.dialects.psk_kernel_structured import ContractOp
from presk.dialects.psk_realize_nests import Contraction
from presk.lowering import contraction, nests
from presk.lowering.kernel_builder import KernelBuilder
from presk.passes.kernel_layout import (
    consume,
    kernel_of,
    refuse,
    replace_decision,
    resolved,
    stated,
)

TILE_DECISIONS = ("form", "tile", "kblock", "jblock", "order", "lanes")


def contraction_operands(op: ContractOp) -> contraction.ContractionOperands:
    """The axes and sizes of a structured contraction, from its properties and buffers."""
    sizes: dict[str, int] = {}
    # A blocked panel [outer..., blocks, K..., n] splits I or J: its other axes are read off around the block axis.
    for which, blocked in (("out", None), ("lhs", op.row_block), ("rhs", op.block)):
        buffer = getattr(op, which).type
        assert isinstance(buffer, MemRefType)
        axes, shape = op.axes_of(which), buffer.get_shape()
        if blocked is not None:
            summed = 1 + len(op.summed_outer)
            shape = (*shape[: -summed - 2], *shape[-summed - 1 : -1])
            axes = axes[:-1]
        sizes.update(zip(axes, shape))
    outer = tuple(a.data for a in op.outer.data)
    i, j, k = op.i.data, op.j.data, op.k.data
    tn = op.axes_of("lhs")[-1] == i
    c = Contraction(outer, i, j, k, sizes[j], sizes[k], op.nt is not None, False, tn, op.summed_outer)
    return contraction.ContractionOperands(
        c, op.axes_of("lhs"), op.axes_of("rhs"), op.axes_of("out"), sizes, op.block, op.row_block
    )


def _operand(op: ContractOp, which: str, sizes: dict[str, int]) -> nests.Operand:
    axes = op.axes_of(which)
    return nests.Operand(TensorType((a, sizes[a]) for a in axes), buffer=getattr(op, which))


def epilogue_of(op: ContractOp) -> contraction.Epilogue | None:
    if op.addend is None and op.addend_literal is None:
        return None
    literal = op.addend_literal.value.data if op.addend_literal is not None else None
    addend = nests.Operand(op.addend_type, buffer=op.addend, constant=literal)  # type: ignore[arg-type]
    return contraction.Epilogue(addend, op.product_first is not None, op.epilogue_kind)


class TileContraction(RewritePattern):
    """`psk_kernel.contract` → its loop nest at the kernel's pending layout."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ContractOp, rewriter: PatternRewriter) -> None:
        k = kernel_of(op)
        block = k.body.block
        assert block.last_op is op, "a structured contraction is its kernel's last op"
        layout, said = resolved(k), stated(k)
        for earlier, name in (("epilogue", "psk-epilogue"), ("pack", "psk-pack")):
            if layout.get(earlier) is True:  # its pass works on the structured op: once tiled, never applied
                raise refuse(k, None, earlier, f"the layout's {earlier} is not applied yet: run {name} before psk-tile")
        co = contraction_operands(op)
        # Lanes stated away from their default are recorded (the lowering drops a stated default).
        lanes = said.get("lanes")
        recorded = lanes if isinstance(lanes, int) else None
        split = layout.get("split")
        by_columns = (
            layout.get("form") == "row-wise" and isinstance(split, dict) and split["depth"] == len(co.c.outer) + 2
        )
        a, b = _operand(op, "lhs", dict(co.sizes)), _operand(op, "rhs", dict(co.sizes))
        out, arith_type, epilogue = op.out, op.arith_type, epilogue_of(op)
        rewriter.erase(op, safe_erase=False)
        contraction.emit_contraction(
            KernelBuilder(block), co, a, b, out, layout, arith_type, epilogue, recorded, by_columns
        )
        if by_columns:
            replace_decision(k, "split", {"depth": 0, "workers": split["workers"]})  # type: ignore[index]
        consume(k, TILE_DECISIONS)


@dataclass(frozen=True)
class TileContractions(ModulePass):
    """Every structured contraction lowered to loops at its layout (the defaults where none is stated)."""

    name = "psk-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(TileContraction(), apply_recursively=False).rewrite_module(op)
