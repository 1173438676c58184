"""GEMM across the layout space (issue 5): the default layout, the best point, numpy.matmul, torch.matmul.

    python bench/bench_gemm.py                               # f32 and f64, 512/1024/2048, 1 and 2 threads
    python bench/bench_gemm.py --sizes 1024 --threads 2 --dtypes f32 --rounds 9
    python bench/bench_gemm.py --sizes 2048 --points '[{"tile": [8, 32], "lanes": 16, "order": "JI", "pack": true}]'
    python bench/bench_gemm.py --sizes 2048 --dtypes f64 --no-default   # the default layout run once, for its bits

For each thread count the script runs itself in a fresh process (numpy's
OpenBLAS reads its thread count when it is imported): `OPENBLAS_NUM_THREADS`,
`OMP_NUM_THREADS` and `PRESK_THREADS` are set to it, and torch is told
`torch.set_num_threads`. Per (dtype, size):

1. Sweep: every point of the swept space (`--space`) is lowered through the
   real pipeline (`presk.pipeline.lower`, so `psk-vectorize` runs
   wherever a point states lanes), run once to warm up and timed over
   `--screen` calls (median). Every point keeps the split at the executor's
   default (every worker on the outermost loop, when it is parallel), but
   the orders with K outermost: their k-block loop is serial, so on more
   than one thread they split the block loop below it (depth 1), which
   `psk-split` strip-mines (each worker runs every block of K over its
   own rows or columns). The packed K-outer points also run with a J-block
   of 256 and 512 columns (`"jblock"`, BLIS's loop over n_c), whose loop
   over blocks of J is outermost and parallel. The `--finalists` fastest
   are timed again side by side (`timing.final`), and the fastest there is
   the best point.
2. Side by side: the default layout, the best point, numpy.matmul and
   torch.matmul, timed in turn for `--rounds` rounds of `--block` calls each,
   the first of each turn not counted (`bench/timing.py`);
   medians, GFLOP/s (2·N³ / time), best/default and best/peer ratios.
   `--no-default` leaves the default out of this timing (it still runs
   once, for the bits): at N = 2048 in f64 its calls take minutes.

The inputs are C-contiguous arrays of the dtype, made once; presk's host
program reuses its output buffer, numpy and torch allocate theirs.

`--space quick` (default) sweeps up to ten (tile, lanes) pairs that the target's
vector registers hold with the widest lanes and the most accumulators
(`register_tiles.py`: [8, 32] at 16 f32 lanes first on AVX-512's 32
registers, [6, 16] at 8 on AVX2's 16), no k-block (IJ, JI) and a k-block of
128 (IJK, JIK, JKI, KIJ, KJI: with K outermost a k-block of operand 1 stays
in L2 across the rows), each without the pack, with it, and with `"both"`;
`--space full` every point of the domain (tile [1, 1] or m_i ∈ {1, 2, 4, 6,
8} × n_j ∈ {4, 8, 16, 32}, k-block none/32/128 with every order, every lane
count of this machine, the three packs). The pack copies operand 1 to a
blocked panel [N / n_j, N, n_j] before each product (its time is counted):
at N = 2048 operand 1's rows are 8 KiB apart, so a tile's k-block of them
falls in a few sets of L1 and L2 and evicts itself; the panel reads as one
stream ([8, 32] JI, f32 N = 2048, one thread: 168 ms packed against 305 ms
unpacked, numpy 167 ms). `"both"` also copies operand 0 to the panel
[⌈N / m_i⌉, N, m_i] of the tile's rows, whose m_i rows are otherwise 8 KiB
apart in one set of L1.

n_j = 32 is two registers of 16 f32 per row: an AVX-512 f32 FMA has 4 cycles of latency and 2 units,
so a tile needs m_i·n_j/L ≥ 8 independent accumulators to keep both busy,
which at L = 16 and m_i ≤ 4 is n_j = 32 ([4, 32], 16 lanes, k-block 128,
JKI: 58 GFLOP/s against 34 for the best [4, 16] point, f32 N = 1024, one
thread). m_i = 8 halves the loads of operand 1 per FMA ([8, 32] JI: 100
GFLOP/s against 63 for [4, 32] JI, same run).
Points the layout checks refuse (E7002) are counted and skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import permutations
from pathlib import Path
from collections.abc import Callable
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import positive_int, run_per_thread_count

from register_tiles import domain_tiles, register_tiles

from presk.target import Machine


JBLOCKS = (256, 512)
"""The J-blocks the K-outer points try (packed): 128 × 512 f64 of operand 1 is 512 KiB of L2."""


def _space(kind: str, dtype: str, machine: Machine, threads: int, n: int) -> list[dict[str, Any]]:
    points = []
    for point in _block_points(kind, dtype, machine):
        if threads > 1 and point["order"].startswith("K"):
            points.append({**point, "split": {"depth": 1, "workers": threads}})
        else:
            points.append(point)
        if point["order"].startswith("K") and point["pack"]:
            # The loop over blocks of J is outermost and parallel: the executor's split divides it.
            points += [{**point, "jblock": jblock} for jblock in JBLOCKS if jblock <= n]
    return points


def _block_points(kind: str, dtype: str, machine: Machine) -> list[dict[str, Any]]:
    if kind == "quick":
        pairs = register_tiles(machine, dtype)
        blocks = [("none", "IJ"), ("none", "JI")] + [(128, order) for order in ("IJK", "JIK", "JKI", "KIJ", "KJI")]
    else:
        pairs = domain_tiles(machine, dtype)
        blocks = [("none", "IJ"), ("none", "JI")] + [(kb, "".join(p)) for kb in (32, 128) for p in permutations("IJK")]
    return [
        {"tile": tile, "kblock": kblock, "order": order, "lanes": lanes, "pack": pack}
        for tile, lanes in pairs
        for kblock, order in blocks
        for pack in (False, True, "both")
        if pack != "both" or tile[0] > 1  # a tile of one row has no panel of rows: E7002
    ]


def _points(text: str) -> list[dict[str, Any]]:
    """`--points`: a JSON list of layouts (objects)."""
    try:
        points = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(points, list) or not points or not all(isinstance(p, dict) for p in points):
        raise argparse.ArgumentTypeError("a non-empty JSON list of layouts, e.g. '[{\"tile\": [8, 32], \"lanes\": 16}]'")
    return points


def _label(layout: dict[str, Any] | None) -> str:
    if layout is None:
        return "default"
    kb = layout.get("kblock", "none")
    order = layout.get("order", "IJ" if kb == "none" else "IJK")
    return f"tile {layout.get('tile', 'default')}, lanes {layout.get('lanes', 'widest')}, " + (
        f"order {order}" if kb == "none" else f"k-block {kb} {order}"
    ) + (f", J-block {jb}" if (jb := layout.get("jblock", "none")) != "none" else "") + (
        {True: ", packed", "both": ", both packed"}.get(layout.get("pack"), "")
    ) + (
        f", split at depth {split['depth']}" if isinstance(split := layout.get("split"), dict) else ""
    )


def _worker(args: argparse.Namespace) -> None:
    """One thread count: sweep, then the side-by-side table, one JSON line per (dtype, size)."""
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

    path = ROOT / "bench" / "programs" / "gemm.mlir"
    parsed = parse_module(presk_context(), path.read_text(), str(path))
    machine = target_machine()
    runner = NativeRunner()
    for dtype in args.dtypes:
        np_dtype = np.float32 if dtype == "f32" else np.float64
        for n in args.sizes:
            env = sizes.resolve(parsed.module, {}, {"N": n})
            rng = np.random.default_rng(n)
            # On a cache line, for every contender: where numpy puts them varies with what the process
            # allocated before, and an unpacked point's vector loads of b split lines off it (presk.jit.buffers).
            a = copy_on_a_line(rng.standard_normal((n, n)).astype(np_dtype))
            b = copy_on_a_line(rng.standard_normal((n, n)).astype(np_dtype))
            flops = 2.0 * n**3

            def program(layout: dict[str, Any] | None) -> HostProgram:
                plan: dict[str, Any] = {"realization": dtype}
                if layout is not None:
                    plan["layout"] = {"gemm/%0": layout}
                return HostProgram(lower(parsed.module, "gemm", env, parse_plan(plan, "bench_gemm")), runner)

            points = args.points if args.points is not None else _space(args.space, dtype, machine, args.threads, n)

            def progress(p: int, seconds: float, dtype: str = dtype, n: int = n, total: int = len(points)) -> None:
                if sys.stderr.isatty():
                    sys.stderr.write(f"\r{dtype} N={n} threads={args.threads}: sweep {p + 1}/{total} ({seconds:.0f} s)   ")
                    sys.stderr.flush()

            def call(layout: dict[str, Any]) -> Callable[[], object]:
                host = program(layout)
                return lambda: host([a, b])

            swept, refusals = sweep(points, call, args.screen, progress)
            refused = sum(refusals.values())
            if sys.stderr.isatty():
                sys.stderr.write("\r" + " " * 70 + "\r")
            best = final(swept, call, count=args.finalists, rounds=args.rounds, block=args.block)
            default_host, best_host = program(None), program(best)
            # The bits: the best point computes the default's.
            same = default_host([a, b])[0].tobytes() == best_host([a, b])[0].tobytes()
            contenders = {
                "default": lambda: default_host([a, b]),
                "best": lambda: best_host([a, b]),
                "numpy": lambda: np.matmul(a, b),
            }
            if args.no_default:
                del contenders["default"]
            if torch is not None:
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                contenders["torch"] = lambda: torch.matmul(ta, tb)
            timings = side_by_side(contenders, rounds=args.rounds, warmup=1, block=args.block)
            record = {
                "dtype": dtype, "n": n, "threads": args.threads, "best": best, "best_label": _label(best),
                "bits_equal": same, "points": len(points), "refused": refused,
                "swept_top": [(round(t * 1e3, 3), _label(lay)) for t, lay in swept[:5]],
                "ms": {k: v.median_s * 1e3 for k, v in timings.items()},
                "quartiles_ms": {k: [q * 1e3 for q in v.spread] for k, v in timings.items()},
                "gflops": {k: flops / v.median_s / 1e9 for k, v in timings.items()},
            }  # fmt: skip
            print(json.dumps(record), flush=True)


def _table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| dtype | N | threads | default ms | best point | best ms | numpy ms | torch ms | best GFLOP/s | "
        "default / best | faster peer / best |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        ms, gf = r["ms"], r["gflops"]
        peer = min(ms["numpy"], ms.get("torch", float("inf")))
        default, speedup = ("–", "–") if "default" not in ms else (f"{ms['default']:.2f}", f"{ms['default'] / ms['best']:.1f}×")
        lines.append(
            f"| {r['dtype']} | {r['n']} | {r['threads']} | {default} | {r['best_label']} | {ms['best']:.2f} | "
            f"{ms['numpy']:.2f} | {ms.get('torch', float('nan')):.2f} | {gf['best']:.1f} | {speedup} | {peer / ms['best']:.2f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="512,1024,2048", help="comma-separated N (default 512,1024,2048)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--dtypes", default="f32,f64", help="f32, f64 or both (default f32,f64)")
    parser.add_argument("--space", choices=("quick", "full"), default="quick")
    parser.add_argument("--points", metavar="JSON", type=_points,
                        help="sweep these layouts (a JSON list) instead of --space, e.g. to time a run's best points again")
    parser.add_argument("--screen", type=positive_int, default=3,
                        help="timed calls per point in the sweep (default 3)")
    parser.add_argument("--finalists", type=positive_int, default=4,
                        help="the sweep's fastest points timed again side by side (--rounds rounds of --block calls)"
                             " before the best is chosen (default 4; 1: the sweep's first)")
    parser.add_argument("--rounds", type=positive_int, default=9, help="rounds of the side-by-side timing (default 9)")
    parser.add_argument("--block", type=positive_int, default=3,
                        help="consecutive calls of a contender per round, the first not counted (default 3)")
    parser.add_argument("--no-default", action="store_true",
                        help="leave the default layout out of the side-by-side timing (it still runs once, for the bits)")
    parser.add_argument("--json", metavar="FILE", help="also write the records to FILE")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    args.dtypes = [d for d in str(args.dtypes).split(",")]
    if args.worker:
        args.threads = int(args.threads)
        _worker(args)
        return
    def report(threads: int, record: dict[str, Any]) -> None:
        ms = record["ms"]
        default = f"{ms['default']:.2f} ms" if "default" in ms else "not timed"
        print(
            f"{record['dtype']} N={record['n']} threads={threads}: default {default}, "
            f"best {ms['best']:.2f} ms ({record['best_label']}; same bits: {record['bits_equal']}), "
            f"numpy {ms['numpy']:.2f} ms, torch {ms.get('torch', float('nan')):.2f} ms",
            flush=True,
        )

    worker_args = ["--sizes", ",".join(map(str, args.sizes)), "--dtypes", ",".join(args.dtypes), "--space", args.space,
                   "--screen", str(args.screen), "--finalists", str(args.finalists),
                   "--rounds", str(args.rounds), "--block", str(args.block)]  # fmt: skip
    if args.no_default:
        worker_args.append("--no-default")
    if args.points is not None:
        worker_args += ["--points", json.dumps(args.points)]
    records = run_per_thread_count(__file__, [int(t) for t in str(args.threads).split(",")], worker_args, report)
    print()
    print(_table(records))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
