"""The JIT engine: compiling ABI kernels, refusing bad modules, caching."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from jit_kernels import (
    LIBCALL_IR,
    NOOP_IR,
    UNKNOWN_INTRINSIC_IR,
    UNRESOLVED_CALL_IR,
    UNRESOLVED_GLOBAL_IR,
    pointer_table,
    scale_ir,
    vector_fma_ir,
)

from presk.target import target_machine
from presk.diagnostics import PreskError
from presk.jit.engine import (
    OBJECT_SUFFIX,
    CompiledKernel,
    JitEngine,
    clear_disk_cache,
    default_cache_dir,
    undefined_symbols,
)


@pytest.fixture(autouse=True)
def _private_default_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine built without `cache_dir` must not write to the user's cache."""
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "default-cache"))


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "kernels"


@pytest.fixture
def engine(cache_dir: Path) -> JitEngine:
    return JitEngine(cache_dir=cache_dir)


def run_scale(kernel: CompiledKernel, n: int = 37, lo: int = 0, hi: int | None = None) -> np.ndarray:
    a = np.arange(n, dtype=np.float32) - 5
    out = np.full(n, -1.0, dtype=np.float32)
    table = pointer_table([a, out])
    kernel(ctypes.addressof(table), lo, n if hi is None else hi)
    return out


def test_scale_kernel_runs_its_range(engine: JitEngine) -> None:
    kernel = engine.kernel(scale_ir(), "scale")
    assert kernel.name == "scale" and kernel.address
    a = np.arange(37, dtype=np.float32) - 5
    np.testing.assert_array_equal(run_scale(kernel), a * 2)
    partial = run_scale(kernel, lo=3, hi=11)
    np.testing.assert_array_equal(partial[3:11], a[3:11] * 2)
    assert (partial[:3] == -1).all() and (partial[11:] == -1).all()
    assert kernel.function is kernel.function


@pytest.mark.target
def test_vector_kernel_uses_the_widest_registers(engine: JitEngine) -> None:
    rng = np.random.default_rng(0)
    a, b, out = (rng.standard_normal(64, dtype=np.float32) for _ in range(3))
    expected = (a.astype(np.float64) * b + out).astype(np.float32)  # fma rounds once
    kernel = engine.kernel(vector_fma_ir(), "vfma")
    table = pointer_table([a, b, out])
    kernel(ctypes.addressof(table), 0, 4)
    np.testing.assert_array_equal(out, expected)
    if "avx512f" in target_machine().features:
        assert "zmm" in engine.assembly(vector_fma_ir())


@pytest.mark.parametrize(
    ("ir", "symbol"),
    [
        (UNRESOLVED_CALL_IR, "presk_no_such_function"),
        (UNRESOLVED_GLOBAL_IR, "presk_no_such_global"),
        (UNKNOWN_INTRINSIC_IR, "llvm.presk.bogus"),
    ],
)
def test_unresolved_symbol_is_an_error_not_a_crash(engine: JitEngine, ir: str, symbol: str) -> None:
    # In-process on purpose: without the check, MCJIT aborts the interpreter here.
    with pytest.raises(PreskError) as error:
        engine.compile(ir)
    assert error.value.code == "E5001"
    assert symbol in error.value.message and "unresolved" in error.value.message
    assert engine.kernel(NOOP_IR, "noop").address  # the engine is still usable


def test_a_runtime_library_call_is_refused_where_the_process_lacks_it(engine: JitEngine, cache_dir: Path) -> None:
    """`__divti3`, which a 128-bit division calls, is not in CPython, but a library loaded into the process
    provides it (libgcc_s: importing Ray loads it, and so does this suite's collection). Where the process has
    it, the kernel links and divides; a fresh interpreter, which lacks it, refuses the kernel with E5001."""
    import llvmlite.binding as llvm

    if llvm.address_of_symbol("__divti3"):
        kernel = engine.kernel(LIBCALL_IR, "divides")
        args = np.zeros(4, dtype=np.uint64)
        x, d = 10**30, 7
        args[0], args[1], args[2], args[3] = x & (2**64 - 1), x >> 64, d, 0
        kernel(args.ctypes.data, 0, 1)
        assert int(args[0]) + (int(args[1]) << 64) == x // d
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        from jit_kernels import LIBCALL_IR
        from presk.diagnostics import PreskError
        from presk.jit.engine import JitEngine
        import llvmlite.binding as llvm
        engine = JitEngine()
        assert not llvm.address_of_symbol("__divti3")
        try:
            engine.compile(LIBCALL_IR)
        except PreskError as error:
            print(error.code, "__divti3" in error.message and "unresolved" in error.message)
        """
    )
    env = {**os.environ, "PRESK_CACHE_DIR": str(cache_dir)}
    here = str(Path(__file__).parent)
    command = [sys.executable, "-c", script, here]
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["E5001", "True"]


def test_the_object_check_sees_runtime_calls(engine: JitEngine) -> None:
    obj = engine._codegen().emit_object(engine._parse(LIBCALL_IR))
    assert "__divti3" in undefined_symbols(obj)
    assert undefined_symbols(b"not an object file") == []


@pytest.mark.parametrize(
    ("ir", "llvm_says"),
    [
        ("define void @k(ptr %args {", "expected ')'"),
        ("define void @k(ptr %a, i64 %lo, i64 %hi) {\n  ret i64 0\n}", "doesn't match function result type"),
        ("define void @k(ptr %a, i64 %lo, i64 %hi) {\n  br label %nowhere\n}", "nowhere"),
        (
            (
                "define void @k(ptr %a, i64 %lo, i64 %hi) {\nentry:\n  br label %b\nb:\n"
                "  %x = add i64 %y, 1\n  %y = add i64 %x, 1\n  ret void\n}"
            ),
            "does not dominate",
        ),
    ],
)
def test_invalid_ir_is_an_error_with_llvms_message(engine: JitEngine, ir: str, llvm_says: str) -> None:
    with pytest.raises(PreskError) as error:
        engine.compile(ir)
    assert error.value.code == "E5001"
    assert "invalid LLVM IR" in error.value.message and llvm_says in error.value.message


def test_a_kernel_must_exist_and_have_the_abi(engine: JitEngine) -> None:
    compiled = engine.compile(NOOP_IR + "define i32 @helper(i32 %x) {\n  ret i32 %x\n}\n")
    assert set(compiled.function_names) == {"noop", "helper"}
    with pytest.raises(PreskError, match=r"E5001.*@helper has type 'i32 \(i32\)'"):
        compiled.kernel("helper")
    with pytest.raises(PreskError, match=r"E5001.*no function @absent.*@noop"):
        compiled.kernel("absent")


def test_memory_cache(engine: JitEngine) -> None:
    first = engine.compile(scale_ir())
    assert engine.compile(scale_ir()) is first
    assert engine.kernel(scale_ir(), "scale") is first.kernel("scale")
    assert (engine.stats.compiled, engine.stats.memory_hits) == (1, 2)
    assert engine.compile(scale_ir(), layout_key="tile=4") is not first
    assert engine.compile(scale_ir(3.0)) is not first
    assert engine.stats.compiled == 3


def cache_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{OBJECT_SUFFIX}"))


def test_disk_cache_in_a_fresh_engine(cache_dir: Path) -> None:
    JitEngine(cache_dir=cache_dir).compile(scale_ir())
    assert len(cache_files(cache_dir)) == 1
    fresh = JitEngine(cache_dir=cache_dir)
    kernel = fresh.kernel(scale_ir(), "scale")
    assert (fresh.stats.compiled, fresh.stats.disk_hits) == (0, 1)
    np.testing.assert_array_equal(run_scale(kernel), (np.arange(37, dtype=np.float32) - 5) * 2)
    assert not list(cache_dir.glob("*.tmp"))


def test_disk_cache_across_processes(cache_dir: Path, tmp_path: Path) -> None:
    ir_file = tmp_path / "scale.ll"
    ir_file.write_text(scale_ir())
    JitEngine(cache_dir=cache_dir).compile(ir_file.read_text())
    script = textwrap.dedent(
        f"""
        import ctypes, numpy as np
        from presk.jit.engine import JitEngine
        engine = JitEngine()  # the cache directory comes from PRESK_CACHE_DIR
        kernel = engine.kernel(open({str(ir_file)!r}).read(), "scale")
        a = np.arange(8, dtype=np.float32); out = np.zeros(8, np.float32)
        table = (ctypes.c_void_p * 2)(a.ctypes.data, out.ctypes.data)
        kernel(ctypes.addressof(table), 0, 8)
        assert (out == a * 2).all(), out
        print(engine.stats.compiled, engine.stats.disk_hits)
        """
    )
    env = {**os.environ, "PRESK_CACHE_DIR": str(cache_dir)}
    result = subprocess.run([sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "1"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # a writer died mid-file (without os.replace)
        lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]),  # a flipped bit
        lambda data: b"",
        lambda data: b"\x7fELF" + data[4:],  # not our header
    ],
)
def test_corrupt_cache_file_is_recompiled(cache_dir: Path, damage) -> None:
    JitEngine(cache_dir=cache_dir).compile(scale_ir())
    (path,) = cache_files(cache_dir)
    path.write_bytes(damage(path.read_bytes()))
    engine = JitEngine(cache_dir=cache_dir)
    kernel = engine.kernel(scale_ir(), "scale")
    assert (engine.stats.disk_rejected, engine.stats.disk_hits, engine.stats.compiled) == (1, 0, 1)
    np.testing.assert_array_equal(run_scale(kernel), (np.arange(37, dtype=np.float32) - 5) * 2)
    repaired = JitEngine(cache_dir=cache_dir)
    repaired.compile(scale_ir())
    assert repaired.stats.disk_hits == 1


def test_disk_cache_can_be_disabled(cache_dir: Path) -> None:
    engine = JitEngine(cache_dir=cache_dir, disk_cache=False)
    engine.compile(scale_ir())
    assert not cache_dir.exists()


def test_unwritable_cache_costs_only_a_recompilation(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    engine = JitEngine(cache_dir=blocker / "kernels")
    assert engine.kernel(scale_ir(), "scale").address
    assert engine.stats.disk_write_errors == 1


def test_clear_disk_cache_removes_only_presk_files(cache_dir: Path) -> None:
    engine = JitEngine(cache_dir=cache_dir)
    engine.compile(scale_ir())
    engine.compile(NOOP_IR)
    (cache_dir / "notes.txt").write_text("mine")
    (cache_dir / f"0123{OBJECT_SUFFIX}.x1y2.tmp").write_bytes(b"left by a writer that died")
    assert clear_disk_cache(cache_dir) == 3
    assert [p.name for p in cache_dir.iterdir()] == ["notes.txt"]
    assert clear_disk_cache(cache_dir / "missing") == 0


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "explicit"))
    assert default_cache_dir() == tmp_path / "explicit"
    assert JitEngine(disk_cache=False).cache_dir == tmp_path / "explicit"
    monkeypatch.delenv("PRESK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "presk" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "presk" / "kernels"
