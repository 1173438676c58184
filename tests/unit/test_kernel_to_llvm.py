"""PSK-Kernel → LLVM IR → native code: numerics, the ABI's range, buffer checks, splits, vectorisation."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, bf16, f32, f64, i64

from presk.cost.kernel_cost import SPLIT_THRESHOLD, default_split, weighted_operations
from presk.target import target_machine
from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import WORKERS, KernelOp
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit import executor
from presk.jit.engine import JitEngine
from presk.jit.native import NativeRunner, dtype_of
from presk.analysis import launch_iterations, split_loop, written_buffers
from presk.lowering.kernel_to_llvm import translate_kernel, translate_module
from presk.pipeline import apply_layouts
from presk.lowering.realize_to_kernel import LowerToKernel
from presk.passes.bind import BindSizes
from presk.passes.fuse import FuseElementwise
from presk.passes.realize import RealizeSites

BF16 = np.dtype(ml_dtypes.bfloat16)
GPT = Path(__file__).resolve().parents[2] / "corpus" / "nlp" / "gpt.mlir"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def engine() -> JitEngine:
    return JitEngine(disk_cache=False)


@pytest.fixture(scope="module")
def runner(engine: JitEngine):
    with NativeRunner(engine) as native:
        yield native


def parse_kernels(text: str) -> dict[str, KernelOp]:
    module = parse_module(presk_context(), text, "test.mlir").module
    module.verify()
    return {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, KernelOp)}


def parse_kernel(text: str) -> KernelOp:
    (kernel,) = parse_kernels(text).values()
    return kernel


def map_kernel(n: int, source: str, target: str, body: str, name: str = "k", inputs: int = 1) -> KernelOp:
    """`out[i] = body(%a[i], %b[i], ...)` over n elements; the body ends by defining %r."""
    names = ["%a", "%b", "%c"][:inputs]
    args = ", ".join(f"{v}: memref<{n}x{source}>" for v in names)
    loads = "\n".join(f"    {v}v = memref.load {v}[%i] : memref<{n}x{source}>" for v in names)
    return parse_kernel(f"""
psk_kernel.kernel @{name}({args}, %out: memref<{n}x{target}>) "test/%1" {{
  %c0 = arith.constant 0 : index
  %n = arith.constant {n} : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {{
{loads}
{body}
    memref.store %r, %out[%i] : memref<{n}x{target}>
  }} {{psk_kernel.parallel}}
}}""")


@cache
def gpt_source() -> ModuleOp:
    module = parse_module(presk_context(), GPT.read_text(), str(GPT)).module
    module.verify()
    return module


@cache
def lowered(entry: str, realization: str) -> tuple[ModuleOp, dict[str, KernelOp]]:
    """gpt.mlir's `entry` at B=2, T=8, lowered to PSK-Kernel in-process."""
    module = gpt_source().clone()
    ctx = presk_context()
    for p in (
        BindSizes(dims="B=2,T=8"),
        FuseElementwise(),
        RealizeSites(realization=realization),
        LowerToKernel(entry=entry),
    ):
        p.apply(ctx, module)
    apply_layouts(module)
    return module, {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, KernelOp)}


def assert_native_is_the_interpreter(runner: NativeRunner, kernel: KernelOp, seed: int) -> None:
    """The kernel's buffers after a native call are the kernel interpreter's, byte for byte (random inputs)."""
    from presk.interp.kernel import KernelInterpreter

    native = random_inputs(kernel, seed)
    interpreted = [a.copy() for a in native]
    runner(kernel)(native)
    KernelInterpreter().runner(kernel)(interpreted)
    assert [a.tobytes() for a in native] == [a.tobytes() for a in interpreted]


def random_inputs(kernel: KernelOp, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for t in kernel.buffers:
        dtype = dtype_of(t)
        shape = tuple(t.get_shape())
        if dtype == np.int64:
            arrays.append(np.asarray(rng.integers(0, 8, shape), dtype=np.int64))  # valid ids and masks
        else:
            arrays.append(np.asarray(rng.standard_normal(shape) * 3).astype(dtype))
    return arrays


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


# --------------------------------------------------------------------------- IR shape


@pytest.mark.target
def test_ir_follows_the_abi_and_carries_the_target(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f32")
    ir = translate_kernel(kernels["add"], target_machine())
    assert re.search(r'define void @"?add"?\(ptr %"?args"?, i64 %"?lo"?, i64 %"?hi"?\)', ir)
    assert f'"target-cpu"="{target_machine().cpu_name}"' in ir
    if target_machine().vector_bits >= 512:
        assert '"prefer-vector-width"="512"' in ir
    for flag in ("fast", "contract", "reassoc", "nnan", "ninf", "afn", "arcp", "nsz"):
        assert not re.search(rf"\bf(add|sub|mul|div|neg)\b[^\n]*\b{flag}\b", ir)
    assert "!alias.scope" in ir and "!noalias" in ir
    conservative = translate_kernel(kernels["add"], target_machine(), assume_disjoint=False)
    assert "!alias.scope" not in conservative


def test_translate_module_has_every_kernel() -> None:
    module, kernels = lowered("loss", "f32")
    ir = translate_module(module, target_machine())
    for name in kernels:
        assert re.search(rf'define void @"?{name}"?\(', ir), name


def test_split_loop_and_iterations() -> None:
    _, kernels = lowered("loss", "f32")
    assert launch_iterations(kernels["add"]) == 2  # the outermost parallel loop, B = 2
    assert split_loop(kernels["cross_entropy"]) is None  # a reduction at the top: one iteration
    assert launch_iterations(kernels["cross_entropy"]) == 1
    assert launch_iterations(kernels["div"]) == 1  # no loop at all
    assert written_buffers(kernels["add"]) == {2}
    assert written_buffers(kernels["dot_6"]) == {2}


# --------------------------------------------------------------------------- numerics


def test_f64_kernels_match_numpy_in_the_same_order(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f64")
    x, b, out = random_inputs(kernels["add"], 1)
    runner(kernels["add"])([x, b, out])
    assert np.array_equal(bits(out), bits(x + b))

    x, mean = random_inputs(kernels["mean"], 2)
    runner(kernels["mean"])([x, mean])
    expected = np.empty((2, 8))
    for i in range(2):
        for j in range(8):
            s = 0.0
            for v in x[i, j]:  # sequential, increasing index
                s += float(v)
            expected[i, j] = s / 64.0
    assert np.array_equal(bits(mean), bits(expected))

    # Contraction with a [1, 8] register tile: terms added in increasing k, each with one fma.
    x, w, y = random_inputs(kernels["dot"], 3)
    runner(kernels["dot"])([x, w, y])
    ref = np.zeros((2, 8, 64))
    for k in range(64):
        ref = _fma(x[:, :, k : k + 1], w[k][None, None, :], ref)
    assert np.array_equal(bits(y), bits(ref))


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    from presk.interp.fma import fma

    return fma(a, b, c)


def test_f32_softmax_and_cross_entropy_are_close_to_numpy(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f32")
    scores, mask, out = random_inputs(kernels["softmax"], 4)
    mask[...] = np.tril(np.ones((8, 8), dtype=np.int64))
    runner(kernels["softmax"])([scores, mask, out])
    s = np.where(mask == 1, scores.astype(np.float64), -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)

    logits, targets, loss = random_inputs(kernels["cross_entropy"], 5)
    targets[...] = np.arange(16).reshape(2, 8) * 5 % 92
    runner(kernels["cross_entropy"])([logits, targets, loss])
    z = logits.astype(np.float64)
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    picked = np.take_along_axis(z, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss[()], (lse - picked).mean(), rtol=1e-5)


def _special_f32() -> np.ndarray:
    specials = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,  # quiet/signalling nans, both signs
        0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F808000, 0x7FC0FFFF, 0xFF80C000,  # payloads
        0x00000001, 0x80000001, 0x007FFFFF, 0x00008000, 0x00018000, 0x0000FFFF,  # subnormals
        0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF,  # normal limits, round to inf
        0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # ties to even, just above/below
    ]
    ties = (np.arange(1 << 16, dtype=np.uint32) << 16) | 0x8000  # every tie
    rng = np.random.default_rng(7)
    return np.concatenate([np.array(specials, dtype=np.uint32), ties, rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)])


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # the NaN patterns
def test_bf16_truncation_matches_ml_dtypes_bit_for_bit(runner: NativeRunner) -> None:
    x = _special_f32().view(np.float32)
    n = x.size
    truncate = runner(map_kernel(n, "f32", "bf16", "    %r = arith.truncf %av : f32 to bf16"))
    out = np.empty(n, BF16)
    truncate([x, out])
    with np.errstate(invalid="ignore"):
        expected = x.astype(BF16)
    assert np.array_equal(bits(out), bits(expected))
    # every nan becomes sign | 0x7fc0, whatever its payload
    nan = np.isnan(x)
    assert set(bits(out)[nan].tolist()) == {0x7FC0, 0xFFC0}

    # f64 -> bf16 is one rounding, as the kernel interpreter does it. ml_dtypes rounds twice
    # (f64 -> f32 -> bf16), so it is the reference only where that changes nothing.
    from presk.interp.kernel import truncate_f64_to_bf16

    rng = np.random.default_rng(8)
    y = np.concatenate([
        x.astype(np.float64),
        np.array([1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8 + 2.0**-30), 3.4e38, 1e300, -1e300, 1e-300, 2.0**-133]),
        rng.standard_normal(4096) * np.exp2(rng.integers(-140, 130, 4096)),
    ])
    truncate64 = runner(map_kernel(y.size, "f64", "bf16", "    %r = arith.truncf %av : f64 to bf16"))
    out = np.empty(y.size, BF16)
    truncate64([y, out])
    with np.errstate(invalid="ignore", over="ignore"):
        expected = truncate_f64_to_bf16(y)
        twice = y.astype(BF16)
    assert np.array_equal(bits(out), bits(expected))
    differ = bits(twice) != bits(expected)
    assert differ.sum() >= 2 and np.all(np.abs(y[differ]) < np.inf)  # the double-rounding cases
    assert bits(out)[y.size - 4096 - 7] == 0x3F81  # 1 + 2**-8 + 2**-30 rounds up to 1 + 2**-7


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # the NaN patterns
def test_bf16_extension_is_exact_for_every_pattern(runner: NativeRunner) -> None:
    patterns = np.arange(1 << 16, dtype=np.uint16).view(BF16)
    extend = runner(map_kernel(1 << 16, "bf16", "f32", "    %r = arith.extf %av : bf16 to f32"))
    out = np.empty(1 << 16, np.float32)
    extend([patterns, out])
    assert np.array_equal(bits(out), np.arange(1 << 16, dtype=np.uint32) << 16)
    assert np.array_equal(bits(out), bits(patterns.astype(np.float32)))

    extend64 = runner(map_kernel(1 << 16, "bf16", "f64", "    %r = arith.extf %av : bf16 to f64"))
    wide = np.empty(1 << 16, np.float64)
    extend64([patterns, wide])
    expected = patterns.astype(np.float64)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(wide), nan)
    assert np.array_equal(bits(wide)[~nan], bits(expected)[~nan])


@pytest.mark.parametrize("element", ["f32", "f64"])
def test_maximumf_is_ieee_maximum(runner: NativeRunner, element: str) -> None:
    dtype = np.float32 if element == "f32" else np.float64
    nan, inf = np.nan, np.inf
    pairs = [
        (0.0, -0.0), (-0.0, 0.0), (-0.0, -0.0), (0.0, 0.0),
        (nan, 1.0), (1.0, nan), (nan, -inf), (-inf, nan), (nan, nan),
        (-inf, -1.0), (inf, 1.0), (1.0, 2.0), (-3.0, -2.0), (5e-324 if element == "f64" else 1e-45, -0.0),
    ]
    pairs = pairs * 6  # 84 elements: full vectors and a scalar tail
    a = np.array([p[0] for p in pairs], dtype=dtype)
    b = np.array([p[1] for p in pairs], dtype=dtype)
    kernel = map_kernel(len(pairs), element, element, f"    %r = arith.maximumf %av, %bv : {element}", inputs=2)
    out = np.empty(len(pairs), dtype)
    runner(kernel)([a, b, out])
    expected = np.maximum(a, b)  # numpy's maximum propagates nan; fix its signed zeros
    zeros = (a == 0) & (b == 0)
    expected[zeros] = np.where(np.signbit(a[zeros]) & np.signbit(b[zeros]), -0.0, 0.0)
    assert np.array_equal(np.isnan(out), np.isnan(expected))
    ok = ~np.isnan(expected)
    assert np.array_equal(bits(out)[ok], bits(expected)[ok])


@pytest.mark.parametrize("element", ["f32", "f64"])
def test_fma_rounds_once_and_mul_add_is_not_contracted(runner: NativeRunner, element: str) -> None:
    dtype = np.float32 if element == "f32" else np.float64
    e = 12 if element == "f32" else 27
    n = 40
    a = np.full(n, 1 + 2.0**-e, dtype)  # a*a = 1 + 2**(1-e) + 2**-2e: the last term rounds away
    b = a.copy()
    c = np.full(n, -(1 + 2.0 ** (1 - e)), dtype)
    fused = runner(map_kernel(n, element, element, f"    %r = math.fma %av, %bv, %cv : {element}", "fma", 3))
    out = np.empty(n, dtype)
    fused([a, b, c, out])
    assert np.all(out == dtype(2.0 ** (-2 * e)))  # exact: a*b + c = 2**-2e
    separate = runner(map_kernel(n, element, element, f"""    %p = arith.mulf %av, %bv : {element}
    %r = arith.addf %p, %cv : {element}""", "muladd", 3))
    separate([a, b, c, out])
    assert np.all(out == 0)  # a*b rounds to 1 first


def test_integer_and_compare_ops(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f32")
    (mask,) = random_inputs(kernels["causal_mask"])
    runner(kernels["causal_mask"])([mask])
    assert np.array_equal(mask, np.tril(np.ones((8, 8), dtype=np.int64)))
    table, ids, out = random_inputs(kernels["gather"], 6)
    ids[...] = np.arange(16).reshape(2, 8) * 7 % 92
    runner(kernels["gather"])([table, ids, out])
    assert np.array_equal(out, table[ids])


def test_native_equals_the_kernel_interpreter_bit_for_bit(runner: NativeRunner) -> None:
    """bf16 storage, f32 arithmetic, exp/log/erf, fma contractions: every loss kernel, every bit."""
    from presk.interp.kernel import KernelInterpreter

    interpreter = KernelInterpreter()
    _, kernels = lowered("loss", "bf16")
    for name, kernel in kernels.items():
        native = random_inputs(kernel, 13)
        interpreted = [a.copy() for a in native]
        runner(kernel)(native)
        interpreter.runner(kernel)(interpreted)
        for a, b in zip(native, interpreted):
            assert a.tobytes() == b.tobytes(), name


# --------------------------------------------------------------------------- the ABI's range


def test_lo_hi_select_iterations_of_the_split_loop(engine: JitEngine) -> None:
    _, kernels = lowered("loss", "f64")
    kernel = kernels["add"]
    compiled = engine.kernel(translate_kernel(kernel), "add")
    x, b, _ = random_inputs(kernel, 9)
    out = np.full((2, 8, 64), -1.0)
    table = _table([x, b, out])
    compiled(table, 1, 2)
    assert np.all(out[0] == -1.0) and np.array_equal(out[1], x[1] + b)
    compiled(table, -5, 100)  # clamped to [0, 2)
    assert np.array_equal(out, x + b)

    single = kernels["div"]  # no loop: runs when 0 is in [lo, hi)
    call = engine.kernel(translate_kernel(single), "div")
    scalar = np.full((), -1.0)
    call(_table([scalar]), 1, 2)
    assert scalar[()] == -1.0
    call(_table([scalar]), 0, 1)
    assert scalar[()] == 1 / np.sqrt(32.0)


@pytest.mark.parametrize("lb, ub, step", [(0, 10, 1), (3, 10, 3), (0, 9, 3), (2, 3, 5), (5, 5, 1), (7, 3, 1)])
def test_split_loop_with_general_bounds(engine: JitEngine, lb: int, ub: int, step: int) -> None:
    kernel = parse_kernel(f"""
psk_kernel.kernel @iota(%o: memref<12xi64>) "test/%1" {{
  %lb = arith.constant {lb} : index
  %ub = arith.constant {ub} : index
  %st = arith.constant {step} : index
  scf.for %i = %lb to %ub step %st {{
    %v = arith.index_cast %i : index to i64
    memref.store %v, %o[%i] : memref<12xi64>
  }} {{psk_kernel.parallel}}
}}""")
    n = launch_iterations(kernel)
    induction = list(range(lb, ub, step))
    assert n == len(induction)
    call = engine.kernel(translate_kernel(kernel), "iota")
    for lo, hi in [(0, n), (1, n), (0, n - 1), (-3, 100), (1, 2)]:
        out = np.full(12, -1, np.int64)
        call(_table([out]), lo, hi)
        expected = np.full(12, -1, np.int64)
        for i in induction[max(lo, 0) : max(min(hi, n), 0)]:
            expected[i] = i
        assert np.array_equal(out, expected), (lo, hi)


def _table(arrays: list[np.ndarray]) -> int:
    import ctypes

    table = (ctypes.c_void_p * len(arrays))(*(a.ctypes.data for a in arrays))
    _table.keep.append(table)  # type: ignore[attr-defined]
    return ctypes.addressof(table)


_table.keep = []  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- buffers


def test_bad_buffers_are_refused_before_the_call(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f32")
    call = runner(kernels["add"])
    x, b, out = random_inputs(kernels["add"])
    for arrays, message in [
        ([x, b], "takes 3 buffers"),
        ([x, b[:4], out], "expected shape (8, 64) float32"),
        ([x, b.astype(np.float64), out], "got shape (8, 64) float64"),
        ([x, np.ones((8, 128), np.float32)[:, ::2], out], "C-contiguous"),
        ([x, b, out[:, :, ::1].copy().astype(BF16)], "bfloat16"),
    ]:
        with pytest.raises(PreskError) as error:
            call(arrays)
        assert error.value.code == "E4003" and message in str(error.value), str(error.value)
    readonly = out.copy()
    readonly.flags.writeable = False
    with pytest.raises(PreskError, match="read-only"):
        call([x, b, readonly])


def test_dtype_of_agrees_with_the_executor() -> None:
    for element, dtype in ((f64, np.float64), (f32, np.float32), (bf16, BF16), (i64, np.int64)):
        t = MemRefType(element, [2, 3])
        assert dtype_of(t) == np.dtype(dtype) == executor.dtype_of(t)


def test_overlapping_output_runs_the_sequential_semantics(runner: NativeRunner) -> None:
    n = 64
    step = runner(map_kernel(n, "f32", "f32", "    %one = arith.constant 1.0 : f32\n    %r = arith.addf %av, %one : f32"))
    memory = np.zeros(n + 1, np.float32)
    step([memory[:n], memory[1:]])  # out[i] = in[i] + 1 with out = in shifted: a running count
    assert np.array_equal(memory, np.arange(n + 1, dtype=np.float32))
    a, out = np.arange(n, dtype=np.float32), np.empty(n, np.float32)
    step([a, out])  # disjoint again: the fast variant
    assert np.array_equal(out, a + 1)


def test_repeated_and_changed_buffers(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f32")
    call = runner(kernels["add"])
    x, b, out = random_inputs(kernels["add"], 10)
    for _ in range(3):
        call([x, b, out])
        assert np.array_equal(out, x + b)
        x = x * 2
        out = np.empty_like(out)


# --------------------------------------------------------------------------- splits and cost


def _with_workers(kernel: KernelOp, workers: int) -> KernelOp:
    clone = kernel.clone()
    loop = split_loop(clone)
    assert loop is not None
    loop.attributes[WORKERS] = IntegerAttr(workers, 64)
    return clone


def test_split_over_two_workers_gives_identical_bytes(runner: NativeRunner) -> None:
    _, kernels = lowered("loss", "f32")
    for name in ("dot_4", "gelu", "softmax"):
        kernel = kernels[name]
        inputs = random_inputs(kernel, 11)
        one, two = ([a.copy() for a in inputs] for _ in range(2))
        runner(_with_workers(kernel, 1))(one)
        split = runner(_with_workers(kernel, 2))
        assert split.workers() == 2
        split(two)
        for a, b in zip(one, two):
            assert a.tobytes() == b.tobytes(), name


def test_weighted_operations_and_default_split(monkeypatch: pytest.MonkeyPatch) -> None:
    small = map_kernel(10, "f32", "f32", "    %r = math.exp %av : f32")
    # per iteration: load 1 + exp 20 + store 1; constants and the loop are free
    assert weighted_operations(small) == 10 * 22
    machine = target_machine()
    assert default_split(small, machine) == 1

    big = parse_kernel("""
psk_kernel.kernel @big(%a: memref<1024x1024xf32>, %b: memref<1024xf32>, %out: memref<1024xf32>) "test/%2" {
  %c0 = arith.constant 0 : index
  %n = arith.constant 1024 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (f32) {
      %x = memref.load %a[%i, %k] : memref<1024x1024xf32>
      %y = memref.load %b[%k] : memref<1024xf32>
      %f = math.fma %x, %y, %acc : f32
      scf.yield %f : f32
    }
    memref.store %s, %out[%i] : memref<1024xf32>
  } {psk_kernel.parallel}
}""")
    assert weighted_operations(big) == 1024 * (1024 * (1 + 1 + 2) + 1)
    assert weighted_operations(big) > SPLIT_THRESHOLD
    monkeypatch.setenv("PRESK_THREADS", "3")
    assert default_split(big, machine) == 3
    assert default_split(_with_workers(big, 2), machine) == 2
    assert default_split(_with_workers(small, 4), machine) == 4


def test_vector_operations_weigh_per_lane() -> None:
    """A vector op counts once per lane: the vector kernel weighs what its scalar form does."""
    vector = parse_kernel("""
psk_kernel.kernel @v(%a: memref<64x16xf32>, %out: memref<64x16xf32>) "test/%0" {
  %c0 = arith.constant 0 : index
  %n = arith.constant 64 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = vector.load %a[%i, %c0] : memref<64x16xf32>, vector<16xf32>
    %f = vector.fma %x, %x, %x : vector<16xf32>
    %s = vector.shuffle %f, %x [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23] : vector<16xf32>, vector<16xf32>
    vector.store %s, %out[%i, %c0] : memref<64x16xf32>, vector<16xf32>
  } {psk_kernel.parallel}
}""")
    # per row, 16 lanes each: load 1 + fma 2 + shuffle 1 + store 1
    assert weighted_operations(vector) == 64 * 16 * (1 + 2 + 1 + 1)


def test_default_split_runs_big_kernels_on_the_pool(runner: NativeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_THREADS", "2")
    kernel = map_kernel(1 << 20, "f32", "f32", "    %r = math.tanh %av : f32")  # 22 Mi weighted operations
    assert default_split(kernel, target_machine()) == 2
    call = runner(kernel)
    assert call.iterations == 1 << 20 and call.workers() == 2
    x = np.random.default_rng(12).standard_normal(1 << 20).astype(np.float32)
    split, single = np.empty_like(x), np.empty_like(x)
    call([x, split])
    runner(_with_workers(kernel, 1))([x, single])
    assert split.tobytes() == single.tobytes()
    np.testing.assert_allclose(split, np.tanh(x), rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- vectorisation


@pytest.mark.target
def test_f32_elementwise_and_tiled_contraction_are_vectorised(engine: JitEngine) -> None:
    _, kernels = lowered("loss", "f32")
    wide = "zmm" if target_machine().vector_bits >= 512 else "ymm"
    elementwise = engine.assembly(translate_kernel(kernels["add"]))
    assert re.search(rf"vaddps\s+[^\n]*%{wide}", elementwise), "f32 elementwise add is not vectorised"
    dot = kernels["dot"]  # [1, 8] register tile: eight accumulators over k
    assert sum(isinstance(op, scf.ForOp) for op in dot.walk()) == 4
    contraction = engine.assembly(translate_kernel(dot))
    assert re.search(r"vfmadd\d+ps\s+[^\n]*%[yz]mm", contraction), "the tiled contraction is not vectorised"
    assert "call" not in contraction
    gelu = engine.assembly(translate_kernel(kernels["gelu"]))  # erf inline: vectorises too
    assert re.search(r"vfmadd\d+ps\s+[^\n]*%[yz]mm", gelu) and "call" not in gelu


def test_whole_gpt_loss_f64_matches_the_reference(runner: NativeRunner) -> None:
    from presk import sizes
    from presk.interp.inputs import make_inputs
    from presk.interp.reference import run_entry
    from presk.ir.calls import find_entry

    source = gpt_source()
    env = sizes.resolve(source, dims={"B": 2, "T": 8})
    bound = source.clone()
    BindSizes(dims="B=2,T=8").apply(presk_context(), bound)
    inputs = make_inputs(find_entry(source, "loss"), env, seed=1)
    (expected,) = run_entry(bound, "loss", inputs, env)
    module, _ = lowered("loss", "f64")
    (loss,) = executor.HostProgram(module, runner)(executor.flatten_inputs(inputs))
    assert abs(float(loss) - float(expected)) < 1e-10 * abs(float(expected))


# --------------------------------------------------------------------------- short chains of FMAs


def weight_gradient(terms: int) -> KernelOp:
    """A contraction at its default layout: out[i, j] = Σ_b Σ_t x[b, t, i] · y[b, t, j], one chain per element."""
    return parse_kernel(f"""builtin.module {{
  psk_kernel.kernel @wg(%0: memref<4x{terms}x16xf32>, %1: memref<4x{terms}x32xf32>, %2: memref<16x32xf32>) "f/%0" {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %ct = arith.constant {terms} : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %z = arith.constant 0.0 : f32
    scf.for %i = %c0 to %c16 step %c1 {{
      scf.for %j = %c0 to %c32 step %c1 {{
        %s = scf.for %b = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (f32) {{
          %r = scf.for %t = %c0 to %ct step %c1 iter_args(%a = %acc) -> (f32) {{
            %x = memref.load %0[%b, %t, %i] : memref<4x{terms}x16xf32>
            %y = memref.load %1[%b, %t, %j] : memref<4x{terms}x32xf32>
            %f = math.fma %x, %y, %a : f32
            scf.yield %f : f32
          }}
          scf.yield %r : f32
        }}
        memref.store %s, %2[%i, %j] : memref<16x32xf32>
      }} {{psk_kernel.parallel}}
    }} {{psk_kernel.parallel}}
  }}
}}""")


def test_a_short_chain_of_fmas_is_unrolled_whole_and_keeps_its_bits(runner: NativeRunner) -> None:
    """4 × 32 terms (384 ops) unroll whole, both loops; of 4 × 64 (768), only the inner 64 (192). Native equals
    the interpreter."""
    from presk.lowering.llvm.loops import FULL_UNROLL_OPS

    short, long = weight_gradient(32), weight_gradient(64)
    assert 4 * 32 * 3 <= FULL_UNROLL_OPS < 4 * 64 * 3
    assert translate_kernel(short).count("llvm.loop.unroll.full") == 1  # one loop ID, on both latches
    assert len(re.findall(r"!llvm.loop ", translate_kernel(short))) == 2
    assert len(re.findall(r"!llvm.loop ", translate_kernel(long))) == 1
    for kernel in (short, long):
        assert_native_is_the_interpreter(runner, kernel, seed=5)


@pytest.mark.target
def test_the_loop_around_a_short_chain_runs_in_the_vectors_the_cost_model_prices(engine: JitEngine) -> None:
    """Unrolled whole, the chains leave the output's j loop innermost, which LLVM vectorises: the assembly's
    fmas are packed in the target's widest register, none scalar, as `presk.cost.quantities` prices the
    kernel (`unrolled_chain_lanes`). The chain too long to unroll keeps its scalar fmas and its scalar price."""
    from presk.cost.quantities import kernel_terms
    from presk.cost.terms import MachineDesc

    machine = target_machine()
    wide = "zmm" if machine.vector_bits >= 512 else "ymm"
    desc = MachineDesc.of(machine)
    short, long = weight_gradient(32), weight_gradient(64)
    assembly = engine.assembly(translate_kernel(short))
    assert re.search(rf"vfmadd\w+ps\s+[^\n]*%{wide}", assembly) and not re.search(r"vfmadd\w+ss", assembly)
    assert kernel_terms(short, desc).lanes == machine.register_width("f32")
    assembly = engine.assembly(translate_kernel(long))
    assert re.search(r"vfmadd\w+ss", assembly) and not re.search(r"vfmadd\w+ps", assembly)
    assert kernel_terms(long, desc).lanes == 1


def scores(lanes: int) -> KernelOp:
    """The scores at their default layout: out[i, j] = Σ_k q[i, k] · kt[j, k], k = 8 terms, kt read along its rows."""
    j = 4 * lanes
    return parse_kernel(f"""builtin.module {{
  psk_kernel.kernel @scores(%0: memref<16x8xf32>, %1: memref<{j}x8xf32>, %2: memref<16x{j}xf32>) "f/%0" {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %cj = arith.constant {j} : index
    %z = arith.constant 0.0 : f32
    scf.for %i = %c0 to %c16 step %c1 {{
      scf.for %j = %c0 to %cj step %c1 {{
        %s = scf.for %k = %c0 to %c8 step %c1 iter_args(%a = %z) -> (f32) {{
          %x = memref.load %0[%i, %k] : memref<16x8xf32>
          %y = memref.load %1[%j, %k] : memref<{j}x8xf32>
          %f = math.fma %x, %y, %a : f32
          scf.yield %f : f32
        }}
        memref.store %s, %2[%i, %j] : memref<16x{j}xf32>
      }} {{psk_kernel.parallel}}
    }} {{psk_kernel.parallel}}
  }}
}}""")


@pytest.mark.target
def test_an_operand_read_along_its_rows_costs_the_shuffles_the_cost_model_prices(engine: JitEngine) -> None:
    """LLVM vectorises the j loop around the unrolled chain with kt's rows loaded whole and transposed into the
    lanes by shuffles, as many as `presk.cost.quantities.shuffles_per_element` prices; packed fmas, none scalar."""
    from presk.cost.quantities import shuffles_per_element

    machine = target_machine()
    lanes = machine.register_width("f32")
    assembly = engine.assembly(translate_kernel(scores(lanes)))
    body = assembly[: assembly.index("ret")] if "ret" in assembly else assembly
    shuffles = len(re.findall(r"^\s+v(?:shuf|perm|unpck|insert|extract|blend)\w*\s", body, re.M))
    fmas = len(re.findall(r"^\s+vfmadd\w+ps\s", body, re.M))
    assert fmas and not re.search(r"vfmadd\w+ss", body)
    # Per vector of `lanes` outputs: 8 fmas and the 8 · lanes elements of kt, each moved by the shuffles the
    # cost model prices, within a factor of 2 (AVX2: about 1 an element; AVX-512's two-source permutes 1 / lanes).
    expected = lanes * shuffles_per_element(machine.vector_bits, lanes)
    assert 0.5 * expected <= shuffles / fmas <= 2 * expected, (shuffles, fmas, expected)


CAUSAL_MAX = """builtin.module {
  psk_kernel.kernel @causal_max(%x: memref<$Rx$Cxf32>, %o: memref<$Rxf32>) "f/%0" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cr = arith.constant $R : index
    %cc = arith.constant $C : index
    %far = arith.constant $OFFSET : index
    %lowest = arith.constant 0xff800000 : f32
    scf.for %i = %c0 to %cr step %c1 {
      %row = arith.addi %i, %far : index
      %m = scf.for %j = %c0 to %cc step %c1 iter_args(%acc = %lowest) -> (f32) {
        %seen = arith.cmpi ule, %j, %row : index
        %v = memref.load %x[%i, %j] : memref<$Rx$Cxf32>
        %bigger = arith.maximumf %acc, %v : f32
        %next = arith.select %seen, %bigger, %acc : f32
        scf.yield %next : f32
      }
      memref.store %m, %o[%i] : memref<$Rxf32>
    } {psk_kernel.parallel}
  }
}"""
"""A causally masked running maximum over each row, as a softmax's first pass: column j counts in row i when
j <= i + offset."""


def causal_max(rows: int, columns: int, offset: int) -> KernelOp:
    text = CAUSAL_MAX.replace("$R", str(rows)).replace("$C", str(columns)).replace("$OFFSET", str(offset))
    return parse_kernel(text)


@pytest.mark.target
def test_a_causal_test_compares_in_32_bits_where_its_indices_fit(runner: NativeRunner) -> None:
    """The running maximum's vector loop compares the column's lanes with the row in 32-bit lanes when every
    lane of both lies in i32's range (`presk.analysis.index_range`), in 64 otherwise; the bits are the kernel
    interpreter's either way."""
    from presk.analysis import index_range

    lanes = target_machine().register_width("f32")
    near, far = causal_max(16, 64, 0), causal_max(16, 64, 2**31 - 10)
    for kernel, offset in ((near, 0), (far, 2**31 - 10)):
        (row,) = [op.results[0] for op in kernel.walk() if op.name == "arith.addi"]
        (column,) = [op.operands[0] for op in kernel.walk() if op.name == "arith.cmpi"]
        assert (index_range(row), index_range(column)) == ((offset, offset + 15), (0, 63))
    assert re.search(rf"icmp ule <{lanes} x i32>", translate_kernel(near))
    assert not re.search(r"icmp ule <\d+ x i32>", translate_kernel(far))
    assert re.search(rf"icmp ule <{lanes} x i64>", translate_kernel(far))
    for kernel in (near, far):
        assert_native_is_the_interpreter(runner, kernel, seed=3)
