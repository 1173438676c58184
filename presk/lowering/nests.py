"""Each launch's loop nest: the kernel body of a group, a reduction, a product or a data move.

Every function here fills one kernel through a `KernelBuilder`: the loops,
the loads (converted from each buffer's storage type to the kernel's
arithmetic type), the arithmetic, and the store of the result (rounded to
its buffer's type). The numerics policy is the same everywhere: sums run in
increasing index order, a product's terms are added in increasing k with
one fused multiply-add each, and a running value lives in the arithmetic
type. So every layout of a nest computes the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, Float64Type, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, RealType, TensorType
from presk.lowering.kernel_builder import KernelBuilder
from presk.lowering.row_blocks import row_blocks

Scalar = SSAValue
"""A value of the kernel's arithmetic type (or an i64 index element)."""


@dataclass(frozen=True)
class Operand:
    """How a kernel reads one operand: from a buffer (with the operand's axes), or as a literal."""

    type: Attribute
    """The operand's PSK-Core leaf type: real, tensor or index tensor."""
    buffer: SSAValue | None = None
    constant: float | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return self.type.names if isinstance(self.type, TensorType | IndexTensorType) else ()

    def read(self, kb: KernelBuilder, index: Mapping[str, SSAValue], arith_type: Attribute) -> Scalar:
        """The element at `index` (by axis name; axes the operand lacks are broadcast)."""
        if self.constant is not None:
            return kb.real(self.constant, arith_type)
        assert self.buffer is not None
        indices = [index[n] for n in self.names]
        if isinstance(self.type, IndexTensorType):
            return kb.load(self.buffer, indices)
        return kb.load_real(self.buffer, indices, arith_type)


def static_sizes(t: Attribute) -> list[int]:
    if isinstance(t, RealType):
        return []
    sizes = list(t.sizes)
    for s in sizes:
        if not isinstance(s, int):
            raise PreskError("E4002", f"size '{s}' is not bound; the kernel lowering needs every --dim")
    return sizes  # type: ignore[return-value]


def accumulate(
    kb: KernelBuilder,
    counts: Sequence[int],
    inits: Sequence[Scalar],
    body: Callable[[list[SSAValue], list[Scalar]], list[Scalar]],
) -> list[Scalar]:
    """Serial loops over `counts` (outermost first) threading running values, in increasing index order."""
    if not counts:
        return body([], list(inits))
    with kb.loop(counts[0], inits=inits) as loop:
        iv = loop.iv
        loop.yields = accumulate(kb, counts[1:], loop.args, lambda ivs, accs: body([iv, *ivs], accs))
    return loop.results


# --------------------------------------------------------------------------
# Fusion groups.


def scalar_op(kb: KernelBuilder, op: Operation, args: Sequence[Scalar], arith_type: Attribute) -> Scalar:
    """One elementwise primitive on scalars of the arithmetic type (a where's condition is i64)."""
    if isinstance(op, core.AddOp):
        return kb.addf(*args)
    if isinstance(op, core.SubOp):
        return kb.subf(*args)
    if isinstance(op, core.MulOp):
        return kb.mulf(*args)
    if isinstance(op, core.DivOp):
        return kb.divf(*args)
    if isinstance(op, core.MaxOp):
        return kb.maxf(*args)
    if isinstance(op, core.NegOp):
        return kb.add(arith.NegfOp(args[0]))
    if isinstance(op, core.ExpOp | core.LogOp | core.SqrtOp | core.TanhOp | core.ErfOp):
        return kb.math(op.name.split(".")[1], args[0])
    if isinstance(op, core.GeluOp):
        # x · ½ · (1 + erf(x / √2)), in the reference's order: (x · ½) · (1 + erf(x · (1/√2))).
        (x,) = args
        erf = kb.math("erf", kb.mulf(x, kb.real(1 / math.sqrt(2.0), arith_type)))
        return kb.mulf(kb.mulf(x, kb.real(0.5, arith_type)), kb.addf(kb.real(1.0, arith_type), erf))
    if isinstance(op, core.PowOp):
        result = args[0]
        for _ in range(op.n - 1):  # n − 1 products, left to right
            result = kb.mulf(result, args[0])
        return result
    if isinstance(op, core.WhereOp):
        cond, a, b = args
        return kb.select(kb.nonzero(cond), a, b)
    raise PreskError("E3003", f"psk-lower-kernel: no scalar lowering of {op.name}")


def emit_group(
    kb: KernelBuilder,
    members: Sequence[Operation],
    root: SSAValue,
    operands: Mapping[SSAValue, Operand],
    result_type: Attribute,
    out: SSAValue,
    arith_type: Attribute,
) -> None:
    """One loop nest over the result; the members' expression per element; one store of the root."""
    names = result_type.names if isinstance(result_type, TensorType) else ()
    with kb.nest(static_sizes(result_type)) as ivs:
        index = dict(zip(names, ivs))
        values: dict[SSAValue, Scalar] = {}

        def value(v: SSAValue) -> Scalar:
            if v not in values:
                values[v] = operands[v].read(kb, index, arith_type)
            return values[v]

        for op in members:
            values[op.results[0]] = scalar_op(kb, op, [value(o) for o in op.operands], arith_type)
        kb.store_real(values[root], out, list(ivs))


# --------------------------------------------------------------------------
# Reductions and data movement.


def emit_reduction(kb: KernelBuilder, op: core.ReductionOp, x: Operand, out: SSAValue, arith_type: Attribute) -> None:
    xt = op.operand.type
    reduced = [n for n in xt.names if n in op.axes]
    kept = [n for n in xt.names if n not in op.axes]
    counts = dict(zip(xt.names, static_sizes(xt)))
    is_max = isinstance(op, core.ReduceMaxOp)
    if not is_max and kept and list(xt.names) == [*reduced, *kept] and _sums_in_place(out, arith_type):
        _emit_column_sums(kb, op, x, out, arith_type, kept, reduced, counts)
        return
    if not is_max and kept and list(xt.names) in ([*kept, *reduced], [*reduced, *kept]):
        _emit_row_sums(kb, op, x, out, arith_type, kept, reduced, counts)
        return
    with kb.nest([counts[n] for n in kept]) as ivs:
        index = dict(zip(kept, ivs))
        init = kb.real(-math.inf if is_max else 0.0, arith_type)

        def step(rivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            element = x.read(kb, {**index, **dict(zip(reduced, rivs))}, arith_type)
            return [kb.maxf(accs[0], element) if is_max else kb.addf(accs[0], element)]

        (total,) = accumulate(kb, [counts[n] for n in reduced], [init], step)
        if isinstance(op, core.MeanOp):
            total = kb.divf(total, kb.real(float(math.prod(counts[n] for n in reduced)), arith_type))
        kb.store_real(total, out, list(ivs))


def _emit_row_sums(
    kb: KernelBuilder, op: core.ReductionOp, x: Operand, out: SSAValue, arith_type: Attribute,
    kept: Sequence[str], reduced: Sequence[str], counts: Mapping[str, int],
) -> None:  # fmt: skip
    """A sum or mean over trailing or leading axes: rows in blocks (`presk.lowering.row_blocks`).

    Each row's sum still runs over its elements in increasing order; a block
    of consecutive rows shares the loops, one running value per row, which
    native code advances together in the lanes of a vector. Over leading
    axes this path serves only outputs stored narrower than the arithmetic
    (bf16; the others keep their sums in the output, `_emit_column_sums`): a
    block's rows are then consecutive columns, each step of the reduced
    loops reading them from one cache line.
    """
    with row_blocks(kb, kept, counts) as block:

        def step(rivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            at = dict(zip(reduced, rivs))
            return [kb.addf(acc, x.read(kb, {**row, **at}, arith_type)) for row, acc in zip(block, accs)]

        zero = kb.real(0.0, arith_type)
        totals = accumulate(kb, [counts[n] for n in reduced], [zero] * len(block), step)
        count = kb.real(float(math.prod(counts[n] for n in reduced)), arith_type)
        for row, total in zip(block, totals):
            if isinstance(op, core.MeanOp):
                total = kb.divf(total, count)
            kb.store_real(total, out, [row[n] for n in kept])


COLUMN_CHUNKS = 2
"""The column sums' parallel chunks of the innermost kept axis: one per worker of a two-core machine,
each reading half of every row. More chunks read shorter runs of each row; fewer leave a worker idle.
Measured on [8, 256, 1536] f32, 2 threads, two alternating runs of 31 calls: 2 chunks 0.345 and 0.345
ms, 4 chunks 0.368 and 0.385."""

COLUMN_CHUNK_MULTIPLE = 64
"""A chunk is split off only if its width is a multiple of this: whole cache lines of f32 and f64, and
whole vectors of any register width, so that no chunk starts or ends inside a vector."""


def _sums_in_place(out: SSAValue, arith_type: Attribute) -> bool:
    """Whether the output can hold the running sums: stored in the arithmetic's own type (a bf16 output
    would round every partial sum; its sums run in registers, by `_emit_row_sums`)."""
    t = out.type
    return isinstance(t, MemRefType) and t.element_type == arith_type


def _emit_column_sums(
    kb: KernelBuilder, op: core.ReductionOp, x: Operand, out: SSAValue, arith_type: Attribute,
    kept: Sequence[str], reduced: Sequence[str], counts: Mapping[str, int],
) -> None:  # fmt: skip
    """A sum or mean over leading axes (a bias's gradient: Σ over batch and seq of ct[batch, seq, out]),
    the running sums kept in the output's row.

    The output row is zeroed, then every row of the input, in increasing
    order of the reduced axes, is added to it element by element: each
    column's sum is the same chain of additions in the same order as a
    running value would make (0 + x₀ + x₁ + ...), so the bits are those of
    any other order of the columns. What changes is the reading: every row
    of the input is read whole and in order, where summing a few columns at
    a time read a short piece of each row, a page apart (6 KiB for 1536
    f32 columns), which the hardware prefetchers do not follow: 3 ms where
    the input streams in 0.6. The innermost kept axis is cut into
    `COLUMN_CHUNKS` parallel chunks when they are whole lines, so that two
    workers each read half of every row.
    """
    last = counts[kept[-1]]
    chunks = COLUMN_CHUNKS if last % (COLUMN_CHUNKS * COLUMN_CHUNK_MULTIPLE) == 0 else 1
    width = last // chunks
    with kb.nest([counts[n] for n in kept[:-1]] + [chunks]) as ivs:
        outer = dict(zip(kept[:-1], ivs[:-1]))

        @contextmanager
        def columns() -> Iterator[tuple[dict[str, SSAValue], list[SSAValue]]]:
            """A parallel loop over the chunk's columns: the index by axis name, and the output's."""
            with kb.nest([width]) as (column,):
                at = {**outer, kept[-1]: kb.offset(ivs[-1], width, column)}
                yield at, [at[n] for n in kept]

        zero = kb.real(0.0, arith_type)
        with columns() as (_, index):
            kb.store(zero, out, index)
        with kb.nest([counts[n] for n in reduced], parallel=False) as rivs:
            rows = dict(zip(reduced, rivs))
            with columns() as (at, index):
                kb.store(kb.addf(kb.load(out, index), x.read(kb, {**at, **rows}, arith_type)), out, index)
        if isinstance(op, core.MeanOp):
            count = kb.real(float(math.prod(counts[n] for n in reduced)), arith_type)
            with columns() as (_, index):
                kb.store(kb.divf(kb.load(out, index), count), out, index)


def emit_copy(
    kb: KernelBuilder, x: Operand, result_type: Attribute, out: SSAValue, arith_type: Attribute, summed: Sequence[str] = ()
) -> None:
    """out[...] = x[...] broadcast by name, summing the axes of `x` the result lacks (sum_to)."""
    names = result_type.names if isinstance(result_type, TensorType) else ()
    x_counts = dict(zip(x.names, static_sizes(x.type))) if not isinstance(x.type, RealType) else {}
    with kb.nest(static_sizes(result_type)) as ivs:
        index = dict(zip(names, ivs))
        if not summed:
            kb.store_real(x.read(kb, index, arith_type), out, list(ivs))
            return

        def step(rivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            return [kb.addf(accs[0], x.read(kb, {**index, **dict(zip(summed, rivs))}, arith_type))]

        (total,) = accumulate(kb, [x_counts[n] for n in summed], [kb.real(0.0, arith_type)], step)
        kb.store_real(total, out, list(ivs))


def emit_fill(kb: KernelBuilder, value: float, result_type: Attribute, out: SSAValue, arith_type: Attribute) -> None:
    with kb.nest(static_sizes(result_type)) as ivs:
        kb.store_real(kb.real(value, arith_type), out, list(ivs))


def emit_gather(kb: KernelBuilder, op: core.GatherOp, table: Operand, ids: Operand, out: SSAValue, arith_type: Attribute) -> None:
    rt = op.result.type
    with kb.nest(static_sizes(rt)) as ivs:
        index = dict(zip(rt.names, ivs))
        row = kb.index_of(ids.read(kb, index, arith_type))
        rest = [index[n] for n in table.names[1:]]
        kb.store_real(kb.load_real(table.buffer, [row, *rest], arith_type), out, list(ivs))  # type: ignore[arg-type]


def emit_arange(kb: KernelBuilder, rt: IndexTensorType, out: SSAValue) -> None:
    with kb.nest(static_sizes(rt)) as (i,):
        kb.store(kb.to_i64(i), out, [i])


def emit_causal_mask(kb: KernelBuilder, rt: IndexTensorType, out: SSAValue) -> None:
    with kb.nest(static_sizes(rt)) as (i, j):
        allowed = kb.add(arith.CmpiOp(j, i, "ule"))
        kb.store(kb.bool_to_i64(allowed), out, [i, j])


CMPF_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""`compare`'s predicates as `arith.cmpf`'s: ordered (false on NaN) but for `ne`, as IEEE and numpy."""


def emit_compare(kb: KernelBuilder, op: core.CompareOp, a: Operand, b: Operand, out: SSAValue) -> None:
    """The mask of one predicate, element by element, on both operands widened exactly to one type.

    The type is the wider of the two buffers' (bf16 read as f32): the site
    of a mask has no realization of its own, and the operands may come
    from sites realized differently. Widening is exact, so the mask is the
    reference's, which compares the values rounded to their storage.
    """
    kinds = {str(x.buffer.type.element_type) for x in (a, b)}  # type: ignore[union-attr]
    wide = Float64Type() if "f64" in kinds else Float32Type()
    rt = op.result.type
    with kb.nest(static_sizes(rt)) as ivs:
        index = dict(zip(rt.names, ivs))
        holds = kb.cmpf(a.read(kb, index, wide), b.read(kb, index, wide), CMPF_PREDICATES[op.predicate.data])
        kb.store(kb.bool_to_i64(holds), out, list(ivs))


# --------------------------------------------------------------------------
# Products.


def emit_product(
    kb: KernelBuilder, labels: Sequence[Sequence[str]], inputs: Sequence[Operand], rt: TensorType,
    summed: Sequence[str], sizes: Mapping[str, int], out: SSAValue, arith_type: Attribute,
) -> None:  # fmt: skip
    """out[r] = Σ over the summed axes, in increasing order, of the operands' product; two operands by FMA.

    A real result (the dot of two vectors) is the nest of no loops.
    """
    with kb.nest(static_sizes(rt)) as ivs:
        index = dict(zip(rt.names if isinstance(rt, TensorType) else (), ivs))

        def term(at: Mapping[str, SSAValue]) -> list[Scalar]:
            return [
                kb.load_real(x.buffer, [at[n] for n in ls], arith_type)  # type: ignore[arg-type]
                for x, ls in zip(inputs, labels)
            ]

        if not summed:
            factors = term(index)
            value = factors[0]
            for f in factors[1:]:
                value = kb.mulf(value, f)
            kb.store_real(value, out, list(ivs))
            return

        def step(rivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            factors = term({**index, **dict(zip(summed, rivs))})
            if len(factors) == 2:
                return [kb.fma(factors[0], factors[1], accs[0])]
            value = factors[0]
            for f in factors[1:]:
                value = kb.mulf(value, f)
            return [kb.addf(accs[0], value)]

        (total,) = accumulate(kb, [sizes[n] for n in summed], [kb.real(0.0, arith_type)], step)
        kb.store_real(total, out, list(ivs))
