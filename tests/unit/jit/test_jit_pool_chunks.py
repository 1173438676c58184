"""How a split launch is cut into chunks (`even_chunks`), and that the cut never changes the result."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from jit_kernels import pointer_table, scale_ir

from presk.jit.engine import JitEngine
from presk.jit.pool import WorkerPool, even_chunks, split_range


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


def test_same_results_as_one_chunk_per_worker(tmp_path) -> None:
    engine = JitEngine(cache_dir=tmp_path)
    kernel = engine.kernel(scale_ir(), "scale")
    a = np.random.default_rng(1).standard_normal(100_003).astype(np.float32)
    outs = []
    for per in (1, 4, 16):
        out = np.zeros_like(a)
        table = pointer_table([a, out])
        with WorkerPool(2, per, engine=engine) as pool:
            pool.run(kernel.address, ctypes.addressof(table), a.size)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], a * 2)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
