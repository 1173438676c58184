"""The course GPT's attention `ein`s across the layout space (issue 5): default, best point, numpy.einsum, torch.einsum.

    python bench/bench_attention.py                          # B=16, H=6, T=256, hd=64, f32, 1 and 2 threads
    python bench/bench_attention.py --threads 2 --rounds 15 --space full
    python bench/bench_attention.py --dim B=4 --dim T=128 --threads 2 --rounds 5

The two `ein`s of `SelfAttention.apply` (corpus/nlp/gpt.mlir) on their own,
from `bench/programs/attention_eins.mlir`: `scores` (q kᵀ, an NT contraction,
[b, h, s, d] × [b, h, t, d] → [b, h, s, t]) and `values` (p v, NN,
[b, h, s, t] × [b, h, t, d] → [b, h, s, d]), H = 6 and hd = 64 fixed, B and
T dims (`--dim`). Structured like `bench/bench_gemm.py`: for each thread
count the script runs itself in a fresh process with `OPENBLAS_NUM_THREADS`,
`OMP_NUM_THREADS`, `MKL_NUM_THREADS` and `PRESK_THREADS` set to it, and torch
is told `torch.set_num_threads`. Per `ein`:

1. Sweep: every point of the swept space (`--space`) is lowered through the
   real pipeline (`presk.pipeline.lower`), run once to warm up and
   timed over `--screen` calls (median). Points the layout checks refuse
   (E7002) are counted and skipped. The `--finalists` fastest are timed
   again side by side (`timing.final`), and the fastest there is the best.
2. Side by side: the default layout, the best point,
   `numpy.einsum(..., optimize=True)` and `torch.einsum`, timed in turn for
   `--rounds` rounds (`bench/timing.py`), each turn `--block` consecutive
   calls of which all but the first count (a contender's steady state: one
   call right after another contender's finds torch's thread pool asleep
   and the caches cold, which made torch.einsum twice as slow as alone);
   medians and quartiles. The best point's output bytes are compared with
   the default's.

A point with `"pack": true` launches a copy kernel before the contraction
(scores: operand 1 transposed to a panel [K, J]; values: operand 1 in
blocks of the tile's n_j columns, [J / n_j, K, n_j]); a call of the host
program runs both launches, so the pack's time is included in every figure
of that point.

The swept space, per `ein` (K = hd = 64 for scores, so only a k-block of 32
divides it; K = T for values, 32 and 128): tiles from the layout domain
(`presk/dialects/psk_realize_layout.py`), lanes from this machine's register
widths (`target_machine().lane_widths("f32")`) dividing n_j, k-blocks with
their orders, the pack (lanes on the NT scores need it), and the
split: the executor's default, or `{"depth": 1, "workers": threads}` when
there are two threads or more.
`--space quick` (default): the (tile, lanes) pairs the target's vector registers hold
(`register_tiles.py`: on AVX-512 [8, 32] at 16 lanes first, on AVX2 [6, 16] at 8), no
k-block (IJ, JI) or a k-block with IJK / JIK / JKI, scores always packed, values with and
without the pack. `--space full`: tile [1, 1] or m_i ∈ {1, 2, 4, 6, 8} × n_j ∈ {4, 8, 16,
32}, lanes 1 or a register width, every order, pack true/false.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import permutations
from pathlib import Path
from collections.abc import Callable
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import positive_int, run_per_thread_count

from register_tiles import domain_tiles, register_tiles

from presk.target import Machine

EINS: dict[str, dict[str, Any]] = {
    # name: the nest, the einsum spec, whether it is NT (its lanes need the pack), its K
    "scores": {"nest": "scores/%0", "spec": "bhsd,bhtd->bhst", "nt": True, "k": "hd"},
    "values": {"nest": "values/%0", "spec": "bhst,bhtd->bhsd", "nt": False, "k": "T"},
}
HEADS, HD = 6, 64


def _space(kind: str, ein: str, k: int, threads: int, machine: Machine) -> list[dict[str, Any]]:
    nt = EINS[ein]["nt"]
    kblocks = [kb for kb in (32, 128) if k % kb == 0]
    if kind == "quick":
        pairs = register_tiles(machine, "f32")
        blocks = [("none", "IJ"), ("none", "JI")] + [(kb, o) for kb in kblocks for o in ("IJK", "JIK", "JKI")]
        packs = [True] if nt else [False, True]
    else:
        pairs = domain_tiles(machine, "f32")
        blocks = [("none", "IJ"), ("none", "JI")] + [(kb, "".join(p)) for kb in kblocks for p in permutations("IJK")]
        packs = [False, True]
    splits: list[Any] = [None] + ([{"depth": 1, "workers": threads}] if threads >= 2 else [])
    points = []
    for tile, lanes in pairs:
        for kblock, order in blocks:
            for pack in packs:
                for split in splits:
                    layout: dict[str, Any] = {"tile": tile, "kblock": kblock, "order": order, "lanes": lanes, "pack": pack}
                    if split is not None:
                        layout["split"] = split
                    points.append(layout)
    return points


def _label(layout: dict[str, Any] | None) -> str:
    if layout is None:
        return "default"
    kb = layout["kblock"]
    text = f"tile {layout['tile']}, lanes {layout['lanes']}, " + (
        f"order {layout['order']}"
        if kb == "none"
        else f"k-block {kb} {layout['order']}"
    )
    if layout.get("pack"):
        text += ", packed"
    split = layout.get("split")
    text += (
        f", split depth {split['depth']}×{split['workers']}"
        if split
        else ", executor split"
    )
    return text


def _progress(text: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r" + text + "   ")
    else:
        sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _worker(args: argparse.Namespace) -> None:
    """One thread count: per ein, sweep, then the side-by-side timing; one JSON line per ein."""
    import numpy as np
    from timing import final, side_by_side, sweep, torch_or_none

    from presk import sizes
    from presk.target import target_machine
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.buffers import copy_on_a_line
    from presk.jit.executor import HostProgram
    from presk.jit.native import NativeRunner
    from presk.pipeline import lower
    from presk.plans import parse_plan

    torch = torch_or_none(args.threads)

    path = ROOT / "bench" / "programs" / "attention_eins.mlir"
    parsed = parse_module(presk_context(), path.read_text(), str(path))
    env = sizes.resolve(parsed.module, {}, args.dims)
    b, t = args.dims["B"], args.dims["T"]
    machine = target_machine()
    runner = NativeRunner()
    rng = np.random.default_rng(5)
    shapes = {
        "scores": [(b, HEADS, t, HD), (b, HEADS, t, HD)],
        "values": [(b, HEADS, t, t), (b, HEADS, t, HD)],
    }
    for ein in args.eins:
        spec, nest = EINS[ein]["spec"], EINS[ein]["nest"]
        k = HD if EINS[ein]["k"] == "hd" else t
        # On a cache line for every contender: the unpacked points' vector loads split lines off one.
        x, y = (copy_on_a_line(rng.standard_normal(s).astype(np.float32)) for s in shapes[ein])
        flops = 2.0 * b * HEADS * t * (t if ein == "scores" else HD) * k

        def program(
            layout: dict[str, Any] | None, ein: str = ein, nest: str = nest
        ) -> HostProgram:
            plan: dict[str, Any] = {"realization": "f32"}
            if layout is not None:
                plan["layout"] = {nest: layout}
            return HostProgram(
                lower(parsed.module, ein, env, parse_plan(plan, "bench_attention")),
                runner,
            )

        points = _space(args.space, ein, k, args.threads, machine)
        start = time.perf_counter()

        def progress(p: int, seconds: float, ein: str = ein, total: int = len(points)) -> None:
            if p % 25 == 0 or sys.stderr.isatty():
                _progress(f"{ein} threads={args.threads}: sweep {p + 1}/{total} ({seconds:.0f} s)")

        def call(layout: dict[str, Any], x: Any = x, y: Any = y) -> Callable[[], object]:
            host = program(layout)
            return lambda: host([x, y])

        swept, refused = sweep(points, call, args.screen, progress)
        _progress(
            f"{ein} threads={args.threads}: swept {len(points)} points in {time.perf_counter() - start:.0f} s"
        )
        if sys.stderr.isatty():
            sys.stderr.write("\n")
        best = final(swept, call, count=args.finalists, rounds=args.rounds, block=args.block)
        default_host, best_host = program(None), program(best)
        # The bits: the best point computes the default's.
        default_out = default_host([x, y])[0].copy()
        best_out = best_host([x, y])[0]
        same = default_out.tobytes() == best_out.tobytes()
        reference = np.einsum(spec, x, y, optimize=True)
        err = float(np.abs(best_out - reference).max() / np.abs(reference).max())
        # Default arguments bind this ein's programs and inputs (the lambdas are timed right away).
        contenders = {
            "default": lambda h=default_host, x=x, y=y: h([x, y]),
            "best": lambda h=best_host, x=x, y=y: h([x, y]),
            "numpy": lambda spec=spec, x=x, y=y: np.einsum(spec, x, y, optimize=True),
        }
        if torch is not None:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            contenders["torch"] = lambda spec=spec, tx=tx, ty=ty: torch.einsum(
                spec, tx, ty
            )
        _progress(f"{ein} threads={args.threads}: side by side, {args.rounds} rounds of {args.block} calls")
        if sys.stderr.isatty():
            sys.stderr.write("\n")
        timings = side_by_side(contenders, rounds=args.rounds, warmup=1, block=args.block)
        record = {
            "ein": ein, "dims": args.dims, "threads": args.threads, "block": args.block,
            "best": best, "best_label": _label(best),
            "best_launches": [s.name for s in best_host.steps if hasattr(s, "call")],
            "bits_equal": same, "rel_err_vs_numpy": err, "points": len(points),
            "refused": refused,
            "swept_top": [(round(s * 1e3, 3), _label(lay)) for s, lay in swept[:5]],
            "ms": {n: v.median_s * 1e3 for n, v in timings.items()},
            "quartiles_ms": {n: [q * 1e3 for q in v.spread] for n, v in timings.items()},
            "gflops": {n: flops / v.median_s / 1e9 for n, v in timings.items()},
        }  # fmt: skip
        print(json.dumps(record), flush=True)


def _table(records: list[dict[str, Any]]) -> str:
    lines = [
        (
            "| ein | threads | default ms | best point | best ms | numpy ms | torch ms | best GFLOP/s | "
            "default / best | torch / best |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(r: dict[str, Any], name: str) -> str:
        if name not in r["ms"]:
            return "–"
        lo, hi = r["quartiles_ms"][name]
        return f"{r['ms'][name]:.2f} ({lo:.2f}–{hi:.2f})"

    for r in records:
        ms = r["ms"]
        kind = "NT" if EINS[r["ein"]]["nt"] else "NN"
        pack = " (pack launch included)" if "pack" in r["best_launches"] else ""
        torch_ratio = f"{ms['torch'] / ms['best']:.2f}×" if "torch" in ms else "–"
        lines.append(
            f"| {r['ein']} ({kind}) | {r['threads']} | {cell(r, 'default')} | {r['best_label']}{pack} | "
            f"{cell(r, 'best')} | {cell(r, 'numpy')} | {cell(r, 'torch')} | {r['gflops']['best']:.1f} | "
            f"{ms['default'] / ms['best']:.1f}× | {torch_ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--threads", default="1,2", help="comma-separated thread counts (default 1,2)"
    )
    parser.add_argument(
        "--eins", default="scores,values", help="scores, values or both (default both)"
    )
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=N",
        help="B or T (default B=16, T=256)",
    )
    parser.add_argument("--space", choices=("quick", "full"), default="quick")
    parser.add_argument(
        "--screen",
        type=positive_int,
        default=3,
        help="timed calls per point in the sweep (default 3)",
    )
    parser.add_argument(
        "--finalists",
        type=positive_int,
        default=4,
        help="the sweep's fastest points timed again side by side (--rounds rounds of --block calls)"
        " before the best is chosen (default 4; 1: the sweep's first)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=15,
        help="rounds of the side-by-side timing (default 15)",
    )
    parser.add_argument(
        "--block",
        type=positive_int,
        default=5,
        help="consecutive calls of a contender per round, the first not counted (default 5; 1: one call each, in turn)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the records to FILE")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dims = {"B": 16, "T": 256}
    for item in args.dim:
        name, _, value = item.partition("=")
        if name not in dims or not value.isdecimal():
            parser.error(f"--dim {item}: expected B=N or T=N")
        dims[name] = int(value)
    args.dims = dims
    args.eins = [e for e in str(args.eins).split(",") if e]
    if any(e not in EINS for e in args.eins):
        parser.error(f"--eins: scores and/or values, not {','.join(args.eins)}")
    if args.worker:
        args.threads = int(args.threads)
        _worker(args)
        return
    def report(threads: int, record: dict[str, Any]) -> None:
        ms = record["ms"]
        print(
            f"{record['ein']} threads={threads}: default {ms['default']:.2f} ms, best {ms['best']:.2f} ms "
            f"({record['best_label']}; launches {record['best_launches']}; same bits: {record['bits_equal']}; "
            f"refused {record['refused']} of {record['points']}), numpy {ms['numpy']:.2f} ms, "
            f"torch {ms.get('torch', float('nan')):.2f} ms",
            flush=True,
        )

    worker_args = ["--eins", ",".join(args.eins), "--space", args.space, "--screen", str(args.screen),
                   "--finalists", str(args.finalists), "--rounds", str(args.rounds), "--block", str(args.block),
                   *(f"--dim={n}={v}" for n, v in dims.items())]  # fmt: skip
    records = run_per_thread_count(__file__, [int(t) for t in str(args.threads).split(",")], worker_args, report)
    print()
    print(
        f"B={dims['B']}, H={HEADS}, T={dims['T']}, hd={HD}, f32; medians (quartiles) of the side-by-side rounds"
    )
    print(_table(records))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
