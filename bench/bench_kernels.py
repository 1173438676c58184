"""presk's native kernels against numpy and PyTorch, side by side in one run.

    python bench/bench_kernels.py [--threads 2] [--rounds 41] [--only adamw,softmax,layernorm] [--cpu] [--spread S]

Cases (f32): AdamW over 1e6 and 1e7 parameters (one fused chain: psk-fuse
makes three groups, psk-fuse-launches one kernel; also with p, m and v
donated, `psk-in-place`: the step writes p', m', v' over them, as torch
does; numpy as users write it, torch.optim.AdamW foreach and fused), softmax [24576, 256] (numpy,
torch.softmax), layer normalization [4096, 768] (numpy, F.layer_norm), and
a stream reference for AdamW: the same bytes AdamW must move (4 arrays read,
3 written), by the simplest kernel presk makes (bench/programs/stream.mlir,
one kernel of three additions), which is what a memory-bound kernel reaches
on this machine with presk's code generation.

Every figure is the median of `--rounds` rounds, the contenders interleaved
round by round (a slow moment of the machine hits all of them), with the
quartiles. Wall time by default, on `--threads` threads for presk and
PyTorch. `--cpu` measures single-threaded CPU time instead (`time.thread_time`
of the one thread doing the work, presk and PyTorch both on one thread):
on a shared machine under load, far steadier than wall time, but it says
nothing of the second core. Inputs are float32 arrays made once, so no call
converts anything. PyTorch (the `bench` extra, torch 2.13.0 CPU) is optional.

PyTorch runs with `OMP_WAIT_POLICY=PASSIVE` (unless the environment says
otherwise): by default its OpenMP threads keep spinning for a while after
each call, holding the core that presk's second worker needs in the next
turn of the round (presk's softmax measured 6.0 ms instead of 3.6 ms on
two threads that way); PyTorch's own times are the same either way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported: see the docstring

from timing import Timing, side_by_side, torch_or_none


def presk_host(program: str, entry: str, dims: dict[str, int], realize: str = "f32", donate: str | None = None):  # type: ignore[no-untyped-def]
    from presk import sizes
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.executor import HostProgram
    from presk.jit.native import NativeRunner
    from presk.pipeline import lower
    from presk.plans import plan_from_options

    path = ROOT / "bench" / "programs" / program
    parsed = parse_module(presk_context(), path.read_text(), str(path))
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, dims)
    kernels = lower(parsed.module, entry, env, plan_from_options(realize, None))
    if donate:
        from presk.passes.in_place import donate as donate_arguments

        donate_arguments(kernels, donate)
    return HostProgram(kernels, NativeRunner())


def on_a_line(array: np.ndarray) -> np.ndarray:
    """`array` on a cache line, for every contender alike: numpy leaves a large array 16 bytes into a page,
    where presk's vector loads split lines and its timing would depend on the allocator (presk.jit.buffers)."""
    from presk.jit.buffers import on_a_line as placed

    return placed(array)


def adamw_case(n: int, rounds: int, threads: int, clock: Callable[[], float]) -> dict[str, Timing]:
    rng = np.random.default_rng(0)
    p, g, m = (on_a_line(rng.standard_normal(n, dtype=np.float32)) for _ in range(3))
    v = on_a_line(np.abs(rng.standard_normal(n, dtype=np.float32)) + np.float32(0.1))
    lr = np.float32(1e-3)
    host = presk_host("adamw.mlir", "adamw", {"N": n})
    leaves = [p, g, m, v, np.array(0.0, np.float32), np.array(0.0, np.float32), np.array(lr)]
    b1, b2, eps, wd = np.float32(0.9), np.float32(0.999), np.float32(1e-8), np.float32(0.01)

    def numpy_adamw() -> None:
        m2 = b1 * m + (1 - b1) * g
        v2 = b2 * v + (1 - b2) * g * g
        p2 = p - lr * (m2 / (np.sqrt(v2) + eps) + wd * p)
        del p2

    torch_form = presk_host("adamw_torch_form.mlir", "adamw", {"N": n})
    # Donated: p, m, v updated in place, as torch does (their own copies: the other contenders' inputs stay).
    donated = presk_host("adamw.mlir", "adamw", {"N": n}, donate="params,m,v")
    d_leaves = [p.copy(), g, m.copy(), v.copy(), *leaves[4:]]
    contenders: dict[str, Callable[[], object]] = {
        "presk (native, one chain)": lambda: host(leaves),
        "presk, donated p, m, v (in place)": lambda: donated(d_leaves),
        "presk, torch's formulation": lambda: torch_form(leaves),
        "numpy": numpy_adamw,
    }
    torch = torch_or_none(threads)
    if torch is not None:
        for label, kw in (("torch AdamW foreach", {"foreach": True}), ("torch AdamW fused", {"fused": True})):
            tp = torch.nn.Parameter(torch.from_numpy(p.copy()))
            tp.grad = torch.from_numpy(g.copy())
            opt = torch.optim.AdamW([tp], lr=1e-3, weight_decay=0.01, **kw)
            opt.step()  # creates the state
            contenders[label] = opt.step
    stream = presk_host("stream.mlir", "stream", {"N": n})
    s_leaves = [p, g, m, v]
    contenders["stream: 4 reads, 3 writes (presk)"] = lambda: stream(s_leaves)
    return side_by_side(contenders, rounds=rounds, clock=clock)


def softmax_case(rounds: int, threads: int, clock: Callable[[], float], spread: float = 1.0) -> dict[str, Timing]:
    """Scores of standard deviation `spread`: from about 12 on, exp(x - max) is often subnormal in f32."""
    x = on_a_line(np.random.default_rng(0).standard_normal((24576, 256), dtype=np.float32) * np.float32(spread))
    host = presk_host("softmax.mlir", "softmax", {"R": 24576, "C": 256})

    def numpy_softmax() -> None:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)

    contenders: dict[str, Callable[[], object]] = {"presk (native)": lambda: host([x]), "numpy": numpy_softmax}
    torch = torch_or_none(threads)
    if torch is not None:
        tx = torch.from_numpy(x)
        contenders["torch.softmax"] = lambda: torch.softmax(tx, dim=1)
    return side_by_side(contenders, rounds=rounds, clock=clock)


def layernorm_case(rounds: int, threads: int, clock: Callable[[], float]) -> dict[str, Timing]:
    rows, e = 4096, 768
    x = on_a_line(np.random.default_rng(0).standard_normal((rows, e), dtype=np.float32))
    g, b = np.ones(e, np.float32), np.zeros(e, np.float32)
    host = presk_host("layernorm.mlir", "layernorm", {"R": rows, "E": e})

    def numpy_layernorm() -> None:
        mu = x.mean(axis=1, keepdims=True)
        d = x - mu
        _ = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + np.float32(1e-5)) * g + b

    contenders: dict[str, Callable[[], object]] = {"presk (native)": lambda: host([x, g, b]), "numpy": numpy_layernorm}
    torch = torch_or_none(threads)
    if torch is not None:
        tx, tg, tb = (torch.from_numpy(a) for a in (x, g, b))
        contenders["F.layer_norm"] = lambda: torch.nn.functional.layer_norm(tx, (e,), tg, tb)
    return side_by_side(contenders, rounds=rounds, clock=clock)


def print_table(title: str, rows: dict[str, Timing], reference: str) -> None:
    base = rows[reference].median_s
    print(f"\n### {title}\n")
    print(f"| contender | median ms | quartiles ms | time / {reference} |")
    print("|---|---|---|---|")
    for name, t in rows.items():
        lo, hi = t.spread
        print(f"| {name} | {t.median_s * 1e3:.3f} | {lo * 1e3:.3f}–{hi * 1e3:.3f} | {t.median_s / base:.2f} |")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--only", default="adamw,softmax,layernorm")
    parser.add_argument("--cpu", action="store_true", help="single-threaded CPU time (thread_time) instead of wall time")
    parser.add_argument("--spread", type=float, default=1.0, metavar="S",
                        help="standard deviation of the softmax's scores (default 1; 30 makes a fifth of its outputs "
                        "subnormal, which x86 computes in microcode unless avoided)")  # fmt: skip
    args = parser.parse_args()
    threads = 1 if args.cpu else args.threads
    clock = time.thread_time if args.cpu else time.perf_counter
    os.environ["PRESK_THREADS"] = str(threads)
    only = set(args.only.split(","))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    what = "CPU time of one thread" if args.cpu else f"wall time, {threads} threads"
    print(f"{what}, medians of {args.rounds} interleaved rounds, f32; load average {load:.1f} at start")
    if "adamw" in only:
        for n in (1_000_000, 10_000_000):
            print_table(f"AdamW, {n:.0e} parameters", adamw_case(n, args.rounds, threads, clock), "presk (native, one chain)")
    if "softmax" in only:
        title = "softmax [24576, 256]" + (f", scores of standard deviation {args.spread:g}" if args.spread != 1 else "")
        print_table(title, softmax_case(args.rounds, threads, clock, args.spread), "presk (native)")
    if "layernorm" in only:
        print_table("layer norm [4096, 768]", layernorm_case(args.rounds, threads, clock), "presk (native)")
    if hasattr(os, "getloadavg"):
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
