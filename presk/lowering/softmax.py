"""Softmax and cross-entropy nests: rows in blocks, each row's reductions in increasing order.

A row's arithmetic is the reference's, whatever the block: its maximum, then
the sum of its exponentials in increasing index order, then the quotients.
What the blocks change is only the order in which independent rows are
worked on. `presk.lowering.row_blocks.jam_factor` consecutive rows of the innermost row axis form a
block; each row's maximum is one loop streaming through the row; then one
loop over the softmax axis carries the running sums of every row of the
block, so that native code has that many independent sums in flight (one
row's sum is a chain of dependent additions: alone, its latency would set
the pace) and `presk.lowering.kernel_to_llvm` computes the exponentials of
consecutive elements of a row in one vector (as many as the block has rows)
and adds them to each row's sum lane by lane, in order, after a register
transpose. Last, each row's quotients. The kernel interpreter runs the same
IR (vectorised over the blocks), so it gives the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, SSAValue

from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import TensorType
from presk.lowering.kernel_builder import KernelBuilder
from presk.lowering.nests import Operand, Scalar, accumulate, static_sizes
from presk.lowering.row_blocks import row_blocks



@dataclass(frozen=True)
class LoadedMask:
    """A mask read from its buffer: an element is allowed where the mask is nonzero."""

    operand: Operand

    def allowed(self, kb: KernelBuilder, index: Mapping[str, SSAValue], arith_type: Attribute) -> SSAValue:
        return kb.nonzero(self.operand.read(kb, index, arith_type))


@dataclass(frozen=True)
class CausalMask:
    """`causal_mask`'s mask computed from the loop counters: allowed where index[second] ≤ index[first].

    The same comparison `causal_mask`'s kernel stores (`nests.emit_causal_mask`), so the bits are those
    of reading its buffer; what goes is the buffer, T² i64 read once per batch and head.
    """

    first: str
    second: str

    def allowed(self, kb: KernelBuilder, index: Mapping[str, SSAValue], arith_type: Attribute) -> SSAValue:
        return kb.add(arith.CmpiOp(index[self.second], index[self.first], "ule"))


Mask: TypeAlias = LoadedMask | CausalMask


def shifted_exp(kb: KernelBuilder, value: Scalar, top: Scalar, allowed: SSAValue | None, zero: Scalar) -> Scalar:
    """exp(value − top), or 0 where the mask refuses the element.

    A refused element's exponential is taken of 0 and discarded: of its own
    value it could be subnormal, which an x86 core finishes in microcode,
    10-15x slower, for nothing.
    """
    if allowed is None:
        return kb.math("exp", kb.subf(value, top))
    return kb.select(allowed, kb.math("exp", kb.select(allowed, kb.subf(value, top), zero)), zero)


def emit_softmax(
    kb: KernelBuilder, xt: TensorType, axis: str, x: Operand, mask: Mask | None, out: SSAValue,
    arith_type: Attribute,
) -> None:  # fmt: skip
    """Three passes over each row: the maximum, the sum of exponentials, the quotients.

    With a mask, the maximum and the sum run over the allowed positions and
    a refused one gets 0; a row with none allowed is all 0 (its maximum is
    taken as 0), the reference interpreter's semantics.

    When the output buffer holds the arithmetic type, the second pass stores
    each exponential (exactly: no rounding) and the third divides it in
    place, instead of computing it again.
    """
    rows = [n for n in xt.names if n != axis]
    counts = dict(zip(xt.names, static_sizes(xt)))
    n = counts[axis]
    assert isinstance(out.type, MemRefType)
    keep = out.type.element_type == arith_type
    with row_blocks(kb, rows, counts) as block:

        def at(j: int, k: SSAValue) -> list[SSAValue]:
            index = {**block[j], axis: k}
            return [index[name] for name in xt.names]

        def element(j: int, k: SSAValue) -> tuple[Scalar, Scalar | None]:
            index = {**block[j], axis: k}
            allowed = mask.allowed(kb, index, arith_type) if mask is not None else None
            return x.read(kb, index, arith_type), allowed

        neg_inf = kb.real(-math.inf, arith_type)
        zero = kb.real(0.0, arith_type)

        def row_max(j: int) -> Scalar:
            def step(kivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
                value, allowed = element(j, kivs[0])
                bigger = kb.maxf(accs[0], value)
                return [bigger if allowed is None else kb.select(allowed, bigger, accs[0])]

            (top,) = accumulate(kb, [n], [neg_inf], step)
            return top if mask is None else kb.select(kb.cmpf(top, neg_inf, "oeq"), zero, top)

        tops = [row_max(j) for j in range(len(block))]

        def exponential(j: int, k: SSAValue) -> Scalar:
            value, allowed = element(j, k)
            return shifted_exp(kb, value, tops[j], allowed, zero)

        def running_sums(kivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            sums = []
            for j, acc in enumerate(accs):
                e = exponential(j, kivs[0])
                if keep:
                    kb.store(e, out, at(j, kivs[0]))
                sums.append(kb.addf(acc, e))
            return sums

        totals = accumulate(kb, [n], [zero] * len(block), running_sums)
        for j, total in enumerate(totals):
            empty = kb.cmpf(total, zero, "oeq") if mask is not None else None
            with kb.loop(n, parallel=True) as lk:
                e = kb.load(out, at(j, lk.iv)) if keep else exponential(j, lk.iv)
                quotient = kb.divf(e, total, subnormal_numerator=True)
                value = kb.select(empty, zero, quotient) if empty is not None else quotient
                kb.store_real(value, out, at(j, lk.iv))


def emit_cross_entropy(
    kb: KernelBuilder, op: core.CrossEntropyOp, logits: Operand, targets: Operand, out: SSAValue, arith_type: Attribute
) -> None:
    """The mean over every position of logsumexp(row) − row[target], rows summed in row-major order."""
    lt = op.logits.type
    axis = op.axis.data
    rows = [n for n in lt.names if n != axis]
    counts = dict(zip(lt.names, static_sizes(lt)))
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
