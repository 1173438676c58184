"""Regenerate `mathlib_coefficients.py`: `python -m presk.lowering.mathlib_fit`.

Not used at run time. It is the recipe behind every number in the coefficient
table, so that a degree or an interval can be changed and the table rebuilt
instead of hand-edited: the table and the algorithms in `mathlib_spec` are then
the only inputs of both the LLVM emitter and the numpy twin.

Polynomials are minimax (Remez exchange on a dense Chebyshev grid, mpmath at
160 bits) in the error measure that matters for the final result (relative for
exp/log/tanh/erf near 0, absolute for erf's pieces whose values lie in
[0.77, 1)). Coefficients are then rounded to the target type one at a time,
lowest degree first, refitting the higher ones after each rounding so they
absorb its error (a cheap stand-in for Sollya's fpminimax). The printed
"approx" column is the error of the rounded polynomial in exact arithmetic, in
ulps of the result; the evaluation in floating point adds to it (measured in
tests/unit/test_mathlib.py).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import mpmath
from mpmath import mp, mpf

Fn = Callable[[mpf], mpf]

# The recipe. FORMATS: significand bits. Degrees and intervals were chosen from
# the approximation errors this script prints (about 1/20 ulp or better).
FORMATS = {"f32": 24, "f64": 53}
EXP_DEGREE = {"f32": 6, "f64": 11}          # e^r on |r| <= ln2/2 (+ slack for k's rounding)
LOG_TERMS = {"f32": 4, "f64": 7}            # R(z) = z*(Lg1 + ... + Lg_m z^(m-1)), z = s^2
TANH_SMALL = {"f32": (0.625, 6), "f64": (0.625, 11)}     # |x| < T: x + x*z*P(z), P with m terms
ERF_SMALL = {"f32": (0.84375, 6), "f64": (0.84375, 11)}  # |x| < T: x + x*P(z), P with m+1 terms
ERF_PIECES = {  # |x| in [b_i, b_{i+1}): A_i + Q_i(|x| - c_i), Q_i of this degree
    "f32": (8, (0.84375, 1.6875, 2.625, 3.9375)),
    "f64": (18, (0.84375, 1.875, 3.0, 4.375, 5.9375)),
}
EXP_REDUCED = 0.3467  # ln2/2 = 0.34657..., plus the error of k = round(x*log2e) in the target type


def remez(f: Fn, lo: mpf, hi: mpf, powers: Sequence[int], weight: Fn,
          grid: int = 1200, iters: int = 40) -> tuple[list[mpf], mpf]:
    """Minimax of weight(x)*(f(x) - sum_j c_j x**powers[j]) over a grid of [lo, hi].

    Returns the coefficients and the maximal weighted error on the grid.
    """
    xs = [(lo + hi) / 2 - (hi - lo) / 2 * mpmath.cos(mp.pi * i / (grid - 1)) for i in range(grid)]
    fs = [f(x) for x in xs]
    ws = [weight(x) for x in xs]
    basis = [[x**p for p in powers] for x in xs]
    m = len(powers)
    ref = [round(i * (grid - 1) / m) for i in range(m + 1)]
    best: tuple[list[mpf], mpf] | None = None
    for _ in range(iters):
        a = mpmath.matrix(m + 1, m + 1)
        rhs = mpmath.matrix(m + 1, 1)
        for row, i in enumerate(ref):
            for j in range(m):
                a[row, j] = basis[i][j]
            a[row, m] = (-1) ** row / ws[i]
            rhs[row] = fs[i]
        sol = mpmath.lu_solve(a, rhs)
        coefs = [sol[j] for j in range(m)]
        err = [ws[i] * (fs[i] - mpmath.fsum(c * b for c, b in zip(coefs, basis[i]))) for i in range(grid)]
        emax = max(abs(e) for e in err)
        if best is None or emax < best[1]:
            best = (coefs, emax)
        if emax - abs(sol[m]) <= 1e-4 * emax:
            break
        ref = _alternating_extrema(err, m + 1)
        if len(ref) < m + 1:
            break
    assert best is not None
    return best


def _alternating_extrema(err: list[mpf], want: int) -> list[int]:
    """The largest error of each run of one sign, thinned to `want` points
    while keeping the signs alternating (drop an end, or an adjacent pair)."""
    ext: list[int] = []
    i = 0
    while i < len(err):
        positive, k, j = err[i] >= 0, i, i
        while j < len(err) and (err[j] >= 0) == positive:
            k = j if abs(err[j]) > abs(err[k]) else k
            j += 1
        ext.append(k)
        i = j
    while len(ext) > want:
        if len(ext) - want == 1:
            ext.pop(0 if abs(err[ext[0]]) < abs(err[ext[-1]]) else -1)
            continue
        k = min(range(len(ext)), key=lambda q: abs(err[ext[q]]))
        if k in (0, len(ext) - 1):
            ext.pop(k)
        else:
            nb = k - 1 if abs(err[ext[k - 1]]) < abs(err[ext[k + 1]]) else k + 1
            for q in sorted((k, nb), reverse=True):
                ext.pop(q)
    return ext


def rnd(v: mpf | float, bits: int) -> float:
    """v rounded to nearest with `bits` significand bits (24: a float32 value)."""
    with mp.workprec(bits):
        return float(+mpf(v))


def fit(f: Fn, lo: float, hi: float, powers: Sequence[int], weight: Fn, bits: int,
        **kw: int) -> tuple[list[float], float]:
    """Remez, then round the coefficients lowest power first, refitting the rest.

    Returns the rounded coefficients and their weighted error (exact arithmetic).
    """
    fixed: list[tuple[int, mpf]] = []
    rest = list(powers)
    while rest:
        def g(x: mpf, fixed: tuple[tuple[int, mpf], ...] = tuple(fixed)) -> mpf:
            return f(x) - mpmath.fsum(c * x**p for p, c in fixed)
        coefs, _ = remez(g, mpf(lo), mpf(hi), rest, weight, **kw)
        fixed.append((rest[0], mpf(rnd(coefs[0], bits))))
        rest = rest[1:]
    err = max(abs(weight(x) * (f(x) - mpmath.fsum(c * x**p for p, c in fixed)))
              for x in mpmath.linspace(mpf(lo), mpf(hi), 3000))
    return [float(c) for _, c in fixed], float(err)


def _first_rounding_to_one(f: Fn, inverse: Fn, bits: int) -> float:
    """The least float a with f(a) >= 1 - 2**-(bits+1), i.e. rounding to 1 (ties to even)."""
    half_ulp = mpf(2) ** -(bits + 1)
    a = rnd(inverse(1 - half_ulp), bits)
    step = 2.0 ** (mpmath.floor(mpmath.log(a, 2)) - bits + 1)
    while f(mpf(a)) < 1 - half_ulp:
        a += float(step)
    while f(mpf(a) - step) >= 1 - half_ulp:
        a -= float(step)
    return a


def _report(name: str, err: float, bits: int) -> None:
    print(f"  {name:<24} approx {err * 2.0 ** bits:.4f} ulp (at most)", file=sys.stderr)


def generate() -> str:
    """The text of mathlib_coefficients.py."""
    mp.prec = 160
    ln2, log2e = mpmath.log(2), 1 / mpmath.log(2)
    tiny = mpf(2) ** -20
    out: dict[str, dict[str, object]] = {}
    for fmt, bits in FORMATS.items():
        print(fmt, file=sys.stderr)
        t: dict[str, object] = {}
        hi = rnd(ln2, bits)
        t["LN2_HI"], t["LN2_LO"] = hi, rnd(ln2 - hi, bits)
        log_hi = rnd(ln2, bits - 11)  # dk * LOG_LN2_HI is exact for |k| < 2**11
        t["LOG_LN2_HI"], t["LOG_LN2_LO"] = log_hi, rnd(ln2 - log_hi, bits)
        t["LOG2E"] = rnd(log2e, bits)

        coefs, err = fit(lambda r: mpmath.exp(r) - 1 - r, -EXP_REDUCED, EXP_REDUCED,
                         range(2, EXP_DEGREE[fmt] + 1), lambda r: 1 / mpmath.exp(r), bits)
        _report("exp", err, bits)
        t["EXP_POLY"] = coefs

        smax = float((mpmath.sqrt(2) - 1) / (mpmath.sqrt(2) + 1)) * 1.0001
        coefs, err = fit(lambda s: mpmath.log((1 + s) / (1 - s)) - 2 * s, smax * 1e-6, smax,
                         [2 * i + 1 for i in range(1, LOG_TERMS[fmt] + 1)],
                         lambda s: 1 / (2 * mpmath.atanh(s)), bits, grid=800)
        _report("log", err, bits)
        t["LOG_POLY"] = coefs

        limit, terms = TANH_SMALL[fmt]
        coefs, err = fit(lambda x: mpmath.tanh(x) - x, tiny, limit,
                         [2 * i + 1 for i in range(1, terms + 1)], lambda x: 1 / mpmath.tanh(x), bits, grid=800)
        _report("tanh small", err, bits)
        t["TANH_SMALL_LIMIT"], t["TANH_POLY"] = limit, coefs
        t["TANH_ONE"] = _first_rounding_to_one(mpmath.tanh, mpmath.atanh, bits)

        limit, terms = ERF_SMALL[fmt]
        coefs, err = fit(lambda x: mpmath.erf(x) - x, tiny, limit,
                         [2 * i + 1 for i in range(terms + 1)], lambda x: 1 / mpmath.erf(x), bits, grid=800)
        _report("erf small", err, bits)
        t["ERF_SMALL_LIMIT"], t["ERF_SMALL_POLY"] = limit, coefs

        degree, bounds = ERF_PIECES[fmt]
        pieces = []
        for lo, hi_ in itertools.pairwise(bounds):
            c = rnd((mpf(lo) + hi_) / 2, 12)
            a = rnd(mpmath.erf(c), bits)
            coefs, err = fit(lambda u, c=c, a=a: mpmath.erf(c + u) - a, lo - c, hi_ - c,
                             range(degree + 1), lambda u: mpf(1), bits, grid=500, iters=30)
            _report(f"erf [{lo}, {hi_})", err, bits)  # values in [0.5, 1): ulp = 2**-bits
            pieces.append((lo, c, a, coefs))
        t["ERF_PIECES"] = pieces
        t["ERF_ONE"] = _first_rounding_to_one(mpmath.erf, mpmath.erfinv, bits)
        assert t["ERF_ONE"] <= bounds[-1]
        out[fmt] = t
    return _render(out)


def _hex(v: float) -> str:
    return f'h("{float(v).hex()}")'


def _render(tables: dict[str, dict[str, object]]) -> str:
    lines = [
        '"""Constants of presk\'s transcendentals, shared by the LLVM emitter and the numpy twin.',
        "",
        "GENERATED by `python -m presk.lowering.mathlib_fit` (the recipe: degrees,",
        "intervals, fitting method); do not edit by hand. Values are hex floats, exact in",
        "their type (the f32 table holds float32 values). `mathlib_spec` says how they are",
        'used."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "h = float.fromhex",
        "",
        "TABLES: dict[str, dict[str, Any]] = {",
    ]
    for fmt, t in tables.items():
        lines.append(f'    "{fmt}": {{')
        for key, v in t.items():
            if key == "ERF_PIECES":
                lines.append(f'        "{key}": (  # (lower bound, centre, erf(centre) rounded, Q coefficients)')
                for lo, c, a, coefs in v:  # type: ignore[attr-defined]
                    lines.append(f"            ({_hex(lo)}, {_hex(c)}, {_hex(a)}, (")
                    lines.extend(f"                {_hex(x)}," for x in coefs)
                    lines.append("            )),")
                lines.append("        ),")
            elif isinstance(v, list):
                cs = ",\n            ".join(_hex(x) for x in v)
                lines.append(f'        "{key}": (\n            {cs},\n        ),')
            else:
                lines.append(f'        "{key}": {_hex(v)},  # {float(v)!r}')  # type: ignore[arg-type]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    target = Path(__file__).with_name("mathlib_coefficients.py")
    target.write_text(generate())
    print(f"wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
