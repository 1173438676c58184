"""Subnormal results without subnormal arithmetic: exp's last scaling, the softmax's division.

x86 cores finish a multiply or a division with a subnormal operand or result
in microcode, 6-15x slower than the ordinary instruction. A softmax row with a
wide range (attention scores of an untrained model) makes many: exp(x - max)
is subnormal below about -87 in f32, and so is its quotient by the row's sum.
`mathlib_spec.exp` and `mathlib_spec.divide` form those results from integer
and normal arithmetic instead. They must be the IEEE results, bit for bit:
the kernel interpreter divides with numpy (IEEE), and every layout and both
executors agree. Checked here on the numpy twin against IEEE, on the native
code against the twin, and on softmax kernels, native against the kernel
interpreter, on rows whose outputs are largely subnormal.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from presk import sizes
from presk.interp.kernel import KernelInterpreter
from presk.interp.mathlib import NumpyOps
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.lowering import mathlib_spec as spec
from presk.lowering.mathlib import emit_divide
from presk.pipeline import lower
from presk.plans import parse_plan

DTYPES = (np.float32, np.float64)
UINT = {np.float32: np.uint32, np.float64: np.uint64}


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: the same bits, or both nan (payloads are not part of the contract)."""
    it = UINT[got.dtype.type]
    return (got.view(it) == want.view(it)) | (np.isnan(got) & np.isnan(want))


def division_cases(dtype: type, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Numerators and divisors: subnormal numerators, normal ones with subnormal quotients,
    exact halves of the subnormal grid (ties), both signs, zeros, specials, and divisors
    outside [1, 2**p) where the ordinary division is taken."""
    info = np.finfo(dtype)
    mant = info.nmant
    it = UINT[dtype]
    n = 20_000
    subnormal = rng.integers(0, 1 << mant, n, dtype=np.uint64).astype(it).view(dtype)
    numerators = [subnormal, -subnormal, (info.tiny * np.exp2(rng.uniform(-2, 10, n))).astype(dtype)]
    divisors = [rng.uniform(1, 300, n).astype(dtype), rng.uniform(1, 300, n).astype(dtype),
                rng.uniform(1, 3000, n).astype(dtype)]  # fmt: skip
    odd = (2 * rng.integers(0, 1 << 20, n) + 1).astype(np.float64)
    smallest = float(info.smallest_subnormal)
    numerators += [(odd * smallest).astype(dtype), (3 * odd * smallest * 1024).astype(dtype)]
    divisors += [np.full(n, 2.0, dtype), np.full(n, 6.0 * 1024, dtype)]  # U / b = k + 1/2 exactly
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.tiny, smallest, 1.0, info.max,
                         0.5, 1.0 - info.epsneg, 2.0**mant, 2.0**mant - 1], dtype)  # fmt: skip
    a, b = np.meshgrid(specials, specials)
    numerators += [a.ravel(), subnormal[:1000]]
    divisors += [b.ravel(), rng.uniform(-4, 4, 1000).astype(dtype)]
    return np.concatenate(numerators), np.concatenate(divisors)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_the_subnormal_scaling_is_the_ieee_product(dtype: type) -> None:
    """y * 2**k onto the subnormal grid, as the two-factor IEEE product rounds it, for every k below the normal range."""
    fmt = spec.F32 if dtype is np.float32 else spec.F64
    o = NumpyOps(np.dtype(dtype))
    rng = np.random.default_rng(3)
    y = rng.uniform(np.sqrt(0.5), np.sqrt(2.0), 4000).astype(dtype)
    y = np.concatenate([y, np.nextafter(y, dtype(2)), np.array([1.0, np.sqrt(2.0), np.sqrt(0.5)], dtype)])
    lowest = int(np.floor(fmt.exp_lo / np.log(2.0))) - 1
    for k in range(lowest, -fmt.bias + 1):
        with np.errstate(under="ignore"):
            want = (y * dtype(2.0 ** (k // 2))) * dtype(2.0 ** (k - k // 2))
        got = spec._scale_subnormal(o, y, o.iconst(k))
        assert np.all(same_bits(got, want)), f"k={k}"
    assert np.any((want > 0) & (want < np.finfo(dtype).tiny))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_divide_is_the_ieee_quotient(dtype: type) -> None:
    a, b = division_cases(dtype, np.random.default_rng(4))
    with np.errstate(all="ignore"):
        got = spec.divide(NumpyOps(np.dtype(dtype)), a, b)
        want = np.divide(a, b)
    bad = np.flatnonzero(~same_bits(got, want))
    assert bad.size == 0, f"{bad.size} differ, first {a[bad[0]]!r} / {b[bad[0]]!r}: {got[bad[0]]!r} != {want[bad[0]]!r}"
    tiny = (np.abs(want) < np.finfo(dtype).tiny) & (want != 0)
    assert tiny.sum() > 50_000  # the subnormal quotients the method is for


Binary = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


@pytest.fixture(scope="module")
def native_divide() -> Iterator[Binary]:
    """native(a, b, lanes): `emit_divide` JIT-compiled in a z[i] = a[i] / b[i] loop, scalar or in vectors."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("subnormal_divide_test")
    module.triple = llvm.get_process_triple()
    i64 = ir.IntType(64)
    names = {}
    for dtype in DTYPES:
        element = ir.FloatType() if dtype is np.float32 else ir.DoubleType()
        for lanes in (1, 512 // (8 * np.dtype(dtype).itemsize)):
            name = f"divide_{np.dtype(dtype).name}_x{lanes}"
            names[np.dtype(dtype), lanes] = name
            ptr = element.as_pointer()
            fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64]), name)
            entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
            b = ir.IRBuilder(entry)
            b.branch(body)
            b.position_at_end(body)
            i = b.phi(i64)
            i.add_incoming(i64(0), entry)
            ty = element if lanes == 1 else ir.VectorType(element, lanes)
            at = [b.bitcast(b.gep(arg, [i]), ty.as_pointer()) for arg in fn.args[:3]]
            b.store(emit_divide(b, b.load(at[0], align=1), b.load(at[1], align=1)), at[2], align=1)
            following = b.add(i, i64(lanes))
            i.add_incoming(following, body)
            b.cbranch(b.icmp_signed("<", following, fn.args[3]), body, done)
            b.position_at_end(done)
            b.ret_void()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True
    )
    passes = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3))
    passes.getModulePassManager().run(parsed, passes)
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    kernels = {key: signature(engine.get_function_address(name)) for key, name in names.items()}

    def run(a: np.ndarray, b: np.ndarray, lanes: int) -> np.ndarray:
        size = len(a) - len(a) % lanes
        a, b = np.ascontiguousarray(a[:size]), np.ascontiguousarray(b[:size])
        out = np.empty_like(a)
        kernels[a.dtype, lanes](a.ctypes.data, b.ctypes.data, out.ctypes.data, size)
        return out

    yield run
    del engine


@pytest.mark.parametrize("lanes", ["scalar", "vector"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_native_divide_is_the_ieee_quotient(native_divide: Binary, dtype: type, lanes: str) -> None:
    a, b = division_cases(dtype, np.random.default_rng(5))
    width = 1 if lanes == "scalar" else 512 // (8 * np.dtype(dtype).itemsize)
    got = native_divide(a, b, width)
    with np.errstate(all="ignore"):
        want = np.divide(a[: len(got)], b[: len(got)])
    assert np.all(same_bits(got, want))


SOFTMAX = """
!S    = !psk_core.tensor<[heads: H, seq: T, seq2: T]>
!Mask = !psk_core.index<[seq: T, seq2: T], 2>
func.func @masked(%x: !S) -> !S {
  %m = psk_core.causal_mask : !Mask
  %y = psk_core.softmax %x [seq2] mask %m : !S
  func.return %y : !S
}
func.func @plain(%x: !S) -> !S {
  %y = psk_core.softmax %x [seq2] : !S
  func.return %y : !S
}
"""


@pytest.fixture(scope="module")
def runners() -> Iterator[dict[str, Any]]:
    with NativeRunner() as native:
        yield {"native": native, "kernel": KernelInterpreter().runner}


@pytest.mark.parametrize("wider", [1.0, 10.0], ids=["subnormals", "mostly-zeros"])
@pytest.mark.parametrize("passes", [2, 3])
@pytest.mark.parametrize("entry", ["masked", "plain"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_wide_softmax_rows_native_equal_the_kernel_interpreter(
    runners: dict[str, Any], dtype: type, entry: str, passes: int, wider: float
) -> None:
    """Rows spread wide enough that many outputs are subnormal or zero: the same bits on both executors.

    Ten times wider, most exponentials are exactly 0 (below the format's `exp_lo`), so most vectors take
    the exponential's quick form with zero lanes and the division's `fdiv` with zero numerators."""
    parsed = parse_module(presk_context(), SOFTMAX, "softmax.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, {"H": 2, "T": 40})
    realization = "f32" if dtype is np.float32 else "f64"
    plan = parse_plan({"realization": realization, "layout": {f"{entry}/%y": {"passes": passes, "split": "none"}}}, "test")
    kernels = lower(parsed.module, entry, env, plan)
    spread = (60.0 if dtype is np.float32 else 250.0) * wider  # exp(x - max) spans the subnormal range
    x = (np.random.default_rng(6).standard_normal((2, 40, 40)) * spread).astype(dtype)
    results = {}
    for name, runner in runners.items():
        host = HostProgram(kernels.clone(), runner)
        (results[name],) = (np.array(leaf, copy=True) for leaf in host([x]))
    native, interpreted = results["native"], results["kernel"]
    assert native.dtype == dtype
    assert native.tobytes() == interpreted.tobytes()
    subnormal = (native > 0) & (native < np.finfo(dtype).tiny)
    assert subnormal.sum() > (50 if wider == 1.0 else 0)
    if wider > 1.0:
        assert (native == 0).mean() > 0.5


def test_the_softmax_division_takes_the_exact_method_only_where_a_vector_needs_it() -> None:
    """The normalising loop runs as vectors that divide with `fdiv` and branch to the out-of-line exact method."""
    from presk.lowering.llvm.translator import translate_kernel
    from presk.dialects.psk_kernel import KernelOp
    from presk.target import target_machine

    parsed = parse_module(presk_context(), SOFTMAX, "softmax.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, {"H": 2, "T": 40})
    plan = parse_plan({"realization": "f32", "layout": {"plain/%y": {"passes": 2, "split": "none"}}}, "test")
    kernels = lower(parsed.module, "plain", env, plan)
    (softmax,) = [op for op in kernels.walk() if isinstance(op, KernelOp) and op.sym_name.data == "softmax"]
    lanes = target_machine().vector_bits // 32
    ir_text = translate_kernel(softmax)
    exact = f"presk.divide.exact.v{lanes}f32"
    assert f'define internal <{lanes} x float> @"{exact}"' in ir_text
    assert f'call <{lanes} x float> @"{exact}"' in ir_text
    assert f"fdiv <{lanes} x float>" in ir_text
    assert ".divide.body" in ir_text
