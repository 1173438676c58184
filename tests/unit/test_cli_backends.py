"""`presk run --backend`, `dump --stage kernel|llvm` and `bench`: what a user sees, and every refusal.

The bit-for-bit claims live in test_backends_exact.py; here, the command
line: the backends give the same output file, and each bad flag is a
diagnostic with a code and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main as presk

ROOT = Path(__file__).resolve().parents[2]
LAYERNORM = str(ROOT / "corpus" / "layernorm.mlir")
SIZES = ["--dim", "B=2", "--dim", "T=4"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = presk(list(argv))
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("realization", ["f32", "bf16"])
def test_kernel_and_native_backends_write_the_same_bytes(realization: str, tmp_path: Path) -> None:
    files = {}
    for backend in ("kernel", "native"):
        files[backend] = tmp_path / f"{backend}.npz"
        status, out, err = run("run", LAYERNORM, "--entry", "LayerNorm.apply", *SIZES, "--realize", realization,
                               "--backend", backend, "--output", str(files[backend]))  # fmt: skip
        assert status == 0, err
        assert f"{backend} backend" in out
    kernel, native = np.load(files["kernel"]), np.load(files["native"])
    assert kernel.files == native.files
    for key in kernel.files:
        assert kernel[key].dtype == native[key].dtype and kernel[key].tobytes() == native[key].tobytes()


@pytest.mark.parametrize(
    "argv,pattern",
    [
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", *SIZES, "--backend", "native", "--threads", "0"],
         "E4001: --threads 0"),
        # A typo would start that many threads.
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", *SIZES, "--backend", "native", "--threads", "99999999999"],
         "E4001: --threads 99999999999: give a number of workers from 1 to 4096"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", *SIZES, "--backend", "kernel", "--bits", "64"],
         "E4001: --bits runs the reference interpreter"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--backend", "native"],
         "E4002"),
        (["dump", LAYERNORM, "--stage", "llvm"], "E4001: --stage llvm prints one entry"),
        (["dump", LAYERNORM, "--stage", "kernel", "--entry", "nope", *SIZES], "E4004"),
        (["bench", LAYERNORM, "--entry", "LayerNorm.apply", *SIZES, "--rounds", "0"], "E4001: --rounds"),
    ],
)  # fmt: skip
def test_bad_flags_are_diagnostics(argv: list[str], pattern: str) -> None:
    status, _, err = run(*argv)
    assert status == 1
    assert pattern in err
    assert "Traceback" not in err


def test_dump_kernel_and_llvm(tmp_path: Path) -> None:
    status, kernels, err = run("dump", LAYERNORM, "--stage", "kernel", "--entry", "LayerNorm.apply", *SIZES, "--realize", "f32")
    assert status == 0, err
    # psk-fuse-slices runs the whole LayerNorm row by row: one kernel, named after the six it merges.
    assert "psk_kernel.host @LayerNorm.apply" in kernels and 'psk_kernel.launch @"mean+sub+pow+mean_1+sqrt+add"' in kernels
    status, llvm, err = run("dump", LAYERNORM, "--stage", "llvm", "--entry", "LayerNorm.apply", *SIZES, "--realize", "f32")
    assert status == 0, err
    assert 'define void @"mean+sub+pow+mean_1+sqrt+add"' in llvm


def test_bench_reports_every_kernel_and_the_host() -> None:
    status, out, err = run("bench", LAYERNORM, "--entry", "LayerNorm.apply", *SIZES, "--realize", "f32",
                           "--rounds", "3", "--warmup", "1")  # fmt: skip
    assert status == 0, err
    assert "@LayerNorm.apply: native backend" in out
    assert "per launch" in out and "| mean+sub+pow+mean_1+sqrt+add |" in out


def test_the_host_s_time_is_measured_within_each_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A product of about two milliseconds and its pack, two launches a call: the host's own time, each call's
    time less its launches', is microseconds a launch, whatever the calls' spread."""
    monkeypatch.setenv("PRESK_THREADS", "1")  # one worker, whatever PRESK_THREADS the suite runs under
    plan = tmp_path / "plan.json"  # one lane: legal on every machine; packed: two launches
    plan.write_text('{"realization": "f32", "layout": {"matmul/%0": {"tile": [1, 8], "lanes": 1, "order": "IJ", '
                    '"pack": true}}}')
    status, out, err = run("bench", str(ROOT / "bench" / "programs" / "matmul.mlir"), "--entry", "matmul",
                           "--dim", "M=256", "--dim", "K=256", "--dim", "J=256", "--plan", f"@{plan}",
                           "--threads", "1", "--rounds", "7", "--warmup", "1")  # fmt: skip
    assert status == 0, err
    launches = int(re.search(r"native backend, (\d+) launches", out).group(1))
    host = re.search(r"outside kernels: ([\d.]+) ms \((\d+)%\), ([\d.]+) µs per launch", out)
    assert host is not None, out
    assert launches == 2
    assert float(host.group(3)) < 150.0, out  # a launch's host work is microseconds


def test_a_timed_runner_sums_what_it_timed() -> None:
    """`total_seconds` is every sample it took, summed: what `presk bench` subtracts from a call's time."""
    from presk.cli.backends import compile_entry, make_runner
    from presk.cli.program import load_program, plan_of
    from presk.interp.inputs import make_inputs
    from presk.ir.calls import find_entry
    from presk.jit.executor import HostProgram, flatten_inputs
    from presk.jit.timed import TimedRunner

    program = load_program(LAYERNORM, ["B=2", "T=4"], [], entries=["LayerNorm.apply"])
    kernels = compile_entry(program, "LayerNorm.apply", plan_of("f32", None), fuse=False)
    timed = TimedRunner(make_runner("kernel"))
    host = HostProgram(kernels, timed)
    leaves = host.prepare_inputs(flatten_inputs(make_inputs(find_entry(program.parsed.module, "LayerNorm.apply"), program.env, 0)))
    host(leaves)
    host(leaves)
    assert len(timed.samples) > 3 and all(len(xs) == 2 for xs in timed.samples.values())
    assert timed.total_seconds == pytest.approx(sum(sum(xs) for xs in timed.samples.values()), rel=1e-12)
