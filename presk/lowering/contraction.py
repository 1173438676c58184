"""The contraction nests: out[outer, I, J] = Σ_K a[outer, I, K] · b[.., K, J], at their layout.

Every layout gives every output element the same chain: the FMA of its
terms in increasing k, starting from zero, in the arithmetic type. The
layout changes only where the running sums live and in which order the
elements are visited, so every point of the space computes the default's
bits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Attribute, SSAValue

from presk.dialects.psk_realize_nests import Contraction
from presk.lowering.kernel_builder import KernelBuilder
from presk.lowering.nests import Operand, Scalar, accumulate


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
