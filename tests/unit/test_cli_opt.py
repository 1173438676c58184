"""`--opt` and `presk dump --stage core-opt`: psk-egraph-opt in the commands (docs/egraph.md).

The rewrite moves roundings (the attention's 1/√hd onto the queries), so a
program under `--opt` agrees with the original to a tolerance, not to the bit;
the bound is the whole-program bound of f64 kernels against the reference
(256 ulps of each result's scale, docs/numerics.md).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from presk.cli.main import main as presk

ROOT = Path(__file__).resolve().parents[2]
ATTENTION = str(ROOT / "corpus" / "attention.mlir")
SIZES = ["--dim", "B=2", "--dim", "T=8"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = presk(list(argv))
    return status, out.getvalue(), err.getvalue()


def lets(program: str) -> int:
    return sum(1 for line in program.splitlines() if line.lstrip().startswith("%") and " = psk_core." in line)


def test_dump_core_opt_prints_the_rewritten_program_and_every_functions_report() -> None:
    status, plain, _ = run("dump", ATTENTION, "--stage", "core", *SIZES)
    assert status == 0
    status, rewritten, err = run("dump", ATTENTION, "--stage", "core-opt", *SIZES)
    assert status == 0, err
    assert lets(rewritten) < lets(plain)  # 25 -> 23: the scale moves onto the queries
    report = err.splitlines()
    assert report[0].startswith("@SelfAttention.apply: saturated") and "lets 25 -> 23" in report[0]
    assert report[-1].startswith("psk-egraph-opt: 1 of 1 functions changed")
    status, again, _ = run("dump", ATTENTION, "--stage", "core", "--opt", *SIZES)
    assert again == rewritten


def test_run_opt_computes_the_same_outputs(tmp_path: Path) -> None:
    outputs = {}
    for label, flags in (("plain", []), ("opt", ["--opt"])):
        path = tmp_path / f"{label}.npz"
        status, _, err = run("run", ATTENTION, "--entry", "SelfAttention.apply", *SIZES, *flags, "--backend",
                             "native", "--seed", "1", "--output", str(path))  # fmt: skip
        assert status == 0, err
        assert ("psk-egraph-opt:" in err) == (label == "opt")  # the summary line, only with --opt
        outputs[label] = dict(np.load(path))
    for key, want in outputs["plain"].items():
        got = outputs["opt"][key]
        assert np.max(np.abs(got - want)) <= 256 * np.spacing(np.max(np.abs(want))), key
