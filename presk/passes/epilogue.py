"""`psk-epilogue`: the add or mul that alone reads a product, folded into the product's kernel (`dot+add`).

A contraction whose layout states `"epilogue": true` launches its kernel
(one structured `psk_kernel.contract`) into a buffer that one other launch
reads: the kernel of a lone addition, `out[p] = add(product[p], other[q])`
or `add(other[q], product[p])` over the product's shape, or of a lone
multiplication alike (attention's scores times their scale). The pattern
reads that kernel as what it is (a perfect nest, two operands loaded or a
literal, one `arith.addf` or `arith.mulf`, one store), finds along which of
the product's axes the other operand runs from the loop variables that
index its load, and rewrites the two launches into one of a new kernel
`<name>+add` (`<name>+mul`) whose `contract` has the other operand as its
`addend` and the operation as its `epilogue_op`: `psk-tile` adds it to (or
multiplies it into) each finished sum (under a k-block, after the last
block; in the row-wise form in one more sweep; in bf16 after the sum is
rounded to the storage type and read back, as the separate kernels do).
The product's buffer and the kernels no launch uses any more disappear.

The seed's conditions are checked here on the launches, with E7002 naming
the product's nest: its value has one reader, which is that addition (or
multiplication); it is no result of the entry; that kernel stores the
product's storage type; and with lanes, the other operand runs along J
innermost or not at all. (The plan's check, `psk-verify-layout`, refuses
most of these earlier, on the program; this is the guard at the level where
the fold happens.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_core_types import RealType, TensorType
from presk.dialects.psk_kernel_structured import ContractOp
from presk.passes.kernel_layout import (
    consume,
    fresh_name,
    kernels,
    launches_of,
    refuse,
    resolved,
    stated,
)


@dataclass(frozen=True)
class LoneOp:
    """A kernel read as `out = add(a, b)` or `mul(a, b)`: the operation, which of its buffers the product
    is, and the other operand."""

    op: str
    """`add` or `mul`."""
    product_first: bool
    other_buffer: int | None
    """The kernel argument the other operand is loaded from, or None for a literal."""
    other_axes: tuple[int, ...]
    """For each axis of the other operand, the output axis whose loop indexes it."""
    literal: float | None
    out_type: MemRefType


def _loaded(value: SSAValue) -> Operation | None:
    """The load or constant behind `value`, through a widening conversion."""
    op = value.owner
    if isinstance(op, arith.ExtFOp):
        op = op.input.owner
    return op if isinstance(op, memref.LoadOp | arith.ConstantOp) else None


_OPS: dict[type[Operation], str] = {arith.AddfOp: "add", arith.MulfOp: "mul"}


def read_lone_op(k: kernel.KernelOp, product_arg: int) -> LoneOp | None:
    """`k` as a lone addition or multiplication reading argument `product_arg` at the output's own index,
    or None."""
    block = k.body.block
    loops: list[scf.ForOp] = []
    while True:
        inner = [op for op in block.ops if not isinstance(op, scf.YieldOp | arith.ConstantOp)]
        if len(inner) == 1 and isinstance(inner[0], scf.ForOp) and not inner[0].iter_args:
            loops.append(inner[0])
            block = inner[0].body.block
            continue
        break
    ivs = [loop.body.block.args[0] for loop in loops]
    stores = [op for op in block.ops if isinstance(op, memref.StoreOp)]
    arithmetic = [op for op in block.ops if type(op) in _OPS]
    if len(stores) != 1 or len(arithmetic) != 1:
        return None
    store, combine = stores[0], arithmetic[0]
    args = k.body.block.args
    out = args[-1]
    if store.memref != out or list(store.indices) != ivs:
        return None
    stored = store.value.owner
    if stored is not combine and not (isinstance(stored, arith.TruncFOp) and stored.input.owner is combine):
        return None
    sources = [_loaded(combine.lhs), _loaded(combine.rhs)]
    if any(s is None for s in sources):
        return None
    sides = [
        isinstance(s, memref.LoadOp) and s.memref == args[product_arg] and list(s.indices) == ivs
        for s in sources
    ]
    if sides.count(True) != 1:
        return None
    first = sides[0]
    other = sources[1 if first else 0]
    assert out.type is not None and isinstance(out.type, MemRefType)
    if isinstance(other, arith.ConstantOp):
        return LoneOp(_OPS[type(combine)], first, None, (), other.value.value.data, out.type)  # type: ignore[union-attr]
    assert isinstance(other, memref.LoadOp)
    if other.memref not in args or any(index not in ivs for index in other.indices):
        return None
    axes = tuple(ivs.index(index) for index in other.indices)
    return LoneOp(_OPS[type(combine)], first, args.index(other.memref), axes, None, out.type)  # type: ignore[arg-type]


@dataclass
class FoldEpilogue(RewritePattern):
    """A product whose layout states an epilogue, and the add (mul) that reads it: one launch of `<name>+add`
    (`<name>+mul`)."""

    module: ModuleOp
    folded: dict[tuple[str, str], str] = field(default_factory=dict)
    """The folded kernel of each (product kernel, add or mul kernel) pair: one kernel serves every such fold."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, k: kernel.KernelOp, rewriter: PatternRewriter) -> None:
        op = k.body.block.last_op
        if not isinstance(op, ContractOp) or resolved(k).get("epilogue") is not True:
            return
        for launch in launches_of(self.module, k.sym_name.data):
            self.fold(k, op, launch, rewriter)
        rewriter.erase(k)

    def fold(self, k: kernel.KernelOp, op: ContractOp, launch: kernel.LaunchOp, rewriter: PatternRewriter) -> None:
        product = launch.buffers[-1]
        readers = [use.operation for use in product.uses if use.operation is not launch]
        if any(isinstance(r, kernel.ReturnOp) for r in readers):
            raise refuse(k, None, "epilogue", "the product's value is a result of the entry, which its own kernel must store")
        if len(readers) != 1 or not isinstance(readers[0], kernel.LaunchOp):
            raise refuse(k, None, "epilogue", "the product's value is read by another launch than its add or mul")
        reader = readers[0]
        adder = self.kernel_named(reader.kernel.string_value())
        position = list(reader.buffers).index(product)
        lone = read_lone_op(adder, position)
        if lone is None or list(reader.buffers).count(product) != 1:
            raise refuse(k, None, "epilogue", "the product's value is read by another launch than its add or mul")
        assert isinstance(product.type, MemRefType)
        if lone.out_type != product.type:
            raise refuse(k, None, "epilogue", f"the {lone.op} stores {lone.out_type.element_type}, the product {product.type.element_type}: the storage types differ")
        out_axes = op.axes_of("out")
        other_names = tuple(out_axes[a] for a in lone.other_axes)
        lanes = stated(k).get("lanes")
        j = op.j.data
        if lone.other_buffer is not None and isinstance(lanes, int) and lanes > 1 and j in other_names and other_names[-1] != j:
            raise refuse(k, None, "epilogue", (
                f"with lanes, the {'added' if lone.op == 'add' else 'multiplying'} operand runs along J ({j}) as its innermost axis or not at all; "
                f"its axes are {', '.join(other_names)}"
            ))  # fmt: skip
        other_buffer = reader.buffers[lone.other_buffer] if lone.other_buffer is not None else None
        inputs = list(launch.buffers[:-1])
        # The other operand is one more buffer, unless the product already reads it.
        shared = inputs.index(other_buffer) if other_buffer in inputs else None
        if other_buffer is not None and shared is None:
            inputs.append(other_buffer)
        name = self.folded_kernel(k, op, adder, lone, other_names, shared)
        site = launch.attributes["site"]
        assert isinstance(site, StringAttr)
        rewriter.replace(reader, kernel.LaunchOp(name, [*inputs, reader.buffers[-1]], site.data))
        alloc = product.owner
        rewriter.erase(launch)
        if isinstance(alloc, kernel.AllocOp) and not alloc.result.uses:
            rewriter.erase(alloc)
        if not launches_of(self.module, adder.sym_name.data):
            rewriter.erase(adder)

    def kernel_named(self, name: str) -> kernel.KernelOp:
        return next(k for k in kernels(self.module) if k.sym_name.data == name)

    def folded_kernel(
        self, k: kernel.KernelOp, op: ContractOp, adder: kernel.KernelOp, lone: LoneOp,
        other_names: tuple[str, ...], shared: int | None,
    ) -> str:  # fmt: skip
        key = (k.sym_name.data, adder.sym_name.data, shared)
        if key in self.folded:
            return self.folded[key]
        inputs = list(k.body.block.arg_types[:-1])
        other_type = adder.body.block.args[lone.other_buffer].type if lone.other_buffer is not None else None
        if other_type is not None and shared is None:
            inputs.append(other_type)
        base = re.sub(r"_\d+$", "", k.sym_name.data)
        fused = kernel.KernelOp(fresh_name(self.module, f"{base}+{lone.op}"), k.site.data, [*inputs, lone.out_type])
        fused.location = k.location
        fused.attributes.update(k.attributes)
        args = fused.body.block.args
        sizes = dict(zip(op.axes_of("out"), lone.out_type.get_shape()))
        if other_type is not None:
            addend_type = TensorType((n, sizes[n]) for n in other_names) if other_names else RealType()
            addend: SSAValue | None = args[shared if shared is not None else len(inputs) - 1]
        else:
            addend_type, addend = RealType(), None
        buffers = {old: new for old, new in zip(k.body.block.args[:-1], args)}
        fused.body.block.add_op(ContractOp(
            buffers[op.lhs], buffers[op.rhs], args[-1], [a.data for a in op.outer.data],  # type: ignore[index]
            (op.i.data, op.j.data, op.k.data), (op.axes_of("lhs"), op.axes_of("rhs"), op.axes_of("out")),
            op.nt is not None, op.arith_type, addend, addend_type, lone.literal, lone.product_first,
            op.summed_outer, lone.op,
        ))  # fmt: skip
        consume(fused, ["epilogue"])
        self.module.body.block.insert_op_before(fused, k)
        self.folded[key] = fused.sym_name.data
        return fused.sym_name.data


@dataclass(frozen=True)
class FoldEpilogues(ModulePass):
    """Every product whose layout states `epilogue: true` computes its add (mul) in its own kernel."""

    name = "psk-epilogue"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(FoldEpilogue(op), apply_recursively=False).rewrite_module(op)
        for k in kernels(op):  # `epilogue: false` is applied by doing nothing
            if "epilogue" in resolved(k):
                consume(k, ["epilogue"])
