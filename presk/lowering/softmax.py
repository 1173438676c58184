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

Under a causal mask (the rows' innermost axis against the softmax's), row r
allows its first r + 1 columns alone: the blocks then run in segments of
`SEGMENT_ROWS` rows, each its own loop over blocks whose passes stop at
the segment's last row (`causal_segments`): at 256 rows the maximum and
the sum skip 3/8 of the columns (3/4 of those the mask refuses), more at
longer ones, with the bits of whole rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, SSAValue

from presk.dialects import psk_core as core
from presk.dialects.psk_realize import NestOp
from presk.dialects.psk_core_types import TensorType
from presk.lowering.kernel_builder import KernelBuilder
from presk.lowering.nests import Operand, Scalar, accumulate, static_sizes
from presk.lowering.row_blocks import jam_factor, row_block_segments, row_blocks



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


def causal_axes(mask: SSAValue) -> tuple[str, str] | None:
    """The two axes of a softmax's mask when `causal_mask`'s launch computes it (which the softmax then
    computes from its loop counters instead of reading: `CausalMask`), else None."""
    site = mask.owner
    if isinstance(site, NestOp) and isinstance(site.primitive, core.CausalMaskOp):
        first, second = site.primitive.result.type.names
        return first, second
    return None


def shifted_exp(kb: KernelBuilder, value: Scalar, top: Scalar, allowed: SSAValue | None, zero: Scalar) -> Scalar:
    """exp(value − top), or 0 where the mask refuses the element.

    A refused element's exponential is taken of 0 and discarded: of its own
    value it could be subnormal, which an x86 core finishes in microcode,
    10-15x slower, for nothing.
    """
    if allowed is None:
        return kb.math("exp", kb.subf(value, top))
    return kb.select(allowed, kb.math("exp", kb.select(allowed, kb.subf(value, top), zero)), zero)


SEGMENT_ROWS = 64
"""Rows of a causal mask's segment (`causal_segments`): its columns' loops run to its last row's bound, at
least 64, so that every one is long enough for the translator's vector loops (16 f32 lanes × 4 running
maxima on AVX-512)."""


def causal_segments(
    mask: Mask | None, rows: Sequence[str], axis: str, counts: Mapping[str, int], blocks: bool = True
) -> list[tuple[int, int, int]] | None:
    """A causal mask's rows in segments: (first block, end block, columns) of each, or None.

    `blocks`: the rows run in blocks (`row_blocks`, three passes) and the
    segments count blocks; otherwise (two passes, a row at a time) rows.

    Row r of a causal mask over (rows' innermost axis, the softmax's axis)
    allows the columns up to r alone: the rows of a segment need none beyond
    its last row. Their maximum and sum stop there (what they skip adds
    nothing: a refused term is left out of the maximum and adds +0 to the
    sum, so the bits are those of the whole row) and their quotients beyond
    are stored as the 0 they are. None when the mask is not causal over
    those axes, or its rows are fewer than two segments.
    """
    if not isinstance(mask, CausalMask) or not rows or mask.first != rows[-1] or mask.second != axis:
        return None
    count = counts[rows[-1]]
    if count < 2 * SEGMENT_ROWS or count % SEGMENT_ROWS:
        return None
    per = SEGMENT_ROWS // jam_factor(count) if blocks else SEGMENT_ROWS
    n = counts[axis]
    return [(s * per, (s + 1) * per, min(n, (s + 1) * SEGMENT_ROWS)) for s in range(count // SEGMENT_ROWS)]


def store_refused(
    kb: KernelBuilder, out: SSAValue, cell: Callable[[SSAValue], list[SSAValue]], columns: int, n: int, zero: Scalar
) -> None:
    """A row's quotients beyond a segment's `columns`, which its causal mask refuses: 0, as the whole row stores."""
    if columns < n:
        with kb.span(kb.index(columns), kb.index(n), parallel=True) as rest:
            kb.store_real(zero, out, cell(rest.iv))


def emit_softmax(
    kb: KernelBuilder, xt: TensorType, axis: str, x: Operand, mask: Mask | None, out: SSAValue,
    arith_type: Attribute,
) -> None:  # fmt: skip
    """Three passes over each row: the maximum, the sum of exponentials, the quotients.

    With a mask, the maximum and the sum run over the allowed positions and
    a refused one gets 0; a row with none allowed is all 0 (its maximum is
    taken as 0), the reference interpreter's semantics. A causal mask's
    rows run in segments, each over the columns its rows allow
    (`causal_segments`).

    When the output buffer holds the arithmetic type, the second pass stores
    each exponential (exactly: no rounding) and the third divides it in
    place, instead of computing it again.
    """
    rows = [n for n in xt.names if n != axis]
    counts = dict(zip(xt.names, static_sizes(xt)))
    n = counts[axis]
    assert isinstance(out.type, MemRefType)
    keep = out.type.element_type == arith_type

    def passes(block: list[dict[str, SSAValue]], columns: int) -> None:
        """The three passes of one block of rows, over their first `columns` columns; 0 beyond."""

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

            (top,) = accumulate(kb, [columns], [neg_inf], step)
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

        totals = accumulate(kb, [columns], [zero] * len(block), running_sums)
        for j, total in enumerate(totals):
            empty = kb.cmpf(total, zero, "oeq") if mask is not None else None
            with kb.loop(columns, parallel=True) as lk:
                e = kb.load(out, at(j, lk.iv)) if keep else exponential(j, lk.iv)
                quotient = kb.divf(e, total, subnormal_numerator=True)
                value = kb.select(empty, zero, quotient) if empty is not None else quotient
                kb.store_real(value, out, at(j, lk.iv))
            store_refused(kb, out, lambda k, j=j: at(j, k), columns, n, zero)

    segments = causal_segments(mask, rows, axis, counts)
    if segments is None:
        with row_blocks(kb, rows, counts) as block:
            passes(block, n)
        return
    with row_block_segments(kb, rows, counts, [(first, end) for first, end, _ in segments]) as segment:
        for s, (_, _, columns) in enumerate(segments):
            with segment(s) as block:
                passes(block, columns)


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
