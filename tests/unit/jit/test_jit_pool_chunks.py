"""A split handed out in more chunks than workers (`WorkerPool(workers, chunks_per_worker)`)."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from jit_kernels import pointer_table, scale_ir

from presk.jit.engine import JitEngine
from presk.jit.pool import WorkerPool, even_chunks, split_range


class Recorder:
    def __init__(self, fail_at: int | None = None) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[int, int, str]] = []
        self.fail_at = fail_at

    def __call__(self, args_ptr: int, lo: int, hi: int) -> None:
        with self.lock:
            self.calls.append((lo, hi, threading.current_thread().name))
        if self.fail_at is not None and lo <= self.fail_at < hi:
            raise ZeroDivisionError(f"chunk at {lo}")


@pytest.mark.parametrize(("workers", "per", "n"), [(2, 4, 10), (2, 4, 3), (3, 2, 1001), (2, 8, 100_000), (1, 4, 50)])
def test_every_iteration_runs_once(workers: int, per: int, n: int) -> None:
    kernel = Recorder()
    with WorkerPool(workers, per) as pool:
        pool.run(kernel, 0, n)
    assert sorted((lo, hi) for lo, hi, _ in kernel.calls) == (even_chunks(n, workers, per) if workers > 1 else [(0, n)])
    assert sorted(i for lo, hi, _ in kernel.calls for i in range(lo, hi)) == list(range(n))


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("per", [1, 2, 4])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 12, 48, 1001, 2048])
def test_even_chunks_are_of_one_size(n: int, workers: int, per: int) -> None:
    chunks = even_chunks(n, workers, per)
    assert [i for lo, hi in chunks for i in range(lo, hi)] == list(range(n))
    sizes = {hi - lo for lo, hi in chunks}
    if len(chunks) > workers:
        # more chunks than workers only where they are alike, a whole number per worker, at most `per` each
        assert len(sizes) == 1 and len(chunks) % workers == 0 and len(chunks) <= workers * per
    else:
        assert chunks == split_range(n, workers)
    # and the most such chunks: no larger whole number per worker divides n
    assert not [c for c in range(2 * workers, workers * per + 1, workers) if c > len(chunks) and n % c == 0]


def test_twelve_column_blocks_on_two_workers_are_six_chunks_of_two() -> None:
    """The attention weight gradients' 12 J blocks: 8 chunks would be 1s and 2s."""
    assert even_chunks(12, 2, 4) == [(2 * i, 2 * i + 2) for i in range(6)]
    assert even_chunks(2048, 2, 4) == split_range(2048, 8)


def test_a_failed_chunk_is_raised_after_the_others_ran() -> None:
    kernel = Recorder(fail_at=0)
    with WorkerPool(2, 4) as pool:
        with pytest.raises(ZeroDivisionError, match="chunk at 0"):
            pool.run(kernel, 0, 80)
        ran = {lo for lo, _, _ in kernel.calls}
        assert ran == {lo for lo, _ in split_range(80, 8)}  # the other thread drained the rest
        pool.run(Recorder(), 0, 10)  # and the pool still works


def test_same_results_as_one_chunk_per_worker(tmp_path) -> None:
    kernel = JitEngine(cache_dir=tmp_path).kernel(scale_ir(), "scale")
    a = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    outs = []
    for per in (1, 4, 16):
        out = np.zeros_like(a)
        table = pointer_table([a, out])
        with WorkerPool(2, per) as pool:
            pool.run(kernel, ctypes.addressof(table), a.size)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], a * 2)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_chunks_per_worker_is_positive() -> None:
    with pytest.raises(ValueError):
        WorkerPool(2, 0)
