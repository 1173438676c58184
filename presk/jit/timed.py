"""A runner whose every kernel launch is timed: what `presk bench` reports and the calibration fits.

Native kernels keep the host's fast path (`bind` once, `launch` per call)
and only `launch` is timed, so what is left outside the kernels is the
host's own cost, and a calibration sample is the kernel's time alone.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from presk.dialects.psk_kernel import KernelOp
from presk.jit.executor import calls_of

__all__ = ["TimedRunner", "call_for_a_window"]


def call_for_a_window(call: Callable[[], None], min_calls: int, min_seconds: float, max_calls: int) -> int:
    """Calls `call` until it has been called `min_calls` times and `min_seconds` have passed, or `max_calls`
    times: how many calls it made.

    The one timing window of the calibration and of `presk autotune`: a
    window of time, not a count of calls, so that a kernel of microseconds
    is called thousands of times and its median is not a few calls' noise.
    """
    calls, start = 0, time.perf_counter()
    while calls < max_calls and (calls < min_calls or time.perf_counter() - start < min_seconds):
        call()
        calls += 1
    return calls


class TimedRunner:
    """Wraps a runner so every launch is timed, by kernel name (`samples`), with the workers it ran on (`workers`)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.total_seconds = 0.0
        """Every timed launch's seconds, summed: a caller's difference around one call is that call's kernels."""
        self.workers: dict[str, int] = {}
        self.kernels: dict[str, KernelOp] = {}

    def __call__(self, kernel: KernelOp) -> Any:
        return self._timed(kernel, self.runner(kernel))

    def many(self, kernels: Sequence[KernelOp]) -> list[Any]:
        """Each kernel's timed call, the calls made together as the wrapped runner makes them (`calls_of`)."""
        return [self._timed(k, call) for k, call in zip(kernels, calls_of(self.runner, kernels))]

    def _timed(self, kernel: KernelOp, call: Any) -> Any:
        name = kernel.sym_name.data
        samples = self.samples[name]
        self.kernels[name] = kernel
        workers = getattr(call, "workers", None)
        self.workers[name] = workers() if callable(workers) else 1
        if hasattr(call, "bind") and hasattr(call, "launch"):
            return _TimedLaunch(call, samples, self)

        def timed(arrays: Sequence[Any]) -> None:
            start = time.perf_counter()
            call(arrays)
            self.record(samples, time.perf_counter() - start)

        return timed

    def record(self, samples: list[float], seconds: float) -> None:
        samples.append(seconds)
        self.total_seconds += seconds


class _TimedLaunch:
    def __init__(self, inner: Any, samples: list[float], runner: TimedRunner) -> None:
        self.inner, self.samples, self.runner = inner, samples, runner

    def bind(self, arrays: Any, previous: Any = None) -> Any:
        return self.inner.bind(arrays, previous)

    def launch(self, binding: Any) -> None:
        start = time.perf_counter()
        self.inner.launch(binding)
        self.runner.record(self.samples, time.perf_counter() - start)

    def __call__(self, arrays: Any) -> None:
        start = time.perf_counter()
        self.inner(arrays)
        self.runner.record(self.samples, time.perf_counter() - start)
