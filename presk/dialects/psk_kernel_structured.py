"""The structured ops of PSK-Kernel: a nest whose loops its layout has not made yet.

`psk-lower-kernel` writes a contraction nest as one `psk_kernel.contract`
and a softmax as one `psk_kernel.softmax` inside their kernels, the way
MLIR's linalg names a matmul before tiling it; the kernel carries the
nest's layout (`layout = #psk_realize.layout<...>`). The layout passes then
rewrite them: `psk-epilogue` folds the add that alone reads a product into
its `contract`, `psk-pack` gives a `contract` a panel for operand 1,
`psk-tile` turns a `contract` into its loop nest at the layout's form,
tile, k-block and order, and `psk-softmax-passes` a `softmax` into its two
or three passes.
Neither executor runs a structured op: they exist between passes.

    psk_kernel.contract %0, %1 -> %2 <{i = "i", j = "j", k = "__k", outer = [],
        lhs_axes = ["i", "__k"], rhs_axes = ["__k", "j"], out_axes = ["i", "j"]}>
        : memref<8x8xf32>, memref<8x8xf32> -> memref<8x8xf32>
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IntegerAttr, MemRefType, StringAttr, UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
)
from xdsl.utils.exceptions import VerifyException


def _names(names: Sequence[str]) -> ArrayAttr[StringAttr]:
    return ArrayAttr([StringAttr(n) for n in names])


EPILOGUE_OPS: tuple[str, ...] = ("add", "mul")
"""What an epilogue folded into a contraction's kernel may do with its other operand."""


@irdl_op_definition
class ContractOp(IRDLOperation):
    """out[outer, I, J] = Σ_K lhs[outer, I, K] · rhs[.., K, J], plus or times `addend` once folded (`dot+add`).

    Each buffer's axes are named (`lhs_axes`, ...); `nt` marks an operand 1
    that carries K innermost; `rhs_block = n` an operand 1 read from a
    blocked panel [outer..., ⌈J/n⌉, K, n] (`psk-pack` on an NN contraction;
    where n does not divide J its last block holds J's last n columns, as
    the tile's shifted last block reads them), its axes still named
    [outer..., K, J]. `k_outer` names summed axes besides K, outermost
    first: a TN contraction (both operands carry K before I and J) may sum
    over several, one loop each, K the innermost; a blocked panel then
    keeps them after its block axis, [outer..., ⌈J/n⌉, K_outer..., K, n].
    `lhs_block = m` an operand 0 read from the blocked panel
    [outer..., ⌈I/m⌉, K..., m] of the tile's m rows (`psk-pack`: a TN
    contraction's, or any under `"pack": "both"`; the last block holds I's
    last m rows where m does not divide I, as the tile's shifted last block
    reads them), its axes named [outer..., K..., I] as a TN operand 0's are
    (an NN or NT operand 0 packed has them swapped to [outer..., K, I]). The addend is a buffer (its
    PSK-Core type in `addend_type`, for its broadcasting) or a literal
    (`addend_literal`); `product_first` keeps the add's operand order. `epilogue_op` is `mul` for an
    epilogue that multiplies the finished sums by the addend (`ein+mul`: attention's scores scaled),
    absent for one that adds it.
    """

    name = "psk_kernel.contract"
    lhs = operand_def(MemRefType)
    rhs = operand_def(MemRefType)
    addend = opt_operand_def(MemRefType)
    out = operand_def(MemRefType)
    outer = prop_def(ArrayAttr[StringAttr])
    i = prop_def(StringAttr)
    j = prop_def(StringAttr)
    k = prop_def(StringAttr)
    k_outer = opt_prop_def(ArrayAttr[StringAttr])
    """Summed axes besides `k`, outermost first (absent: K alone)."""
    lhs_axes = prop_def(ArrayAttr[StringAttr])
    rhs_axes = prop_def(ArrayAttr[StringAttr])
    out_axes = prop_def(ArrayAttr[StringAttr])
    nt = opt_prop_def(UnitAttr)
    rhs_block = opt_prop_def(IntegerAttr)
    """The columns of each block of a blocked panel read as operand 1 (absent: operand 1 as its axes say)."""
    lhs_block = opt_prop_def(IntegerAttr)
    """The rows of each block of a blocked panel read as operand 0 of a TN contraction (absent: as its axes say)."""
    arith_type = prop_def(Attribute)
    """The type the sums accumulate in (the site's arithmetic type)."""
    addend_type = opt_prop_def(Attribute)
    addend_literal = opt_prop_def(FloatAttr)
    product_first = opt_prop_def(UnitAttr)
    epilogue_op = opt_prop_def(StringAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = (
        "$lhs `,` $rhs (`plus` $addend^ `:` type($addend))? `->` $out attr-dict"
        " `:` type($lhs) `,` type($rhs) `->` type($out)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        out: SSAValue,
        outer: Sequence[str],
        axes: tuple[str, str, str],
        operand_axes: tuple[Sequence[str], Sequence[str], Sequence[str]],
        nt: bool,
        arith_type: Attribute,
        addend: SSAValue | None = None,
        addend_type: Attribute | None = None,
        addend_literal: float | None = None,
        product_first: bool = False,
        k_outer: Sequence[str] = (),
        epilogue_op: str = "add",
    ) -> None:
        i, j, k = axes
        lhs_axes, rhs_axes, out_axes = operand_axes
        properties: dict[str, Attribute] = {
            "outer": _names(outer),
            "i": StringAttr(i),
            "j": StringAttr(j),
            "k": StringAttr(k),
            "lhs_axes": _names(lhs_axes),
            "rhs_axes": _names(rhs_axes),
            "out_axes": _names(out_axes),
        }
        properties["arith_type"] = arith_type
        if k_outer:
            properties["k_outer"] = _names(k_outer)
        if nt:
            properties["nt"] = UnitAttr()
        if addend_type is not None:
            properties["addend_type"] = addend_type
        if addend_literal is not None:
            properties["addend_literal"] = FloatAttr(addend_literal, arith_type)  # type: ignore[arg-type]
        if product_first:
            properties["product_first"] = UnitAttr()
        if epilogue_op != "add":
            properties["epilogue_op"] = StringAttr(epilogue_op)
        addends = [addend] if addend is not None else []
        super().__init__(operands=[lhs, rhs, addends, out], properties=properties)

    def axes_of(self, which: str) -> tuple[str, ...]:
        return tuple(a.data for a in getattr(self, f"{which}_axes").data)

    @property
    def summed_outer(self) -> tuple[str, ...]:
        """The summed axes besides K, outermost first."""
        return tuple(a.data for a in self.k_outer.data) if self.k_outer is not None else ()

    @property
    def block(self) -> int | None:
        """The columns of a blocked panel's blocks, or None when operand 1 is read as its axes say."""
        return self.rhs_block.value.data if self.rhs_block is not None else None

    @property
    def row_block(self) -> int | None:
        """The rows of a blocked operand 0's blocks, or None when operand 0 is read as its axes say."""
        return self.lhs_block.value.data if self.lhs_block is not None else None

    def verify_(self) -> None:
        blocks = {"lhs": self.row_block, "rhs": self.block}
        for which in ("lhs", "rhs", "out"):
            buffer = getattr(self, which).type
            rank = len(self.axes_of(which)) + (1 if blocks.get(which) is not None else 0)
            if isinstance(buffer, MemRefType) and len(buffer.get_shape()) != rank:
                raise VerifyException(f"the {which} buffer {buffer} has {len(buffer.get_shape())} axes, not {rank}")
        if self.rhs_block is not None:
            if self.nt is not None:
                raise VerifyException("a blocked operand 1 is read along K, then J: its axes end in K, J")
            self._verify_panel("rhs", self.j.data, "columns", "operand 1", "J")
        if self.lhs_block is not None:
            self._verify_panel("lhs", self.i.data, "rows", "operand 0", "I")
        if self.addend is not None and self.addend_type is None:
            raise VerifyException("an addend buffer needs its addend_type")
        if self.epilogue_op is not None and self.epilogue_op.data not in EPILOGUE_OPS:
            raise VerifyException(f"epilogue_op is one of {', '.join(EPILOGUE_OPS)}, not '{self.epilogue_op.data}'")

    @property
    def epilogue_kind(self) -> str:
        """What the folded epilogue does with its operand: `add` (the default) or `mul`."""
        return self.epilogue_op.data if self.epilogue_op is not None else "add"

    def _verify_panel(self, which: str, axis: str, what: str, operand: str, letter: str) -> None:
        """A blocked panel [outer..., ⌈X/n⌉, K..., n] of the tile's n rows or columns along `axis` (X)."""
        summed = (*self.summed_outer, self.k.data)
        if self.axes_of(which)[-len(summed) - 1 :] != (*summed, axis):
            raise VerifyException(f"a blocked {operand} is read along K, then {letter}: its axes end in K, {letter}")
        panel = getattr(self, which).type
        assert isinstance(panel, MemRefType)
        n = panel.get_shape()[-1]
        stated = self.row_block if which == "lhs" else self.block
        if n != stated:
            raise VerifyException(f"the blocked panel {panel} has blocks of {n} {what}, not {stated}")
        out = self.out.type
        if isinstance(out, MemRefType) and axis in self.axes_of("out") and n > 0:
            size = out.get_shape()[self.axes_of("out").index(axis)]
            want = -(-size // n)  # the tile's blocks, the last one shifted back where n does not divide the axis
            count = panel.get_shape()[-len(summed) - 2]
            if count != want:
                raise VerifyException(
                    f"the blocked panel {panel} has {count} blocks, not the {want} blocks of {n} {what} of {letter} = {size}"
                )


@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    """out = softmax(x) along `axis` (masked where `mask` is 0): rows of the layout's two or three passes.

    `x_type` and `mask_type` are the operands' PSK-Core types: their axes
    name the buffers' dimensions, and a mask broadcasts along those it lacks.
    """

    name = "psk_kernel.softmax"
    x = operand_def(MemRefType)
    mask = opt_operand_def(MemRefType)
    out = operand_def(MemRefType)
    axis = prop_def(StringAttr)
    arith_type = prop_def(Attribute)
    x_type = prop_def(Attribute)
    mask_type = opt_prop_def(Attribute)
    causal = opt_prop_def(ArrayAttr[StringAttr])
    """`[first, second]`, in place of a mask buffer: `causal_mask`'s mask over those two axes of x,
    allowed where second's index ≤ first's, computed from the loop counters instead of loaded."""
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = "$x (`masked` $mask^ `:` type($mask))? `->` $out attr-dict `:` type($x) `->` type($out)"

    def __init__(
        self, x: SSAValue, mask: SSAValue | None, out: SSAValue, axis: str, arith_type: Attribute,
        x_type: Attribute, mask_type: Attribute | None, causal: tuple[str, str] | None = None,
    ) -> None:  # fmt: skip
        properties: dict[str, Attribute] = {"axis": StringAttr(axis), "arith_type": arith_type, "x_type": x_type}
        if mask_type is not None:
            properties["mask_type"] = mask_type
        if causal is not None:
            properties["causal"] = ArrayAttr([StringAttr(n) for n in causal])
        super().__init__(operands=[x, [mask] if mask is not None else [], out], properties=properties)

    def verify_(self) -> None:
        if self.causal is None:
            return
        names = [n.data for n in self.causal.data]
        x_names = getattr(self.x_type, "names", ())
        if self.mask is not None or len(names) != 2 or not set(names) <= set(x_names):
            raise VerifyException("a causal softmax names two axes of x and reads no mask buffer")


STRUCTURED_OPS = (ContractOp, SoftmaxOp)
