"""presk-opt end to end: exit codes and diagnostics, and never a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from presk.cli.guard import EXIT_INTERNAL, run_guarded
from presk.diagnostics import PreskError

ROOT = Path(__file__).resolve().parents[2]

BIN = Path(sys.executable).parent
DIAGNOSTIC = re.compile(r"^(?:\S+:\d+:\d+|presk): error: E\d{4}: ", re.MULTILINE)

GOOD = "func.func @f(%a: i32) -> i32 {\n  func.return %a : i32\n}\n"


def presk_opt(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    tool = BIN / "presk-opt"
    command = [str(tool)] if tool.exists() else [sys.executable, "-m", "presk.cli.opt"]
    return subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    path = tmp_path / "good.mlir"
    path.write_text(GOOD)
    return path


def test_round_trip_from_file_and_stdin(good_file: Path) -> None:
    from_file = presk_opt(str(good_file))
    assert from_file.returncode == 0 and from_file.stderr == ""
    assert presk_opt("-", stdin=from_file.stdout).stdout == from_file.stdout
    assert presk_opt(stdin=from_file.stdout).stdout == from_file.stdout


def test_output_file(good_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mlir"
    result = presk_opt(str(good_file), "-o", str(out))
    assert result.returncode == 0 and result.stdout == ""
    assert out.read_text().startswith("builtin.module {")


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["/no/such/file.mlir"], "", "E0001"),
        (["-"], "func.func @f( {{{ garbage", "E1001"),
        (["-"], "\x00\x01 binary", "E1001"),
        (["-"], "func.func @f() {\n  bogus.op\n}\n", "E1002"),
        (["-"], "func.func @f(%a: i32) -> i64 {\n  func.return %a : i32\n}\n", "E2001"),
        (["-", "-p", "no-such-pass"], GOOD, "E3001"),
        (["-", "-p", "cse{bogus=1}"], GOOD, "E3002"),
        (["-", "-p", "cse{"], GOOD, "E3002"),
        (["-", "--pass-pipeline", "builtin.module(func.func(cse))"], GOOD, "E3002"),
        (["-", "-p", "cse", "--pass-pipeline", "builtin.module(cse)"], GOOD, "E3002"),
    ],
)
def test_bad_input_gives_one_diagnostic_and_no_traceback(args: list[str], stdin: str, code: str) -> None:
    result = presk_opt(*args, stdin=stdin)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert DIAGNOSTIC.search(result.stderr), result.stderr
    assert f"error: {code}: " in result.stderr


def test_directory_as_input(tmp_path: Path) -> None:
    result = presk_opt(str(tmp_path))
    assert result.returncode == 1 and "error: E0001: " in result.stderr and "Traceback" not in result.stderr


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.mlir"
    path.write_bytes(b"// caf\xe9\n")
    result = presk_opt(str(path))
    assert result.returncode == 1 and "error: E0001: " in result.stderr


def test_stdin_not_utf8() -> None:
    tool = BIN / "presk-opt"
    result = subprocess.run([str(tool), "-"], input=b"\xff\xfe", capture_output=True, timeout=120, check=False)
    assert result.returncode == 1 and b"error: E0001: standard input is not UTF-8" in result.stderr


def test_unwritable_output_file(good_file: Path, tmp_path: Path) -> None:
    result = presk_opt(str(good_file), "-o", str(tmp_path / "no" / "such" / "dir" / "out.mlir"))
    assert result.returncode == 1 and "error: E0001: cannot write output file" in result.stderr


def test_located_diagnostic_points_at_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text("// comment\nfunc.func @f(%a: i32) -> i64 {\n  func.return %a : i32\n}\n")
    result = presk_opt(str(path))
    assert result.stderr.splitlines()[:3] == [
        f"{path}:3:3: error: E2001: Expected arguments to have the same types as the function output types: "
        "expected [i64], got [i32]",
        "  func.return %a : i32",
        "  ^",
    ]


@pytest.mark.parametrize("text", ["", "// only a comment\n", "!X = !psk_core.real\n"], ids=["empty", "comment", "alias"])
def test_an_input_without_operations_is_an_empty_module(text: str) -> None:
    """As mlir-opt reads it; xDSL's parser alone said "Could not parse entire input!" at the end of the file."""
    result = presk_opt("-", stdin=text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "builtin.module {\n}\n", "")


def test_help_lists_passes() -> None:
    result = presk_opt("--help")
    assert result.returncode == 0
    assert "presk and plugin passes:" in result.stdout and "psk-bind" in result.stdout
    assert "cse" in result.stdout


def test_unexpected_exception_is_an_internal_error(capsys: pytest.CaptureFixture[str]) -> None:
    def crash() -> int:
        raise RuntimeError("boom")

    os.environ.pop("PRESK_DEBUG", None)
    assert run_guarded(crash) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("presk: internal error: RuntimeError: boom") and "Traceback" not in err


def test_presk_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def crash() -> int:
        raise RuntimeError("boom")

    monkeypatch.setenv("PRESK_DEBUG", "1")
    assert run_guarded(crash) == EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err


def test_presk_errors_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    def fail() -> int:
        raise PreskError("E4004", "no function @main")

    assert run_guarded(fail) == 1
    assert capsys.readouterr().err == "presk: error: E4004: no function @main\n"


def test_running_out_of_memory_is_the_user_s_error_not_a_bug(capsys: pytest.CaptureFixture[str]) -> None:
    def allocate() -> int:
        raise MemoryError("Unable to allocate 4.77 GiB for an array with shape (20000000, 32) and data type float64")

    assert run_guarded(allocate) == 1
    err = capsys.readouterr().err
    assert err.startswith("presk: error: E4006: out of memory: Unable to allocate 4.77 GiB") and "internal" not in err


def test_sigterm_ends_a_command_as_an_interrupt_does() -> None:
    """A `kill` (or a batch system's time limit) runs the command's `finally` blocks, says so, exits 143, and
    leaves SIGTERM's handler as it found it."""
    probe = (
        "import os, signal, time\n"
        "from presk.cli.guard import run_guarded\n"
        "def body():\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(30)\n"
        "    finally:\n"
        "        print('cleaned up', flush=True)\n"
        "    return 0\n"
        "code = run_guarded(body)\n"
        "print(code, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.split("\n")[:2] == ["cleaned up", "143 True"], result.stdout + result.stderr
    assert result.stderr == "presk: terminated\n"


def test_presk_starts_without_the_libraries_only_some_commands_use() -> None:
    """`presk` imports egglog (and the black it pulls in) only for `--opt`, and xDSL's interpreters only
    for the reference interpreter: together they were 0.4 s of every invocation's 0.9 s."""
    probe = "import sys, presk.cli.main; print(sorted(m for m in ('egglog', 'black', 'xdsl.interpreters') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


def test_the_reference_interpreter_and_presk_opt_load_only_what_they_use() -> None:
    """The reference interpreter takes `func` from presk, not from the package of xDSL's interpreters (which
    imports every one of them: 0.25 s); `presk-opt` on PSK-Core does not load LLVM (0.05-0.08 s). Both set the
    garbage collector's thresholds of presk's processes (`presk.cli.collector`)."""
    probe = (
        "import sys, io, contextlib\n"
        "from presk.cli.opt import main as opt\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = opt(['corpus/attention.mlir', '-p', 'psk-autodiff'])\n"
        "import gc\n"
        "print(code, 'llvmlite.binding' in sys.modules, gc.get_threshold() == (100_000, 20, 20))\n"
        "gc.set_threshold(700, 10, 10)\n"
        "from presk.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['run', 'corpus/mlp.mlir', '--entry', 'MLP.apply', '--const', 'D_IN=3', '--const', 'D_HID=4', '--const', 'D_OUT=2', '--dim', 'B=2'])\n"
        "print(code, 'xdsl.interpreters' in sys.modules, gc.get_threshold() == (100_000, 20, 20))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    assert result.stdout.split() == ["0", "False", "True", "0", "False", "True"], result.stderr


def test_a_command_imports_its_own_module_and_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """`presk run` imports neither the other commands' modules nor the tuning layer (`--plan auto` imports it
    when asked for): they were a quarter of its start, 0.85 s against 0.65. On the reference interpreter it
    imports no lowering and no kernel executor either (`--backend kernel`/`native` import them): 0.78 s
    against 0.49. `presk --help` still lists all."""
    probe = (
        "import sys, io, contextlib\n"
        "from presk.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['run', 'corpus/mlp.mlir', '--entry', 'MLP.apply', '--const', 'D_IN=3', '--const', 'D_HID=4', '--const', 'D_OUT=2', '--dim', 'B=2'])\n"
        "print(code, sorted(m for m in ('presk.cli.autotune', 'presk.cli.train', 'presk.cli.bench', 'presk.cli.auto_plan',\n"
        "                                'presk.tuning.plan', 'presk.tuning.calibration', 'presk.pipeline',\n"
        "                                'presk.jit.executor', 'presk.interp.kernel') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    assert result.stdout.strip() == "0 []", result.stderr
    from presk.cli.main import SUBCOMMANDS, main

    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(re.search(rf"^    {name}\b", listed, re.MULTILINE) for name in SUBCOMMANDS), listed


def test_march_and_threads_hold_for_their_command_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--march` and `--threads` set PRESK_TARGET and PRESK_THREADS for the command's layers; a library caller's
    environment is as it was after the command, whether it had them set or not."""
    from presk.cli.main import main
    from presk.target import TARGET_ENV, THREADS_ENV

    monkeypatch.delenv(TARGET_ENV, raising=False)
    monkeypatch.setenv(THREADS_ENV, "2")
    mlp = ["corpus/mlp.mlir", "--entry", "MLP.apply", "--const", "D_IN=3", "--const", "D_HID=4", "--const", "D_OUT=2",
           "--dim", "B=2"]  # fmt: skip
    monkeypatch.chdir(ROOT)
    assert main(["run", *mlp, "--backend", "native", "--threads", "1", "--march", "x86-64-v3"]) == 0
    assert TARGET_ENV not in os.environ and os.environ[THREADS_ENV] == "2"


def test_version_names_what_presk_runs_on_and_its_target(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`presk --version`: the versions, then the target a speed figure needs beside it (the host's own CPU, or
    the level `PRESK_TARGET` names, with that level's registers)."""
    import xdsl

    from presk.cli.main import main
    from presk.cli.version import presk_version
    from presk.target import target_machine

    def version() -> list[str]:
        with pytest.raises(SystemExit) as exited:
            main(["--version"])
        assert exited.value.code == 0
        return capsys.readouterr().out.splitlines()

    monkeypatch.delenv("PRESK_TARGET", raising=False)
    monkeypatch.setenv("PRESK_THREADS", "3")
    first, target = version()
    assert first.startswith(f"presk {presk_version()} (xDSL {xdsl.__version__}, llvmlite ")
    host = target_machine()
    assert target.startswith(f"target host: {host.cpu_name} ({host.triple}), {host.vector_bits}-bit vectors")
    assert f"{host.vector_registers} vector registers" in target and target.endswith("; 3 workers")
    monkeypatch.setenv("PRESK_TARGET", "x86-64-v3")
    _, narrow = version()
    assert narrow.startswith("target x86-64-v3: x86-64-v3 (") and "256-bit vectors, FMA, 16 vector registers" in narrow


def test_a_machine_describes_its_caches_in_the_os_s_units() -> None:
    from presk.target import CacheLevel, Machine

    machine = Machine("x86_64-unknown-linux-gnu", "znver3", frozenset({"avx2", "fma"}), 2, 256,
                      caches=(CacheLevel(1, 32 << 10, 64, 1), CacheLevel(2, 512 << 10, 64, 1),
                              CacheLevel(3, 32 << 20, 64, 2), CacheLevel(4, 1000, 64, 1)))  # fmt: skip
    assert machine.describe().split("; ")[1] == "L1 32 KiB, L2 512 KiB, L3 32 MiB shared by 2, L4 1000 B"
