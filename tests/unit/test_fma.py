"""presk.interp.fma against the hardware: `llvm.fma` JIT-compiled for this CPU.

The emulation must be bit-for-bit the IEEE fma (one rounding, ties to even),
including the cases where naive schemes fail: exact ties and near-ties of the
product, catastrophic cancellation, subnormal results, products that overflow
while the sum does not, and the sign of zero. NaN payloads are not compared
(only "is nan"): LLVM does not promise them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvmlite import binding as llvm
from llvmlite import ir

from presk.interp.fma import fma, round_to_odd_sum

Fma = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
DTYPES = [np.float32, np.float64]
INT = {np.float32: np.int32, np.float64: np.int64}
PRECISION = {np.float32: 24, np.float64: 53}


def _fma_loop(module: ir.Module, name: str, element: ir.Type) -> None:
    """void name(T* a, T* b, T* c, T* out, i64 n): out[i] = llvm.fma(a[i], b[i], c[i])."""
    i64 = ir.IntType(64)
    ptr = element.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, ptr, i64]), name)
    a, b, c, out, n = fn.args
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    builder = ir.IRBuilder(entry)
    builder.cbranch(builder.icmp_signed(">", n, i64(0)), loop, done)
    builder.position_at_end(loop)
    i = builder.phi(i64)
    i.add_incoming(i64(0), entry)
    args = [builder.load(builder.gep(p, [i])) for p in (a, b, c)]
    builder.store(builder.fma(*args), builder.gep(out, [i]))
    step = builder.add(i, i64(1))
    i.add_incoming(step, loop)
    builder.cbranch(builder.icmp_signed("<", step, n), loop, done)
    builder.position_at_end(done)
    builder.ret_void()


@pytest.fixture(scope="module")
def hardware() -> Iterator[Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]]:
    """The CPU's fma over arrays (broadcast), through a tiny MCJIT module."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("fma_reference")
    module.triple = llvm.get_process_triple()
    _fma_loop(module, "fma_f32", ir.FloatType())
    _fma_loop(module, "fma_f64", ir.DoubleType())
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(  # owned by the engine
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2, jit=True
    )
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4, ctypes.c_int64)
    kernels = {
        np.dtype(np.float32): signature(engine.get_function_address("fma_f32")),
        np.dtype(np.float64): signature(engine.get_function_address("fma_f64")),
    }

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        a, b, c = (np.ascontiguousarray(v) for v in np.broadcast_arrays(a, b, c))
        out = np.empty_like(a)
        kernels[a.dtype](a.ctypes.data, b.ctypes.data, c.ctypes.data, out.ctypes.data, a.size)
        return out

    yield run
    del engine


def assert_same(got: np.ndarray, want: np.ndarray, inputs: tuple[np.ndarray, ...]) -> None:
    """Equal bits (so +0 != -0), or both nan; on failure show the first culprits."""
    itype = INT[want.dtype.type]
    same = (got.view(itype) == want.view(itype)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        operands = [np.broadcast_to(v, got.shape).reshape(-1) for v in inputs]
        rows = [
            f"fma({', '.join(float(v[i]).hex() for v in operands)}) = {float(got.flat[i]).hex()},"
            f" hardware {float(want.flat[i]).hex()}"
            for i in np.flatnonzero(~same)[:5]
        ]
        pytest.fail(f"{(~same).sum()} of {same.size} differ:\n" + "\n".join(rows))


def _check(hardware: Fma, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    assert_same(fma(a, b, c), hardware(a, b, c), (a, b, c))


def _random_bits(rng: np.random.Generator, dtype: type, n: int) -> np.ndarray:
    itype = INT[dtype]
    return rng.integers(np.iinfo(itype).min, np.iinfo(itype).max, n, dtype=itype, endpoint=True).view(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_bit_patterns(hardware: Fma, dtype: type) -> None:
    """Every class at once (f64: mostly the exact fallback, hence fewer)."""
    rng = np.random.default_rng(1)
    n = 200_000 if dtype is np.float32 else 20_000
    _check(hardware, *(_random_bits(rng, dtype, n) for _ in range(3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_normal_range_operands(hardware: Fma, dtype: type) -> None:
    """Operands of moderate exponents: the vectorised fast path of f64."""
    rng = np.random.default_rng(2)
    n = 100_000
    mant = [rng.uniform(-2, 2, n) for _ in range(3)]
    exps = [rng.integers(-60, 60, n) for _ in range(2)]
    with np.errstate(over="ignore"):  # f32: some c overflow to inf, fine
        a = np.ldexp(mant[0], exps[0]).astype(dtype)
        b = np.ldexp(mant[1], exps[1]).astype(dtype)
        c = np.ldexp(mant[2], exps[0] + exps[1] + rng.integers(-70, 70, n)).astype(dtype)
    _check(hardware, a, b, c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zeros_among_normal_range_operands(hardware: Fma, dtype: type) -> None:
    """Zeros of both signs in a or b, beside operands of moderate exponents (f64's fast path, zeros standing in
    as 1), and against them infinities and nans (their product nan) and c of every sign of zero."""
    rng = np.random.default_rng(5)
    n = 50_000
    a, b, c = (rng.uniform(-2, 2, n) * 2.0 ** rng.integers(-40, 40, n) for _ in range(3))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    a[rng.random(n) < 0.2] = 0.0
    a[rng.random(n) < 0.1] = -0.0
    b[rng.random(n) < 0.2] = -0.0
    c[rng.random(n) < 0.1] = 0.0
    c[rng.random(n) < 0.1] = -0.0
    zero_against_special = np.flatnonzero(a == 0)[:200]
    b[zero_against_special] = rng.choice(specials[2:], zero_against_special.size)
    _check(hardware, a.astype(dtype), b.astype(dtype), c.astype(dtype))
    # The same operands without the specials: every element on the fast path, zeros only.
    b[~np.isfinite(b)] = 1.5
    _check(hardware, a.astype(dtype), b.astype(dtype), c.astype(dtype))


TIE_SCALES = [(np.float32, s) for s in (0, -100, -140, -150, 100, 124)] + [
    (np.float64, s) for s in (0, -900, -1000, -1060, -1076, 900, 1020)
]


@pytest.mark.parametrize(("dtype", "scale"), TIE_SCALES)
def test_ties_and_near_ties(hardware: Fma, dtype: type, scale: int) -> None:
    """a, b with (p+2)/2-bit significands in [1.5, 2): a*b has p+1 bits, so half
    the time its rounding is an exact tie; c = 0 or a nudge either way (down to
    far below the last bit) decides it. Scaled to put the result in every range
    the type has (subnormal, huge)."""
    p = PRECISION[dtype]
    rng = np.random.default_rng(3)
    h = (p + 2) // 2
    n = 20_000
    k1, k2 = (rng.integers(1 << (h - 2), 1 << (h - 1), n) for _ in range(2))
    a = np.ldexp(1.0 + k1 / 2.0 ** (h - 1), scale // 2).astype(dtype)
    b = np.ldexp(1.0 + k2 / 2.0 ** (h - 1), scale - scale // 2).astype(dtype)
    half_ulp = np.ldexp(1.0, scale - p + 1)  # of a*b, which lies in [2.25, 4) * 2**scale
    nudge = rng.choice(np.array([0.0, 1.0, -1.0, 2.0**-20, -(2.0**-20), 0.5, -0.5]), n) * half_ulp
    c = nudge.astype(dtype)  # may become subnormal or zero at the bottom: both interesting
    _check(hardware, a, b, c)
    _check(hardware, a, -b, c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cancellation(hardware: Fma, dtype: type) -> None:
    """c = -(a*b) rounded, give or take a few ulps: the result is the product's
    rounding error (plus the nudge), which only an exact fma gets right."""
    rng = np.random.default_rng(4)
    n = 100_000
    a = rng.standard_normal(n).astype(dtype)
    b = np.ldexp(rng.standard_normal(n), rng.integers(-30, 30, n)).astype(dtype)
    p = (a * b).astype(dtype)
    ulps = rng.integers(-3, 4, n)
    c = -p
    for _ in range(3):
        c = np.where(ulps > 0, np.nextafter(c, np.inf), np.where(ulps < 0, np.nextafter(c, -np.inf), c))
        ulps = ulps - np.sign(ulps)
    _check(hardware, a, b, c.astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_products(hardware: Fma, dtype: type) -> None:
    """Products that overflow or underflow on their own, while c brings the sum
    back (or not); huge and subnormal operands everywhere."""
    info = np.finfo(dtype)
    rng = np.random.default_rng(5)
    n = 20_000
    top, bottom = info.maxexp, info.minexp - PRECISION[dtype] + 1
    ea = rng.integers(bottom, top, n)
    eb = rng.integers(bottom, top, n)
    big = np.array([info.max, -info.max, info.max / 2, -info.max / 2, info.tiny, -info.tiny], dtype=dtype)
    with np.errstate(over="ignore"):
        a = np.ldexp(rng.uniform(1, 2, n), ea).astype(dtype)
        b = np.ldexp(rng.uniform(-2, 2, n), eb - rng.integers(0, 2, n) * (ea + eb - top)).astype(dtype)
        c = np.where(rng.random(n) < 0.5, rng.choice(big, n), -(a * b)).astype(dtype)
    _check(hardware, a, b, c)


def _specials(dtype: type) -> np.ndarray:
    info = np.finfo(dtype)
    sub = info.smallest_subnormal
    values = [0.0, np.inf, np.nan, 1.0, 3.0, 0.1, info.max, info.tiny, sub, 2 * sub, info.tiny - sub,
              info.max * 0.75, np.sqrt(info.max), np.sqrt(info.tiny), np.sqrt(sub), info.eps, 2.0**-60]
    return np.array([s * v for v in values for s in (1.0, -1.0)], dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_cross_product(hardware: Fma, dtype: type) -> None:
    """Every triple of specials: zeros of both signs, infinities, nan, extremes."""
    s = _specials(dtype)
    a, b, c = (v.reshape(-1) for v in np.meshgrid(s, s, s, indexing="ij"))
    _check(hardware, a, b, c)


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32), st.floats(width=32), st.floats(width=32))
def test_hypothesis_f32(hardware: Fma, a: float, b: float, c: float) -> None:
    _check(hardware, *(np.array([v], dtype=np.float32) for v in (a, b, c)))


@settings(max_examples=300, deadline=None)
@given(st.floats(), st.floats(), st.floats())
def test_hypothesis_f64(hardware: Fma, a: float, b: float, c: float) -> None:
    _check(hardware, *(np.array([v]) for v in (a, b, c)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes", [((48, 1), (1, 40), (48, 40)), ((6, 1, 8, 1), (1, 1, 1, 32), (6, 1, 8, 32)), ((1,), (900,), (1,))]
)
def test_operands_of_one_type_broadcast_as_the_interpreter_gives_them(
    hardware: Fma, dtype: type, shapes: tuple[tuple[int, ...], ...]
) -> None:
    """A tile's column against its row and the sums (three arrays of one type and different shapes, which
    the emulation broadcasts as it goes): the bits of the operands broadcast first, random bit patterns
    (the exact fallback's cases among them) and the normal range alike."""
    rng = np.random.default_rng(sum(map(len, shapes)))
    for operands in (
        [_random_bits(rng, dtype, int(np.prod(shape))).reshape(shape) for shape in shapes],
        [rng.standard_normal(shape).astype(dtype) for shape in shapes],
    ):
        got = fma(*operands)
        broadcast = [np.ascontiguousarray(v) for v in np.broadcast_arrays(*operands)]
        assert got.shape == broadcast[0].shape and got.dtype == dtype
        assert_same(got, hardware(*broadcast), tuple(broadcast))


def test_dtype_broadcasting_and_scalars() -> None:
    """Python floats are weak (a float32 stays float32); 0-d gives a scalar."""
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    out = fma(x, 2.0, np.float32(1.0))
    assert out.dtype == np.float32 and out.tolist() == [3.0, 5.0, 7.0]
    col = fma(np.ones((3, 1)), np.arange(4.0), 0.5)
    assert col.shape == (3, 4) and col.dtype == np.float64
    scalar = fma(np.float64(0.1), 10.0, -1.0)  # 0.1 is 0.1 + 2**-54/10: naive gives 0.0
    assert isinstance(scalar, np.float64) and scalar == 2.0**-54
    with pytest.raises(TypeError):
        fma(np.float16(1.0), np.float16(2.0), np.float16(3.0))


def test_round_to_odd_sum() -> None:
    """Exact sums are untouched; inexact ones land on the odd neighbour."""
    one = np.array([1.0])
    assert round_to_odd_sum(one, np.array([2.0**-52]))[0] == 1.0 + 2.0**-52
    assert round_to_odd_sum(one, np.array([2.0**-60]))[0] == 1.0 + 2.0**-52  # up to odd
    assert round_to_odd_sum(one, np.array([-(2.0**-60)]))[0] == 1.0 - 2.0**-53  # down to odd
    assert round_to_odd_sum(one + 2.0**-52, np.array([2.0**-60]))[0] == 1.0 + 2.0**-52  # already odd
