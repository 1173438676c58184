"""`--opt` and `presk dump --stage core-opt`: psk-egraph-opt in the commands (docs/egraph.md).

The rewrite moves roundings (the attention's 1/√hd onto the queries), so a
program under `--opt` agrees with the original to a tolerance, not to the bit;
the bound is the whole-program bound of f64 kernels against the reference
(256 ulps of each result's scale, docs/numerics.md).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path


import numpy as np
import pytest

from presk.cli.main import main as presk

pytestmark = pytest.mark.usefixtures("memoized_lowering")  # conftest.py: one lowering per program and flags
ROOT = Path(__file__).resolve().parents[2]
ATTENTION = str(ROOT / "corpus" / "attention.mlir")
SIZES = ["--dim", "B=2", "--dim", "T=8"]
GPT = str(ROOT / "corpus" / "nlp" / "gpt.mlir")
GPT_SIZES = [*SIZES, "--const", "D=8", "--const", "H=2", "--const", "L=1", "--const", "C=8"]
MINIGPT = str(ROOT / "corpus" / "minigpt.mlir")


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


TWO_USED_ONE_NOT = """
!X = !psk_core.tensor<[n: 4]>
func.func @used(%a: !X) -> !X {
  %0 = psk_core.neg %a : !X
  %1 = psk_core.neg %0 : !X
  func.return %1 : !X
}
func.func @unused(%a: !X) -> !X {
  %0 = psk_core.neg %a : !X
  %1 = psk_core.neg %0 : !X
  func.return %1 : !X
}
func.func @main(%a: !X) -> !X {
  %0 = func.call @used(%a) : (!X) -> !X
  %1 = psk_core.neg %0 : !X
  %2 = psk_core.neg %1 : !X
  func.return %2 : !X
}
"""


def test_run_rewrites_the_functions_its_entry_reaches_only(tmp_path: Path) -> None:
    """`presk run --opt` saturates what the entry calls, not the rest of the file, which never runs;
    `presk dump --stage core-opt` rewrites the whole file."""
    path = tmp_path / "three.mlir"
    path.write_text(TWO_USED_ONE_NOT)
    status, out, err = run("run", str(path), "--entry", "main", "--opt", "--print-values")
    assert status == 0, err
    assert "psk-egraph-opt: 2 of 2 functions changed, lets 5 -> 1" in err, err
    status, plain, _ = run("run", str(path), "--entry", "main", "--print-values")
    assert status == 0 and plain == out  # neg neg is the identity, exactly
    status, _, err = run("dump", str(path), "--stage", "core-opt")
    assert status == 0 and "@unused: saturated" in err and "psk-egraph-opt: 3 of 3 functions changed" in err, err


@pytest.mark.parametrize(("seq", "divided"), [("16", ": !Q"), ("4", ": !S")])
def test_opt_profile_prices_the_extraction_at_the_bound_sizes(seq: str, divided: str) -> None:
    """`--opt-profile`: the profile's roofline at the sizes the command binds chooses where 1/√hd goes (hd = 8):
    the queries at T = 16, the scores, as written, at T = 4; the report prices in predicted microseconds."""
    profile = str(ROOT / "tests" / "filecheck" / "egraph" / "Inputs" / "roofline.json")
    status, rewritten, err = run("dump", ATTENTION, "--stage", "core-opt", "--dim", "B=2", "--dim", f"T={seq}",
                                 "--opt-profile", profile)  # fmt: skip
    assert status == 0, err
    (division,) = [line for line in rewritten.splitlines() if " = psk_core.div " in line]
    assert division.endswith(divided), division
    assert "predicted (fused)" in err and " us -> " in err
    status, _, err = run("dump", ATTENTION, "--stage", "core-opt", *SIZES, "--opt-profile", "/no/such/profile.json")
    assert status != 0 and "error: E0001" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("path", "entry", "sizes"),
    [(ATTENTION, "SelfAttention.apply", SIZES), (GPT, "loss_grad", GPT_SIZES)],
    ids=["forward", "gradient"],
)
def test_native_computes_the_same_outputs_with_and_without_opt(
    path: str, entry: str, sizes: list[str], tmp_path: Path
) -> None:
    """The attention's forward pass and the GPT's loss and gradient (the file's `loss_grad`, differentiated
    before the rewrite), native f64, with and without `--opt`, within 256 ulps of each leaf's scale."""
    outputs = {}
    for label, flags in (("plain", []), ("opt", ["--opt"])):
        out = tmp_path / f"{label}.npz"
        status, _, err = run("run", path, "--entry", entry, *sizes, *flags, "--backend", "native",
                             "--seed", "1", "--output", str(out))  # fmt: skip
        assert status == 0, err
        assert ("psk-egraph-opt:" in err) == (label == "opt")  # the summary line, only with --opt
        outputs[label] = dict(np.load(out))
    assert sorted(outputs["opt"]) == sorted(outputs["plain"])
    for key, want in outputs["plain"].items():
        got = outputs["opt"][key]
        assert np.max(np.abs(got - want)) <= 256 * np.spacing(np.max(np.abs(want))), key


def test_native_training_steps_agree_with_and_without_opt(tmp_path: Path) -> None:
    """Three MiniGPT training steps, native f64: the losses with `--opt` within 1e−12 relative of those without.

    Each step's loss is a sum of a few thousand rounded terms; the rewrite moves a handful of roundings
    per step (1e−16 each), which the optimiser carries into later steps: 1e−12 is far above that and far
    below any wrong rewrite (an O(1) change of the loss)."""
    losses = {}
    for label, flags in (("plain", []), ("opt", ["--opt"])):
        log = tmp_path / f"{label}.jsonl"
        status, _, err = run("train", MINIGPT, "--loss", "loss", "--step", "adamw.step", "--dim", "B=2", "--dim",
                             "T=8", "--const", "D=8", "--const", "C=8", "--steps", "3", "--backend", "native",
                             "--log", str(log), *flags)  # fmt: skip
        assert status == 0, err
        losses[label] = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    assert len(losses["plain"]) == 3
    assert np.allclose(losses["opt"], losses["plain"], rtol=1e-12, atol=0)


def test_a_plan_for_the_file_refused_under_opt_says_why(tmp_path: Path) -> None:
    """The rewrite renumbers the lets a plan's nests are named by: E7002, with a note saying what to do."""
    written = json.loads((ROOT / "bench" / "plans" / "gpt_grad_plan.json").read_text())
    forward = {nest: layout for nest, layout in written["layout"].items() if nest.startswith("SelfAttention.apply/")}
    plan = tmp_path / "forward.json"
    plan.write_text(json.dumps({"realization": "f32", "layout": forward}))
    argv = ["run", GPT, "--entry", "loss", *GPT_SIZES, "--plan", f"@{plan}"]
    status, _, err = run(*argv)
    assert status == 0, err  # the plan fits the program as the file has it
    status, _, err = run(*argv, "--opt")
    assert status != 0 and "error: E7002" in err and "note: --opt rewrote the program and renumbered its nests" in err
    assert "Traceback" not in err
