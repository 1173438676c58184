"""presk's native kernels against numpy and PyTorch, side by side in one run.

    python bench/bench_kernels.py [--threads 2] [--rounds 21] [--only adamw,softmax,layernorm,stream]

Cases (f32): AdamW over 1e6 and 1e7 parameters (one fused chain; numpy as
users write it, torch.optim.AdamW foreach and fused), softmax [24576, 256]
(numpy, torch.softmax), layer normalization [4096, 768] (numpy,
F.layer_norm), and a stream reference: the same bytes AdamW must move,
read and written by the simplest kernel presk makes (a copy-like chain),
which is what a memory-bound kernel can reach on this machine. Every figure
is the median of `--rounds` rounds, the contenders interleaved round by
round. PyTorch (the `bench` extra, torch 2.13.0 CPU) is optional.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from timing import side_by_side  # noqa: E402


def presk_host(program: str, entry: str, dims: dict[str, int], realize: str = "f32"):  # type: ignore[no-untyped-def]
    from presk import sizes
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.executor import HostProgram
    from presk.jit.native import NativeRunner
    from presk.lowering.compile import lower
    from presk.plans import plan_from_options

    path = ROOT / "bench" / "programs" / program
    parsed = parse_module(presk_context(), path.read_text(), str(path))
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, dims)
    return HostProgram(lower(parsed.module, entry, env, plan_from_options(realize, None)), NativeRunner())


def torch_or_none():  # type: ignore[no-untyped-def]
    try:
        import torch
    except ImportError:
        return None
    return torch


def adamw_case(n: int, rounds: int, threads: int) -> list[tuple[str, float]]:
    rng = np.random.default_rng(0)
    p, g, m = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    v = np.abs(rng.standard_normal(n, dtype=np.float32)) + np.float32(0.1)
    lr = np.float32(1e-3)
    host = presk_host("adamw.mlir", "adamw", {"N": n})
    leaves = [p, g, m, v, np.float32(0.0), np.float32(0.0), lr]
    b1, b2, eps, wd = np.float32(0.9), np.float32(0.999), np.float32(1e-8), np.float32(0.01)

    def numpy_adamw() -> None:
        m2 = b1 * m + (1 - b1) * g
        v2 = b2 * v + (1 - b2) * g * g
        p2 = p - lr * (m2 / (np.sqrt(v2) + eps) + wd * p)
        del p2

    contenders: dict[str, Callable[[], object]] = {"presk (native, fused)": lambda: host(leaves), "numpy": numpy_adamw}
    torch = torch_or_none()
    if torch is not None:
        torch.set_num_threads(threads)
        for label, kw in (("torch AdamW foreach", {"foreach": True}), ("torch AdamW fused", {"fused": True})):
            tp = torch.nn.Parameter(torch.from_numpy(p.copy()))
            tp.grad = torch.from_numpy(g.copy())
            opt = torch.optim.AdamW([tp], lr=1e-3, weight_decay=0.01, **kw)
            opt.step()  # creates the state
            contenders[label] = opt.step
    stream = presk_host("stream.mlir", "stream", {"N": n})
    s_leaves = [p, g, m, v]
    contenders["stream: 4 reads, 3 writes (presk)"] = lambda: stream(s_leaves)
    result = side_by_side(contenders, rounds=rounds)
    return [(name, t.median_s) for name, t in result.items()]


def softmax_case(rounds: int, threads: int) -> list[tuple[str, float]]:
    x = np.random.default_rng(0).standard_normal((24576, 256), dtype=np.float32)
    host = presk_host("softmax.mlir", "softmax", {"R": 24576, "C": 256})

    def numpy_softmax() -> None:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        e /= e.sum(axis=1, keepdims=True)

    contenders: dict[str, Callable[[], object]] = {"presk (native)": lambda: host([x]), "numpy": numpy_softmax}
    torch = torch_or_none()
    if torch is not None:
        torch.set_num_threads(threads)
        tx = torch.from_numpy(x)
        contenders["torch.softmax"] = lambda: torch.softmax(tx, dim=1)
    return [(name, t.median_s) for name, t in side_by_side(contenders, rounds=rounds).items()]


def layernorm_case(rounds: int, threads: int) -> list[tuple[str, float]]:
    rows, e = 4096, 768
    x = np.random.default_rng(0).standard_normal((rows, e), dtype=np.float32)
    g, b = np.ones(e, np.float32), np.zeros(e, np.float32)
    host = presk_host("layernorm.mlir", "layernorm", {"R": rows, "E": e})

    def numpy_layernorm() -> None:
        mu = x.mean(axis=1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=1, keepdims=True)
        del var
        _ = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + np.float32(1e-5)) * g + b

    contenders: dict[str, Callable[[], object]] = {"presk (native)": lambda: host([x, g, b]), "numpy": numpy_layernorm}
    torch = torch_or_none()
    if torch is not None:
        torch.set_num_threads(threads)
        tx, tg, tb = (torch.from_numpy(a) for a in (x, g, b))
        contenders["F.layer_norm"] = lambda: torch.nn.functional.layer_norm(tx, (e,), tg, tb)
    return [(name, t.median_s) for name, t in side_by_side(contenders, rounds=rounds).items()]


def print_table(title: str, rows: list[tuple[str, float]], reference: str) -> None:
    base = dict(rows)[reference]
    print(f"\n### {title}\n")
    print(f"| contender | median ms | time / {reference} |")
    print("|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t * 1e3:.3f} | {t / base:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--only", default="adamw,softmax,layernorm")
    args = parser.parse_args()
    os.environ["PRESK_THREADS"] = str(args.threads)
    only = set(args.only.split(","))
    print(f"threads {args.threads}, medians of {args.rounds} interleaved rounds, f32")
    if "adamw" in only:
        for n in (1_000_000, 10_000_000):
            print_table(f"AdamW, {n:.0e} parameters", adamw_case(n, args.rounds, args.threads), "presk (native, fused)")
    if "softmax" in only:
        print_table("softmax [24576, 256]", softmax_case(args.rounds, args.threads), "presk (native)")
    if "layernorm" in only:
        print_table("layer norm [4096, 768]", layernorm_case(args.rounds, args.threads), "presk (native)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
