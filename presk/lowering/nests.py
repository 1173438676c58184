"""Each launch's loop nest: the kernel body of a group or of one primitive, at its layout.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import arith
from xdsl.ir import Attribute, Operation, SSAValue

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, RealType, TensorType
from presk.dialects.psk_realize_nests import Contraction
from presk.lowering.kernel_builder import KernelBuilder

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


def _sizes(t: Attribute) -> list[int]:
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
    if isinstance(op, core.ExpOp | core.LogOp | core.SqrtOp | core.TanhOp):
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
    with kb.nest(_sizes(result_type)) as ivs:
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
    counts = dict(zip(xt.names, _sizes(xt)))
    is_max = isinstance(op, core.ReduceMaxOp)
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


def emit_copy(
    kb: KernelBuilder, x: Operand, result_type: Attribute, out: SSAValue, arith_type: Attribute, summed: Sequence[str] = ()
) -> None:
    """out[...] = x[...] broadcast by name, summing the axes of `x` the result lacks (sum_to)."""
    names = result_type.names if isinstance(result_type, TensorType) else ()
    x_counts = dict(zip(x.names, _sizes(x.type))) if not isinstance(x.type, RealType) else {}
    with kb.nest(_sizes(result_type)) as ivs:
        index = dict(zip(names, ivs))
        if not summed:
            kb.store_real(x.read(kb, index, arith_type), out, list(ivs))
            return

        def step(rivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            return [kb.addf(accs[0], x.read(kb, {**index, **dict(zip(summed, rivs))}, arith_type))]

        (total,) = accumulate(kb, [x_counts[n] for n in summed], [kb.real(0.0, arith_type)], step)
        kb.store_real(total, out, list(ivs))


def emit_fill(kb: KernelBuilder, value: float, result_type: Attribute, out: SSAValue, arith_type: Attribute) -> None:
    with kb.nest(_sizes(result_type)) as ivs:
        kb.store_real(kb.real(value, arith_type), out, list(ivs))


def emit_gather(kb: KernelBuilder, op: core.GatherOp, table: Operand, ids: Operand, out: SSAValue, arith_type: Attribute) -> None:
    rt = op.result.type
    with kb.nest(_sizes(rt)) as ivs:
        index = dict(zip(rt.names, ivs))
        row = kb.index_of(ids.read(kb, index, arith_type))
        rest = [index[n] for n in table.names[1:]]
        kb.store_real(kb.load_real(table.buffer, [row, *rest], arith_type), out, list(ivs))  # type: ignore[arg-type]


def emit_arange(kb: KernelBuilder, rt: IndexTensorType, out: SSAValue) -> None:
    with kb.nest(_sizes(rt)) as (i,):
        kb.store(kb.to_i64(i), out, [i])


def emit_causal_mask(kb: KernelBuilder, rt: IndexTensorType, out: SSAValue) -> None:
    with kb.nest(_sizes(rt)) as (i, j):
        allowed = kb.add(arith.CmpiOp(j, i, "ule"))
        kb.store(kb.bool_to_i64(allowed), out, [i, j])


# --------------------------------------------------------------------------
# Products.


def emit_product(
    kb: KernelBuilder, labels: Sequence[Sequence[str]], inputs: Sequence[Operand], rt: TensorType,
    summed: Sequence[str], sizes: Mapping[str, int], out: SSAValue, arith_type: Attribute,
) -> None:  # fmt: skip
    """out[r] = Σ over the summed axes, in increasing order, of the operands' product; two operands by FMA."""
    with kb.nest(_sizes(rt)) as ivs:
        index = dict(zip(rt.names, ivs))

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


@dataclass(frozen=True)
class ContractionOperands:
    """The axis labels of a contraction nest's two operands and output, outer axes first."""

    c: Contraction
    a_labels: tuple[str, ...]
    b_labels: tuple[str, ...]
    out_labels: tuple[str, ...]
    sizes: Mapping[str, int]


def emit_contraction(
    kb: KernelBuilder, co: ContractionOperands, a: Operand, b: Operand, out: SSAValue,
    layout: Mapping[str, Any], arith_type: Attribute,
) -> None:  # fmt: skip
    """out[outer, I, J] = Σ_K a[outer, I, K] · b[.., K, J], at the nest's form and tile.

    Tiled: [m_i, n_j] running sums in registers per block of I and J, each
    the FMA chain of its element in increasing k. Row-wise: the running sums
    live in the output row from one k to the next (so only where the storage
    type is the arithmetic type). Both give every element the same chain.
    """
    c, sizes = co.c, co.sizes
    outer = [sizes[n] for n in c.outer]
    n_i, n_j, n_k = sizes[c.i], sizes[c.j], sizes[c.k]

    def at(labels: Sequence[str], where: Mapping[str, SSAValue]) -> list[SSAValue]:
        return [where[n] for n in labels]

    with kb.nest(outer) as outer_ivs:
        base = dict(zip(c.outer, outer_ivs))
        if layout.get("form") == "row-wise":
            with kb.loop(n_i, parallel=True) as li:
                row = {**base, c.i: li.iv}
                with kb.loop(n_j, parallel=True) as lj:
                    kb.store(kb.real(0.0, arith_type), out, at(co.out_labels, {**row, c.j: lj.iv}))
                with kb.loop(n_k) as lk:
                    where = {**row, c.k: lk.iv}
                    x = kb.load_real(a.buffer, at(co.a_labels, where), arith_type)  # type: ignore[arg-type]
                    with kb.loop(n_j, parallel=True) as lj:
                        cell = at(co.out_labels, {**where, c.j: lj.iv})
                        w = kb.load_real(b.buffer, at(co.b_labels, {**where, c.j: lj.iv}), arith_type)  # type: ignore[arg-type]
                        kb.store(kb.fma(x, w, kb.load(out, cell)), out, cell)
            return
        m, n = layout.get("tile", [1, 1])
        with kb.loop(n_i // m, parallel=True) as lib, kb.loop(n_j // n, parallel=True) as ljb:
            rows = [kb.offset(lib.iv, m, r) for r in range(m)]
            cols = [kb.offset(ljb.iv, n, s) for s in range(n)]
            zero = kb.real(0.0, arith_type)

            def step(kivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
                where = {**base, c.k: kivs[0]}
                xs = [kb.load_real(a.buffer, at(co.a_labels, {**where, c.i: r}), arith_type) for r in rows]  # type: ignore[arg-type]
                ws = [kb.load_real(b.buffer, at(co.b_labels, {**where, c.j: s}), arith_type) for s in cols]  # type: ignore[arg-type]
                return [kb.fma(xs[r], ws[s], accs[r * n + s]) for r in range(m) for s in range(n)]

            sums = accumulate(kb, [n_k], [zero] * (m * n), step)
            for r in range(m):
                for s in range(n):
                    kb.store_real(sums[r * n + s], out, at(co.out_labels, {**base, c.i: rows[r], c.j: cols[s]}))


# --------------------------------------------------------------------------
# Softmax and cross-entropy.


def emit_softmax(
    kb: KernelBuilder, op: core.SoftmaxOp, x: Operand, mask: Operand | None, out: SSAValue, arith_type: Attribute
) -> None:
    """Three passes over each row: the maximum, the sum of exponentials, the quotients.

    With a mask, the maximum and the sum run over the allowed positions and
    a refused one gets 0; a row with none allowed is all 0 (its maximum is
    taken as 0), the reference interpreter's semantics.
    """
    xt = op.operand.type
    axis = op.axis.data
    rows = [n for n in xt.names if n != axis]
    counts = dict(zip(xt.names, _sizes(xt)))
    with kb.nest([counts[n] for n in rows]) as ivs:
        row = dict(zip(rows, ivs))

        def element(k: SSAValue) -> tuple[Scalar, Scalar | None]:
            at = {**row, axis: k}
            allowed = kb.nonzero(mask.read(kb, at, arith_type)) if mask is not None else None
            return x.read(kb, at, arith_type), allowed

        def running_max(kivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            value, allowed = element(kivs[0])
            bigger = kb.maxf(accs[0], value)
            return [bigger if allowed is None else kb.select(allowed, bigger, accs[0])]

        neg_inf = kb.real(-math.inf, arith_type)
        (top,) = accumulate(kb, [counts[axis]], [neg_inf], running_max)
        zero = kb.real(0.0, arith_type)
        if mask is not None:
            top = kb.select(kb.cmpf(top, neg_inf, "oeq"), zero, top)

        def exponential(k: SSAValue) -> Scalar:
            value, allowed = element(k)
            e = kb.math("exp", kb.subf(value, top))
            return e if allowed is None else kb.select(allowed, e, zero)

        (total,) = accumulate(kb, [counts[axis]], [zero], lambda kivs, accs: [kb.addf(accs[0], exponential(kivs[0]))])
        empty = kb.cmpf(total, zero, "oeq")
        with kb.loop(counts[axis], parallel=True) as lk:
            quotient = kb.divf(exponential(lk.iv), total)
            value = kb.select(empty, zero, quotient) if mask is not None else quotient
            kb.store_real(value, out, [({**row, axis: lk.iv})[n] for n in xt.names])


def emit_cross_entropy(
    kb: KernelBuilder, op: core.CrossEntropyOp, logits: Operand, targets: Operand, out: SSAValue, arith_type: Attribute
) -> None:
    """The mean over every position of logsumexp(row) − row[target], rows summed in row-major order."""
    lt = op.logits.type
    axis = op.axis.data
    rows = [n for n in lt.names if n != axis]
    counts = dict(zip(lt.names, _sizes(lt)))
    zero = kb.real(0.0, arith_type)

    def row_loss(rivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
        row = dict(zip(rows, rivs))

        def at(k: SSAValue) -> Scalar:
            return logits.read(kb, {**row, axis: k}, arith_type)

        (top,) = accumulate(kb, [counts[axis]], [kb.real(-math.inf, arith_type)], lambda k, a: [kb.maxf(a[0], at(k[0]))])
        (total,) = accumulate(
            kb, [counts[axis]], [zero], lambda k, a: [kb.addf(a[0], kb.math("exp", kb.subf(at(k[0]), top)))]
        )
        lse = kb.addf(top, kb.math("log", total))
        target = kb.index_of(targets.read(kb, row, arith_type))
        picked = logits.read(kb, {**row, axis: target}, arith_type)
        return [kb.addf(accs[0], kb.subf(lse, picked))]

    (nll,) = accumulate(kb, [counts[n] for n in rows], [zero], row_loss)
    count = float(math.prod(counts[n] for n in rows))
    kb.store_real(kb.divf(nll, kb.real(count, arith_type)), out, [])
