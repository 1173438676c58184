"""Splitting a kernel's range over worker threads."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from jit_kernels import pointer_table, scale_ir

from presk.jit.engine import JitEngine
from presk.jit.pool import WorkerPool, split_range


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
    """A Python stand-in for a kernel: records its chunks and the threads that ran them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[int, int, int, str]] = []

    def __call__(self, args_ptr: int, lo: int, hi: int) -> None:
        with self.lock:
            self.calls.append((args_ptr, lo, hi, threading.current_thread().name))


@pytest.mark.parametrize(("workers", "n", "calls"), [(1, 10, 1), (2, 10, 2), (2, 1, 1), (2, 0, 0), (3, 2, 2)])
def test_run_calls_each_chunk_once(workers: int, n: int, calls: int) -> None:
    kernel = Recorder()
    with WorkerPool(workers) as pool:
        pool.run(kernel, 42, n)
    assert len(kernel.calls) == calls
    assert sorted(i for _, lo, hi, _ in kernel.calls for i in range(lo, hi)) == list(range(n))
    assert {ptr for ptr, *_ in kernel.calls} <= {42}
    if calls == 2:
        threads = {name for *_, name in kernel.calls}
        assert threading.current_thread().name in threads and len(threads) == 2


def test_two_workers_compute_what_one_does(tmp_path) -> None:
    kernel = JitEngine(cache_dir=tmp_path).kernel(scale_ir(), "scale")
    a = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    results = []
    for workers in (1, 2):
        out = np.zeros_like(a)
        table = pointer_table([a, out])
        with WorkerPool(workers) as pool:
            pool.run(kernel, ctypes.addressof(table), a.size)
        results.append(out)
    np.testing.assert_array_equal(results[0], a * 2)
    np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.parametrize("failing_chunk", [0, 1])
def test_exceptions_propagate_after_every_chunk_finished(failing_chunk: int) -> None:
    finished: list[int] = []
    release = threading.Event()

    def kernel(args_ptr: int, lo: int, hi: int) -> None:
        chunk = 0 if lo == 0 else 1
        if chunk == failing_chunk:
            release.set()
            raise ZeroDivisionError(f"chunk {chunk}")
        release.wait(5)
        finished.append(chunk)

    pool = WorkerPool(2)
    with pytest.raises(ZeroDivisionError, match=f"chunk {failing_chunk}"):
        pool.run(kernel, 0, 10)
    assert finished == [1 - failing_chunk]
    pool.run(Recorder(), 0, 10)  # the pool survives a failed launch
    pool.close()


def test_pool_arguments() -> None:
    with pytest.raises(ValueError):
        WorkerPool(0)
    pool = WorkerPool(2)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(Recorder(), 0, 10)
