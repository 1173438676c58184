"""The machine's FMA peak: what presk's kernels are measured against, per CPU.

    python bench/bench_peak.py                    # f32 and f64, every register width of the target, 1 and 2 threads
    PRESK_TARGET=x86-64-v3 python bench/bench_peak.py     # the AVX2 register file on an AVX-512 host

A JIT-compiled loop (through presk's `JitEngine`, for the target presk
lowers for) of `--accumulators` independent `llvm.fma` chains on vectors of
each register width, `--iterations` steps each, no loads or stores in the
loop: its GFLOP/s (2 · lanes · accumulators · iterations / time) is the
FMA units' throughput at this clock. An FMA has several cycles of latency
and a core has two units, so fewer chains than latency × units leave units
idle; the script tries 8, 10 and 12 chains (and more where the registers
hold them) and reports the best. Two threads run the same loop at once,
one each, from Python threads (the compiled call releases the GIL).

Each figure is the median of `--rounds` calls; the machine is shared, so
the median, not the best, is reported.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import positive_int

from presk.jit.engine import JitEngine
from presk.target import Machine, target_machine

LLVM_TYPE = {"f32": "float", "f64": "double"}


def fma_loop_ir(dtype: str, lanes: int, chains: int) -> str:
    """`peak(args, lo, hi)`: `chains` FMA chains of `<lanes x T>` for hi − lo steps; their sum to args[0].

    The multiplicands are read from args[1] and args[2] once, before the
    loop, so that nothing is constant-folded; without fast-math flags LLVM
    keeps every FMA and every chain."""
    t = LLVM_TYPE[dtype]
    v = f"<{lanes} x {t}>"
    fma = f"llvm.fma.v{lanes}{dtype}"
    lines = [
        f"declare {v} @{fma}({v}, {v}, {v})",
        "define void @peak(ptr %args, i64 %lo, i64 %hi) {",
        "entry:",
        "  %pa = getelementptr ptr, ptr %args, i64 1",
        "  %pb = getelementptr ptr, ptr %args, i64 2",
        "  %a.ptr = load ptr, ptr %pa",
        "  %b.ptr = load ptr, ptr %pb",
        f"  %a = load {v}, ptr %a.ptr, align 4",
        f"  %b = load {v}, ptr %b.ptr, align 4",
        "  %n = sub i64 %hi, %lo",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [0, %entry], [%i.next, %loop]",
    ]
    for c in range(chains):
        lines.append(f"  %acc{c} = phi {v} [zeroinitializer, %entry], [%next{c}, %loop]")
    for c in range(chains):
        lines.append(f"  %next{c} = call {v} @{fma}({v} %a, {v} %b, {v} %acc{c})")
    lines += [
        "  %i.next = add i64 %i, 1",
        "  %done = icmp eq i64 %i.next, %n",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
    ]
    total = "%next0"
    for c in range(1, chains):
        lines.append(f"  %sum{c} = fadd {v} {total}, %next{c}")
        total = f"%sum{c}"
    lines += [
        "  %po = getelementptr ptr, ptr %args, i64 0",
        "  %out.ptr = load ptr, ptr %po",
        f"  store {v} {total}, ptr %out.ptr, align 4",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def measure(engine: JitEngine, dtype: str, lanes: int, chains: int, threads: int, iterations: int, rounds: int) -> float:
    """GFLOP/s of `threads` copies of the loop at once, the median of `rounds`."""
    kernel = engine.kernel(fma_loop_ir(dtype, lanes, chains), "peak")
    element = ctypes.c_float if dtype == "f32" else ctypes.c_double
    buffers = [[(element * lanes)(), (element * lanes)(*([1.0] * lanes)), (element * lanes)(*([1e-9] * lanes))]
               for _ in range(threads)]  # fmt: skip
    args = [(ctypes.c_void_p * 3)(*(ctypes.addressof(b) for b in bufs)) for bufs in buffers]
    addresses = [ctypes.addressof(a) for a in args]

    def once() -> float:
        workers = [threading.Thread(target=kernel, args=(address, 0, iterations)) for address in addresses]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return time.perf_counter() - start

    once()
    seconds = statistics.median(once() for _ in range(rounds))
    return 2 * lanes * chains * iterations * threads / seconds / 1e9


def chain_counts(machine: Machine) -> list[int]:
    """8, 10, 12 chains, and 16 and 24 where the registers hold them (one register each, plus two operands)."""
    return [c for c in (8, 10, 12, 16, 24) if c + 2 <= machine.vector_registers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--dtypes", default="f32,f64", help="f32, f64 or both (default f32,f64)")
    parser.add_argument("--iterations", type=positive_int, default=20_000_000, help="FMA steps per chain (default 2e7)")
    parser.add_argument("--rounds", type=positive_int, default=7, help="timed calls per figure (default 7)")
    parser.add_argument("--json", metavar="FILE", help="also write the records to FILE")
    args = parser.parse_args()
    machine = target_machine()
    engine = JitEngine(machine, disk_cache=False)
    print(f"target {machine.cpu_name}, {machine.vector_registers} vector registers", flush=True)
    records = []
    for dtype in args.dtypes.split(","):
        for lanes in machine.lane_widths(dtype):
            for threads in (int(t) for t in args.threads.split(",")):
                by_chains = {c: measure(engine, dtype, lanes, c, threads, args.iterations, args.rounds)
                             for c in chain_counts(machine)}  # fmt: skip
                best = max(by_chains, key=lambda c: by_chains[c])
                record = {"dtype": dtype, "lanes": lanes, "threads": threads, "gflops": by_chains[best],
                          "chains": best, "by_chains": by_chains}  # fmt: skip
                records.append(record)
                print(f"{dtype} <{lanes} x {dtype}> threads={threads}: {by_chains[best]:.1f} GFLOP/s "
                      f"({best} chains; " + ", ".join(f"{c}: {g:.1f}" for c, g in by_chains.items()) + ")", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
