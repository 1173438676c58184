"""Per-element cost of presk's exp against numpy.exp and libm, side by side.

    python bench/bench_mathlib.py [--rows 24576 --cols 256] [--repeat 15] [--twin]

The data is a softmax-sized f32 array (24576 x 256 = 6.3e6 values, like
softmax's exp over [batch*heads*seq, seq] scores after subtracting the row max).
Contenders, all single-threaded, each run once per round in turn so that the
machine's noise hits them alike, and reported as medians over the rounds:

  presk <16 x float>   presk.lowering.mathlib.emit_exp on zmm vectors
  presk <8 x float>    the same on ymm vectors
  presk scalar IR      the scalar IR in a plain loop (LLVM's loop vectoriser
                       widens it: same bits, since the lanes are independent)
  libm via llvm.exp    `llvm.exp.v16f32`, which LLVM scalarises to 16 expf calls
  numpy.exp            numpy's own SIMD float32 exp (not reproducible by presk)
  twin (interp)        presk.interp.mathlib.exp, the kernel interpreter (--twin)

A second table repeats the race on a cache-resident slice (--cached values,
called back to back): if its per-element times match the first table's, the
big run was bound by arithmetic, not by memory.
The "max ulp" column is each result's error against numpy's float64 exp.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
from collections.abc import Callable

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from presk.interp import mathlib as twin
from presk.lowering.mathlib import define_map_kernel, emit_exp

Kernel = Callable[[np.ndarray, np.ndarray], None]


def _libm_exp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """`llvm.exp` on x's type: what presk would get from LLVM's own exp."""
    ty = x.type
    suffix = f"v{ty.count}f32" if isinstance(ty, ir.VectorType) else "f32"
    name = f"llvm.exp.{suffix}"
    module = builder.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ty, [ty]), name)
    return builder.call(fn, [x])


def compile_kernels() -> tuple[dict[str, Kernel], object]:
    """JIT the contenders into one module; returns callables and the engine (keep it alive)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module("bench_mathlib")
    module.triple = llvm.get_process_triple()
    f32 = ir.FloatType()
    specs = {
        "presk <16 x float>": (emit_exp, 16),
        "presk <8 x float>": (emit_exp, 8),
        "presk scalar IR": (emit_exp, 1),
        "libm via llvm.exp": (_libm_exp, 16),
    }
    names = {}
    for i, (label, (emit, lanes)) in enumerate(specs.items()):
        names[label] = f"k{i}"
        define_map_kernel(module, names[label], emit, f32, lanes)
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(  # one per engine
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True
    )
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.slp_vectorization = True
    passes = llvm.create_pass_builder(machine, tuning)
    passes.getModulePassManager().run(parsed, passes)
    engine = llvm.create_mcjit_compiler(parsed, machine)  # also loads the process's symbols
    if not llvm.address_of_symbol("expf"):  # an unresolved symbol would crash finalize
        raise SystemExit("expf is not available in this process; cannot build the libm contender")
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    kernels: dict[str, Kernel] = {}
    for label, name in names.items():
        cfunc = signature(engine.get_function_address(name))
        kernels[label] = lambda x, y, f=cfunc: f(x.ctypes.data, y.ctypes.data, x.size)
    return kernels, engine


def max_ulp(y: np.ndarray, x: np.ndarray) -> float:
    exact = np.exp(x.astype(np.float64))
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.where(exact > 0, exact, 1.0)))
        err = np.abs(y.astype(np.float64) - exact) / 2.0 ** (np.maximum(e, -126) - 23)
    return float(np.nanmax(err))


def measure(contenders: dict[str, Kernel], x: np.ndarray, repeat: int, inner: int
            ) -> tuple[dict[str, list[float]], dict[str, np.ndarray]]:
    """Seconds per call (the mean of `inner` back-to-back calls), one entry per
    round; the contenders take turns within each round."""
    outputs = {label: np.empty_like(x) for label in contenders}
    times: dict[str, list[float]] = {label: [] for label in contenders}
    for label, run in contenders.items():  # warm up (page faults, first-call costs)
        run(x, outputs[label])
    for _ in range(repeat):
        for label, run in contenders.items():
            out = outputs[label]
            t0 = time.perf_counter()
            for _ in range(inner):
                run(x, out)
            times[label].append((time.perf_counter() - t0) / inner)
    return times, outputs


def report(title: str, x: np.ndarray, times: dict[str, list[float]], outputs: dict[str, np.ndarray]) -> None:
    n = x.size
    ref = statistics.median(times["numpy.exp"])
    print(title)
    print(f"  {'contender':<24}{'median ms':>11}{'ns/elem':>10}{'min ms':>9}{'vs numpy':>10}{'max ulp':>9}")
    for label, ts in times.items():
        med = statistics.median(ts)
        print(f"  {label:<24}{med * 1e3:>11.3f}{med / n * 1e9:>10.3f}{min(ts) * 1e3:>9.3f}"
              f"{ref / med:>9.2f}x{max_ulp(outputs[label], x):>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=24576)
    parser.add_argument("--cols", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=15, help="rounds (median reported)")
    parser.add_argument("--cached", type=int, default=65536,
                        help="size of the second, cache-resident run (0: skip)")
    parser.add_argument("--twin", action="store_true", help="also time the numpy twin (slow)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    scores = rng.normal(0.0, 3.0, (args.rows, args.cols)).astype(np.float32)
    x = np.ascontiguousarray(scores - scores.max(axis=1, keepdims=True)).reshape(-1)  # softmax's exp input
    kernels, _engine = compile_kernels()
    contenders: dict[str, Kernel] = dict(kernels)
    contenders["numpy.exp"] = lambda a, out: np.exp(a, out=out)
    if args.twin:
        contenders["twin (interp)"] = lambda a, out: np.copyto(out, twin.exp(a))

    times, outputs = measure(contenders, x, args.repeat, 1)
    report(f"exp over {x.size:,} float32 values ({args.rows} x {args.cols}, softmax-sized), median of "
           f"{args.repeat} interleaved rounds, one thread", x, times, outputs)
    same = np.array_equal(outputs["presk <16 x float>"].view(np.int32), outputs["presk scalar IR"].view(np.int32))
    if args.cached:
        small = np.ascontiguousarray(x[: args.cached])
        inner = max(1, x.size // small.size)
        if args.twin:
            del contenders["twin (interp)"]
        times, outputs = measure(contenders, small, args.repeat, inner)
        report(f"exp over {small.size:,} values (in cache), {inner} calls per round", small, times, outputs)
    print(f"presk <16 x float> == presk scalar IR, bit for bit: {same}")


if __name__ == "__main__":
    main()
