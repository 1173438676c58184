"""Running a split kernel's range on several threads.

A split (`psk-split`) divides the kernel's outermost parallel loop `[0, n)`
into contiguous chunks; the kernel ABI takes `[lo, hi)`, so a chunk is just a
call. Threads suffice because ctypes releases the GIL for the duration of a
native call. The threads persist across launches (starting one costs far
more than a small kernel), and the calling thread runs chunks itself instead
of idling while it waits.

With `chunks_per_worker` = 1 each worker gets one chunk. With more, the
chunks are handed out as workers become free (the calling thread takes the
first at once, a pool thread the next when it wakes up, and so on): on a
shared machine a worker that starts late, or runs on a core another process
holds, then takes fewer chunks instead of making the whole launch wait for
its one large chunk. The chunks are of one size (`even_chunks`): where the
range does not divide into that many, fewer, down to one per worker. Which
thread runs which iterations never changes what they compute (the
iterations of a split loop are independent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Self

Kernel = Callable[[int, int, int], None]
"""`kernel(args_ptr, lo, hi)`: a `CompiledKernel` or anything called like one."""


def split_range(n: int, workers: int) -> list[tuple[int, int]]:
    """`[0, n)` as at most `workers` contiguous, non-empty chunks differing in size by at most one.

    Balanced rather than ceil-sized, so that no worker is left with a much
    smaller last chunk (with n=9, workers=4: 2,2,2,3 and not 3,3,3,0).
    """
    parts = max(1, min(workers, n))
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]


def even_chunks(n: int, workers: int, chunks_per_worker: int) -> list[tuple[int, int]]:
    """`[0, n)` as the most chunks of one size, at most `chunks_per_worker` per worker and a multiple of
    `workers`, else as `split_range(n, workers)`.

    Chunks handed out as threads become free balance a launch only if they
    are alike: the course GPT's attention weight gradients split 12 column
    blocks, which 8 chunks cut into 1s and 2s, and the thread left with a
    last chunk of 2 kept the other waiting. With chunks of one size its
    `loss_grad` ran 2 to 4 % faster (`docs/performance.md`, "Chunks of one
    size").
    """
    for count in range(workers * chunks_per_worker, workers, -workers):
        if n % count == 0:
            return split_range(n, count)
    return split_range(n, workers)


def _drain(kernel: Kernel, args_ptr: int, queue: Iterator[tuple[int, int]]) -> None:
    """Run chunks from the shared `queue` until it is empty (or a chunk fails: the others take the rest)."""
    for lo, hi in queue:
        kernel(args_ptr, lo, hi)


class WorkerPool:
    """`workers` threads (the caller's included) for running split kernels, `chunks_per_worker` chunks each."""

    def __init__(self, workers: int, chunks_per_worker: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {workers}")
        if chunks_per_worker < 1:
            raise ValueError(f"a worker takes at least one chunk, got {chunks_per_worker}")
        self.workers = workers
        self.chunks_per_worker = chunks_per_worker
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def _pool(self) -> ThreadPoolExecutor:
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.workers - 1, thread_name_prefix="presk-worker")
        return self._executor

    def run(self, kernel: Kernel, args_ptr: int, n: int) -> None:
        """Run `kernel` over `[0, n)`, split into `workers` chunks; return when all are done.

        Every chunk finishes before this returns or raises, even when one
        fails: the caller may free the buffers as soon as it regains control.
        The first failure (the caller's own chunk first) is re-raised.
        """
        if self.workers == 1 or n < 2:
            if n > 0:
                kernel(args_ptr, 0, n)
            return
        chunks = even_chunks(n, self.workers, self.chunks_per_worker)
        submit = self._pool().submit
        futures: list[Future[None]]
        error: BaseException | None = None
        if len(chunks) <= self.workers:
            futures = [submit(kernel, args_ptr, lo, hi) for lo, hi in chunks[1:]]
            try:
                kernel(args_ptr, *chunks[0])
            except BaseException as own:  # noqa: BLE001 - re-raised after the others finish
                error = own
        else:
            # One shared iterator: `next` on a list iterator is atomic under the GIL.
            queue = iter(chunks)
            futures = [submit(_drain, kernel, args_ptr, queue) for _ in range(min(self.workers, len(chunks)) - 1)]
            try:
                _drain(kernel, args_ptr, queue)
            except BaseException as own:  # noqa: BLE001 - re-raised after the others finish
                error = own
        for future in futures:
            failure = future.exception()
            if error is None:
                error = failure
        if error is not None:
            raise error

    def close(self) -> None:
        """Stop the threads (waiting for running chunks); later `run`s with splits fail."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
