"""The JIT's costs: compile time per kernel, and a second process on a warm disk cache.

    python bench/bench_jit.py [--program corpus/nlp/gpt.mlir] [--entry loss] [--dim B=2 --dim T=32]

First, in this process, with an empty cache directory (a temporary one,
removed afterwards): every kernel of the entry (f32) is translated to LLVM
IR (`translate_kernel`) and compiled at O3 for this CPU (`JitEngine`), each
timed on its own; the medians and totals are printed. Then a second Python
process starts on the same cache directory, lowers the entry again and
prepares every kernel: it should compile nothing (`EngineStats.compiled ==
0`, every kernel a disk hit). Its wall time from start to all kernels
ready, and the part spent getting kernels, are printed beside the first
process's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def prepare(program: str, entry: str, dims: dict[str, int], cache_dir: str) -> dict[str, object]:
    """Lower the entry and prepare every kernel natively, timing each translation and compilation."""
    from presk import sizes
    from presk.dialects.psk_kernel import KernelOp
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.engine import JitEngine
    from presk.pipeline import lower
    from presk.lowering.kernel_to_llvm import translate_kernel
    from presk.plans import plan_from_options

    path = ROOT / program
    parsed = parse_module(presk_context(), path.read_text(), str(path))
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, dims)
    kernels = lower(parsed.module, entry, env, plan_from_options("f32", None))
    engine = JitEngine(cache_dir=cache_dir)
    translate_ms, compile_ms = [], []
    start = time.perf_counter()
    for k in kernels.body.block.ops:
        if not isinstance(k, KernelOp):
            continue
        t0 = time.perf_counter()
        ir = translate_kernel(k, engine.machine)
        t1 = time.perf_counter()
        engine.kernel(ir, k.sym_name.data)
        t2 = time.perf_counter()
        translate_ms.append((t1 - t0) * 1e3)
        compile_ms.append((t2 - t1) * 1e3)
    return {
        "kernels": len(compile_ms),
        "translate_median_ms": statistics.median(translate_ms),
        "compile_median_ms": statistics.median(compile_ms),
        "compile_total_ms": sum(compile_ms),
        "kernels_ready_ms": (time.perf_counter() - start) * 1e3,
        "compiled": engine.stats.compiled,
        "disk_hits": engine.stats.disk_hits,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default="corpus/nlp/gpt.mlir")
    parser.add_argument("--entry", default="loss")
    parser.add_argument("--dim", action="append", default=None, metavar="NAME=N")
    parser.add_argument("--child", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dims = {k: int(v) for k, v in (d.split("=", 1) for d in (args.dim or ["B=2", "T=32"]))}
    if args.child:
        print(json.dumps(prepare(args.program, args.entry, dims, args.child)))
        return 0
    with tempfile.TemporaryDirectory(prefix="presk-jit-bench-") as cache:
        first = prepare(args.program, args.entry, dims, cache)
        command = [sys.executable, __file__, "--program", args.program, "--entry", args.entry, "--child", cache]
        for k, v in dims.items():
            command += ["--dim", f"{k}={v}"]
        t0 = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        process_ms = (time.perf_counter() - t0) * 1e3
        second = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{args.program} {args.entry} {' '.join(f'{k}={v}' for k, v in dims.items())}, f32, {first['kernels']} kernels")
    print("| process | compiled | disk hits | translate, median ms/kernel | get kernel, median ms | all kernels ready, ms |")
    print("|---|---|---|---|---|---|")
    for name, r in (("first (empty cache)", first), ("second (warm disk cache)", second)):
        print(
            f"| {name} | {r['compiled']} | {r['disk_hits']} | {r['translate_median_ms']:.2f} | "
            f"{r['compile_median_ms']:.2f} | {r['kernels_ready_ms']:.0f} |"
        )
    print(f"second process, start to exit (Python, imports, parse, lower, kernels): {process_ms:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
