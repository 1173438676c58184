"""The kernel backends of `presk run`, `bench` and `dump`: one entry lowered, then run.

`--backend kernel` interprets the kernels exactly in numpy; `--backend
native` compiles them with LLVM. Both run the same host program
(`presk.jit.executor.HostProgram`), so they differ only in their kernels.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from presk.cli.program import Program, in_program
from presk.diagnostics import PreskError
from presk.plans import Plan
from presk.target import MAX_WORKERS

if TYPE_CHECKING:  # the lowering and the executors are imported where they run: `presk run`'s reference
    # interpreter needs neither, and they are a quarter of a second of a process's start
    from presk.jit.executor import HostProgram, Runner

KERNEL_BACKENDS = ("kernel", "native")


def add_backend_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    choices = ("interp", *KERNEL_BACKENDS) if default == "interp" else KERNEL_BACKENDS
    parser.add_argument(
        "--backend",
        default=default,
        choices=choices,
        help="interp: the reference interpreter; kernel: the kernels, interpreted exactly; "
        f"native: the kernels compiled by LLVM (default {default})",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="workers of the native backend's thread split (default: PRESK_THREADS, else every core)",
    )
    parser.add_argument("--no-fuse", action="store_true", help="launch every primitive by itself (psk-fuse{max-nodes=1})")
    parser.add_argument(
        "--donate",
        metavar="NAMES",
        help="kernel backends: let results be written over these arguments (comma-separated argument paths, a name "
        "standing for every leaf under it, or 'all'), as JAX's donate_argnums: psk-in-place; same bits",
    )


def make_runner(backend: str, threads: int | None = None) -> Runner:
    if threads is not None:
        if not 1 <= threads <= MAX_WORKERS:
            raise PreskError("E4001", f"--threads {threads}: give a number of workers from 1 to {MAX_WORKERS}")
        os.environ["PRESK_THREADS"] = str(threads)
    if backend == "kernel":
        from presk.interp.kernel import KernelInterpreter

        return KernelInterpreter().runner
    if backend == "native":
        from presk.jit.native import NativeRunner

        runner = NativeRunner()
        if sys.stderr.isatty():
            runner.engine.on_batch = say_compiling
        return runner
    raise PreskError("E4001", f"--backend {backend}: the kernel backends are {', '.join(KERNEL_BACKENDS)}")


def say_compiling(modules: int, ir_bytes: int, processes: int) -> None:
    """The line a terminal sees before a first run's kernels compile (seconds for a model's dozens)."""
    where = f"on {processes} processes" if processes > 1 else "in this process"
    sys.stderr.write(f"presk: compiling {modules} kernels ({ir_bytes / 1e6:.1f} MB of LLVM IR) {where}...\n")
    sys.stderr.flush()


def lower(module: Any, entry: str, env: dict[str, int], plan: Plan, *flags: bool | None) -> Any:
    """`presk.pipeline.lower`, imported at the first lowering rather than at the command's start; a name of
    this module, so that a caller can put a memo in its place (the suite's conftest does)."""
    from presk.pipeline import lower as lower_entry

    return lower_entry(module, entry, env, plan, *flags)


def compile_entry(program: Program, entry: str, plan: Plan, fuse: bool = True, donate: str | None = None) -> Any:
    """The kernel module of `entry`, with the plan's errors placed at their source line.

    `donate` (`--donate`): arguments whose buffers results may take (`presk.passes.in_place`).
    """
    try:
        kernels = lower(program.parsed.module, entry, program.env, plan, fuse)
        if donate:
            from presk.passes.in_place import donate as donate_arguments

            donate_arguments(kernels, donate)
        return kernels
    except PreskError as error:
        raise in_program(error, program) from None


def host_program(
    program: Program, entry: str, plan: Plan, backend: str, threads: int | None, fuse: bool, donate: str | None = None
) -> HostProgram:
    from presk.jit.executor import HostProgram

    return HostProgram(compile_entry(program, entry, plan, fuse, donate), make_runner(backend, threads))
