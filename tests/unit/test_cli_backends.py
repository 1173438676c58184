"""`presk run --backend`, `dump --stage kernel|llvm` and `bench`: what a user sees, and every refusal.

The bit-for-bit claims live in test_backends_exact.py; here, the command
line: the backends give the same output file, and each bad flag is a
diagnostic with a code and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
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
