"""Timing on a shared, noisy machine: medians of repeated calls, measured side by side.

Every benchmark of presk compares against a baseline measured in the same
process, interleaved round by round, so that a slow minute of the machine
slows both sides alike; a figure is the median of the rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

Point = TypeVar("Point")


@dataclass(frozen=True)
class Timing:
    name: str
    median_s: float
    spread: tuple[float, float]
    """The 25th and 75th percentiles, seconds."""
    rounds: int

    def ms(self) -> str:
        return f"{self.median_s * 1e3:.3f}"


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of `n` contenders, one per round, in which each follows each other equally often: a Williams design.

    The first order is 0, 1, n−1, 2, n−2, …; the others add 1, 2, … to it
    modulo n. For an even n those n orders hold every ordered pair of
    neighbours once; for an odd n the n orders reversed are added, and
    every pair is there twice.
    """
    first, low, high = [0], 1, n - 1
    while low <= high:
        first.append(low)
        low += 1
        if low <= high:
            first.append(high)
            high -= 1
    orders = [[(i + shift) % n for i in first] for shift in range(n)]
    return orders if n % 2 == 0 else orders + [order[::-1] for order in orders]


def side_by_side(
    contenders: Mapping[str, Callable[[], object]],
    rounds: int = 21,
    warmup: int = 3,
    progress: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    block: int = 1,
) -> dict[str, Timing]:
    """Time each contender in turn, for `rounds` rounds after `warmup` calls each (round r starts at the r-th).

    `clock` is wall time by default; `time.thread_time` measures the CPU time
    of the calling thread only, which a busy machine (other processes taking
    turns on the cores) disturbs much less: for single-threaded runs.

    With `block` > 1 a contender runs `block` consecutive calls in its turn
    and the round's sample is the median of all but the first: its steady
    state, as a caller that runs it in a loop sees it. A single call right
    after another contender's measures a cold start too (a thread pool put
    to sleep, caches holding the other's data), which costs torch's OpenMP
    pool far more than presk's: the attention `ein`s ran twice as slow in
    torch interleaved call by call as in a process of their own.

    The order of the turns follows `balanced_orders`: over every n rounds
    (2n for an odd count n of contenders) every contender follows every
    other equally often. A contender leaves the
    machine disturbed for the next few milliseconds (the GEMM's default
    layout slowed the next two threads' 512³ f64 product, presk's or
    torch's, by 10 % for its first four calls), and an order that only
    rotates keeps each contender's predecessor: the best point followed the
    default in three rounds of four there, torch never did.
    """
    if block < 1:
        raise ValueError(f"block is a number of calls, at least 1, not {block}")
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    orders = balanced_orders(len(names))
    for r in range(rounds):
        for name in (names[i] for i in orders[r % len(orders)]):
            fn = contenders[name]
            calls = []
            for _ in range(block):
                start = clock()
                fn()
                calls.append(clock() - start)
            samples[name].append(statistics.median(calls[1:] if block > 1 else calls))
        if progress and sys.stderr.isatty():
            done = (r + 1) * 30 // rounds
            sys.stderr.write(f"\r  [{'#' * done}{'.' * (30 - done)}] round {r + 1}/{rounds}")
            sys.stderr.flush()
    if progress and sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 60 + "\r")
    out = {}
    for name, xs in samples.items():
        q = statistics.quantiles(xs, n=4) if len(xs) >= 4 else [min(xs), 0, max(xs)]
        out[name] = Timing(name, statistics.median(xs), (q[0], q[2]), len(xs))
    return out


def torch_or_none(threads: int) -> Any:
    """torch told to use `threads` threads, or None when the optional `bench` extra is not installed.

    torch.compile's kernel cache is kept apart per `ATEN_CPU_CAPABILITY` (the AVX2 runs of
    docs/performance.md set it): torch 2.13 reuses a kernel compiled under another capability, and
    the course GPT's loss under AVX2 came out NaN from the AVX-512 run's cache (Xeon, 2026-12-02).
    """
    capability = os.environ.get("ATEN_CPU_CAPABILITY")
    if capability and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        import getpass
        import tempfile

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
            tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}_{capability}"
        )
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    torch.set_num_threads(threads)
    return torch


def positive_int(text: str) -> int:
    """An argparse type: a count of calls or rounds, at least 1 (a clear usage error otherwise)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def sweep(
    points: Sequence[Point],
    build: Callable[[Point], Callable[[], object]],
    screen: int,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[list[tuple[float, Point]], dict[str, int]]:
    """Each point built and timed: (median seconds of `screen` calls, point), fastest first, and the refusals.

    A point `build` refuses with a `PreskError` (a layout the checks reject,
    E7002) is counted under its code and skipped; every other point is run
    once to warm up (compilation) before its timed calls. `progress` is told
    the index of each point and the seconds since the sweep began.
    """
    from presk.diagnostics import PreskError

    timed: list[tuple[float, Point]] = []
    refused: dict[str, int] = {}
    start = time.perf_counter()
    for index, point in enumerate(points):
        if progress is not None:
            progress(index, time.perf_counter() - start)
        try:
            call = build(point)
        except PreskError as error:
            refused[error.code] = refused.get(error.code, 0) + 1
            continue
        call()
        times = []
        for _ in range(screen):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        timed.append((sorted(times)[len(times) // 2], point))
    timed.sort(key=lambda entry: entry[0])
    return timed, refused


def final(
    swept: Sequence[tuple[float, Point]],
    build: Callable[[Point], Callable[[], object]],
    count: int = 4,
    rounds: int = 5,
    block: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> Point:
    """The fastest of the sweep's first `count` points, timed again side by side: the point a benchmark reports.

    A sweep times each point alone over a few calls, minutes apart from the
    others, so its order near the top is partly the machine's: of two runs
    of the AVX2 GEMM at f32 N = 2048, one's sweep put `JI` first (147.5 ms
    side by side), the other's `KIJ` with a J-block (143.5). The finalists
    run in the balanced turns of `side_by_side`, after one warm-up call
    each, and the least median wins. A sweep that timed no point (the
    layout checks refused every one) ends the benchmark with a message.
    """
    if not swept:
        raise SystemExit("no point to time: the layout checks refused every point of the sweep (E7002)")
    finalists = [point for _, point in swept[:count]]
    if len(finalists) == 1:
        return finalists[0]
    calls = {str(i): build(point) for i, point in enumerate(finalists)}
    timings = side_by_side(calls, rounds=rounds, warmup=1, progress=False, clock=clock, block=block)
    return finalists[int(min(timings, key=lambda name: timings[name].median_s))]


def thread_env(threads: int) -> dict[str, str]:
    """The environment of a process whose every thread pool (OpenBLAS, OpenMP, MKL, presk) has `threads` threads.

    Idle threads sleep at once: spinning ones would hold the core the next
    contender needs. OpenMP waits passively, and OpenBLAS's threads spin
    2⁴ cycles instead of 2²⁸ (`OPENBLAS_THREAD_TIMEOUT`, log₂ cycles,
    clamped to [4, 30]): 2²⁸ is about 70 ms here, during which a numpy call
    left one of the two cores busy for torch.einsum, timed next (11.9 ms
    instead of 7.3 alone).
    """
    n = str(threads)
    return {**os.environ, "OPENBLAS_NUM_THREADS": n, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n,
            "PRESK_THREADS": n, "OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}  # fmt: skip


def run_per_thread_count(
    script: str, thread_counts: Sequence[int], worker_args: Sequence[str], report: Callable[[int, dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """`script --worker --threads N *worker_args` in a fresh process per thread count (`thread_env`).

    Thread pools are sized when a library loads, so each count needs its own
    process. The worker prints one JSON record per line; each is passed to
    `report` as it arrives and all are returned. A failing worker ends the run.
    """
    records: list[dict[str, Any]] = []
    for threads in thread_counts:
        command = [sys.executable, script, "--worker", "--threads", str(threads), *worker_args]
        with subprocess.Popen(command, env=thread_env(threads), stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                record = json.loads(line)
                records.append(record)
                report(threads, record)
        if proc.returncode:
            sys.exit(proc.returncode)
    return records
