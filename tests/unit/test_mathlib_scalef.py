"""exp's final scaling by 2**k in one AVX-512 `vscalef` (presk.lowering.mathlib.IROps.scale_by_pow2).

In a kernel compiled for AVX-512, the vector code of `exp` multiplies by 2**k
with `vscalefps/pd` instead of `mathlib_spec`'s two exact power-of-two
factors; both are the IEEE product y * 2**k rounded once, so every lane must
give the same bits as the plain vector code, the scalar code and the numpy
twin. Checked here on the inputs of test_mathlib (every clamp and reduction
edge, subnormal and overflowing results, specials, random bit patterns) and a
dense sweep of the f32 domain; all 2**32 f32 inputs were compared offline for
16, 8 and 4 lanes (no difference). Skipped without AVX-512.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

sys.path.insert(0, str(Path(__file__).parent))

from test_mathlib import INT, assert_same_bits, inputs

from presk.target import target_machine
from presk.interp import mathlib as twin
from presk.lowering.mathlib import EMITTERS, define_map_kernel

MACHINE = target_machine()
pytestmark = pytest.mark.skipif("avx512f" not in MACHINE.features, reason="needs AVX-512")

LANES = {np.float32: (16, 8, 4), np.float64: (8, 4, 2)}
Run = Callable[[str, np.ndarray], np.ndarray]


@pytest.fixture(scope="module")
def kernels() -> Iterator[tuple[Run, str]]:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("scalef_test")
    module.triple = llvm.get_process_triple()
    for dtype, element in ((np.float32, ir.FloatType()), (np.float64, ir.DoubleType())):
        for lanes in (1, *LANES[dtype]):
            base = f"{np.dtype(dtype).name}_x{lanes}"
            define_map_kernel(module, f"plain_{base}", EMITTERS["exp"], element, lanes)
            define_map_kernel(module, f"scalef_{base}", EMITTERS["exp"], element, lanes, MACHINE.feature_string())
    text = str(module)
    parsed = llvm.parse_assembly(text)
    parsed.verify()
    target = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True
    )
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    passes = llvm.create_pass_builder(target, tuning)
    passes.getModulePassManager().run(parsed, passes)
    engine = llvm.create_mcjit_compiler(parsed, target)
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    names = [f.name for f in module.functions if not f.is_declaration]
    functions = {name: signature(engine.get_function_address(name)) for name in names}

    def run(name: str, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        functions[name](x.ctypes.data, out.ctypes.data, x.size)
        return out

    yield run, text
    del engine


def test_vector_code_uses_vscalef_only_with_the_target_features(kernels: tuple[Run, str]) -> None:
    _, text = kernels
    for width, kind in ((512, "ps"), (256, "ps"), (128, "ps"), (512, "pd"), (256, "pd"), (128, "pd")):
        assert f"llvm.x86.avx512.mask.scalef.{kind}.{width}" in text
    plain = text.split('define void @"plain_float32_x16"')[1].split("\ndefine")[0]
    assert "scalef" not in plain
    scalar = text.split('define void @"scalef_float32_x1"')[1].split("\ndefine")[0]
    assert "scalef" not in scalar  # scalar code keeps the two factors
    vector = text.split('define void @"scalef_float32_x16"')[1].split("\ndefine")[0]
    assert "scalef.ps.512" in vector


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_same_bits_as_the_plain_code_and_the_twin(kernels: tuple[Run, str], dtype: type) -> None:
    run, _ = kernels
    name = np.dtype(dtype).name
    x = inputs("exp", dtype)
    want = twin.exp(x)
    assert_same_bits(run(f"plain_{name}_x1", x), want, x, "scalar")
    for lanes in LANES[dtype]:
        assert_same_bits(run(f"scalef_{name}_x{lanes}", x), want, x, f"vscalef, {lanes} lanes")
        assert_same_bits(run(f"plain_{name}_x{lanes}", x), want, x, f"plain, {lanes} lanes")


def test_dense_f32_sweep(kernels: tuple[Run, str]) -> None:
    """Every 61st f32 from -104 (below which exp is 0) to 89 (above, inf): about 3e7 inputs, both signs' bits."""
    run, _ = kernels
    lo, hi = np.float32(-104.5).view(np.int32), np.float32(89.5).view(np.int32)
    negative = np.arange(np.int32(np.float32(-0.0).view(np.int32)) & 0x7FFFFFFF, lo & 0x7FFFFFFF, 61, dtype=np.int64)
    positive = np.arange(0, hi, 61, dtype=np.int64)
    x = np.concatenate([(negative | 0x80000000).astype(np.uint32).view(np.float32),
                        positive.astype(np.uint32).view(np.float32)])
    want = run("plain_float32_x16", x)
    for lanes in LANES[np.float32]:
        got = run(f"scalef_float32_x{lanes}", x)
        same = (got.view(INT[np.float32]) == want.view(INT[np.float32])) | (np.isnan(got) & np.isnan(want))
        assert same.all(), f"{lanes} lanes: {(~same).sum()} differ, first at {x[~same][0]!r}"
