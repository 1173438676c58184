"""Rounding to bf16 exactly once, as `arith.truncf` f64 -> bf16 is lowered.

ml_dtypes and numpy convert f64 to bf16 through f32, and two roundings to
nearest are not one: 1 + 2^-8 + 2^-40 rounds to the f32 tie 1 + 2^-8, which
then rounds to even, 1, where the nearest bf16 is 1 + 2^-7. Rounding the f64
to f32 *to odd* first (truncated, with the last bit set when inexact) makes
the pair one rounding, since f32 has 24 bits, at least bf16's 8 + 2. The
kernel interpreter and the realized interpreter both round this way, and so
does native code (`presk.lowering.llvm.bf16`).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["f64_to_f32_odd", "truncate_f64_to_bf16"]


def f64_to_f32_odd(a: np.ndarray) -> np.ndarray:
    """`a` in f32, rounded to odd when it is f64 (NaN and ±inf kept; beyond f32's range it still
    rounds to ±inf in bf16); any other type is converted to f32 as it is."""
    if a.dtype != np.float64:
        return a.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = a.astype(np.float32)
        inexact = (nearest.astype(np.float64) != a) & ~np.isnan(a)
        away = inexact & (np.abs(nearest.astype(np.float64)) > np.abs(a))
        truncated = np.where(away, np.nextafter(nearest, np.float32(0)), nearest)
    bits = np.asarray(np.asarray(truncated, dtype=np.float32).view(np.uint32) | inexact.astype(np.uint32))
    return bits.view(np.float32)


def truncate_f64_to_bf16(x: Any) -> Any:
    """float64 to bfloat16, rounded once to nearest even (a scalar stays a scalar)."""
    out = f64_to_f32_odd(np.asarray(x, dtype=np.float64)).astype(ml_dtypes.bfloat16)
    return out[()] if out.ndim == 0 else out
