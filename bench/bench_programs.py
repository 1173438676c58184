"""Whole programs on the native backend: time per call, the share outside kernels, host cost per launch.

    python bench/bench_programs.py [--rounds 51] [--threads 2]

Cases: the tiny MiniGPT (corpus/minigpt.mlir at B=2, T=8) forward, loss and
adamw.step, and the course GPT (corpus/nlp/gpt.mlir at B=2, T=32) forward,
loss and adamw.step (also with p, m and v donated, `psk-in-place`), f32. Inputs are generated once (`presk.interp.inputs`)
and converted to the buffers' types once, as a training loop holds them;
`presk bench` converts its float64 inputs at every call, which it counts as
host time.

Two series of calls per entry: plain calls (the median is the time per
call), then calls where every kernel's native part (`NativeKernel.launch`:
the ctypes call, or the split over the worker pool) is timed by itself; what
a call spends outside those is the host's (allocation, bindings, views, the
Python loop), reported per launch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    ("corpus/minigpt.mlir", "MiniGPT.apply", {"B": 2, "T": 8}),
    ("corpus/minigpt.mlir", "loss", {"B": 2, "T": 8}),
    ("corpus/minigpt.mlir", "adamw.step", {"B": 2, "T": 8}),
    ("corpus/nlp/gpt.mlir", "GPT.apply", {"B": 2, "T": 32}),
    ("corpus/nlp/gpt.mlir", "loss", {"B": 2, "T": 32}),
    ("corpus/nlp/gpt.mlir", "adamw.step", {"B": 2, "T": 32}),
    ("corpus/nlp/gpt.mlir", "adamw.step", {"B": 2, "T": 32}, "params,m,v"),
]
"""(program, entry, sizes[, arguments donated: `psk-in-place`, the step written over p, m and v])."""


class TimedLaunches:
    """A native runner whose kernels time their native part (the fast path of the host executor is kept)."""

    def __init__(self, native: Any) -> None:
        self.native = native
        self.total = 0.0

    def __call__(self, kernel: Any) -> Any:
        inner = self.native(kernel)
        outer = self

        class Timed:
            def bind(self, arrays: Any, previous: Any = None) -> Any:
                return inner.bind(arrays, previous)

            def launch(self, binding: Any) -> None:
                start = time.perf_counter()
                inner.launch(binding)
                outer.total += time.perf_counter() - start

            def __call__(self, arrays: Any) -> None:
                inner(arrays)

        return Timed()


def program(
    path: str, entry: str, dims: dict[str, int], runner: Any, donate: str | None = None
) -> tuple[Any, list[np.ndarray]]:
    from presk import sizes
    from presk.interp.inputs import make_inputs
    from presk.ir.calls import find_entry
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.executor import HostProgram, flatten_inputs
    from presk.pipeline import lower
    from presk.plans import plan_from_options

    parsed = parse_module(presk_context(), (ROOT / path).read_text(), path)
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, dims)
    kernels = lower(parsed.module, entry, env, plan_from_options("f32", None))
    if donate:
        from presk.passes.in_place import donate as donate_arguments

        donate_arguments(kernels, donate)
    host = HostProgram(kernels, runner)
    leaves = flatten_inputs(make_inputs(find_entry(parsed.module, entry), env, 0))
    return host, [np.require(np.asarray(a, dtype), requirements="C") for a, (_, dtype) in zip(leaves, host.inputs)]


def measure(path: str, entry: str, dims: dict[str, int], rounds: int, donate: str | None = None) -> dict[str, Any]:
    from presk.jit.native import NativeRunner

    native = NativeRunner()
    host, leaves = program(path, entry, dims, native, donate)
    timed_runner = TimedLaunches(native)
    timed, timed_leaves = program(path, entry, dims, timed_runner, donate)
    for _ in range(5):
        host(leaves)
        timed(timed_leaves)
    plain, inside, total = [], [], []
    for _ in range(rounds):  # interleaved: a slow moment of the machine hits both series
        start = time.perf_counter()
        host(leaves)
        plain.append(time.perf_counter() - start)
        timed_runner.total = 0.0
        start = time.perf_counter()
        timed(timed_leaves)
        total.append(time.perf_counter() - start)
        inside.append(timed_runner.total)
    outside = [t - k for t, k in zip(total, inside)]
    launches = host.launch_count
    return {
        "entry": f"{Path(path).name} {entry}" + (f" (donated {donate})" if donate else ""),
        "dims": " ".join(f"{k}={v}" for k, v in dims.items()),
        "launches": launches,
        "call_ms": statistics.median(plain) * 1e3,
        "outside_share": statistics.median(o / t for o, t in zip(outside, total)),
        "per_launch_us": statistics.median(outside) / launches * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=51)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ["PRESK_THREADS"] = str(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"threads {args.threads}, medians of {args.rounds} calls, f32, load average {load:.1f} at start\n")
    print("| program | entry sizes | launches | ms per call | outside kernels | host per launch |")
    print("|---|---|---|---|---|---|")
    for path, entry, dims, *donate in CASES:
        r = measure(path, entry, dims, args.rounds, *donate)
        print(f"| {r['entry']} | {r['dims']} | {r['launches']} | {r['call_ms']:.3f} | "
              f"{r['outside_share']:.0%} | {r['per_launch_us']:.1f} µs |")  # fmt: skip
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
