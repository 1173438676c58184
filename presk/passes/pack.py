"""`psk-pack`: operand 1 of a contraction copied to a panel before the contraction runs.

An NT contraction reads operand 1 as b[outer..., J, K]: along a tile's
columns its elements are K apart, so lanes across J cannot load them
together. With `pack: true` the host launches a copy kernel `pack` that
writes b, transposed, to the blocked panel [outer..., ⌈J/n⌉, K, n] an NN
contraction's pack writes (below), and the contraction reads it as that
NN one does; a row-wise NT contraction, which has no tile, gets the plain
transposed panel [outer..., K, J]. The bits move unchanged.

An NN contraction reads operand 1's rows in place, J apart: at J = 2048 a
k-block of a tile's columns sits at an 8 KiB stride, in a handful of the
caches' sets, and evicts itself. Packed, its operand 1 is a blocked panel
[outer..., ⌈J/n⌉, K, n] of the tile's n columns (the layout BLAS packs
into), so each tile reads one contiguous stream; the contraction reads it
through `rhs_block = n`. Where n does not divide J, the last block holds
the last n columns, as the tile's shifted last block reads them.

A TN contraction (both operands carry the summed axes before I and J)
reads each operand's consecutive k a whole row apart; packed, operand 1
is the blocked panel [outer..., ⌈J/n⌉, K..., n] and operand 0 the blocked
panel [outer..., ⌈I/m⌉, K..., m] of the tile's m rows (`pack_rows`).

`pack: "both"` packs operand 0 of an NN or NT contraction too. Its
operand 0 carries K innermost: a tile reads m rows a whole row of K apart,
which at K = 2048 in f32 (8 KiB) share one set of L1. The copy is the one
an NT operand 1 gets, [outer..., I, K] to [outer..., ⌈I/m⌉, K, m], and the
contraction then reads operand 0 as a TN one reads its panel.

The kernel's buffer for an operand becomes the panel's type; each launch of
it gets the panel in its place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_kernel_structured import ContractOp
from presk.dialects.psk_realize_layout import BOTH_PACKS, packs_operand_1
from presk.lowering import contraction
from presk.lowering.kernel_builder import KernelBuilder
from presk.passes.kernel_layout import (
    consume,
    fresh_name,
    kernel_of,
    kernels,
    launches_of,
    refuse,
    resolved,
)


def _swap_last_two(rank: int) -> list[int]:
    """The transposed panel's axes: operand 1's outer axes, then K, then J."""
    return [*range(rank - 2), rank - 1, rank - 2]


@dataclass
class PackOperand(RewritePattern):
    """A `psk_kernel.contract` whose kernel's layout packs: a panel for operand 1 (for operand 0 too on a TN one, or under "both"), and the copy launches."""

    module: ModuleOp
    copies: dict[tuple[MemRefType, MemRefType, int, bool], str] = field(default_factory=dict)
    """The pack kernel of each (source, panel, summed axes, transposed): one kernel serves every such copy.

    Transposed is part of the key because both copies can have the same types: a square [N, N] source
    blocked by 8 is [N/8, N, 8] whether its columns (an NN operand 1) or its rows (an NT operand 1, a
    packed NN operand 0) are blocked."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ContractOp, rewriter: PatternRewriter) -> None:
        k = kernel_of(op)
        layout = resolved(k)
        if not packs_operand_1(layout.get("pack")) or op.block is not None:
            return
        source = op.rhs.type
        assert isinstance(source, MemRefType)
        shape = source.get_shape()
        transposed = op.nt is not None
        n = contraction.tiled_layout(layout).n if layout.get("form") != "row-wise" else 1
        blocked = not op.summed_outer and n > 1
        if transposed and blocked:  # [outer..., J, K] → [outer..., ⌈J/n⌉, K, n]
            panel_type = MemRefType(source.element_type, [*shape[:-2], contraction.blocks(shape[-2], n), shape[-1], n])
        elif transposed:
            panel_type = MemRefType(source.element_type, [shape[d] for d in _swap_last_two(len(shape))])
        else:
            if layout.get("form") == "row-wise":
                raise refuse(k, 3, "pack", "a row-wise contraction has no tile, so no blocked panel to read")
            summed = 1 + len(op.summed_outer)  # K, and a TN contraction's other summed axes, kept after the blocks
            panel_type = MemRefType(
                source.element_type,
                [*shape[: -summed - 1], contraction.blocks(shape[-1], n), *shape[-summed - 1 : -1], n],
            )
        copy = self.pack_kernel(k, source, panel_type, transposed, 1 + len(op.summed_outer))
        self.read_panel(op, 1, panel_type, copy, rewriter)
        if transposed:
            axes = op.axes_of("rhs")
            op.properties["rhs_axes"] = ArrayAttr([StringAttr(axes[d]) for d in _swap_last_two(len(axes))])
            del op.properties["nt"]
        if not transposed or blocked:
            op.properties["rhs_block"] = IntegerAttr(panel_type.get_shape()[-1], i64)
        self.pack_rows(op, layout, rewriter)
        consume(k, ["pack"])

    def pack_rows(self, op: ContractOp, layout: dict[str, Any], rewriter: PatternRewriter) -> None:
        """Operand 0 as the blocked panel [outer..., ⌈I/m⌉, K..., m] of the tile's m rows: a TN one's, or any under "both".

        A TN operand 0 carries I innermost, so a tile's m elements of one k
        are side by side, but consecutive k are a whole row of I apart: 6 KiB
        for an MLP's 1 536 columns, all in two sets of L1, which a k-block of
        them evicts before the tile's next J block reads it again. In the
        panel a block's k run one after the other. Not where the k-block
        loop encloses an I block loop whose tile does not divide I: its rows
        are clamped, not shifted (`contraction._clamped_indices`); `pack:
        true` then leaves a TN operand 0 in place, and `"both"` is refused,
        as `psk-verify-layout` refuses it.
        """
        k = kernel_of(op)
        both = layout.get("pack") == BOTH_PACKS
        tiled = contraction.tiled_layout(layout)
        source = op.lhs.type
        assert isinstance(source, MemRefType)
        shape, axes = source.get_shape(), op.axes_of("lhs")
        tn = axes[-1] == op.i.data
        rows = tn or (both and not op.summed_outer and axes[-2:] == (op.i.data, op.k.data))
        i_size = shape[-1] if tn else shape[-2]
        if not rows or tiled.m == 1 or tiled.clamps_rows(i_size):
            if both:
                raise refuse(k, 3, "pack", "operand 0's panel holds whole blocks of the tile's rows: a tile of more "
                             "than one row, dividing I where the k-block loop encloses the I block loop")  # fmt: skip
            return
        summed = 1 + len(op.summed_outer)
        if tn:
            panel_type = MemRefType(
                source.element_type, [*shape[: -summed - 1], contraction.blocks(i_size, tiled.m), *shape[-summed - 1 : -1], tiled.m]
            )
        else:  # [outer..., I, K] → [outer..., ⌈I/m⌉, K, m], named [outer..., K, I] as a TN operand 0's panel is
            panel_type = MemRefType(source.element_type, [*shape[:-2], contraction.blocks(i_size, tiled.m), shape[-1], tiled.m])
            op.properties["lhs_axes"] = ArrayAttr([StringAttr(axes[d]) for d in _swap_last_two(len(axes))])
        self.read_panel(op, 0, panel_type, self.pack_kernel(k, source, panel_type, not tn, summed), rewriter)
        op.properties["lhs_block"] = IntegerAttr(tiled.m, i64)

    def read_panel(self, op: ContractOp, operand: int, panel_type: MemRefType, copy: str, rewriter: PatternRewriter) -> None:
        """The contraction reads operand `operand` from a panel that each launch allocates and fills by `copy` first.

        The panel's buffer takes the operand's place, or comes at the
        operand's position when the operand has other readers.
        """
        k = kernel_of(op)
        block = k.body.block
        old = op.operands[operand]
        old_index: int = old.index  # type: ignore[attr-defined]
        shared = any(use.operation is not op or use.index != operand for use in old.uses)
        position = operand if shared else old_index
        panel_arg = block.insert_arg(panel_type, position)
        op.operands[operand] = panel_arg
        if not shared:
            block.erase_arg(old)  # type: ignore[arg-type]
        for launch in launches_of(self.module, k.sym_name.data):
            buffers = list(launch.buffers)
            source_buffer = buffers[old_index]
            panel = kernel.AllocOp(panel_type)
            site = launch.attributes["site"]
            assert isinstance(site, StringAttr)
            rewriter.insert([panel, kernel.LaunchOp(copy, [source_buffer, panel.result], site.data)], InsertPoint.before(launch))
            if shared:
                buffers.insert(position, panel.result)
            else:
                buffers[position] = panel.result
            launch.operands = buffers

    def pack_kernel(self, k: kernel.KernelOp, source: MemRefType, panel: MemRefType, transposed: bool, summed: int) -> str:
        key = (source, panel, summed, transposed)
        if key not in self.copies:
            copy = kernel.KernelOp(fresh_name(self.module, "pack"), k.site.data, [source, panel])
            kb, (source_arg, panel_arg) = KernelBuilder(copy.body.block), copy.body.block.args
            if transposed and len(panel.get_shape()) > len(source.get_shape()):
                contraction.emit_transposed_blocked_pack(kb, source_arg, panel_arg)
            elif transposed:
                contraction.emit_pack(kb, source_arg, panel_arg, _swap_last_two(len(source.get_shape())))
            else:
                contraction.emit_blocked_pack(kb, source_arg, panel_arg, summed)
            self.module.body.block.insert_op_before(copy, k)
            self.copies[key] = copy.sym_name.data
        return self.copies[key]


@dataclass(frozen=True)
class PackOperands(ModulePass):
    """Every contraction whose layout says `pack: true` or `"both"` reads a panel (or two) its host copies first."""

    name = "psk-pack"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(PackOperand(op), apply_recursively=False).rewrite_module(op)
        for k in kernels(op):  # `pack: false` is applied by doing nothing
            if "pack" in resolved(k):
                consume(k, ["pack"])
