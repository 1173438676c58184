"""Running a host program: buffers allocated, views taken, kernels launched in order.

The host program (`psk_kernel.host`) is compiled once into a flat list of
steps over numbered buffer slots, so a call costs a few microseconds per
launch beyond the kernels themselves. Kernels run through a runner, the
same interface for both executors: `presk.interp.kernel.KernelInterpreter`
(exact, numpy) and `presk.jit.native.NativeRunner` (LLVM JIT); everything
else here is shared, so the two backends differ only in their kernels.
"""

from __future__ import annotations

import bisect
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    ModuleOp,
)
from xdsl.ir import SSAValue

from presk.analysis import written_buffers
from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as kernel
from presk.interp.kernel import dtype_of
from presk.jit.buffers import copy_on_a_line, empty_aligned, on_a_line

KernelCall = Callable[[Sequence[np.ndarray]], None]
Runner = Callable[[kernel.KernelOp], KernelCall]


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


def calls_of(runner: Runner, kernels: Sequence[kernel.KernelOp]) -> list[KernelCall]:
    """The runner's call of each kernel: made together where the runner can (`NativeRunner.many` compiles
    their modules as one batch), else one by one."""
    many = getattr(runner, "many", None)
    return list(many(kernels)) if many is not None else [runner(k) for k in kernels]


class HostProgram:
    """One entry's launch sequence, ready to call on input leaves.

    Donated arguments (`presk.passes.in_place`, `--donate`): an argument a
    kernel writes is one whose buffer a result has taken. The caller's array
    is then used as it is and overwritten with that result (which is
    returned: the same object), so it must already be a writable,
    C-contiguous array of the buffer's dtype and shape sharing no memory with
    another input (E4003 otherwise; `prepare_inputs` makes such arrays).
    """

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
        launched = list(dict.fromkeys(op.kernel.string_value() for op in block.ops if isinstance(op, kernel.LaunchOp)))
        calls = dict(zip(launched, calls_of(runner, [kernels[name] for name in launched])))
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
                site = op.attributes["site"].data  # type: ignore[attr-defined]
                self.steps.append(Launch(calls[name], tuple(slots[b] for b in op.buffers), name, site))
            elif isinstance(op, kernel.ReturnOp):
                self.outputs = [slots[v] for v in op.values]
        self.slot_count = len(slots)
        self.donated = _written_arguments(block, kernels)
        """Input slots a kernel writes (donated by `psk-in-place`): the caller's array is used as it is, and
        overwritten with the result that takes its place (see `_check_donated`)."""
        self._donation_bounds: list[tuple[weakref.ref[np.ndarray], int, int] | None] = [None] * len(self.inputs)
        self._donated_spans: list[tuple[int, int, int]] = []
        self._arena: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
        self._taken: set[int] = set()
        self._views = {step.slot: step for step in self.steps if isinstance(step, View)}
        self._plan = self._compile_steps()

    def _compile_steps(self) -> list[tuple[Any, ...]]:
        """The steps as tuples for the hot loop, each with its own cache (see `__call__`).

        A launch's tuple also lists the allocations it is the last to use
        (with their views): the hot loop lets go of them there, so that a
        later allocation of the same shape and type in the same call takes
        the buffer again (`_allocate`). The course GPT's gradient held 1 638
        MiB of buffers without it and 594 MiB with it, in the same time
        (`docs/performance.md`, "Buffers reused within a call").
        """
        root = list(range(self.slot_count))
        for step in self.steps:
            if isinstance(step, View):
                root[step.slot] = root[step.source]
        self._root = root
        last_use: dict[int, int] = {}
        for at, step in enumerate(self.steps):
            if isinstance(step, Launch):
                for s in step.slots:
                    last_use[root[s]] = at
        kept = {root[s] for s in self.outputs} | set(range(len(self.inputs)))
        allocated = {step.slot for step in self.steps if isinstance(step, Alloc)}
        views_of: dict[int, list[int]] = {}
        for step in self.steps:
            if isinstance(step, View):
                views_of.setdefault(root[step.slot], []).append(step.slot)
        released: dict[int, list[int]] = {}
        for slot, at in last_use.items():
            if slot in allocated and slot not in kept:
                released.setdefault(at, []).extend([slot, *views_of.get(slot, [])])
        plan: list[tuple[Any, ...]] = []
        for at, step in enumerate(self.steps):
            if isinstance(step, Launch):
                fast = hasattr(step.call, "bind") and hasattr(step.call, "launch")
                roots = tuple(root[s] for s in step.slots)
                plan.append((_LAUNCH, step, [], fast, roots, tuple(released.get(at, ()))))
            elif isinstance(step, Alloc):
                plan.append((_ALLOC, step))
            else:
                plan.append((_VIEW, step))
        return plan

    def _allocate(self, step: Alloc) -> np.ndarray:
        """The first buffer of its shape and type no one holds, else a new one.

        Fresh memory costs a page fault per page on first touch (several ms
        for a 40 MB buffer on this kind of machine), so buffers are recycled:
        across calls, and within a call once a launch was the last to use one
        (`_compile_steps`). A buffer is free when only the arena refers to it
        (results the caller still holds, or views of them, keep theirs) and
        this call has not handed it out since it was last let go. Taking the
        first free one, in the pool's order, makes the assignment a function
        of which results the caller holds: a training loop holding one call's
        results during the next sees two assignments in turn, and every
        launch keeps a binding for each (`CACHED`).
        """
        pool = self._arena.setdefault((step.shape, step.dtype), [])
        for array in pool:
            # One reference from the pool's list, one from getrefcount's argument, one from `array`.
            if sys.getrefcount(array) <= 3 and id(array) not in self._taken and array.shape == step.shape:
                self._taken.add(id(array))
                return array
        array = empty_aligned(step.shape, step.dtype)
        pool.append(array)
        self._taken.add(id(array))
        return array

    @property
    def launch_count(self) -> int:
        return sum(isinstance(s, Launch) for s in self.steps)

    @property
    def donated_paths(self) -> list[str]:
        """The argument paths of the donated inputs (see `donated`)."""
        return [self.argument_paths[i] if i < len(self.argument_paths) else str(i) for i in sorted(self.donated)]

    def prepare_inputs(self, leaves: Sequence[Any]) -> list[np.ndarray]:
        """The input leaves in their buffers' types, once, for callers that call many times (benchmarks).

        A donated input gets its own writable array when the leaf is not one
        already (so a prepared list can always be passed to a call); a leaf
        already usable is kept, and a call then overwrites it. Every other
        array, an input that is only read or one made here, starts on a cache
        line (`on_a_line`), as the executor's own buffers do, so that repeated
        timings of a program do not depend on where the allocator happened to
        place its inputs.
        """
        prepared = []
        for i, leaf in enumerate(leaves):
            array = self._convert(i, leaf)
            must_copy = i in self.donated and (not array.flags.writeable or _shares_any(array, leaves, i))
            if must_copy:
                array = copy_on_a_line(array)
            elif i not in self.donated or array is not leaf:  # not the caller's array to overwrite
                array = on_a_line(array)
            prepared.append(array)
        return prepared

    def _check_donated(self, leaves: Sequence[Any], values: list[Any]) -> None:
        """A donated input must be the caller's own array, writable, sharing no byte with another input (E4003).

        The kernels write results over it: a converted copy would leave the
        caller's array as it was, and memory shared with another input would
        change that input under the kernels that read it. The addresses are
        remembered per input (by identity), so a repeated call on the same
        arrays costs an identity test per input.
        """
        changed: list[int] = []
        for i, entry in enumerate(self._donation_bounds):
            if entry is None or entry[0]() is not values[i]:
                changed.append(i)
        if not changed:
            return
        for i in changed:
            array = values[i]
            if i in self.donated and (array is not leaves[i] or not array.flags.writeable):
                shape, dtype = self.inputs[i]
                raise PreskError(
                    "E4003",
                    f"input '{self._path(i)}' is donated (a result is written over it): pass a writable, "
                    f"C-contiguous {dtype} array of shape {list(shape)}"
                    + ("" if array is not leaves[i] else " (this one is read-only)"),
                )
            start = array.__array_interface__["data"][0] if array.size else 0
            self._donation_bounds[i] = (weakref.ref(array), start, start + array.nbytes)
        if any(i in self.donated for i in changed):
            spans = sorted((b[1], b[2], i) for i, b in enumerate(self._donation_bounds) if b is not None and b[2] > b[1])
            end_all, end_donated = (0, -1), (0, -1)
            for start, end, i in spans:
                other = end_all if i in self.donated else end_donated
                if start < other[0]:
                    self._donation_bounds = [None] * len(self.inputs)
                    raise PreskError(
                        "E4003",
                        f"input '{self._path(i)}' shares memory with input '{self._path(other[1])}', and one of them "
                        "is donated (a result is written over it): pass separate arrays",
                    )
                if end > end_all[0]:
                    end_all = (end, i)
                if i in self.donated and end > end_donated[0]:
                    end_donated = (end, i)
            self._donated_spans = [(s, e, i) for s, e, i in spans if i in self.donated]
            return
        starts = [s for s, _, _ in self._donated_spans]
        for i in changed:
            _, start, end = self._donation_bounds[i]  # type: ignore[misc]
            at = bisect.bisect_left(starts, end)
            if at and end > start and self._donated_spans[at - 1][1] > start:
                d = self._donated_spans[at - 1][2]
                self._donation_bounds = [None] * len(self.inputs)
                raise PreskError(
                    "E4003",
                    f"input '{self._path(i)}' shares memory with input '{self._path(d)}', which is donated (a result "
                    "is written over it): pass separate arrays",
                )

    def _path(self, i: int) -> str:
        return self.argument_paths[i] if i < len(self.argument_paths) else str(i)

    def _convert(self, i: int, leaf: Any) -> np.ndarray:
        shape, dtype = self.inputs[i]
        if type(leaf) is np.ndarray and leaf.dtype == dtype and leaf.shape == shape and leaf.flags.c_contiguous:
            return leaf
        # np.require, not ascontiguousarray, which makes a 0-d array 1-d.
        array = np.require(_to_buffer_type(np.asarray(leaf), dtype), requirements="C")
        if array.shape != shape:
            path = self.argument_paths[i] if i < len(self.argument_paths) else str(i)
            raise PreskError("E4003", f"input '{path}': expected shape {list(shape)}, got {list(array.shape)}")
        return array

    def _value(self, slot: int, values: list[Any]) -> np.ndarray:
        """The array of `slot`, a view made on first need (views are made only when an array is needed)."""
        array = values[slot]
        if array is None:
            step = self._views[slot]
            source = self._value(step.source, values)
            array = values[slot] = (source[step.index] if step.index is not None else source).reshape(step.shape)
        return array

    def __call__(self, leaves: Sequence[np.ndarray], on_launch: Callable[[Launch], Any] | None = None) -> list[np.ndarray]:
        """Run on the input leaves (converted to each buffer's type); returns the result leaves.

        The hot loop keeps, per step, what it made last time: an allocation
        its buffer (reused when no one else holds it), a launch its bindings
        of buffers to the kernel's pointer table, keyed by the identity of the
        buffers they show (an input or an allocation: a view's address is a
        fixed offset from its buffer's). A view is made only when a binding is
        built or the view is a result. So a second call of the same program
        on the same inputs costs, per launch, an identity test per buffer and
        the native call.
        """
        if len(leaves) != len(self.inputs):
            raise PreskError("E4003", f"the host program takes {len(self.inputs)} buffers, got {len(leaves)}")
        values: list[Any] = [None] * self.slot_count
        self._taken = set()
        for i, leaf in enumerate(leaves):
            values[i] = self._convert(i, leaf)
        if self.donated:
            self._check_donated(leaves, values)
        for entry in self._plan:
            kind, step = entry[0], entry[1]
            if kind is _LAUNCH:
                if on_launch is not None:
                    on_launch(step)
                if entry[3]:
                    cache = entry[2]
                    roots = [values[r] for r in entry[4]]
                    for refs, binding in cache:
                        if _same(refs, roots):
                            break
                    else:
                        binding = step.call.bind([self._value(s, values) for s in step.slots])
                        cache.insert(0, (tuple(weakref.ref(r) for r in roots), binding))
                        del cache[CACHED:]
                    step.call.launch(binding)
                else:
                    step.call([self._value(s, values) for s in step.slots])
                for slot in entry[5]:  # dead from here on: its buffer may serve a later allocation
                    array = values[slot]
                    if array is not None:
                        self._taken.discard(id(array))
                        values[slot] = None
            elif kind is _ALLOC:
                values[step.slot] = self._allocate(step)
        for s in self.outputs:
            self._value(s, values)
        return [values[s] for s in self.outputs]


_LAUNCH, _ALLOC, _VIEW = "launch", "alloc", "view"


def _written_arguments(block: Any, kernels: dict[str, kernel.KernelOp]) -> frozenset[int]:
    """The host's arguments (by position) that a launched kernel writes, directly or through a view."""
    root: dict[SSAValue, SSAValue] = {}
    for op in block.ops:
        if isinstance(op, kernel.ViewOp):
            root[op.result] = root.get(op.source, op.source)
    arguments = {arg: i for i, arg in enumerate(block.args)}
    written: set[int] = set()
    stores: dict[str, list[int]] = {}
    for op in block.ops:
        if not isinstance(op, kernel.LaunchOp):
            continue
        name = op.kernel.string_value()
        if name not in stores:
            stores[name] = sorted(written_buffers(kernels[name]))
        for position in stores[name]:
            value = op.buffers[position]
            i = arguments.get(root.get(value, value))
            if i is not None:
                written.add(i)
    return frozenset(written)


def _shares_any(array: np.ndarray, leaves: Sequence[Any], i: int) -> bool:
    """Whether `array` may share memory with another leaf (their byte ranges meet)."""
    return any(j != i and isinstance(leaf, np.ndarray) and np.may_share_memory(array, leaf) for j, leaf in enumerate(leaves))


CACHED = 4
"""Bindings a launch remembers: a result the caller keeps until the next call alternates between two buffers."""


def _same(refs: tuple[weakref.ref[np.ndarray], ...], arrays: list[np.ndarray]) -> bool:
    for ref, array in zip(refs, arrays):
        if ref() is not array:
            return False
    return True


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


def _to_buffer_type(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """An input in its buffer's type: f64 to bf16 rounds once (ml_dtypes' astype rounds through f32)."""
    if dtype == ml_dtypes.bfloat16 and array.dtype == np.float64:
        from presk.interp.kernel import truncate_f64_to_bf16

        return np.asarray(truncate_f64_to_bf16(array))
    return array.astype(dtype, copy=False)
