"""The JIT's costs: compile time per kernel, a second process on a warm disk cache, and a batch on workers.

    python bench/bench_jit.py [--program corpus/nlp/gpt.mlir] [--entry loss] [--dim B=2 --dim T=32] [--rounds 3]

First, in this process, with an empty cache directory (a temporary one,
removed afterwards): every kernel of the entry (f32) is translated to LLVM
IR (`translate_kernel`) and compiled at O3 for this CPU (`JitEngine`), each
timed on its own; the medians and totals are printed. Then a second Python
process starts on the same cache directory, lowers the entry again and
prepares every kernel: it should compile nothing (`EngineStats.compiled ==
0`, every kernel a disk hit). Its wall time from start to all kernels
ready, and the part spent getting kernels, are printed beside the first
process's.

Last, the whole entry's modules as one batch (`JitEngine.compile_many`, as
`HostProgram` compiles a program), each time in a fresh process with an
empty cache: in that process alone (`PRESK_COMPILE_JOBS=1`) and on the
worker processes of `presk.jit.codegen` (the default: one per core of the
affinity mask), the two alternately for `--rounds` rounds; medians and
ranges of the wall time from the first module handed over to the last
loaded, and whether both gave the same object bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def entry_kernels(program: str, entry: str, dims: dict[str, int]) -> tuple[Any, list[Any]]:
    """The entry's kernel module at its default layouts in f32, as `presk run --realize f32` lowers it, and
    its kernels."""
    from presk import sizes
    from presk.dialects.psk_kernel import KernelOp
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.pipeline import lower
    from presk.plans import plan_from_options

    path = ROOT / program
    parsed = parse_module(presk_context(), path.read_text(), str(path))
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, dims)
    kernels = lower(parsed.module, entry, env, plan_from_options("f32", None))
    return kernels, [k for k in kernels.body.block.ops if isinstance(k, KernelOp)]


def prepare(program: str, entry: str, dims: dict[str, int], cache_dir: str) -> dict[str, object]:
    """Lower the entry and prepare every kernel natively, timing each translation and compilation."""
    from presk.jit.engine import JitEngine
    from presk.lowering.kernel_to_llvm import translate_kernel

    engine = JitEngine(cache_dir=cache_dir)
    translate_ms, compile_ms = [], []
    _module, kernels = entry_kernels(program, entry, dims)
    start = time.perf_counter()
    for k in kernels:
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


def batch(program: str, entry: str, dims: dict[str, int], cache_dir: str) -> dict[str, object]:
    """Every kernel's IR of the entry, then all of them compiled as one batch; the batch's wall time."""
    from presk.jit import codegen
    from presk.jit.engine import OBJECT_SUFFIX, JitEngine
    from presk.lowering.kernel_to_llvm import translate_kernel

    engine = JitEngine(cache_dir=cache_dir)
    _module, kernels = entry_kernels(program, entry, dims)
    irs = [translate_kernel(k, engine.machine) for k in kernels]
    start = time.perf_counter()
    engine.compile_many(irs)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(cache_dir).glob(f"*{OBJECT_SUFFIX}"))))
    return {
        "seconds": seconds,
        "modules": len(irs),
        "ir_bytes": sum(len(ir) for ir in irs),
        "jobs": codegen.jobs_for(len(irs), sum(len(ir) for ir in irs)),
        "objects": digest.hexdigest(),
    }


def batch_rounds(args: argparse.Namespace, dims: dict[str, int]) -> None:
    import os

    times: dict[str, list[float]] = {"in this process": [], "on workers": []}
    seen: dict[str, dict[str, object]] = {}
    for _ in range(args.rounds):
        for label, jobs in (("in this process", "1"), ("on workers", "")):
            with tempfile.TemporaryDirectory(prefix="presk-jit-bench-") as cache:
                command = [sys.executable, __file__, "--program", args.program, "--entry", args.entry, "--batch-child", cache]
                for k, v in dims.items():
                    command += ["--dim", f"{k}={v}"]
                env = {**os.environ, "PRESK_COMPILE_JOBS": jobs} if jobs else {k: v for k, v in os.environ.items() if k != "PRESK_COMPILE_JOBS"}
                done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                times[label].append(float(result["seconds"]))
                seen[label] = result
    first = seen["in this process"]
    print(f"one batch of {first['modules']} modules ({int(first['ir_bytes']) / 1e6:.2f} MB of IR), empty caches, "
          f"{args.rounds} rounds alternately:")  # fmt: skip
    print("| compiled | processes | median s | range s |")
    print("|---|---|---|---|")
    for label, values in times.items():
        print(f"| {label} | {seen[label]['jobs']} | {statistics.median(values):.2f} | {min(values):.2f}–{max(values):.2f} |")
    same = seen["in this process"]["objects"] == seen["on workers"]["objects"]
    print(f"the same object bytes both ways: {'yes' if same else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default="corpus/nlp/gpt.mlir")
    parser.add_argument("--entry", default="loss")
    parser.add_argument("--dim", action="append", default=None, metavar="NAME=N")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the batch's two ways (default 3)")
    parser.add_argument("--child", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--batch-child", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dims = {k: int(v) for k, v in (d.split("=", 1) for d in (args.dim or ["B=2", "T=32"]))}
    if args.child:
        print(json.dumps(prepare(args.program, args.entry, dims, args.child)))
        return 0
    if args.batch_child:
        print(json.dumps(batch(args.program, args.entry, dims, args.batch_child)))
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
    batch_rounds(args, dims)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
