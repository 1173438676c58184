"""A tile's vector stores around the caches, and the cache-line-aligned buffers of the host.

In a kernel over more than the last level cache, a `vector.store` of a
whole line into a buffer the kernel never loads (a contraction without a
k-block) is non-temporal where its address is on a line, plain elsewhere
(`VectorOps.streams_lines`); the host allocates its buffers on a line
(`empty_aligned`). Either way the bytes are the default layout's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from presk import sizes
from presk.target import host_machine, target_machine
from presk.dialects import psk_kernel as pk
from presk.interp.kernel import KernelInterpreter
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.buffers import empty_aligned
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.pipeline import lower
from presk.lowering.llvm import streaming_stores
from presk.lowering.llvm.translator import translate_kernel
from presk.plans import parse_plan

ROOT = Path(__file__).resolve().parents[2]
N = 64


def gemm(layout: dict[str, Any] | None) -> Any:
    path = ROOT / "bench" / "programs" / "gemm.mlir"
    module = parse_module(presk_context(), path.read_text(), str(path)).module
    plan: dict[str, Any] = {"realization": "f32"}
    if layout is not None:
        plan["layout"] = {"gemm/%0": layout}
    return lower(module, "gemm", sizes.resolve(module, {}, {"N": N}), parse_plan(plan, "test"))


def the_kernel(module: Any) -> pk.KernelOp:
    (k,) = [op for op in module.walk() if isinstance(op, pk.KernelOp)]
    return k


@pytest.fixture
def streaming(monkeypatch: pytest.MonkeyPatch) -> None:
    if target_machine().vector_bits < 512:
        pytest.skip("a line is one 16-lane f32 vector on AVX-512 only")
    monkeypatch.setattr(streaming_stores, "STREAMING_BYTES", 0)  # every kernel counts as big


@pytest.mark.usefixtures("streaming")
def test_a_tile_without_k_block_stores_its_lines_around_the_caches() -> None:
    ir = translate_kernel(the_kernel(gemm({"tile": [4, 32], "lanes": 16})))
    assert ir.count("!nontemporal") == 8  # 4 rows × 2 vectors of 16
    assert "fence seq_cst" in ir


@pytest.mark.usefixtures("streaming")
@pytest.mark.parametrize(
    "layout",
    [{"tile": [4, 32], "lanes": 16, "kblock": 32, "order": "JKI"}, {"tile": [4, 32], "lanes": 8}],
    ids=["k-block outside: the sums are read back", "8 lanes: half a line"],
)
def test_stores_stay_plain(layout: dict[str, Any]) -> None:
    assert "!nontemporal" not in translate_kernel(the_kernel(gemm(layout)))


@pytest.mark.usefixtures("streaming")
@pytest.mark.parametrize("offset", [0, 4], ids=["on a line", "4 bytes off"])
def test_the_bits_are_the_defaults_wherever_the_output_starts(offset: int) -> None:
    """Called directly with an output 4 bytes off a line, every store takes the plain branch."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((N, N)).astype(np.float32) for _ in range(2))
    (expected,) = HostProgram(gemm(None), KernelInterpreter().runner)([a, b])
    kernel = the_kernel(gemm({"tile": [4, 32], "lanes": 16}))
    with NativeRunner() as native:
        run = native(kernel)
        raw = empty_aligned((N * N + host_machine().cache_line,), np.float32)
        out = raw[offset // 4 : offset // 4 + N * N].reshape(N, N)
        assert out.ctypes.data % host_machine().cache_line == offset
        run([a, b, out])
    assert out.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, ml_dtypes.bfloat16, np.int64])
@pytest.mark.parametrize("shape", [(0,), (3, 5), (1000, 7)])
def test_host_buffers_start_on_a_line(dtype: Any, shape: tuple[int, ...]) -> None:
    array = empty_aligned(shape, dtype)
    assert array.shape == shape and array.dtype == np.dtype(dtype)
    assert array.flags.c_contiguous and array.flags.writeable
    assert array.ctypes.data % host_machine().cache_line == 0 or array.size == 0
