"""Buffer checks before a native call, and the table of base pointers."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
import pytest
from jit_kernels import scale_ir

from presk.diagnostics import PreskError
from presk.jit.buffers import BufferSpec, PointerArray, check_buffers, copy_on_a_line, on_a_line
from presk.jit.engine import JitEngine
from presk.target import host_machine

SPECS = [BufferSpec((4, 3), np.float32), BufferSpec((4, 3), np.float32, output=True)]
NAMES = ["x", "y_out"]


def good() -> list[np.ndarray]:
    return [np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32)]


def misaligned() -> np.ndarray:
    raw = np.zeros(4 * 3 * 4 + 1, np.uint8)
    array = raw[1:].view(np.float32).reshape(4, 3)
    assert not array.flags.aligned
    return array


def read_only() -> np.ndarray:
    array = np.zeros((4, 3), np.float32)
    array.setflags(write=False)
    return array


def test_matching_buffers_pass() -> None:
    check_buffers("k", SPECS, good(), NAMES)
    inputs = good()
    inputs[0].setflags(write=False)  # an input may be read-only
    check_buffers("k", SPECS, inputs, NAMES)


def test_spec_is_normalised() -> None:
    spec = BufferSpec([4, 3], "float32")  # type: ignore[arg-type]
    assert spec == BufferSpec((4, 3), np.dtype(np.float32))


@pytest.mark.parametrize(
    ("index", "replacement", "expected"),
    [
        (0, lambda: np.ones((3, 4), np.float32), "expected shape (4, 3) float32, got shape (3, 4) float32"),
        (0, lambda: np.ones((4, 3), np.float64), "got shape (4, 3) float64"),
        (0, lambda: np.ones((4, 3), ">f4"), "non-native byte order"),
        (0, lambda: np.ones((3, 4), np.float32).T, "C-contiguous"),
        (1, lambda: np.zeros((4, 6), np.float32)[:, ::2], "C-contiguous"),
        (0, misaligned, "aligned"),
        (1, read_only, "read-only"),
        (1, lambda: [[0.0] * 3] * 4, "numpy array"),
    ],
)
def test_every_mismatch_is_e4003_naming_kernel_and_buffer(
    index: int, replacement: Callable[[], object], expected: str
) -> None:
    arrays: list[object] = list(good())
    arrays[index] = replacement()
    with pytest.raises(PreskError) as error:
        check_buffers("matmul_3", SPECS, arrays, NAMES)  # type: ignore[arg-type]
    assert error.value.code == "E4003"
    message = error.value.message
    assert "kernel 'matmul_3'" in message and f"buffer {index} '{NAMES[index]}'" in message
    assert expected in message


def test_buffer_count_and_names_are_optional() -> None:
    with pytest.raises(PreskError, match=r"E4003: kernel 'k' takes 2 buffers, got 1"):
        check_buffers("k", SPECS, good()[:1])
    with pytest.raises(PreskError, match=r"kernel 'k', buffer 1: the kernel writes"):
        check_buffers("k", SPECS, [good()[0], read_only()])


def test_extra_alignment_is_checked() -> None:
    spec = [BufferSpec((8,), np.float32, alignment=64)]
    base = np.zeros(64, np.float32)
    offset = (-base.ctypes.data % 64) // 4
    check_buffers("k", spec, [base[offset : offset + 8]])
    with pytest.raises(PreskError, match="aligned to 64 bytes"):
        check_buffers("k", spec, [base[offset + 1 : offset + 9]])


def test_pointer_array_points_at_the_arrays() -> None:
    arrays = good()
    table = PointerArray(2)
    address = table.update(arrays)
    assert address == table.address
    stored = (ctypes.c_void_p * 2).from_address(address)
    assert [stored[0], stored[1]] == [a.ctypes.data for a in arrays]
    other = np.empty((4, 3), np.float32)
    assert table.update([arrays[0], other]) == address
    assert stored[1] == other.ctypes.data and stored[0] == arrays[0].ctypes.data
    with pytest.raises(ValueError):
        table.update(arrays[:1])
    table.clear()
    assert stored[0] is None and len(table) == 2


def test_pointer_array_reuses_slots_of_the_same_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = good()
    table = PointerArray(2)
    table.update(arrays)
    table._table[0] = 12345  # a rewrite would restore the real address
    table.update(arrays)
    assert table._table[0] == 12345


def test_checks_happen_before_the_native_call(tmp_path) -> None:
    kernel = JitEngine(cache_dir=tmp_path).kernel(scale_ir(), "scale")
    specs = [BufferSpec((16,), np.float32), BufferSpec((16,), np.float32, output=True)]
    table = PointerArray(2)

    def launch(arrays: list[np.ndarray]) -> None:
        check_buffers("scale", specs, arrays, ["a", "out"])
        kernel(table.update(arrays), 0, 16)

    a, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    launch([a, out])
    np.testing.assert_array_equal(out, a * 2)
    short_out = np.zeros(8, np.float32)
    with pytest.raises(PreskError, match="buffer 1 'out'"):
        launch([a, short_out])
    assert table.update([a, out]) and not short_out.any()


def test_on_a_line_moves_only_an_array_off_its_line() -> None:
    line = host_machine().cache_line
    raw = np.zeros(10 * 8 + 2 * line, np.uint8)
    start = -raw.ctypes.data % line
    placed = raw[start : start + 80].view(np.float64)
    assert on_a_line(placed) is placed
    shifted = raw[start + 16 : start + 96].view(np.float64)
    shifted[...] = np.arange(10.0)
    moved = on_a_line(shifted)
    assert moved is not shifted and moved.ctypes.data % line == 0 and moved.flags.writeable
    assert moved.tobytes() == shifted.tobytes()
    copied = copy_on_a_line(placed)
    assert copied is not placed and copied.ctypes.data % line == 0
