"""Buffers handed to native kernels: checking them, and passing their addresses.

A native kernel trusts its buffers blindly (see the ABI in `presk.jit.engine`):
a wrong shape reads past the end, a strided view reads the wrong elements, a
read-only output is written anyway. So every mismatch is refused here, with
the kernel and buffer named, before any native call; nothing after this
point can report an error.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from presk.target import host_machine
from presk.diagnostics import PreskError


@dataclass(frozen=True)
class BufferSpec:
    """What a kernel expects of one buffer."""

    shape: tuple[int, ...]
    dtype: np.dtype
    output: bool = False
    """The kernel writes it, so a read-only array is refused."""
    alignment: int | None = None
    """Byte alignment the kernel's loads assume; None means the element size."""

    def __post_init__(self) -> None:
        # Normalised so that a check is a plain `==` (np.float32 and [2, 3] accepted).
        object.__setattr__(self, "shape", tuple(int(size) for size in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    def describe(self) -> str:
        return f"shape {self.shape} {_dtype_text(self.dtype)}"


def empty_aligned(shape: Sequence[int], dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a cache line.

    numpy aligns large arrays to 16 bytes only; a kernel storing whole lines
    around the caches (non-temporal stores need 64-byte alignment) would
    then fall back to plain stores for every line of a host buffer.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    line = host_machine().cache_line
    raw = np.empty(count * dtype.itemsize + line, dtype=np.uint8)
    start = -raw.ctypes.data % line
    return raw[start : start + count * dtype.itemsize].view(dtype).reshape(tuple(shape))


def on_a_line(array: np.ndarray) -> np.ndarray:
    """`array` if its data starts on a cache line, else a C-contiguous copy of it that does.

    Why inputs are worth moving: numpy places a large array 16 bytes into a
    page, so a kernel reading it with vector loads wider than 16 bytes splits
    every other load across two lines. On Zen 3 an unpacked f64 product with
    4-lane loads of its second operand took 15.4 ms against 8.1 ms for the
    same bytes placed on a line, and which one a process got depended on
    what it had allocated before. The executor's own buffers start on a line
    (`empty_aligned`), so only the inputs are left to the allocator's luck.
    """
    if array.nbytes == 0 or array.ctypes.data % host_machine().cache_line == 0:
        return array
    return copy_on_a_line(array)


def copy_on_a_line(array: np.ndarray) -> np.ndarray:
    """A writable C-contiguous copy of `array` whose data starts on a cache line."""
    placed = empty_aligned(array.shape, array.dtype)
    placed[...] = array
    return placed


def _dtype_text(dtype: np.dtype) -> str:
    return dtype.name if dtype.isnative else f"{dtype.name} ({dtype.str}, non-native byte order)"


def _describe(array: np.ndarray) -> str:
    return f"shape {array.shape} {_dtype_text(array.dtype)}"


def _problem(spec: BufferSpec, array: object) -> str | None:
    """Why `array` cannot be `spec`'s buffer, or None if it can."""
    if not isinstance(array, np.ndarray):
        return f"expected a numpy array with {spec.describe()}, got {type(array).__name__}"
    if array.shape != spec.shape or array.dtype != spec.dtype:
        return f"expected {spec.describe()}, got {_describe(array)}"
    if not array.flags.c_contiguous:
        return f"expected a C-contiguous array, got strides {array.strides} (pass np.ascontiguousarray(...))"
    if not array.flags.aligned:
        return f"expected an array aligned to its {array.dtype.itemsize}-byte elements"
    if (
        spec.alignment is not None
        and spec.alignment > array.dtype.itemsize
        and array.__array_interface__["data"][0] % spec.alignment
    ):
        return f"expected an array aligned to {spec.alignment} bytes"
    if spec.output and not array.flags.writeable:
        return "the kernel writes this buffer, but the array is read-only"
    return None


def check_buffers(
    kernel_name: str,
    specs: Sequence[BufferSpec],
    arrays: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
) -> None:
    """Refuse arrays a kernel cannot safely use, with an E4003 naming the buffer.

    Cheap when all is well (a few attribute reads per buffer): it runs on
    every launch.
    """
    if len(arrays) != len(specs):
        raise PreskError("E4003", f"kernel '{kernel_name}' takes {len(specs)} buffers, got {len(arrays)}")
    for index, (spec, array) in enumerate(zip(specs, arrays)):
        problem = _problem(spec, array)
        if problem is not None:
            name = f" '{names[index]}'" if names is not None and index < len(names) else ""
            raise PreskError("E4003", f"kernel '{kernel_name}', buffer {index}{name}: {problem}")


class PointerArray:
    """The kernel's `ptr %args`: a C array of buffer base pointers, kept up to date.

    Reading an array's address costs about a microsecond, so a slot is only
    rewritten when a different array object comes in; launching the same
    buffers again costs one identity test per buffer. The arrays are held, so
    an address stays valid while it is in the table (numpy never moves a live
    array's data, short of `resize(refcheck=False)`).
    """

    __slots__ = ("_arrays", "_table", "address")

    def __init__(self, count: int) -> None:
        self._arrays: list[object] = [None] * count
        self._table = (ctypes.c_void_p * max(count, 1))()
        self.address: int = ctypes.addressof(self._table)
        """What to pass as the kernel's `args` argument."""

    def __len__(self) -> int:
        return len(self._arrays)

    def update(self, arrays: Sequence[np.ndarray]) -> int:
        """Point the table at `arrays` (checked beforehand) and return its address."""
        held = self._arrays
        if len(arrays) != len(held):
            raise ValueError(f"PointerArray holds {len(held)} pointers, got {len(arrays)} arrays")
        for index, array in enumerate(arrays):
            if array is not held[index]:
                self._table[index] = array.__array_interface__["data"][0]
                held[index] = array
        return self.address

    def clear(self) -> None:
        """Drop the held arrays (their memory can then be freed)."""
        for index in range(len(self._arrays)):
            self._arrays[index] = None
            self._table[index] = None
