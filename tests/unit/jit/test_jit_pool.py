"""Splitting a kernel's range over worker threads (`presk.jit.pool`, the native dispatcher)."""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import warnings

import numpy as np
import pytest
from jit_kernels import pointer_table, scale_ir

from presk.diagnostics import PlanWarning
from presk.jit.engine import JitEngine, KernelFunction
from presk.jit.native import NativeRunner
from presk.jit.pool import WorkerPool, even_chunks, split_range


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> JitEngine:
    return JitEngine(cache_dir=tmp_path_factory.mktemp("pool-cache"))


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 9, 64, 1001])
def test_split_range_covers_the_range_once_in_balanced_chunks(n: int, workers: int) -> None:
    chunks = split_range(n, workers)
    covered = [i for lo, hi in chunks for i in range(lo, hi)]
    assert covered == list(range(n))
    sizes = [hi - lo for lo, hi in chunks]
    if n:
        assert len(chunks) == min(n, workers) and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


class Recorder:
    """A Python stand-in for a kernel, called from native code: records its chunks and the threads that ran them.

    With `meet` > 1 every chunk waits (at most 5 s) until chunks on `meet`
    different threads are running at once, so a test can require that the
    workers really took part.
    """

    def __init__(self, meet: int = 1) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[int, int, int, str]] = []
        self.barrier = threading.Barrier(meet) if meet > 1 else None
        self.met = True
        self.function = KernelFunction(self)
        self.address: int = ctypes.cast(self.function, ctypes.c_void_p).value or 0

    def __call__(self, args_ptr: int | None, lo: int, hi: int) -> None:
        with self.lock:
            self.calls.append((args_ptr or 0, lo, hi, threading.current_thread().name))
        if self.barrier is not None:
            try:
                self.barrier.wait(5)
            except threading.BrokenBarrierError:
                self.met = False


@pytest.mark.parametrize(("workers", "n", "calls"), [(1, 10, 1), (2, 10, 2), (2, 1, 1), (2, 0, 0), (3, 2, 2)])
def test_run_calls_each_chunk_once(engine: JitEngine, workers: int, n: int, calls: int) -> None:
    kernel = Recorder(meet=calls if calls > 1 else 1)
    with WorkerPool(workers, engine=engine) as pool:
        pool.run(kernel.address, 42, n)
    assert len(kernel.calls) == calls
    assert sorted(i for _, lo, hi, _ in kernel.calls for i in range(lo, hi)) == list(range(n))
    assert {ptr for ptr, *_ in kernel.calls} <= {42}
    if calls == 2:  # both chunks ran at once, on two of the pool's threads
        assert kernel.met
        threads = {name for *_, name in kernel.calls}
        pool_threads = {threading.current_thread().name, *(f"presk-worker-{i}" for i in range(1, workers))}
        assert len(threads) == 2 and threads <= pool_threads
        if workers == 2:  # the caller's thread is one of the two: nothing else could meet the other at the barrier
            assert threading.current_thread().name in threads


def test_two_workers_compute_what_one_does(engine: JitEngine) -> None:
    kernel = engine.kernel(scale_ir(), "scale")
    a = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    results = []
    for workers in (1, 2):
        out = np.zeros_like(a)
        table = pointer_table([a, out])
        with WorkerPool(workers, engine=engine) as pool:
            pool.run(kernel.address, ctypes.addressof(table), a.size)
        results.append(out)
    np.testing.assert_array_equal(results[0], a * 2)
    np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.parametrize("per", [1, 4])
def test_many_launches_in_a_row_each_see_their_own_arguments(engine: JitEngine, per: int) -> None:
    """Launches follow each other faster than a worker wakes: none may run a chunk with another launch's
    arguments, or return before its chunks are done (the slot and tag protocol in `presk.jit.pool`)."""
    kernel = engine.kernel(scale_ir(), "scale")
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(int(n)).astype(np.float32) for n in rng.integers(2, 300, size=16)]
    outputs = [np.zeros_like(a) for a in inputs]
    tables = [pointer_table([a, out]) for a, out in zip(inputs, outputs)]
    with WorkerPool(2, per, engine=engine) as pool:
        for launch in range(2000):
            i = launch % len(inputs)
            outputs[i][:] = 0
            pool.run(kernel.address, ctypes.addressof(tables[i]), inputs[i].size)
            np.testing.assert_array_equal(outputs[i], inputs[i] * 2)


def test_a_sleeping_worker_wakes_for_the_next_launch(engine: JitEngine) -> None:
    with WorkerPool(2, engine=engine) as pool:
        time.sleep(0.05)  # far past the spin: the worker waits on its futex
        kernel = Recorder(meet=2)
        pool.run(kernel.address, 0, 2)
        assert kernel.met and len({name for *_, name in kernel.calls}) == 2


def _worker_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("presk-worker")}


def test_close_and_collection_stop_the_threads(engine: JitEngine) -> None:
    before = _worker_threads()
    pool = WorkerPool(3, engine=engine)
    assert len(_worker_threads() - before) == 2
    pool.close()
    assert _worker_threads() == before
    pool = WorkerPool(2, engine=engine)
    pool.run(Recorder().address, 0, 4)
    del pool
    gc.collect()
    assert _worker_threads() == before


def test_pool_arguments(engine: JitEngine) -> None:
    with pytest.raises(ValueError):
        WorkerPool(0, engine=engine)
    with pytest.raises(ValueError):
        WorkerPool(2, 0, engine=engine)
    pool = WorkerPool(2, engine=engine)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(Recorder().address, 0, 10)


@pytest.mark.parametrize(("workers", "per", "n"), [(2, 4, 10), (2, 4, 3), (3, 2, 1001), (2, 8, 100_000), (1, 4, 50)])
def test_every_iteration_runs_once_in_the_planned_chunks(engine: JitEngine, workers: int, per: int, n: int) -> None:
    kernel = Recorder()
    with WorkerPool(workers, per, engine=engine) as pool:
        pool.run(kernel.address, 0, n)
    assert sorted((lo, hi) for _, lo, hi, _ in kernel.calls) == (even_chunks(n, workers, per) if workers > 1 else [(0, n)])


def test_more_workers_than_cores_is_warned_once_and_still_runs() -> None:
    """`--threads 8` on a 2-core machine runs, every split kernel waiting for workers that take turns on
    the cores: the runner says so when it makes that pool, once, and not for a pool the cores can hold."""
    with NativeRunner() as runner:
        cores = runner.machine.cores
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runner.pool(cores)
            runner.pool(cores + 1)
            runner.pool(cores + 1)
        told = [w for w in caught if issubclass(w.category, PlanWarning)]
        assert len(told) == 1
        assert str(told[0].message).startswith(f"{cores + 1} workers on the {cores} cores this process may run on")
