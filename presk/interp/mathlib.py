"""The kernel interpreter's transcendentals: the numpy twin of the emitted IR.

numpy's own exp/log/tanh and libm's bits are not what the native kernels
compute, so the kernel interpreter runs presk's algorithms (`mathlib_spec`)
on numpy arrays instead: every intermediate in the array's dtype, fma through
the exact emulation of `presk.interp.fma`. The results are bit-identical to
`presk.lowering.mathlib`'s IR, scalar or vector (nan payloads aside).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from presk.interp.fma import fma as _fma
from presk.lowering import mathlib_spec as spec

__all__ = ["FUNCTIONS", "NumpyOps", "erf", "exp", "log", "sqrt", "tanh"]


class NumpyOps:
    """`mathlib_spec.Ops` on numpy arrays of one dtype (float32 or float64)."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self.dtype = np.dtype(dtype)
        self.fmt = spec.F32 if self.dtype == np.float32 else spec.F64
        self.itype = np.dtype(np.int32 if self.dtype == np.float32 else np.int64)

    def const(self, v: float) -> np.ndarray:
        return np.asarray(v, dtype=self.dtype)

    def iconst(self, v: int) -> np.ndarray:
        return np.asarray(v, dtype=self.itype)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.add(a, b)

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.subtract(a, b)

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.multiply(a, b)

    def div(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.divide(a, b)

    def fma(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return np.asarray(_fma(a, b, c))

    def fabs(self, a: np.ndarray) -> np.ndarray:
        return np.abs(a)

    def copysign(self, magnitude: np.ndarray, sign: np.ndarray) -> np.ndarray:
        return np.copysign(magnitude, sign)

    def lt(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.less(a, b)

    def gt(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.greater(a, b)

    def eq(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.equal(a, b)

    def isnan(self, a: np.ndarray) -> np.ndarray:
        return np.isnan(a)

    def select(self, m: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(m, a, b)

    def iselect(self, m: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(m, a, b).astype(self.itype, copy=False)

    def mand(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_and(a, b)

    def bits(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=self.dtype).view(self.itype)

    def from_bits(self, i: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(i, dtype=self.itype).view(self.dtype)

    def iadd(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.add(a, b, dtype=self.itype)

    def isub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.subtract(a, b, dtype=self.itype)

    def iand(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.bitwise_and(a, b, dtype=self.itype)

    def shl(self, a: np.ndarray, n: int) -> np.ndarray:
        return np.left_shift(a, self.iconst(n), dtype=self.itype)

    def ashr(self, a: np.ndarray, n: int) -> np.ndarray:
        return np.right_shift(a, self.iconst(n), dtype=self.itype)  # arithmetic for signed

    def to_float(self, i: np.ndarray) -> np.ndarray:
        return np.asarray(i).astype(self.dtype)


def _apply(algorithm: Callable[[NumpyOps, np.ndarray], np.ndarray], x: ArrayLike) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"presk's math functions take float32 or float64, not {a.dtype}")
    flat = np.ascontiguousarray(a).reshape(-1)
    with np.errstate(all="ignore"):  # lanes that a select discards may overflow or be nan
        out = algorithm(NumpyOps(a.dtype), flat).astype(a.dtype, copy=False).reshape(a.shape)
    return out[()] if out.ndim == 0 else out


def exp(x: ArrayLike) -> np.ndarray:
    """e**x, bit-identical to `presk.lowering.mathlib.emit_exp`."""
    return _apply(spec.exp, x)


def log(x: ArrayLike) -> np.ndarray:
    """Natural logarithm, bit-identical to `emit_log` (log(0) = -inf, log(x<0) = nan)."""
    return _apply(spec.log, x)


def tanh(x: ArrayLike) -> np.ndarray:
    """tanh, bit-identical to `emit_tanh`."""
    return _apply(spec.tanh, x)


def erf(x: ArrayLike) -> np.ndarray:
    """erf, bit-identical to `emit_erf` (gelu builds on it)."""
    return _apply(spec.erf, x)


def sqrt(x: ArrayLike) -> np.ndarray:
    """IEEE square root (`llvm.sqrt` on the native side): numpy's is correctly rounded too."""
    return _apply(lambda _ops, v: np.sqrt(v), x)


FUNCTIONS: dict[str, Callable[[ArrayLike], np.ndarray]] = {
    "exp": exp,
    "log": log,
    "tanh": tanh,
    "erf": erf,
    "sqrt": sqrt,
}
