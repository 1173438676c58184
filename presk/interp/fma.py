"""Exact fused multiply-add on numpy arrays, for the kernel interpreter.

presk's native kernels accumulate with `llvm.fma` (one rounding of a*b + c).
numpy has no fma ufunc and Python 3.11 has no `math.fma`, yet the kernel
interpreter must reproduce the native bits, so this module emulates a correctly
rounded IEEE fma (round to nearest even) with ordinary float operations.

float32: a*b is exact in float64 (24 + 24 <= 53 bits, and the exponent range
of a float32 product fits easily), so a*b + c is computed in float64 with
*round to odd* (an error-free TwoSum tells whether the float64 sum was inexact;
if so, the sum is forced to the neighbour with an odd last bit) and then
rounded to float32. Rounding to odd at 53 bits followed by rounding to nearest
at 24 bits (or fewer, for subnormals) equals one rounding to nearest of the
exact value, because 53 >= 24 + 2 (Boldo and Melquiond, "Emulation of FMA and
correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008).
Every element takes this path; no special case is needed because a finite
float32 input can neither overflow nor underflow the float64 intermediates.

float64: the same paper's emulated FMA, Algorithm 5.4:
    (uh, ul) = a*b exactly (Dekker's TwoProduct with Veltkamp splitting)
    (th, tl) = c + uh exactly (TwoSum)
    v        = RoundToOdd(tl + ul)
    result   = RoundToNearest(th + v)
The theorem needs every intermediate to be free of overflow and underflow, so
the operands are first scaled by powers of two (exactly): a = A * 2**ea,
b = B * 2**eb with A, B in [1, 2) (frexp, subnormals included), c' = c * 2**-S
for S = ea + eb; the emulation runs on (A, B, c') and its result is scaled back
by 2**S. That is exact, and vectorised, whenever
    S >= -900             nonzero results are >= 2**(S - 104), never subnormal;
                          overflow on the way back gives the IEEE +-inf
    c' not huge           otherwise |a*b| < ulp(c)/4 and the result is c itself
A c' that underflows (c negligible next to a*b) only acts as a sticky bit, so
it is replaced by the smallest subnormal of its sign. When every nonzero |a|, |b|
lies in [2**-400, 2**400] and every |c| <= 2**1000 (the interpreter's usual case,
checked with a few reductions) the emulation runs on the operands directly, a
zero a or b replaced by 1 and its element taken as a*b + c, exact there: the
product is a signed zero, or nan against an infinity or a nan. Outside:
    a or b not finite       a*b + c           (the product is exactly inf/nan)
    c not finite            c + c             (inf stays, nan is quietened)
    a or b zero             a*b + c           (exact signed zero, IEEE sum rule)
    c zero                  a*b               (round(ab); keeps the sign of an
                                               underflowing product, which
                                               a*b + c would lose for c = +0)
    S < -900, c not dominant: exact rational arithmetic (fractions.Fraction),
                            element by element: rare (products below 2**-900),
                            slow but exact, subnormal results included.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["fma", "round_to_odd_sum", "two_sum"]

_F64_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitter for 53-bit significands
_EMULATED = (np.dtype(np.float32), np.dtype(np.float64))


def fma(a: ArrayLike, b: ArrayLike, c: ArrayLike) -> np.ndarray:
    """Correctly rounded a*b + c, elementwise with broadcasting.

    The dtype is numpy's promotion of the operands (Python floats are weak, so
    `fma(x32, 2.0, y32)` stays float32) and must be float32 or float64.
    0-d operands give a numpy scalar, like a ufunc.
    """
    x, y, z = _operands(a, b, c)
    with np.errstate(all="ignore"):
        out = _fma32(x, y, z) if x.dtype == np.float32 else _fma64(x, y, z)
    return out[()] if out.ndim == 0 else out


def _operands(a: ArrayLike, b: ArrayLike, c: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operands as arrays of their promoted type, broadcast to one shape.

    Three non-empty arrays of one type (the kernel interpreter's usual call,
    a tile's column against its row) are taken as they are: promoting and
    broadcasting them cost a third of a call on a tile's few elements, and
    the emulation's elementwise steps broadcast by themselves (its general
    path broadcasts first).
    """
    if (
        type(a) is np.ndarray and type(b) is np.ndarray and type(c) is np.ndarray
        and a.dtype == b.dtype == c.dtype and a.dtype in _EMULATED and a.size and b.size and c.size
    ):  # fmt: skip
        return a, b, c
    operands = [v if isinstance(v, (float, int)) else np.asarray(v) for v in (a, b, c)]
    dtype = np.result_type(*operands)
    if dtype not in _EMULATED:
        raise TypeError(f"fma supports float32 and float64, not {dtype}")
    x, y, z = np.broadcast_arrays(*(np.asarray(v).astype(dtype, copy=False) for v in operands))
    return x, y, z


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: s = fl(a + b) and the exact error e, a + b == s + e.

    Branch-free (no |a| >= |b| test), hence vectorisable; exact barring overflow.
    """
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_to_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b rounded to odd: the exact sum if representable, else the neighbour
    (of the two around it) whose last significand bit is 1.

    On the integer view: truncate fl(a + b) toward zero (one step down in
    magnitude when it overshot, i.e. when the error's sign differs from the
    sum's), then set the last bit if the sum was inexact. |e| > 0 is false for
    nan, so inf and nan sums pass through untouched.
    """
    s, e = two_sum(a, b)
    itype = np.int64 if s.dtype == np.float64 else np.int32
    bits = s.view(itype)
    inexact = np.abs(e) > 0
    overshot = inexact & ((e.view(itype) ^ bits) < 0)
    return ((bits - overshot) | inexact).astype(itype, copy=False).view(s.dtype)


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    p = a.astype(np.float64) * b.astype(np.float64)
    return round_to_odd_sum(p, c.astype(np.float64)).astype(np.float32)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp: a == hi + lo with each half at most 26 bits wide."""
    t = _F64_SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker: p = fl(a*b) and the exact error, a*b == p + e (fast domain only)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _boldo_melquiond(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """round(a*b + c), given no overflow and |a*b| >= 2**-900 (see the module doc)."""
    uh, ul = _two_product(a, b)
    th, tl = two_sum(c, uh)
    return th + round_to_odd_sum(tl, ul)


def _all_within(x: np.ndarray, lo: float, hi: float) -> bool:
    """lo <= |x| <= hi everywhere (false if any nan): two reductions, cheap."""
    m = np.abs(x)
    return bool(m.min() >= lo) and bool(m.max() <= hi)


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    if a.size and _all_within(c, 0.0, 2.0**1000):
        # The common case, without the scaling below. A zero a or b (a relu's, a mask's, a fresh gradient's)
        # stands in as 1 and takes a*b + c afterwards, which is exact there.
        zero = (a == 0) | (b == 0)
        with_zeros = bool(zero.any())
        x, y = (np.where(zero, 1.0, a), np.where(zero, 1.0, b)) if with_zeros else (a, b)
        if _all_within(x, 2.0**-400, 2.0**400) and _all_within(y, 2.0**-400, 2.0**400):
            out = _boldo_melquiond(x, y, c)
            return np.where(zero, a * b + c, out) if with_zeros else out
    a, b, c = np.broadcast_arrays(a, b, c)  # the steps below index the operands by one mask
    ma, xa = np.frexp(a)  # a = ma * 2**xa, |ma| in [0.5, 1), subnormals included
    mb, xb = np.frexp(b)
    _, xc = np.frexp(c)
    scale = xa + xb - 2  # a*b = (2ma)(2mb) * 2**scale, (2ma)(2mb) in [1, 4)
    finite_ab = np.isfinite(a) & np.isfinite(b)
    general = finite_ab & np.isfinite(c) & (a != 0) & (b != 0) & (c != 0)
    # |a*b| < 2**(scale+2) <= ulp(c)/4: the product cannot move c.
    negligible = general & (scale + 2 <= xc - 1 - 54)
    scaled = general & ~negligible & (scale >= -900)

    c1 = np.ldexp(c, -scale)  # < 2**58 where scaled; may underflow where c is tiny
    # A c that underflowed only ever acts as a sticky bit (a*b's exact bits stop at
    # 2**-104), so any nonzero value of its sign does the same job.
    c1 = np.where(c1 == 0, np.copysign(np.finfo(np.float64).smallest_subnormal, c), c1)
    # Nonzero results are >= 2**(scale - 104) >= 2**-1004, so this is exact (or overflows).
    result = np.ldexp(_boldo_melquiond(2 * ma, 2 * mb, c1), scale)

    out = np.where(scaled, result, a * b + c)  # a*b + c: inf/nan operands, zero a or b
    out = np.where(negligible, c, out)
    out = np.where(finite_ab & ~np.isfinite(c), c + c, out)
    out = np.where(finite_ab & (a != 0) & (b != 0) & (c == 0), a * b, out)
    slow = general & ~negligible & ~scaled  # tiny product, possibly subnormal result
    if slow.any():
        out[slow] = [_exact(*v) for v in zip(a[slow].tolist(), b[slow].tolist(), c[slow].tolist())]
    return out


def _exact(a: float, b: float, c: float) -> float:
    """round(a*b + c) through exact rationals (all three finite and nonzero).

    int/int true division, which Fraction.__float__ uses, is correctly rounded
    (ties to even, subnormals included); it raises on overflow.
    """
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return 0.0  # exact cancellation of nonzero terms is +0 when rounding to nearest
    try:
        r = float(exact)
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")
    return r if r != 0 else (0.0 if exact > 0 else -0.0)
