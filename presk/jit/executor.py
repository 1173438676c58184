"""Running a host program: buffers allocated, views taken, kernels launched in order.

The host program (`psk_kernel.host`) is compiled once into a flat list of
steps over numbered buffer slots, so a call costs a few microseconds per
launch beyond the kernels themselves. Kernels run through a runner, the
same interface for both executors: `presk.interp.kernel.KernelInterpreter`
(exact, numpy) and `presk.jit.native.NativeRunner` (LLVM JIT); everything
else here is shared, so the two backends differ only in their kernels.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float32Type, Float64Type, IntegerType, MemRefType, ModuleOp
from xdsl.ir import Attribute, SSAValue

from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as kernel

KernelCall = Callable[[Sequence[np.ndarray]], None]
Runner = Callable[[kernel.KernelOp], KernelCall]


def dtype_of(t: Attribute) -> np.dtype:
    """The numpy dtype of a buffer's elements (bf16 through ml_dtypes)."""
    element = t.element_type if isinstance(t, MemRefType) else t
    if isinstance(element, Float64Type):
        return np.dtype(np.float64)
    if isinstance(element, Float32Type):
        return np.dtype(np.float32)
    if isinstance(element, BFloat16Type):
        return np.dtype(ml_dtypes.bfloat16)
    if isinstance(element, IntegerType):
        return np.dtype(np.int64)
    raise PreskError("E3003", f"no buffer dtype for {element}")


@dataclass(frozen=True)
class Alloc:
    slot: int
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class View:
    slot: int
    source: int
    shape: tuple[int, ...]
    index: int | None


@dataclass(frozen=True)
class Launch:
    call: KernelCall
    slots: tuple[int, ...]
    name: str
    site: str


Step = Alloc | View | Launch


class HostProgram:
    """One entry's launch sequence, ready to call on input leaves."""

    def __init__(self, module: ModuleOp, runner: Runner) -> None:
        hosts = [op for op in module.body.block.ops if isinstance(op, kernel.HostOp)]
        if len(hosts) != 1:
            raise PreskError("E3003", f"a kernel module has one host program, this one has {len(hosts)}")
        self.host = hosts[0]
        kernels = {op.sym_name.data: op for op in module.body.block.ops if isinstance(op, kernel.KernelOp)}
        block = self.host.body.block
        slots: dict[SSAValue, int] = {arg: i for i, arg in enumerate(block.args)}
        self.inputs = [(tuple(a.type.get_shape()), dtype_of(a.type)) for a in block.args]  # type: ignore[attr-defined]
        self.argument_paths = [p.data for p in (self.host.argument_paths or [])]
        self.result_paths = [p.data for p in (self.host.result_paths or [])]
        calls: dict[str, KernelCall] = {}
        self.steps: list[Step] = []
        self.outputs: list[int] = []
        for op in block.ops:
            if isinstance(op, kernel.AllocOp):
                slots[op.result] = len(slots)
                self.steps.append(Alloc(slots[op.result], tuple(op.result.type.get_shape()), dtype_of(op.result.type)))
            elif isinstance(op, kernel.ViewOp):
                slots[op.result] = len(slots)
                index = op.index.data if op.index is not None else None
                self.steps.append(View(slots[op.result], slots[op.source], tuple(op.result.type.get_shape()), index))
            elif isinstance(op, kernel.LaunchOp):
                name = op.kernel.string_value()
                if name not in calls:
                    calls[name] = runner(kernels[name])
                site = op.attributes["site"].data  # type: ignore[attr-defined]
                self.steps.append(Launch(calls[name], tuple(slots[b] for b in op.buffers), name, site))
            elif isinstance(op, kernel.ReturnOp):
                self.outputs = [slots[v] for v in op.values]
        self.slot_count = len(slots)
        self._arena: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
        self._taken = set()

    def _allocate(self, step: Alloc) -> np.ndarray:
        """A buffer no one holds any more from an earlier call, else a new one.

        Fresh memory costs a page fault per page on first touch (several ms
        for a 40 MB buffer on this kind of machine), so buffers are recycled
        across calls. A buffer is free when only the arena refers to it:
        results the caller still holds, or views of them, keep theirs.
        """
        pool = self._arena.setdefault((step.shape, step.dtype), [])
        for array in pool:
            # One reference from the pool's list, one from getrefcount's argument.
            if sys.getrefcount(array) <= 3 and id(array) not in self._taken:
                self._taken.add(id(array))
                return array
        array = np.empty(step.shape, dtype=step.dtype)
        pool.append(array)
        self._taken.add(id(array))
        return array

    @property
    def launch_count(self) -> int:
        return sum(isinstance(s, Launch) for s in self.steps)

    def __call__(self, leaves: Sequence[np.ndarray], on_launch: Callable[[Launch], Any] | None = None) -> list[np.ndarray]:
        """Run on the input leaves (converted to each buffer's type); returns the result leaves."""
        if len(leaves) != len(self.inputs):
            raise PreskError("E4003", f"the host program takes {len(self.inputs)} buffers, got {len(leaves)}")
        values: list[Any] = [None] * self.slot_count
        self._taken: set[int] = set()
        for i, (leaf, (shape, dtype)) in enumerate(zip(leaves, self.inputs)):
            # np.require, not ascontiguousarray, which makes a 0-d array 1-d.
            array = np.require(np.asarray(leaf).astype(dtype, copy=False), requirements="C")
            if array.shape != shape:
                path = self.argument_paths[i] if i < len(self.argument_paths) else str(i)
                raise PreskError("E4003", f"input '{path}': expected shape {list(shape)}, got {list(array.shape)}")
            values[i] = array
        for step in self.steps:
            if isinstance(step, Launch):
                if on_launch is not None:
                    on_launch(step)
                step.call([values[s] for s in step.slots])
            elif isinstance(step, Alloc):
                values[step.slot] = self._allocate(step)
            else:
                source = values[step.source]
                values[step.slot] = (source[step.index] if step.index is not None else source).reshape(step.shape)
        return [values[s] for s in self.outputs]


def flatten_inputs(inputs: Sequence[Any]) -> list[np.ndarray]:
    """The entry's arguments as leaves, in the host program's order (record fields in order)."""
    from presk.interp.values import leaf_items

    return [np.asarray(leaf) for value in inputs for _, leaf in leaf_items(value)]


def rebuild_results(leaves: Sequence[np.ndarray], paths: Sequence[str], result_count: int) -> list[Any]:
    """Result trees from leaves and their dotted paths: dicts for records, tuples for tuples."""

    def plain(a: np.ndarray) -> Any:
        a = a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a.copy()
        return a[()] if a.ndim == 0 else a

    if result_count == 1 and list(paths) == [""]:
        return [plain(leaves[0])]
    root: dict[str, Any] = {}
    for leaf, path in zip(leaves, paths):
        parts = path.split(".")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = plain(leaf)

    def freeze(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        frozen = {k: freeze(v) for k, v in node.items()}
        if frozen and all(k.isdigit() for k in frozen):
            return tuple(frozen[str(i)] for i in range(len(frozen)))
        return frozen

    top = freeze(root)
    return list(top) if result_count > 1 else [top]
