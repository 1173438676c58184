"""The kernel interpreter: exact machine arithmetic per op, vectorised loops, and the corpus end to end.

Hand-built kernels check each op's bits against an independent computation
(exact rationals for fma, bit manipulation for bf16 rounding, IEEE rules for
maximum and comparisons); loop tests check the order of serial iterations
and running values; the corpus tests lower real entries and compare with the
reference interpreter:

* f64: |kernel - reference| <= 1e-11 * max(|reference|, 1) elementwise (the
  two differ only in summation order: sequential here, pairwise/BLAS there).
* f32: the kernel's error against the f64 reference is at most 4x the error
  of the reference interpreter run in f32 on the same realized program, plus
  4 f32 ulps of max(|reference|, 1): as accurate as numpy in f32.
* bf16: against the reference interpreter on the bf16-realized program,
  within 2**-7 * max(|reference|, 1) (one bf16 rounding).

Every test runs with and without hoisting of serial loops where it matters,
and the corpus runs require the two modes to agree bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType, ModuleOp, f32, f64, i64

from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as K
from presk.interp.inputs import make_inputs
from presk.interp.kernel import KernelInterpreter, dtype_of, ieee_maximum, truncate_f64_to_bf16
from presk.interp.reference import run_entry
from presk.interp.values import leaf_items
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.pipeline import apply_layouts
from presk.lowering.realize_to_kernel import LowerToKernel
from presk.passes.bind import BindSizes
from presk.passes.fuse import FuseElementwise
from presk.passes.realize import RealizeSites

ROOT = Path(__file__).resolve().parents[2]
BF16 = np.dtype(ml_dtypes.bfloat16)
HOIST = pytest.mark.parametrize("hoist", [True, False], ids=["hoisted", "plain"])


def kernel(text: str, **types: str) -> K.KernelOp:
    """Parse one `psk_kernel.kernel`; `$NAME` in the text is replaced by `types[NAME]`."""
    for name, value in sorted(types.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(f"${name}", value)
    parsed = parse_module(presk_context(), text, "kernel.mlir")
    parsed.verify()
    (op,) = [o for o in parsed.module.body.block.ops if isinstance(o, K.KernelOp)]
    return op


def run(k: K.KernelOp, *buffers: np.ndarray, hoist: bool = True) -> None:
    KernelInterpreter(hoist=hoist).runner(k)(list(buffers))


def bits(a: Any) -> np.ndarray:
    a = np.asarray(a)
    return a.view({8: np.uint64, 4: np.uint32, 2: np.uint16}[a.dtype.itemsize])


def assert_bits(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


ELEMENTWISE = """
psk_kernel.kernel @k(%a: memref<$Nx$T>, %b: memref<$Nx$T>, %o: memref<$Nx$R>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant $N : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<$Nx$T>
    %y = memref.load %b[%i] : memref<$Nx$T>
    $BODY
    memref.store %r, %o[%i] : memref<$Nx$R>
  } $ATTR
}
"""


def elementwise(body: str, t: str, r: str | None, a: np.ndarray, b: np.ndarray, parallel: bool, hoist: bool) -> np.ndarray:
    """Run `body` (defining %r from %x, %y) over a and b, in a parallel or a serial loop."""
    r = r or t
    k = kernel(ELEMENTWISE, N=str(len(a)), T=t, R=r, BODY=body, ATTR="{psk_kernel.parallel}" if parallel else "")
    out = np.zeros(len(a), dtype=dtype_of(MemRefType(k.buffers[2].element_type, [1])))
    run(k, a, b, out, hoist=hoist)
    return out


# --------------------------------------------------------------------------
# Buffers and dtypes.


def test_dtype_of_buffers() -> None:
    assert dtype_of(MemRefType(f64, [2])) == np.float64
    assert dtype_of(MemRefType(f32, [])) == np.float32
    assert dtype_of(MemRefType(i64, [3])) == np.int64
    k = kernel(ELEMENTWISE, N="2", T="bf16", R="bf16", BODY="%r = arith.addf %x, %y : bf16", ATTR="")
    assert dtype_of(k.buffers[0]) == BF16


COPY = """
psk_kernel.kernel @copy(%a: memref<2x3xf32>, %o: memref<2x3xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c3 step %c1 {
      %x = memref.load %a[%i, %j] : memref<2x3xf32>
      memref.store %x, %o[%i, %j] : memref<2x3xf32>
    } {psk_kernel.parallel}
  } {psk_kernel.parallel}
}
"""


def test_runs_in_place_and_prepares_once() -> None:
    call = KernelInterpreter().runner(kernel(COPY))
    for seed in range(3):
        a = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
        out = np.zeros((2, 3), np.float32)
        call([a, out])
        assert_bits(out, a)


@pytest.mark.parametrize(
    ("buffers", "message"),
    [
        ([np.zeros((2, 3), np.float32)], "takes 2 buffers, got 1"),
        ([np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)], "buffer 1: expected shape [2, 3] of float32, got shape [3, 2]"),
        ([np.zeros((2, 3), np.float64), np.zeros((2, 3), np.float32)], "buffer 0: expected shape [2, 3] of float32, got shape [2, 3] of float64"),
        ([np.zeros((2, 3), np.float32), [[0.0] * 3] * 2], "buffer 1: expected a numpy array"),
    ],
)  # fmt: skip
def test_buffers_are_checked_before_running(buffers: list[Any], message: str) -> None:
    with pytest.raises(PreskError) as info:
        KernelInterpreter().runner(kernel(COPY))(buffers)
    assert info.value.code == "E4003"
    assert "@copy" in str(info.value) and message in str(info.value)


def test_a_read_only_output_is_refused() -> None:
    out = np.zeros((2, 3), np.float32)
    out.flags.writeable = False
    with pytest.raises(PreskError, match="E4003.*buffer 1.*read-only"):
        run(kernel(COPY), np.zeros((2, 3), np.float32), out)


def test_an_op_it_cannot_run_is_refused_when_preparing() -> None:
    k = kernel(ELEMENTWISE, N="2", T="f32", R="f32", BODY="%r = arith.minimumf %x, %y : f32", ATTR="")
    with pytest.raises(PreskError, match="E3003.*@k.*arith.minimumf"):
        KernelInterpreter().runner(k)


# --------------------------------------------------------------------------
# Arithmetic, bit for bit.


@HOIST
@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "serial"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_maximumf_is_ieee_maximum(t: str, parallel: bool, hoist: bool) -> None:
    """NaN if either operand is NaN; +0 is greater than -0 in both orders; else the larger."""
    inf, nan = np.inf, np.nan
    pairs = [(0.0, -0.0), (-0.0, 0.0), (-0.0, -0.0), (0.0, 0.0), (nan, 1.0), (1.0, nan), (nan, -inf), (-inf, 3.0),
             (2.0, 1.0), (1.0, 2.0), (inf, -inf), (-5.0, -7.0)]  # fmt: skip
    dtype = np.float32 if t == "f32" else np.float64
    a, b = (np.array(col, dtype=dtype) for col in zip(*pairs))
    out = elementwise(f"%r = arith.maximumf %x, %y : {t}", t, None, a, b, parallel, hoist)
    for (x, y), r in zip(pairs, out):
        if np.isnan(x) or np.isnan(y):
            assert np.isnan(r)
        elif x == y == 0:
            assert r == 0 and np.signbit(r) == (np.signbit(x) and np.signbit(y))
        else:
            assert r == max(x, y)
    # The scalar path of the helper agrees with the array path, bit for bit.
    scalars = np.array([ieee_maximum(x, y) for x, y in zip(a, b)], dtype=dtype)
    assert_bits(scalars, out)


@HOIST
@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "serial"])
def test_f32_arithmetic_is_rounded_in_f32(parallel: bool, hoist: bool) -> None:
    """Each op is one IEEE float32 operation: never computed in float64 and rounded later."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(64).astype(np.float32)
    b = (rng.standard_normal(64) * 3).astype(np.float32)
    body = """%s = arith.addf %x, %y : f32
    %p = arith.mulf %s, %x : f32
    %q = arith.divf %p, %y : f32
    %d = arith.subf %q, %x : f32
    %tenth = arith.constant 0.1 : f32
    %e = arith.mulf %d, %tenth : f32
    %g = math.sqrt %e : f32
    %r = arith.negf %g : f32"""
    out = elementwise(body, "f32", None, a, b, parallel, hoist)
    with np.errstate(invalid="ignore"):
        want = -np.sqrt((((a + b) * a) / b - a) * np.float32(0.1))
    assert want.dtype == np.float32
    assert_bits(out, want)


def _bf16_round_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even, written out on the integer bits."""
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0) | ((u >> 16).astype(np.uint16) & 0x8000), rounded)


@HOIST
def test_truncf_to_bf16_rounds_to_nearest_even(hoist: bool) -> None:
    one = 1.0
    values = [one + 2**-8, one + 3 * 2**-8, -(one + 2**-8), one + 2**-8 + 2**-20, one + 2**-9, 3.0e38, 0.0,
              -3.4e38, np.inf, -np.inf, np.nan, 1e-40, -1e-42, 0.0, -0.0, 2**-133, 65536.0 + 256.0]  # fmt: skip
    a = np.array(values, dtype=np.float32)
    a[6] = np.uint32(0x7F7F8000).view(np.float32)  # the largest bf16 plus half an ulp: a tie, to even (inf)
    out = elementwise("%r = arith.truncf %x : f32 to bf16", "f32", "bf16", a, a, True, hoist)
    assert out.dtype == BF16
    nan = np.isnan(a)
    assert np.isnan(out[nan].astype(np.float32)).all()
    np.testing.assert_array_equal(bits(out)[~nan], _bf16_round_bits(a)[~nan])
    assert out[0] == 1.0 and out[1] == one + 2**-6 and out[2] == -1.0 and out[3] == one + 2**-7  # ties to even
    assert np.isinf(out[6].astype(np.float32)) and not np.isinf(out[5].astype(np.float32))


def test_truncf_f64_to_bf16_rounds_once() -> None:
    """1 + 2**-8 + 2**-30 is just above a bf16 tie; f64 -> f32 -> bf16 would round it to 1 (a tie, to even)."""
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, -(1 + 2**-8 + 2**-40), 1e-300, 3.3961e38, np.nan, -np.inf])
    twice = x.astype(np.float32).astype(BF16)
    assert twice[0] == 1.0  # the double rounding this avoids
    out = elementwise("%r = arith.truncf %x : f64 to bf16", "f64", "bf16", x, x, True, True)
    exact = [Fraction(float(v)) for v in x[:5]]
    for got, want in zip(out[:5].astype(np.float64), exact):
        # the nearest bf16 (or the overflow to inf): no representable neighbour is nearer
        lo, hi = np.nextafter(BF16.type(got), BF16.type(-np.inf)), np.nextafter(BF16.type(got), BF16.type(np.inf))
        if np.isfinite(got):
            d = abs(Fraction(float(got)) - want)
            assert all(d <= abs(Fraction(float(n)) - want) for n in (lo, hi) if np.isfinite(float(n)))
    assert out[0] == 1 + 2**-7 and out[1] == 1.0 and out[2] == -(1 + 2**-7) and out[3] == 0
    assert np.isnan(float(out[5])) and float(out[6]) == -np.inf
    assert_bits(truncate_f64_to_bf16(x), out)


@pytest.mark.parametrize(("src", "dst"), [("bf16", "f32"), ("bf16", "f64"), ("f32", "f64")])
def test_extf_is_exact(src: str, dst: str) -> None:
    dtypes = {"bf16": BF16, "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
    rng = np.random.default_rng(2)
    a = np.concatenate([rng.standard_normal(20) * 1e3, [np.inf, -np.inf, np.nan, -0.0, 1e-39]]).astype(np.float32).astype(dtypes[src])
    out = elementwise(f"%r = arith.extf %x : {src} to {dst}", src, dst, a, a, True, True)
    assert out.dtype == dtypes[dst]
    assert_bits(out, a.astype(dtypes[dst]))
    # and back: widening then narrowing is the identity
    assert_bits(out.astype(dtypes[src]), a)


def _exact_round(value: Fraction, dtype: type) -> Any:
    """The float of `dtype` nearest to a rational, ties to even (no double rounding)."""
    guess = dtype(float(value))
    candidates = [np.nextafter(guess, dtype(-np.inf)), guess, np.nextafter(guess, dtype(np.inf))]
    candidates = [c for c in candidates if np.isfinite(c)]
    best = min(abs(Fraction(float(c)) - value) for c in candidates)
    nearest = [c for c in candidates if abs(Fraction(float(c)) - value) == best]
    if len(nearest) > 1:
        nearest = [c for c in nearest if int(bits(np.array(c, dtype=dtype))) % 2 == 0]
    return dtype(nearest[0])


def _fma_cases(dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    a = rng.standard_normal(40).astype(dtype)
    b = rng.standard_normal(40).astype(dtype)
    c = rng.standard_normal(40).astype(dtype)
    # Cancellation: c is minus the rounded product, so a*b + c is the product's rounding error, exactly.
    c[:20] = -(a[:20] * b[:20])
    # Results near a tie of the plain multiply-then-add.
    c[20:25] = dtype(1.0)
    a[20:25] = dtype(1.0) + dtype(np.finfo(dtype).eps)
    b[20:25] = dtype(1.0) - dtype(np.finfo(dtype).eps)
    return a, b, c


FMA = """
psk_kernel.kernel @fma(%a: memref<40x$T>, %b: memref<40x$T>, %c: memref<40x$T>, %o: memref<40x$T>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 40 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<40x$T>
    %y = memref.load %b[%i] : memref<40x$T>
    %z = memref.load %c[%i] : memref<40x$T>
    %r = math.fma %x, %y, %z : $T
    memref.store %r, %o[%i] : memref<40x$T>
  } {psk_kernel.parallel}
}
"""


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_fma_rounds_once(t: str) -> None:
    dtype = np.float32 if t == "f32" else np.float64
    a, b, c = _fma_cases(dtype)
    out = np.zeros(40, dtype)
    run(kernel(FMA, T=t), a, b, c, out)
    want = np.array([_exact_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), dtype)
                     for x, y, z in zip(a, b, c)], dtype=dtype)  # fmt: skip
    assert_bits(out, want)
    assert (out[:20] != 0).any() and not np.array_equal(out, a * b + c)  # the cases do tell fma apart


DOT_CHAIN = """
psk_kernel.kernel @chain(%a: memref<50x$T>, %b: memref<50x$T>, %o: memref<$T>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 50 : index
  %zero = arith.constant 0.0 : $T
  %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> ($T) {
    %x = memref.load %a[%k] : memref<50x$T>
    %y = memref.load %b[%k] : memref<50x$T>
    %next = math.fma %x, %y, %acc : $T
    scf.yield %next : $T
  }
  memref.store %s, %o[] : memref<$T>
}
"""


@HOIST
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_a_serial_fma_chain_adds_its_terms_in_increasing_k(t: str, hoist: bool) -> None:
    dtype = np.float32 if t == "f32" else np.float64
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(50).astype(dtype), rng.standard_normal(50).astype(dtype)
    a[10], b[10] = dtype(1e6), dtype(1e6)  # a large term early: the order shows in the low bits
    a[40], b[40] = dtype(-1e6), dtype(1e6)
    out = np.zeros((), dtype)
    run(kernel(DOT_CHAIN, T=t), a, b, out, hoist=hoist)
    acc = dtype(0.0)
    for x, y in zip(a, b):
        acc = _exact_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(acc)), dtype)
    assert_bits(out, np.array(acc, dtype))


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_transcendentals_are_presks_polynomials(name: str, t: str) -> None:
    from presk.interp import mathlib

    dtype = np.float32 if t == "f32" else np.float64
    a = np.linspace(-6, 6, 37).astype(dtype)
    if name == "log":
        a = np.abs(a) + dtype(0.01)
    for parallel in (True, False):
        out = elementwise(f"%r = math.{name} %x : {t}", t, None, a, a, parallel, False)
        assert_bits(out, getattr(mathlib, name)(a))


CMPF = "%m = arith.cmpf $P, %x, %y : f64\n    %one = arith.constant 1.0 : f64\n    %zero = arith.constant 0.0 : f64\n    %r = arith.select %m, %one, %zero : f64"

PREDICATES: dict[str, Callable[[float, float], bool]] = {
    "false": lambda x, y: False,
    "oeq": lambda x, y: x == y,
    "ogt": lambda x, y: x > y,
    "oge": lambda x, y: x >= y,
    "olt": lambda x, y: x < y,
    "ole": lambda x, y: x <= y,
    "one": lambda x, y: x == x and y == y and x != y,
    "ord": lambda x, y: x == x and y == y,
    "ueq": lambda x, y: x != x or y != y or x == y,
    "ugt": lambda x, y: x != x or y != y or x > y,
    "uge": lambda x, y: x != x or y != y or x >= y,
    "ult": lambda x, y: x != x or y != y or x < y,
    "ule": lambda x, y: x != x or y != y or x <= y,
    "une": lambda x, y: x != x or y != y or x != y,
    "uno": lambda x, y: x != x or y != y,
    "true": lambda x, y: True,
}


@pytest.mark.parametrize("predicate", sorted(PREDICATES))
def test_cmpf_predicates_and_select(predicate: str) -> None:
    nan = np.nan
    pairs = [(1.0, 2.0), (2.0, 1.0), (1.0, 1.0), (0.0, -0.0), (nan, 1.0), (1.0, nan), (nan, nan), (-np.inf, np.inf)]
    a, b = (np.array(col) for col in zip(*pairs))
    for parallel, hoist in ((True, True), (False, False)):
        out = elementwise(CMPF.replace("$P", predicate), "f64", None, a, b, parallel, hoist)
        np.testing.assert_array_equal(out, [float(PREDICATES[predicate](x, y)) for x, y in pairs])


GATHER = """
psk_kernel.kernel @gather(%table: memref<5x3xf32>, %ids: memref<2x4xi64>, %o: memref<2x4x3xf32>, %mask: memref<4x4xi64>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0 : i64
  %minus = arith.constant -1.0 : f32
  scf.for %b = %c0 to %c2 step %c1 {
    scf.for %t = %c0 to %c4 step %c1 {
      scf.for %e = %c0 to %c3 step %c1 {
        %id = memref.load %ids[%b, %t] : memref<2x4xi64>
        %row = arith.index_cast %id : i64 to index
        %x = memref.load %table[%row, %e] : memref<5x3xf32>
        %keep = arith.cmpi ne, %id, %zero : i64
        %r = arith.select %keep, %x, %minus : f32
        memref.store %r, %o[%b, %t, %e] : memref<2x4x3xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
  } {psk_kernel.parallel}
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %allowed = arith.cmpi ule, %j, %i : index
      %bit = arith.extui %allowed : i1 to i64
      %pos = arith.index_cast %j : index to i64
      %v = arith.muli %bit, %pos : i64
      memref.store %v, %mask[%i, %j] : memref<4x4xi64>
    } $ATTR
  } {psk_kernel.parallel}
}
"""


@pytest.mark.parametrize("inner", ["{psk_kernel.parallel}", ""], ids=["parallel", "serial"])
def test_gather_with_index_cast_cmpi_select_and_extui(inner: str) -> None:
    table = np.arange(15, dtype=np.float32).reshape(5, 3) + np.float32(0.5)
    ids = np.array([[0, 4, 2, 2], [1, 0, 3, 4]], dtype=np.int64)
    out = np.zeros((2, 4, 3), np.float32)
    mask = np.full((4, 4), -7, np.int64)
    run(kernel(GATHER, ATTR=inner), table, ids, out, mask)
    want = np.where((ids != 0)[..., None], table[ids], np.float32(-1.0))
    assert_bits(out, want)
    np.testing.assert_array_equal(mask, np.tril(np.ones((4, 4), np.int64)) * np.arange(4))


@pytest.mark.parametrize("bad", [5, -1])
def test_an_index_read_from_data_is_bounds_checked(bad: int) -> None:
    ids = np.array([[0, 1, 2, bad], [0, 0, 0, 0]], dtype=np.int64)
    with pytest.raises(PreskError) as info:
        run(kernel(GATHER, ATTR=""), np.zeros((5, 3), np.float32), ids, np.zeros((2, 4, 3), np.float32),
            np.zeros((4, 4), np.int64))  # fmt: skip
    assert info.value.code == "E4003"
    assert f"index {bad} is outside axis 0 (size 5) of buffer 0" in str(info.value) and "@gather" in str(info.value)


RACE = """
psk_kernel.kernel @race(%a: memref<4xf32>, %o: memref<1xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    memref.store %x, %o[%c0] : memref<1xf32>
  } {psk_kernel.parallel}
}
"""


def test_a_parallel_loop_writing_one_element_from_every_iteration_is_refused() -> None:
    with pytest.raises(PreskError, match="E3003.*same element"):
        run(kernel(RACE), np.arange(4, dtype=np.float32), np.zeros(1, np.float32))


# --------------------------------------------------------------------------
# Loops: order, running values, parallel inside serial.

ROW_WISE = """
psk_kernel.kernel @rows(%a: memref<3x5x$T>, %w: memref<5x4x$T>, %o: memref<3x4x$T>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  scf.for %i = %c0 to %c3 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %zero = arith.constant 0.0 : $T
      memref.store %zero, %o[%i, %j] : memref<3x4x$T>
    } {psk_kernel.parallel}
    scf.for %k = %c0 to %c5 step %c1 {
      %x = memref.load %a[%i, %k] : memref<3x5x$T>
      scf.for %j = %c0 to %c4 step %c1 {
        %y = memref.load %w[%k, %j] : memref<5x4x$T>
        %acc = memref.load %o[%i, %j] : memref<3x4x$T>
        %next = math.fma %x, %y, %acc : $T
        memref.store %next, %o[%i, %j] : memref<3x4x$T>
      } {psk_kernel.parallel}
    }
  } {psk_kernel.parallel}
}
"""


@HOIST
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_row_wise_accumulation_across_a_serial_k_loop(t: str, hoist: bool) -> None:
    """The output row is the running value: read, fma, written back, once per k in increasing order."""
    dtype = np.float32 if t == "f32" else np.float64
    rng = np.random.default_rng(5)
    a, w = rng.standard_normal((3, 5)).astype(dtype), rng.standard_normal((5, 4)).astype(dtype)
    out = np.full((3, 4), np.nan, dtype)
    run(kernel(ROW_WISE, T=t), a, w, out, hoist=hoist)
    want = np.zeros((3, 4), dtype)
    for i in range(3):
        for j in range(4):
            acc = dtype(0.0)
            for k in range(5):
                acc = _exact_round(Fraction(float(a[i, k])) * Fraction(float(w[k, j])) + Fraction(float(acc)), dtype)
            want[i, j] = acc
    assert_bits(out, want)
    # small integers: every step exact, so this is the matrix product
    ai, wi = np.arange(15, dtype=dtype).reshape(3, 5), np.arange(20, dtype=dtype).reshape(5, 4) - 7
    run(kernel(ROW_WISE, T=t), ai, wi, out, hoist=hoist)
    np.testing.assert_array_equal(out, ai @ wi)


NESTED = """
psk_kernel.kernel @nested(%a: memref<3x4xf32>, %o: memref<f32>, %m: memref<f32>, %rows: memref<3xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s, %mx = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %zero, %top = %ninf) -> (f32, f32) {
    %s2, %mx2 = scf.for %j = %c0 to %c4 step %c1 iter_args(%acc2 = %acc, %top2 = %top) -> (f32, f32) {
      %x = memref.load %a[%i, %j] : memref<3x4xf32>
      %e = math.exp %x : f32
      %n = arith.addf %acc2, %x : f32
      %t = arith.maximumf %top2, %e : f32
      scf.yield %n, %t : f32, f32
    }
    scf.yield %s2, %mx2 : f32, f32
  }
  memref.store %s, %o[] : memref<f32>
  memref.store %mx, %m[] : memref<f32>
  scf.for %r = %c0 to %c3 step %c1 {
    %rs = scf.for %j = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %a[%r, %j] : memref<3x4xf32>
      %n = arith.addf %acc, %x : f32
      scf.yield %n : f32
    }
    memref.store %rs, %rows[%r] : memref<3xf32>
  } {psk_kernel.parallel}
}
"""


@HOIST
def test_running_values_thread_through_nested_serial_loops_in_order(hoist: bool) -> None:
    """Sequential f32 sums: 1e8 + 1 + 1 ... - 1e8 is 0 in this order, not the 10 of an exact or pairwise sum."""
    from presk.interp import mathlib

    a = np.array([[1e8, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, -1e8]], dtype=np.float32)
    total, top, rows = np.zeros((), np.float32), np.zeros((), np.float32), np.zeros(3, np.float32)
    run(kernel(NESTED), a, total, top, rows, hoist=hoist)
    acc = np.float32(0)
    for x in a.ravel():
        acc = acc + x
    assert_bits(total, np.array(acc)) and acc == 0
    assert_bits(top, mathlib.exp(a.ravel()).max())
    want_rows = np.zeros(3, np.float32)
    for i in range(3):
        for x in a[i]:
            want_rows[i] = want_rows[i] + x
    assert_bits(rows, want_rows)


SCAN = """
psk_kernel.kernel @scan(%a: memref<6xf64>, %o: memref<6xf64>, %i: memref<6xi64>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %first = memref.load %a[%c0] : memref<6xf64>
  memref.store %first, %o[%c0] : memref<6xf64>
  scf.for %k = %c1 to %c6 step %c1 {
    %x = memref.load %a[%k] : memref<6xf64>
    %prev_i = memref.load %i[%k] : memref<6xi64>
    %prev = arith.index_cast %prev_i : i64 to index
    %p = memref.load %o[%prev] : memref<6xf64>
    %s = arith.addf %p, %x : f64
    memref.store %s, %o[%k] : memref<6xf64>
  }
}
"""


@HOIST
def test_a_serial_loop_reading_what_it_wrote_stays_serial(hoist: bool) -> None:
    """o[k] = o[k-1] + a[k]: the load of o is not hoisted, since the loop stores into o."""
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    out, prev = np.zeros(6), np.array([0, 0, 1, 2, 3, 4], np.int64)
    run(kernel(SCAN), a, out, prev, hoist=hoist)
    np.testing.assert_array_equal(out, np.cumsum(a))


EMPTY = """
psk_kernel.kernel @empty(%o: memref<2xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %seven = arith.constant 7.0 : f32
  %v = scf.for %k = %c2 to %c0 step %c1 iter_args(%acc = %seven) -> (f32) {
    %n = arith.addf %acc, %acc : f32
    scf.yield %n : f32
  }
  scf.for %i = %c0 to %c0 step %c1 {
    memref.store %seven, %o[%i] : memref<2xf32>
  } {psk_kernel.parallel}
  memref.store %v, %o[%c1] : memref<2xf32>
}
"""


def test_a_loop_that_runs_no_iteration_yields_its_initial_values() -> None:
    out = np.zeros(2, np.float32)
    run(kernel(EMPTY), out)
    np.testing.assert_array_equal(out, [0.0, 7.0])


TILE = """
psk_kernel.kernel @tile(%a: memref<2x6xf32>, %b: memref<6x2xf32>, %c: memref<6xf32>, %o: memref<2x2xf32>, %p: memref<f32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c2 step %c1 {
    %s0, %s1, %q = scf.for %k = %c0 to %c6 step %c1 iter_args(%x0 = %zero, %x1 = %zero, %y = %zero) -> (f32, f32, f32) {
      %x = memref.load %a[%i, %k] : memref<2x6xf32>
      %w0 = memref.load %b[%k, %c0] : memref<6x2xf32>
      %w1 = memref.load %b[%k, %c1] : memref<6x2xf32>
      %v = memref.load %c[%k] : memref<6xf32>
      %n0 = math.fma %x, %w0, %x0 : f32
      %n1 = math.fma %x, %w1, %x1 : f32
      %n2 = math.fma %v, %v, %y : f32
      scf.yield %n0, %n1, %n2 : f32, f32, f32
    }
    memref.store %s0, %o[%i, %c0] : memref<2x2xf32>
    memref.store %s1, %o[%i, %c1] : memref<2x2xf32>
    memref.store %q, %p[] : memref<f32>
  } {psk_kernel.parallel}
}
"""


def test_independent_fmas_of_a_serial_step_are_batched_without_changing_bits() -> None:
    """Two accumulators of one shape batch together; the third, of another shape, is run alone."""
    rng = np.random.default_rng(6)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((2, 6), (6, 2), (6,)))
    outs = []
    for hoist in (True, False):
        o, p = np.zeros((2, 2), np.float32), np.zeros((), np.float32)
        run(kernel(TILE), a, b, c, o, p, hoist=hoist)
        outs.append((o, p))
    assert_bits(outs[0][0], outs[1][0])
    assert_bits(outs[0][1], outs[1][1])
    want = np.zeros((2, 2), np.float32)
    for i in range(2):
        for j in range(2):
            acc = np.float32(0)
            for k in range(6):
                acc = _exact_round(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) + Fraction(float(acc)), np.float32)
            want[i, j] = acc
    assert_bits(outs[0][0], want)


# --------------------------------------------------------------------------
# The corpus, end to end: lowered in process, launched by a tiny host loop.


@functools.cache
def _parsed(path: str) -> ModuleOp:
    return parse_module(presk_context(), (ROOT / path).read_text(), path).module


def lower(path: str, entry: str, dims: str, realization: str) -> tuple[ModuleOp, ModuleOp, ModuleOp]:
    """(bound and fused, realized, lowered to PSK-Kernel) modules of one entry."""
    ctx = presk_context()
    module = _parsed(path).clone()
    BindSizes(dims=dims).apply(ctx, module)
    FuseElementwise().apply(ctx, module)
    fused = module.clone()
    RealizeSites(realization=realization).apply(ctx, module)
    realized = module.clone()
    LowerToKernel(entry=entry).apply(ctx, module)
    apply_layouts(module)
    return fused, realized, module


def launch(module: ModuleOp, leaves: Sequence[Any], interpreter: KernelInterpreter) -> list[np.ndarray]:
    """The host program: allocate, view, launch in order (the real one is presk.jit.executor)."""
    (host,) = [op for op in module.body.block.ops if isinstance(op, K.HostOp)]
    kernels = {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, K.KernelOp)}
    runners: dict[str, Callable[[Sequence[np.ndarray]], None]] = {}
    values: dict[Any, np.ndarray] = {}
    for arg, leaf in zip(host.body.block.args, leaves, strict=True):
        dtype = dtype_of(arg.type)
        data = np.asarray(leaf)
        if dtype == BF16:  # as the reference rounds arguments to storage: through f32
            data = data.astype(np.float32)
        values[arg] = np.array(data.astype(dtype), order="C")
        assert values[arg].shape == tuple(arg.type.get_shape())
    for op in host.body.block.ops:
        if isinstance(op, K.AllocOp):
            dtype = dtype_of(op.result.type)
            fill = np.nan if dtype.kind == "f" or dtype == BF16 else -1
            values[op.result] = np.full(op.result.type.get_shape(), fill, dtype)
        elif isinstance(op, K.ViewOp):
            source = values[op.source]
            if op.index is not None:
                source = source[op.index.data]
            values[op.result] = source.reshape(op.result.type.get_shape())
            assert np.shares_memory(values[op.result], values[op.source])
        elif isinstance(op, K.LaunchOp):
            name = op.kernel.string_value()
            if name not in runners:
                runners[name] = interpreter.runner(kernels[name])
            runners[name]([values[b] for b in op.buffers])
        elif isinstance(op, K.ReturnOp):
            return [values[v] for v in op.values]
    raise AssertionError("no psk_kernel.return")


def corpus_case(path: str, entry: str, dims: str, realization: str) -> tuple[list[np.ndarray], Any]:
    fused, realized, module = lower(path, entry, dims, realization)
    env = {k: int(v) for k, v in (kv.split("=") for kv in dims.split(","))}
    inputs = make_inputs(find_entry(fused, entry), env, seed=0)
    leaves = [leaf for value in inputs for _, leaf in leaf_items(value)]

    def reference(m: ModuleOp) -> list[np.ndarray]:
        return [np.asarray(x, dtype=np.float64) for v in run_entry(m, entry, inputs, env) for _, x in leaf_items(v)]

    return launch(module, leaves, KernelInterpreter()), (module, leaves, reference, fused, realized)


def _scaled_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    assert len(got) == len(want)
    errors = [0.0]
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert np.isfinite(g.astype(np.float64)).all()
        errors.append(float(np.max(np.abs(g.astype(np.float64) - w) / np.maximum(np.abs(w), 1.0), initial=0.0)))
    return max(errors)


F64_CASES = [
    ("corpus/mlp.mlir", "MLP.apply", "B=4"),
    ("corpus/mlp.mlir", "mse", "B=4"),
    ("corpus/layernorm.mlir", "LayerNorm.apply", "B=2,T=8"),
    ("corpus/attention.mlir", "SelfAttention.apply", "B=2,T=8"),
    ("corpus/minigpt.mlir", "loss", "B=2,T=8"),
    ("corpus/minigpt.mlir", "adamw.step", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "loss", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "Block.apply", "B=2,T=8"),
]

F32_CASES = [
    ("corpus/mlp.mlir", "Linear.apply_out", "B=4"),
    ("corpus/mlp.mlir", "mse", "B=4"),
    ("corpus/layernorm.mlir", "LayerNorm.apply", "B=2,T=8"),
    ("corpus/attention.mlir", "SelfAttention.apply", "B=2,T=8"),
    ("corpus/minigpt.mlir", "MiniGPT.apply", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "loss", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "GPT.apply", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "adamw.step", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "Block.apply", "B=2,T=8"),
    ("corpus/nlp/gpt.mlir", "MLP.apply", "B=2,T=8"),
]


@pytest.mark.parametrize(("path", "entry", "dims"), F64_CASES, ids=[f"{p.split('/')[-1]}:{e}" for p, e, _ in F64_CASES])
def test_corpus_f64_matches_the_reference_interpreter(path: str, entry: str, dims: str) -> None:
    out, (_, _, reference, fused, _) = corpus_case(path, entry, dims, "f64")
    assert all(o.dtype == np.float64 for o in out)
    assert _scaled_error(out, reference(fused)) <= 1e-11


@pytest.mark.parametrize(("path", "entry", "dims"), F32_CASES, ids=[f"{p.split('/')[-1]}:{e}" for p, e, _ in F32_CASES])
def test_corpus_f32_is_as_accurate_as_numpy_in_f32(path: str, entry: str, dims: str) -> None:
    out, (_, _, reference, fused, realized) = corpus_case(path, entry, dims, "f32")
    assert all(o.dtype == np.float32 for o in out)
    exact = reference(fused)
    numpy_f32 = _scaled_error(reference(realized), exact)
    assert _scaled_error(out, exact) <= 4 * numpy_f32 + 4 * 2.0**-24


@pytest.mark.parametrize(
    ("path", "entry", "dims"),
    [("corpus/mlp.mlir", "MLP.apply", "B=4"), ("corpus/minigpt.mlir", "loss", "B=2,T=8")],
)
def test_corpus_bf16_matches_the_realized_reference(path: str, entry: str, dims: str) -> None:
    out, (_, _, reference, _, realized) = corpus_case(path, entry, dims, "bf16")
    assert _scaled_error([o.astype(np.float32) for o in out], reference(realized)) <= 2.0**-7


@pytest.mark.parametrize(
    ("path", "entry", "dims", "realization"),
    [("corpus/minigpt.mlir", "loss", "B=2,T=8", "f32"), ("corpus/attention.mlir", "SelfAttention.apply", "B=2,T=8", "f64"),
     ("corpus/mlp.mlir", "MLP.apply", "B=4", "bf16")],
)  # fmt: skip
def test_corpus_hoisting_changes_no_bit(path: str, entry: str, dims: str, realization: str) -> None:
    out, (module, leaves, _, _, _) = corpus_case(path, entry, dims, realization)
    plain = launch(module, leaves, KernelInterpreter(hoist=False))
    for a, b in zip(out, plain):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_gpt_loss_kernels_run_in_seconds() -> None:
    import time

    fused, _, module = lower("corpus/nlp/gpt.mlir", "loss", "B=2,T=8", "f32")
    inputs = make_inputs(find_entry(fused, "loss"), {"B": 2, "T": 8}, seed=1)
    leaves = [leaf for value in inputs for _, leaf in leaf_items(value)]
    launch(module, leaves, KernelInterpreter())  # imports, first calls
    start = time.process_time()
    (loss,) = launch(module, leaves, KernelInterpreter())
    assert time.process_time() - start < 3.0
    assert loss.dtype == np.float32 and loss.shape == () and np.isfinite(loss)
