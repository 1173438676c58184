"""Running maxima as vectors of the processor's maximum (presk.lowering.llvm.maximum_loops): the IEEE maximum's bits.

`reduce_max` over a row is one loop of `acc = maximum(acc, x)`. The native
code takes `vmaxps` over the row only when no NaN was seen and the result is
not zero, and else runs the loop as written; either way every row must give
the kernel interpreter's bits. Rows are built to hit each path: NaNs in
the vector part and in the tail, maxima of +0 and -0 (where `vmaxps` could
return the wrong sign), all -inf, infinities, subnormals, ties, and plain
random rows; the row length leaves a tail of iterations or none.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from presk import sizes
from presk.target import target_machine
from presk.dialects import psk_kernel as pk
from presk.interp.kernel import KernelInterpreter
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.pipeline import lower
from presk.lowering.llvm.maximum_loops import ACCUMULATORS
from presk.lowering.llvm.translator import translate_kernel
from presk.plans import parse_plan

pytestmark = pytest.mark.target

PROGRAM = """
!X = !psk_core.tensor<[r: R, c: C]>
!M = !psk_core.tensor<[r: R]>
func.func @row_max(%x: !X) -> !M {
  %0 = psk_core.reduce_max %x [c] : !M
  func.return %0 : !M
}
"""
DTYPES = {"f32": np.float32, "f64": np.float64}


def _lanes(realize: str) -> int:
    return target_machine().vector_bits // (32 if realize == "f32" else 64)


def _lowered(realize: str, rows: int, cols: int):  # type: ignore[no-untyped-def]
    module = parse_module(presk_context(), PROGRAM, "row_max.mlir").module
    env = sizes.resolve(module, {}, {"R": rows, "C": cols})
    return lower(module, "row_max", env, parse_plan({"realization": realize}, "test"))


def _rows(dtype: type, cols: int, lanes: int, rng: np.random.Generator) -> np.ndarray:
    """One row per case, each case in the vector part and again in the last columns (the tail)."""
    info = np.finfo(dtype)
    rows = []

    def row(fill: Callable[[], np.ndarray]) -> np.ndarray:
        return fill().astype(dtype)

    def negative() -> np.ndarray:
        return -rng.random(cols) - 0.5

    for place in (3, cols - 1):
        for special in (np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal):
            r = row(negative)
            r[place] = special
            rows.append(r)
        both = row(negative)
        both[place], both[(place + 7) % cols] = 0.0, -0.0
        rows.append(both)
    # +0 then -0 in the same lane of the same accumulator: `vmaxps` keeps the later one, -0.
    later = row(negative)
    later[2], later[2 + lanes * ACCUMULATORS] = 0.0, -0.0
    rows.append(later)
    rows.append(np.full(cols, -0.0, dtype))
    rows.append(np.full(cols, 0.0, dtype))
    rows.append(np.full(cols, -np.inf, dtype))
    rows.append(np.full(cols, np.nan, dtype))
    tie = row(lambda: rng.standard_normal(cols))
    tie[1] = tie[cols // 2] = tie.max() + 1
    rows.append(tie)
    rows += [row(lambda: rng.standard_normal(cols)) for _ in range(8)]
    rows.append(row(lambda: rng.standard_normal(cols) * 1e-40))
    return np.stack(rows)


@pytest.mark.parametrize("realize", ["f32", "f64"])
@pytest.mark.parametrize("tail", [0, 5], ids=["whole vectors", "a tail"])
def test_row_maxima_give_the_interpreters_bits(realize: str, tail: int) -> None:
    lanes = _lanes(realize)
    cols = 2 * lanes * ACCUMULATORS + tail
    rng = np.random.default_rng(7)
    x = _rows(DTYPES[realize], cols, lanes, rng)
    kernels = _lowered(realize, x.shape[0], cols)
    (k,) = [op for op in kernels.walk() if isinstance(op, pk.KernelOp)]
    assert "maximum.body" in translate_kernel(k), "the row loop is not translated as a running maximum"
    (expected,) = HostProgram(kernels, KernelInterpreter().runner)([x])
    with NativeRunner() as native:
        (got,) = HostProgram(kernels, native)([x])
    bits = np.uint32 if realize == "f32" else np.uint64
    differ = np.flatnonzero(got.view(bits) != expected.view(bits))
    assert differ.size == 0, f"rows {differ}: native {got[differ]} != interpreter {expected[differ]}"
    with np.errstate(invalid="ignore"):
        assert np.array_equal(np.isnan(got), np.isnan(x).any(axis=1))
    zeros = got == 0
    positive_zero = ((x == 0) & ~np.signbit(x)).any(axis=1)
    assert zeros.sum() >= 4 and np.array_equal(np.signbit(got[zeros]), ~positive_zero[zeros])


def test_short_rows_keep_the_loop_as_written() -> None:
    kernels = _lowered("f32", 4, _lanes("f32") * ACCUMULATORS - 1)
    (k,) = [op for op in kernels.walk() if isinstance(op, pk.KernelOp)]
    assert "maximum.body" not in translate_kernel(k)


MASKED = """
!X = !psk_core.tensor<[r: R, c: C]>
!Mask = !psk_core.index<[r: R, c: C], 2>
func.func @masked_softmax(%x: !X, %m: !Mask) -> !X {
  %0 = psk_core.softmax %x [c] mask %m : !X
  func.return %0 : !X
}
"""


def _masked_rows(dtype: type, cols: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows and masks (1 kept) for the masked maxima: specials kept and refused, fully refused rows."""
    rows, masks = [], []

    def case(x: np.ndarray, m: np.ndarray) -> None:
        rows.append(x.astype(dtype))
        masks.append(m.astype(np.int64))

    def some() -> np.ndarray:
        return rng.random(cols) < 0.6

    for place in (3, cols - 1):
        for special in (np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0):
            for kept in (True, False):
                x, m = rng.standard_normal(cols) - 4.0, some()
                x[place], m[place] = special, kept
                case(x, m)
        # The maximum is a zero, of either sign, beside larger refused values.
        for zero in (0.0, -0.0):
            x, m = -rng.random(cols) - 0.5, some()
            x[place], m[place] = zero, True
            x[(place + 5) % cols], m[(place + 5) % cols] = 9.0, False
            case(x, m)
    case(rng.standard_normal(cols), np.zeros(cols))  # fully refused
    case(np.full(cols, np.nan), np.zeros(cols))  # fully refused NaNs
    case(np.full(cols, -np.inf), np.ones(cols))
    case(np.full(cols, -np.inf), some())
    mixed = np.where(rng.random(cols) < 0.5, 0.0, -0.0)
    case(mixed, some())
    case(np.full(cols, -0.0), np.ones(cols))
    nans = rng.standard_normal(cols)
    nans[::2] = np.nan
    case(nans, np.arange(cols) % 2)  # NaNs only where refused
    one = np.zeros(cols)
    one[cols // 2] = 1
    case(rng.standard_normal(cols), one)  # one kept position
    case(rng.standard_normal(cols), np.tril(np.ones((cols, cols)))[cols // 3])  # causal
    while len(rows) % 8:
        case(rng.standard_normal(cols), some())
    return np.stack(rows), np.stack(masks)


@pytest.mark.parametrize("realize", ["f32", "f64"])
@pytest.mark.parametrize("tail", [0, 5], ids=["whole vectors", "a tail"])
def test_masked_softmax_gives_the_interpreters_bits(realize: str, tail: int) -> None:
    """The masked row maxima `select(m, maximum(acc, x), acc)` take the vector path with the same bits."""
    lanes = _lanes(realize)
    cols = 2 * lanes * ACCUMULATORS + tail
    rng = np.random.default_rng(11)
    x, m = _masked_rows(DTYPES[realize], cols, rng)
    module = parse_module(presk_context(), MASKED, "masked_softmax.mlir").module
    env = sizes.resolve(module, {}, {"R": x.shape[0], "C": cols})
    kernels = lower(module, "masked_softmax", env, parse_plan({"realization": realize}, "test"))
    (k,) = [op for op in kernels.walk() if isinstance(op, pk.KernelOp)]
    assert "maximum.body" in translate_kernel(k), "the masked row maxima are not translated as running maxima"
    (expected,) = HostProgram(kernels, KernelInterpreter().runner)([x, m])
    with NativeRunner() as native:
        (got,) = HostProgram(kernels, native)([x, m])
    bits = np.uint32 if realize == "f32" else np.uint64
    differ = np.flatnonzero((got.view(bits) != expected.view(bits)).any(axis=1))
    assert differ.size == 0, f"rows {differ}: native {got[differ]} != interpreter {expected[differ]}"
    refused = ~m.astype(bool).any(axis=1)
    assert refused.sum() >= 2 and np.all(got[refused] == 0)
