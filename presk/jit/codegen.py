"""The LLVM pipeline every kernel object goes through, and the processes that run it side by side.

`JitEngine` (`presk.jit.engine`) optimises and code-generates one module at
a time under llvmlite's lock: llvmlite serialises every call into LLVM, one
process can compile only one module at once. A program launching dozens
of kernels spends most of its first run there (the course GPT's gradient
at B = 2, T = 32: 44 modules, about 5 s of its 8.8). `CompileWorkers`
compiles such a batch in helper processes, one per core the caller may
use, and the engine loads their objects as it loads the disk cache's.

One pipeline, two places it runs: this module holds it (`optimize`,
`PIPELINE`) and imports nothing but the standard library and llvmlite, so
the workers start without presk's imports and run exactly the engine's
passes. The same IR, target and pipeline give the same object bytes in
either process (tests/unit/jit/test_codegen.py compares them).

Run as a script (`python -P .../codegen.py`), it is a worker: it reads
pickled `(ir, triple, cpu, features)` requests on stdin until EOF and
answers each with the object's bytes, or None where LLVM refused the IR
(the engine then compiles that module itself and reports the error as
it always does).
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO

import llvmlite.binding as llvm

UNROLL_THRESHOLD = 50
"""LLVM's `-unroll-threshold` (300 at O3): the size up to which it unrolls a loop it was not asked to.

presk unrolls what must be unrolled itself (a register tile's k loop carries
`llvm.loop.unroll.count`, which this threshold does not limit). At 300, LLVM
fully unrolled the small constant loops of merged kernels and optimised the
copies: 60 % of the optimisation and code generation time, for nothing
measurable. Measured on the Xeon host: the small course GPT's gradient
(48 kernels) compiles in 2.3 s instead of 5.9; the course GPT's training
step, AdamW and softmax kernels ran as fast as at 300 (kernel by kernel,
alternately, twice), where turning LLVM's unrolling off altogether cost 10–40 %
on reductions and LayerNorm kernels."""

PIPELINE = f"O3,slp,unroll-threshold={UNROLL_THRESHOLD}"
"""The optimisation pipeline, part of every cache key: an object from another pipeline is another object."""

JOBS_ENV = "PRESK_COMPILE_JOBS"
"""Processes compiling a batch of modules at once: a positive integer; 1 compiles in-process only."""

PARALLEL_IR_BYTES = 256 * 1024
"""The IR a batch must hold before workers are started for it.

A worker costs about 0.2 s to start (Python and llvmlite); LLVM takes
about 4 µs a byte of presk's IR at O3 (the course GPT's gradient: 1.28 MB
in 5.0 s on the AMD EPYC Zen 3), so below some 150 KB the workers' start
costs what they save."""


def initialize_target() -> None:
    """The native target, its assembly printer and the pipeline's process-wide unrolling option."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.set_option("", f"-unroll-threshold={UNROLL_THRESHOLD}")  # process-wide in LLVM


def target_machine(triple: str, cpu: str, features: str) -> llvm.TargetMachine:
    return llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3, jit=True)


def parse(ir: str, target: llvm.TargetMachine, triple: str) -> llvm.ModuleRef:
    """The verified module of `ir`, for `target`; RuntimeError from LLVM where the IR is invalid."""
    module = llvm.parse_assembly(ir)
    module.verify()
    module.triple = triple
    module.data_layout = str(target.target_data)
    return module


def optimize(module: llvm.ModuleRef, target: llvm.TargetMachine) -> None:
    """`PIPELINE`: O3 with the new pass manager, SLP vectorisation on (as clang's O3 has it; llvmlite leaves
    it off), the unrolling threshold set by `initialize_target`."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(target, tuning)
    builder.getModulePassManager().run(module, builder)


def jobs_for(modules: int, ir_bytes: int) -> int:
    """How many processes should compile a batch of `modules` holding `ir_bytes` of IR.

    `PRESK_COMPILE_JOBS` when set; else the cores this process may run on
    (its affinity mask: a Ray worker pinned to one core gets 1), at most
    one a module, and 1 below `PARALLEL_IR_BYTES`. A bad value of the
    variable is a ValueError naming it (the CLI reports it as an error).
    """
    given = os.environ.get(JOBS_ENV)
    if given is not None and given.strip():
        try:
            jobs = int(given)
        except ValueError:
            jobs = 0
        if jobs < 1:
            raise ValueError(f"{JOBS_ENV}={given!r}: expected a positive integer (1 compiles in this process only)")
        return min(jobs, max(modules, 1))
    if ir_bytes < PARALLEL_IR_BYTES:
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), modules))


class CompileWorkers:
    """`jobs` worker processes compiling modules for one target, stopped on `close()` (or `with`)."""

    def __init__(self, jobs: int, triple: str, cpu: str, features: str) -> None:
        self.target = (triple, cpu, features)
        self._procs: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(jobs):
                self._procs.append(subprocess.Popen(
                    [sys.executable, "-P", os.path.abspath(__file__)],  # -P: presk/jit/ not on sys.path
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                ))  # fmt: skip
        except OSError:
            self.close()  # no workers: every module compiles in the caller's process
            self._procs = []

    def compile(self, modules: Mapping[str, str]) -> dict[str, bytes]:
        """Objects of `modules` (key → IR), the largest first; a module a worker could not compile is absent.

        A worker found dead when handed a module puts it back for the others
        (who wait while any module is out, so none is left behind); one that
        dies compiling a module leaves that module to the caller (which
        compiles it itself and reports what goes wrong)."""
        queue = sorted(modules.items(), key=lambda item: -len(item[1]))
        objects: dict[str, bytes] = {}
        changed = threading.Condition()
        handed = 0  # modules a worker holds now: one it could not take comes back to the queue

        def serve(proc: subprocess.Popen[bytes]) -> None:
            nonlocal handed
            assert proc.stdin is not None and proc.stdout is not None
            while True:
                with changed:
                    while not queue and handed:
                        changed.wait()
                    if not queue:
                        return
                    key, ir = queue.pop(0)
                    handed += 1
                try:
                    pickle.dump((ir, *self.target), proc.stdin)
                    proc.stdin.flush()
                except OSError:  # the worker was gone before it took the module: another takes it
                    outcome: object = "not taken"
                else:
                    try:
                        outcome = pickle.load(proc.stdout)  # the object, or None where LLVM refused the IR
                    except (OSError, EOFError, pickle.UnpicklingError):  # it died on the module: the caller's
                        outcome = "died"
                with changed:
                    handed -= 1
                    if isinstance(outcome, bytes):
                        objects[key] = outcome
                    elif outcome == "not taken":
                        queue.append((key, ir))
                    changed.notify_all()
                if isinstance(outcome, str):
                    return

        threads = [threading.Thread(target=serve, args=(proc,), daemon=True) for proc in self._procs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return objects

    def close(self, kill: bool = False) -> None:
        """Close the workers' pipes, which ends their loops; `kill` stops them at once (the caller was
        interrupted: a module being compiled is not waited for)."""
        for proc in self._procs:
            if kill:
                proc.kill()
        for proc in self._procs:
            for stream in (proc.stdin, proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs = []

    def __enter__(self) -> CompileWorkers:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        self.close(kill=exc_type is not None)


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """A worker's loop: one object (or None) per request, until the caller closes the pipe."""
    initialize_target()
    targets: dict[tuple[str, str, str], llvm.TargetMachine] = {}
    while True:
        try:
            ir, triple, cpu, features = pickle.load(requests)
        except EOFError:
            return
        key = (triple, cpu, features)
        target = targets.get(key)
        if target is None:
            target = targets[key] = target_machine(triple, cpu, features)
        try:
            module = parse(ir, target, triple)
            optimize(module, target)
            reply: bytes | None = target.emit_object(module)
        except RuntimeError:
            reply = None
        pickle.dump(reply, replies)
        replies.flush()


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the caller stops, and closes the pipes that end this loop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _serve(sys.stdin.buffer, sys.stdout.buffer)
