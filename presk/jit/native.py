"""The native executor's kernels: PSK-Kernel translated to LLVM, compiled, called on numpy arrays.

`NativeRunner()(kernel)` gives the same interface as the kernel interpreter's
runner (`presk.jit.executor.Runner`): a callable taking the kernel's buffers
as numpy arrays, in the kernel's order, that fills its outputs in place.

A call:
1. checks every array against the kernel's buffer types (shape, dtype through
   `dtype_of`, C-contiguous, aligned, outputs writable) with `check_buffers`:
   an `E4003` before any native code runs, since native code trusts its buffers;
2. points the kernel's `args` table at the arrays. The table is rebuilt only
   when a different array object comes in: the last arrays are remembered by
   weak reference, so a repeated launch on the same buffers costs one identity
   test per buffer and the runner keeps no array alive. Reading an address only
   then is safe because a live numpy array never moves its data. The table is
   never mutated once built (a new set of arrays gets a new table), so two
   threads may call the same kernel at once. `bind(arrays)` and
   `launch(binding)` are the two halves, for a caller that keeps one binding
   per launch site (`presk.jit.executor.HostProgram`: a kernel serving every
   layer of a fold sees other arrays at each launch, a site the same ones at
   every call);
3. checks, with that rebuild, that no buffer the kernel writes overlaps another
   buffer: the translation tells LLVM that buffers do not alias
   (`presk.lowering.kernel_to_llvm`). If one does, the call runs the variant
   translated without that assumption, compiled on first need, unsplit;
4. runs `[0, n)` (`launch_iterations`): in one call on this thread, or split
   into contiguous chunks on a `WorkerPool` (native threads) when `default_split` says so
   (`psk_kernel.workers`, or more than one million weighted operations).
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Self

import numpy as np

from presk.cost.kernel_cost import (
    declared_workers,
    split_workers,
    weighted_operations,
)
from presk.diagnostics import PlanWarning
from presk.target import THREADS_ENV, Machine
from presk.dialects.psk_kernel import KernelOp
from presk.jit.buffers import BufferSpec, check_buffers
from presk.jit.engine import CompiledKernel, JitEngine
from presk.jit.executor import dtype_of
from presk.jit.pool import WorkerPool
from presk.analysis import launch_iterations, split_loop, written_buffers
from presk.lowering.kernel_to_llvm import translate_kernel

__all__ = ["CHUNKS_PER_WORKER", "KernelCall", "NativeKernel", "NativeRunner", "dtype_of"]

CHUNKS_PER_WORKER = int(os.environ.get("PRESK_CHUNKS_PER_WORKER", "4"))
"""Chunks of a split launch per worker, handed out dynamically (see `NativeRunner.pool`)."""

KernelCall = Callable[[Sequence[np.ndarray]], None]


class _Binding:
    """One set of arrays: weak references to them, their pointer table, and whether they are disjoint."""

    __slots__ = ("address", "disjoint", "refs", "starts", "table")

    def __init__(self, arrays: Sequence[np.ndarray], written: frozenset[int], previous: _Binding | None) -> None:
        self.refs = tuple(weakref.ref(a) for a in arrays)
        if previous is None:
            starts = [a.__array_interface__["data"][0] for a in arrays]
        else:  # reading an address costs microseconds: only for the arrays that changed
            starts = [
                old if ref() is a else a.__array_interface__["data"][0]
                for a, ref, old in zip(arrays, previous.refs, previous.starts)
            ]
        self.starts = starts
        self.table = (ctypes.c_void_p * max(len(arrays), 1))(*starts)
        self.address: int = ctypes.addressof(self.table)
        self.disjoint = _disjoint(starts, [a.nbytes for a in arrays], written)

    def matches(self, arrays: Sequence[np.ndarray]) -> bool:
        if len(arrays) != len(self.refs):
            return False
        for ref, array in zip(self.refs, arrays):
            if ref() is not array:
                return False
        return True


def _disjoint(starts: Sequence[int], sizes: Sequence[int], written: frozenset[int]) -> bool:
    """True when no written buffer shares a byte with any other buffer."""
    for w in written:
        if not sizes[w]:
            continue
        w_start, w_end = starts[w], starts[w] + sizes[w]
        for j, (start, size) in enumerate(zip(starts, sizes)):
            if j != w and size and start < w_end and w_start < start + size:
                return False
    return True


class NativeKernel:
    """One compiled kernel, called on numpy arrays (see the module docstring)."""

    def __init__(self, runner: NativeRunner, kernel: KernelOp, compiled: CompiledKernel | None = None) -> None:
        self.runner = runner
        self.name = kernel.sym_name.data
        self.site = kernel.site.data
        self.written = written_buffers(kernel)
        self.specs = tuple(
            BufferSpec(tuple(t.get_shape()), dtype_of(t), output=i in self.written)
            for i, t in enumerate(kernel.buffers)
        )
        self.iterations = launch_iterations(kernel)
        """`n`: calls run `[0, n)`."""
        self.splittable = split_loop(kernel) is not None and self.iterations > 1
        self.operations = weighted_operations(kernel)
        self.declared_workers = declared_workers(kernel)
        self.compiled: CompiledKernel = compiled or runner.engine.kernel(translate_kernel(kernel, runner.machine), self.name)
        self._function = self.compiled.function
        self._kernel = kernel
        self._overlapping: Callable[[int, int, int], None] | None = None
        self._lock = threading.Lock()
        self._binding: _Binding | None = None

    def workers(self) -> int:
        """Workers a call runs on now (1: not split); reads `PRESK_THREADS` for the default."""
        return split_workers(self.splittable, self.declared_workers, self.operations, self.runner.machine)

    def _overlapping_function(self) -> Callable[[int, int, int], None]:
        """The variant without no-alias scopes, for overlapping buffers (compiled on first use)."""
        with self._lock:
            if self._overlapping is None:
                ir = translate_kernel(self._kernel, self.runner.machine, assume_disjoint=False)
                self._overlapping = self.runner.engine.kernel(ir, self.name).function
            return self._overlapping

    def bind(self, arrays: Sequence[np.ndarray], previous: _Binding | None = None) -> _Binding:
        """Check `arrays` (E4003 before any native code runs) and build their pointer table.

        A binding stays valid for as long as the same array objects come in
        (`_Binding.matches`): a live numpy array never moves its data, and its
        shape, dtype and flags were checked here.
        """
        check_buffers(self.name, self.specs, arrays)
        return _Binding(arrays, self.written, previous)

    def launch(self, binding: _Binding) -> None:
        """Run `[0, n)` on bound arrays: one call here, or split over the worker pool."""
        n = self.iterations
        if n <= 0:
            return
        if not binding.disjoint:
            # Sequential semantics, which a split could not keep with a shared buffer.
            self._overlapping_function()(binding.address, 0, n)
            return
        workers = self.workers()
        if workers > 1:
            self.runner.pool(workers).run(self.compiled.address, binding.address, n)
        else:
            self._function(binding.address, 0, n)

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        binding = self._binding
        if binding is None or not binding.matches(arrays):
            binding = self._binding = self.bind(arrays, binding)
        else:
            check_buffers(self.name, self.specs, arrays)
        self.launch(binding)

    def __repr__(self) -> str:
        return f"NativeKernel({self.name!r}, site={self.site!r}, iterations={self.iterations})"


class NativeRunner:
    """Compiles kernels for the native executor: `runner(kernel)` → a call on numpy arrays.

    `engine` compiles and caches (a new `JitEngine` by default); `machine` is
    what the IR is generated and split for (default: the engine's). Owns the
    worker pools of split kernels: `close()` (or `with`) stops their threads.
    """

    def __init__(self, engine: JitEngine | None = None, machine: Machine | None = None) -> None:
        self.engine = engine if engine is not None else JitEngine(machine)
        self.machine = machine if machine is not None else self.engine.machine
        self._pools: dict[int, WorkerPool] = {}
        self._lock = threading.Lock()

    def __call__(self, kernel: KernelOp) -> NativeKernel:
        return NativeKernel(self, kernel)

    def many(self, kernels: Sequence[KernelOp]) -> list[NativeKernel]:
        """`runner(k)` of each kernel, their modules compiled as one batch (`JitEngine.compile_many`)."""
        irs = [translate_kernel(k, self.machine) for k in kernels]
        modules = self.engine.compile_many(irs)
        return [NativeKernel(self, k, m.kernel(k.sym_name.data)) for k, m in zip(kernels, modules)]

    def pool(self, workers: int) -> WorkerPool:
        """The pool of `workers` threads (the caller's included), created on first use.

        Its chunks are handed out as threads become free, `CHUNKS_PER_WORKER`
        per worker (`presk.jit.pool`): a worker that starts late or shares
        its core takes fewer.
        """
        pool = self._pools.get(workers)
        if pool is None:
            with self._lock:
                pool = self._pools.get(workers)
                if pool is None:
                    if workers > self.machine.cores:
                        warnings.warn(PlanWarning(
                            f"{workers} workers on the {self.machine.cores} cores this process may run on "
                            f"(--threads or {THREADS_ENV}): they take turns on the cores, and each split kernel "
                            f"waits for its slowest; {self.machine.cores} or fewer run it faster"), stacklevel=2)  # fmt: skip
                    pool = self._pools[workers] = WorkerPool(workers, CHUNKS_PER_WORKER, self.engine)
        return pool

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
