"""The pack's copy kernel: a register transpose by blocks where the axes allow, element by element elsewhere.

`contraction.emit_pack` writes panel[..., k, j] = source[..., j, k]. When J
and K are multiples of the block (16 f32, 8 f64) it loads rows of the
source along K, transposes them with `vector.shuffle`s and stores rows of
the panel along J. A copy moves bits, so the test fills the source with
random bit patterns (nans with payloads, infinities and subnormals
included) and wants the panel's bytes to be the transposed source's on
both executors.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import BFloat16Type, Float32Type, Float64Type, MemRefType
from xdsl.ir import Attribute

from presk.dialects import psk_kernel as kernel
from presk.interp.kernel import KernelInterpreter
from presk.jit.native import NativeRunner
from presk.lowering.contraction import PACK_LANES, emit_pack
from presk.lowering.kernel_builder import KernelBuilder

TYPES: dict[str, tuple[Attribute, type, type]] = {
    # name: element type, numpy dtype, integer view of the same width
    "f32": (Float32Type(), np.float32, np.uint32),
    "f64": (Float64Type(), np.float64, np.uint64),
}


def pack_kernel(source_shape: list[int], element: Attribute) -> kernel.KernelOp:
    *outer, j, k = source_shape
    source, panel = MemRefType(element, source_shape), MemRefType(element, [*outer, k, j])
    op = kernel.KernelOp("pack", "test/%0", [source, panel])
    rank = len(source_shape)
    emit_pack(KernelBuilder(op.body.block), *op.body.block.args, [*range(rank - 2), rank - 1, rank - 2])
    return op


def random_bits(shape: list[int], dtype: type, view: type) -> np.ndarray:
    info = np.iinfo(view)
    return np.random.default_rng(5).integers(0, info.max, size=shape, dtype=view, endpoint=True).view(dtype)


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize(
    "shape,blocked",
    [([2, 32, 48], True), ([3, 16, 16], True), ([2, 20, 12], False), ([2, 16, 24], None)],
    ids=["blocks", "one-block", "odd-sizes", "k-not-a-multiple-of-16"],
)
def test_the_panel_is_the_transposed_source_on_both_executors(
    name: str, shape: list[int], blocked: bool | None
) -> None:
    element, dtype, view = TYPES[name]
    lanes = PACK_LANES[type(element)]
    if blocked is None:  # [2, 16, 24]: K = 24 divides by f64's 8 but not by f32's 16
        blocked = shape[-1] % lanes == 0 and shape[-2] % lanes == 0
    op = pack_kernel(shape, element)
    shuffles = [o for o in op.walk() if o.name == "vector.shuffle"]
    # log2(L) rounds of L shuffles per block
    assert len(shuffles) == (lanes * (lanes.bit_length() - 1) if blocked else 0)
    source = random_bits(shape, dtype, view)
    expected = np.ascontiguousarray(np.swapaxes(source, -1, -2))
    for run in (NativeRunner()(op), KernelInterpreter().runner(op)):
        panel = np.zeros_like(expected)
        run([source, panel])
        assert panel.tobytes() == expected.tobytes()


def test_bf16_panels_are_copied_element_by_element() -> None:
    """bf16 has no block (the kernels keep bf16 scalar): the copy stays a loop of loads and stores."""
    op = pack_kernel([2, 32, 32], BFloat16Type())
    assert not [o for o in op.walk() if o.name.startswith("vector.")]
