"""A batch of modules compiled by worker processes (`presk.jit.codegen`): the same objects, the same errors."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from jit_kernels import pointer_table, scale_ir, vector_fma_ir

from presk.diagnostics import PreskError
from presk.jit import codegen
from presk.jit.engine import JitEngine
from presk.target import target_machine
from test_cli_run import run

MINIGPT = str(Path(__file__).resolve().parents[3] / "corpus" / "minigpt.mlir")

BAD_IR = "define void @k(ptr %a, i64 %lo, i64 %hi) {\n  br label %nowhere\n}"


@pytest.fixture(autouse=True)
def _private_default_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "default-cache"))


def modules() -> dict[str, str]:
    irs = [scale_ir(float(f), name=f"scale{f}") for f in range(2, 6)] + [vector_fma_ir()]
    return {f"m{i}": ir for i, ir in enumerate(irs)}


def in_process(ir: str) -> bytes:
    machine = target_machine()
    codegen.initialize_target()
    target = codegen.target_machine(machine.triple, machine.cpu_name, machine.feature_string())
    module = codegen.parse(ir, target, machine.triple)
    codegen.optimize(module, target)
    return target.emit_object(module)


def workers(jobs: int = 2) -> codegen.CompileWorkers:
    machine = target_machine()
    return codegen.CompileWorkers(jobs, machine.triple, machine.cpu_name, machine.feature_string())


def test_workers_give_the_objects_this_process_gives() -> None:
    with workers() as pool:
        objects = pool.compile(modules())
    assert objects == {key: in_process(ir) for key, ir in modules().items()}


def test_a_module_llvm_refuses_is_absent_and_the_rest_compiled() -> None:
    with workers() as pool:
        objects = pool.compile({**modules(), "bad": BAD_IR})
    assert set(objects) == set(modules())


def test_a_dead_worker_leaves_the_batch_to_the_others() -> None:
    with workers() as pool:
        dead = pool._procs[0]
        dead.kill()
        dead.wait()
        objects = pool.compile(modules())
    assert set(objects) == set(modules())


def test_compile_many_loads_the_workers_objects_and_caches_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codegen.JOBS_ENV, "2")
    engine = JitEngine(cache_dir=tmp_path / "kernels")
    irs = list(modules().values())
    compiled = engine.compile_many([*irs, irs[0]])
    assert engine.stats.worker_compiled == len(irs) and engine.stats.compiled == 0
    assert compiled[-1] is compiled[0] and len(list((tmp_path / "kernels").glob("*.pskobj"))) == len(irs)
    a = np.arange(37, dtype=np.float32) - 5
    out = np.full(37, -1.0, dtype=np.float32)
    table = pointer_table([a, out])
    compiled[1].kernel("scale3")(ctypes.addressof(table), 0, 37)
    np.testing.assert_array_equal(out, a * 3)
    # A second engine finds them on disk: nothing is compiled, by workers or here.
    again = JitEngine(cache_dir=tmp_path / "kernels")
    again.compile_many(irs)
    assert (again.stats.disk_hits, again.stats.worker_compiled, again.stats.compiled) == (len(irs), 0, 0)


def test_compile_many_reports_invalid_ir_as_compile_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codegen.JOBS_ENV, "2")
    engine = JitEngine(cache_dir=tmp_path / "kernels")
    with pytest.raises(PreskError) as error:
        engine.compile_many([*modules().values(), BAD_IR])
    assert error.value.code == "E5001" and "invalid LLVM IR" in error.value.message and "nowhere" in error.value.message


def test_jobs_follow_the_variable_the_ir_and_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(codegen.JOBS_ENV, raising=False)
    monkeypatch.setattr(codegen.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    big = codegen.PARALLEL_IR_BYTES
    assert codegen.jobs_for(10, big - 1) == 1  # too little IR to pay for starting workers
    assert codegen.jobs_for(10, big) == 4 and codegen.jobs_for(3, big) == 3
    monkeypatch.setattr(codegen.os, "sched_getaffinity", lambda pid: {5})
    assert codegen.jobs_for(10, big) == 1  # pinned to one core (a Ray worker)
    monkeypatch.setenv(codegen.JOBS_ENV, "3")
    assert codegen.jobs_for(10, 0) == 3 and codegen.jobs_for(2, 0) == 2
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv(codegen.JOBS_ENV, bad)
        with pytest.raises(ValueError, match="PRESK_COMPILE_JOBS"):
            codegen.jobs_for(10, big)


def test_a_bad_jobs_value_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(codegen.JOBS_ENV, "many")
    with pytest.raises(PreskError, match=r"E4001.*PRESK_COMPILE_JOBS='many': expected a positive integer"):
        JitEngine(cache_dir=tmp_path).compile_many([scale_ir()])


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch the workers are handed, in order."""
    sizes: list[int] = []
    compile_batch = codegen.CompileWorkers.compile

    def counted(self: codegen.CompileWorkers, modules: dict[str, str]) -> dict[str, bytes]:
        sizes.append(len(modules))
        return compile_batch(self, modules)

    monkeypatch.setattr(codegen.CompileWorkers, "compile", counted)
    return sizes


def test_a_program_compiled_by_workers_computes_the_same_bits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: list[int]
) -> None:
    """MiniGPT's loss runs natively, its kernels compiled by two workers, then in this process
    (each with a cache of its own): the same outputs, byte for byte."""
    outputs = {}
    for jobs in ("2", "1"):
        monkeypatch.setenv(codegen.JOBS_ENV, jobs)
        monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / f"cache{jobs}"))
        out = tmp_path / f"{jobs}.npz"
        code, _, err = run("run", MINIGPT, "--entry", "loss", "--dim", "B=2", "--dim", "T=8", "--realize", "f32",
                           "--backend", "native", "--output", str(out))  # fmt: skip
        assert code == 0, err
        outputs[jobs] = dict(np.load(out))
    assert len(batches) == 1 and batches[0] >= 5  # the whole program's modules, in one batch, by the workers
    assert sorted(outputs["2"]) == sorted(outputs["1"])
    for key, value in outputs["1"].items():
        assert outputs["2"][key].tobytes() == value.tobytes(), key


def test_presk_bench_compiles_its_timed_program_on_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: list[int]
) -> None:
    """`presk bench` times each launch through its own runner (`TimedRunner`), which hands the program's
    modules over as one batch too."""
    monkeypatch.setenv(codegen.JOBS_ENV, "2")
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = run("bench", MINIGPT, "--entry", "loss", "--dim", "B=2", "--dim", "T=8", "--realize", "f32",
                         "--rounds", "1")  # fmt: skip
    assert code == 0, err
    assert len(batches) == 1 and batches[0] >= 5 and "@loss: native backend" in out


def test_a_large_batch_is_announced_once_and_a_cached_one_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`on_batch` (which the commands set on a terminal) hears of a batch holding enough IR to take seconds,
    before it compiles; a batch the cache holds, or one too small, compiles without a word."""
    monkeypatch.setenv(codegen.JOBS_ENV, "1")
    heard: list[tuple[int, int, int]] = []
    engine = JitEngine(cache_dir=tmp_path / "kernels")
    engine.on_batch = lambda modules, ir_bytes, processes: heard.append((modules, ir_bytes, processes))
    irs = list(modules().values())
    engine.compile_many(irs)
    assert heard == []  # a few small modules
    monkeypatch.setattr(codegen, "PARALLEL_IR_BYTES", 1)
    fresh = [scale_ir(7.0, name="scale7"), irs[0]]
    engine.compile_many(fresh)
    assert heard == [(1, len(fresh[0]), 1)]  # the one module neither cache holds
    engine.compile_many(fresh)
    assert len(heard) == 1


def test_the_commands_announce_a_first_compile_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from presk.cli.backends import make_runner

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert make_runner("native").engine.on_batch is None  # a pipe or a file: the output stays the program's
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    announce = make_runner("native").engine.on_batch
    assert announce is not None
    announce(44, 1_280_000, 2)
    assert terminal.getvalue() == "presk: compiling 44 kernels (1.3 MB of LLVM IR) on 2 processes...\n"
