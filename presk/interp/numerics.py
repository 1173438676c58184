"""The two number systems of the reference interpreter: numpy f64, and mpmath at N bits.

Both represent a tensor as a numpy array (float64, or object holding
`mpmath.mpf`) with its axes in the order of its type, so every primitive is
written once against this small interface.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mpmath
import numpy as np


@dataclass
class Numerics:
    """Elementwise functions and constants of one number system."""

    name: str
    dtype: Any
    exp: Callable[[Any], Any]
    log: Callable[[Any], Any]
    sqrt: Callable[[Any], Any]
    tanh: Callable[[Any], Any]
    erf: Callable[[Any], Any]
    const: Callable[[float], Any]
    context: Any = field(default=None)

    @property
    def neg_inf(self) -> Any:
        return self.const(-math.inf)

    def array(self, values: Any) -> np.ndarray:
        """Convert f64 input data into this system exactly (every double is an mpf)."""
        a = np.asarray(values, dtype=np.float64)
        if self.dtype is object:
            return np.frompyfunc(mpmath.mpf, 1, 1)(a).astype(object).reshape(a.shape)
        return a

    def zeros(self, shape: tuple[int, ...]) -> Any:
        if not shape:
            return self.const(0.0)
        if self.dtype is object:
            return np.full(shape, mpmath.mpf(0), dtype=object)
        return np.zeros(shape)


def _erf64(x: Any) -> Any:
    return np.vectorize(math.erf, otypes=[np.float64])(x) if np.ndim(x) else math.erf(float(x))


F64 = Numerics(
    name="f64",
    dtype=np.float64,
    exp=np.exp,
    log=np.log,
    sqrt=np.sqrt,
    tanh=np.tanh,
    erf=_erf64,
    const=float,
)


def mp_numerics(bits: int) -> Numerics:
    """mpmath at `bits` of precision; the caller runs inside `numerics.context`."""

    def lift(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        ufunc = np.frompyfunc(fn, 1, 1)
        return lambda x: ufunc(x) if np.ndim(x) else fn(x)

    return Numerics(
        name=f"mpmath/{bits}",
        dtype=object,
        exp=lift(mpmath.exp),
        log=lift(mpmath.log),
        sqrt=lift(mpmath.sqrt),
        tanh=lift(mpmath.tanh),
        erf=lift(mpmath.erf),
        const=mpmath.mpf,
        context=mpmath.workprec(bits),
    )
