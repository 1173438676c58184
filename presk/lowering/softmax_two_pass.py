"""The softmax in two passes: store exp(x − m) while summing it, then divide in place.

The layout decision `passes = 2` (the seed's table). Over each row:

1. the maximum m (over the allowed positions, with a mask; a row with none
   allowed takes 0), exactly as the three-pass kernel
   (`presk.lowering.softmax.emit_softmax`) computes it;
2. e = exp(x − m) (0 at a refused position) stored to the output while the
   running sum adds it, in the same order and the same arithmetic type;
3. the division of each stored e by the sum, in place (0 on a row whose
   sum is 0, with a mask).

Under a causal mask the rows run in segments, as in three passes
(`presk.lowering.softmax.causal_segments`), each over the columns its rows
allow.

Each exponential is computed once, where the three-pass kernel computes it
twice. The stored e is read back exactly only when the output's storage
type is the arithmetic type (f64, f32): in bf16 it would be rounded between
the passes, so two passes are refused there (E7002, condition 7, by the
caller). With that, every element is the three-pass kernel's quotient of the
same two values: the same bits.
"""

from __future__ import annotations

import math

from xdsl.ir import Attribute, SSAValue

from presk.dialects.psk_core_types import TensorType
from presk.lowering.kernel_builder import KernelBuilder
from presk.lowering.nests import Operand, Scalar, accumulate, static_sizes
from presk.lowering.softmax import Mask, causal_segments, shifted_exp, store_refused

REFUSAL = (
    "two softmax passes keep exp(x − m) in the output between the passes, which needs the storage type to be the "
    "accumulation type, and {storage} stores what {arith} computes"
)
"""The reason of the E7002 (condition 7) a two-pass softmax gets where storage ≠ arithmetic type."""


def emit_softmax_two_pass(
    kb: KernelBuilder, xt: TensorType, axis: str, x: Operand, mask: Mask | None, out: SSAValue,
    arith_type: Attribute,
) -> None:  # fmt: skip
    """The softmax of each row in two passes over its input and one in place over its output."""
    rows = [n for n in xt.names if n != axis]
    counts = dict(zip(xt.names, static_sizes(xt)))
    n = counts[axis]

    def passes(row: dict[str, SSAValue], columns: int) -> None:
        """The two passes of one row over its first `columns` columns, and the division; 0 beyond."""

        def cell(k: SSAValue) -> list[SSAValue]:
            at = {**row, axis: k}
            return [at[name] for name in xt.names]

        def element(k: SSAValue) -> tuple[Scalar, Scalar | None]:
            at = {**row, axis: k}
            allowed = mask.allowed(kb, at, arith_type) if mask is not None else None
            return x.read(kb, at, arith_type), allowed

        def running_max(kivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            value, allowed = element(kivs[0])
            bigger = kb.maxf(accs[0], value)
            return [bigger if allowed is None else kb.select(allowed, bigger, accs[0])]

        neg_inf = kb.real(-math.inf, arith_type)
        (top,) = accumulate(kb, [columns], [neg_inf], running_max)
        zero = kb.real(0.0, arith_type)
        if mask is not None:
            top = kb.select(kb.cmpf(top, neg_inf, "oeq"), zero, top)

        def store_and_sum(kivs: list[SSAValue], accs: list[Scalar]) -> list[Scalar]:
            value, allowed = element(kivs[0])
            e = shifted_exp(kb, value, top, allowed, zero)
            kb.store_real(e, out, cell(kivs[0]))
            return [kb.addf(accs[0], e)]

        (total,) = accumulate(kb, [columns], [zero], store_and_sum)
        empty = kb.cmpf(total, zero, "oeq") if mask is not None else None
        with kb.loop(columns, parallel=True) as lk:
            quotient = kb.divf(kb.load_real(out, cell(lk.iv), arith_type), total, subnormal_numerator=True)
            value = kb.select(empty, zero, quotient) if empty is not None else quotient
            kb.store_real(value, out, cell(lk.iv))
        store_refused(kb, out, cell, columns, n, zero)

    segments = causal_segments(mask, rows, axis, counts, blocks=False)
    if segments is None:
        with kb.nest([counts[name] for name in rows]) as ivs:
            passes(dict(zip(rows, ivs)), n)
        return
    with kb.nest([counts[name] for name in rows[:-1]]) as ivs:
        outer = dict(zip(rows[:-1], ivs))
        for first, end, columns in segments:
            with kb.span(kb.index(first), kb.index(end), parallel=True) as segment:
                passes({**outer, rows[-1]: segment.iv}, columns)
