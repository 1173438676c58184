"""The bias epilogue: Linear.apply (x · w + b) with and without it, side by side in one run.

    python bench/bench_epilogue.py [--threads 2] [--rounds 31] [--dim B=4 --dim T=128 --const D=256 --const C=128]

The course GPT's Linear.apply (corpus/nlp/gpt.mlir) in f32, at the same
layout of its dot ("Linear.apply/%2") with `"epilogue": false` (two launches:
the dot, then the add of the bias) and `true` (one launch of `dot+add`,
`psk-epilogue`), for the default layout and for a tiled point with lanes
(the `--tile`, `--kblock`, `--lanes` flags). Each pair gives the same bits
(checked here before timing); the table shows the launches and the median
time of each, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from timing import side_by_side

PROGRAM = ROOT / "corpus" / "nlp" / "gpt.mlir"
ENTRY = "Linear.apply"
DOT = "Linear.apply/%2"


def host_program(layout: dict[str, Any], dims: dict[str, int], consts: dict[str, int]) -> Any:
    from presk import sizes
    from presk.interp.inputs import make_inputs
    from presk.ir.calls import find_entry
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.executor import HostProgram, flatten_inputs
    from presk.jit.native import NativeRunner
    from presk.pipeline import lower
    from presk.plans import read_plan

    parsed = parse_module(presk_context(), PROGRAM.read_text(), str(PROGRAM))
    parsed.verify()
    env = sizes.resolve(parsed.module, consts, dims)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"realization": "f32", "layout": {DOT: layout}}, f)
    try:
        plan = read_plan(f"@{f.name}")
    finally:
        os.unlink(f.name)
    kernels = lower(parsed.module, ENTRY, env, plan)
    host = HostProgram(kernels, NativeRunner())
    leaves = flatten_inputs(make_inputs(find_entry(parsed.module, ENTRY), env, 0))
    arrays = [np.require(np.asarray(a, dtype), requirements="C") for a, (_, dtype) in zip(leaves, host.inputs)]
    return host, arrays


def bindings(values: list[str]) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=", 1) for item in values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--dim", action="append", default=None, metavar="NAME=N")
    parser.add_argument("--const", action="append", default=None, metavar="NAME=N")
    parser.add_argument("--tile", default="4,16", help="the tiled point's tile, m,n (default 4,16)")
    parser.add_argument("--kblock", default="32", help="the tiled point's k-block: none, 32 or 128")
    parser.add_argument("--lanes", type=int, default=16)
    args = parser.parse_args()
    os.environ["PRESK_THREADS"] = str(args.threads)
    dims = bindings(args.dim or ["B=4", "T=128"])
    consts = bindings(args.const or ["D=256", "C=128"])
    m, n = (int(x) for x in args.tile.split(","))
    kblock: Any = "none" if args.kblock == "none" else int(args.kblock)
    points = {
        "default layout": {},
        f"tile [{m}, {n}], k-block {kblock}, {args.lanes} lanes": {"tile": [m, n], "kblock": kblock, "lanes": args.lanes},
    }
    print(f"Linear.apply, f32, {' '.join(f'{k}={v}' for k, v in {**dims, **consts}.items())}, {args.threads} threads, "
          f"median of {args.rounds} rounds")  # fmt: skip
    print("| layout of the dot | launches without → with | ms without | ms with | with / without |")
    print("|---|---|---|---|---|")
    for label, layout in points.items():
        plain, plain_in = host_program({**layout, "epilogue": False}, dims, consts)
        folded, folded_in = host_program({**layout, "epilogue": True}, dims, consts)
        a, b = plain(plain_in), folded(folded_in)
        for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
            if np.asarray(x).tobytes() != np.asarray(y).tobytes():
                raise SystemExit(f"{label}: the epilogue changed the result's bits")
        contenders = {
            "without": lambda p=plain, i=plain_in: p(i),  # type: ignore[misc]
            "with": lambda p=folded, i=folded_in: p(i),  # type: ignore[misc]
        }
        t = side_by_side(contenders, rounds=args.rounds)
        ratio = t["with"].median_s / t["without"].median_s
        print(f"| {label} | {plain.launch_count} → {folded.launch_count} | {t['without'].ms()} | {t['with'].ms()} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
