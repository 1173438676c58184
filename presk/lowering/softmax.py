"""Softmax and cross-entropy nests: a row at a time, its reductions in increasing order."""

from __future__ import annotations

import math

from xdsl.ir import Attribute, SSAValue

from presk.dialects import psk_core as core
from presk.lowering.kernel_builder import KernelBuilder
from presk.lowering.nests import Operand, Scalar, _sizes, accumulate


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
