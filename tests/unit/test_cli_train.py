"""`presk train`: twenty MiniGPT steps that every backend reproduces, a loss that falls, a clean Ctrl-C, clear errors.

Reproduction (docs/training.md §4): the kernel interpreter and native run the
same kernels, so their losses are the same bits, in f64 and in f32. The
reference interpreter computes the same functions in another order (its
numpy sums, its exp): each step's loss and gradient agree within the
whole-program bound of docs/numerics.md, 256 ulps of the value's scale
(2^-44 relative), and the parameters carry the differences into later steps.
The tolerance on each step's loss is 1e-10 relative: twenty steps of that
bound (1.1e-12) with a margin of about 100 for their propagation through
AdamW's updates (measured: at most 2 ulps, 3.4e-16, at these sizes). A wrong
rule, a wrong operand order or a step that lost its bias correction moves the
loss by 1e-3 or more.

The parameters start as GPT-2's (`--init gpt2`, the default), so the first
loss is ln V to within a few hundredths and training brings it below; `--init
normal` keeps `presk run`'s N(0, 1) draws. `--checkpoint` resumes a run so
that its losses are those of a run that never stopped, bit for bit.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main as presk

pytestmark = pytest.mark.usefixtures("memoized_lowering")  # conftest.py: one lowering per program and flags
ROOT = Path(__file__).resolve().parents[2]
MINIGPT = str(ROOT / "corpus" / "minigpt.mlir")
SMALL = ["--dim", "B=2", "--dim", "T=8", "--const", "D=8", "--const", "C=8"]
TRAIN = ["train", MINIGPT, "--loss", "loss", "--step", "adamw.step", *SMALL]
REFERENCE_TOLERANCE = 1e-10


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = presk(list(argv))
    return status, out.getvalue(), err.getvalue()


def train(tmp_path: Path, backend: str, *extra: str) -> list[dict]:
    log = tmp_path / f"{backend}{'-'.join(extra)}.jsonl"
    status, out, err = run(*TRAIN, "--steps", "20", "--backend", backend, "--log", str(log), *extra)
    assert status == 0, err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    printed = [line for line in out.splitlines() if line.startswith("step ")]
    assert [r["step"] for r in records] == list(range(1, 21)) and len(printed) == 20
    for record, line in zip(records, printed):
        assert repr(record["loss"]) in line  # the printed digits are the logged double
    return records


def test_twenty_minigpt_steps_reproduce_on_every_backend_f64(tmp_path: Path) -> None:
    kernel = [r["loss"] for r in train(tmp_path, "kernel")]
    native = [r["loss"] for r in train(tmp_path, "native")]
    reference = [r["loss"] for r in train(tmp_path, "interp")]
    assert native == kernel  # bit for bit: floats from JSON round-trip exactly
    for k, r in zip(kernel, reference):
        assert abs(k - r) <= REFERENCE_TOLERANCE * abs(r)
    assert all(math.isfinite(x) for x in kernel)
    assert abs(kernel[0] - math.log(16)) < 0.05  # GPT-2's init: the logits start near 0, the loss near ln V
    assert kernel[-1] < math.log(16) - 0.5  # it trains: 2.78 down to 2.02 (the stream's floor is ln 2)


def test_twenty_minigpt_steps_f32_kernel_equals_native(tmp_path: Path) -> None:
    kernel = train(tmp_path, "kernel", "--realize", "f32")
    native = train(tmp_path, "native", "--realize", "f32")
    assert [r["loss"] for r in native] == [r["loss"] for r in kernel]
    assert all(r["realization"] == "f32" for r in native)
    losses = [r["loss"] for r in native]
    assert all(float(np.float32(x)) == x for x in losses)  # f32 values, as the kernels computed them
    assert losses[-1] < losses[0]


def test_data_file_and_log_appends(tmp_path: Path) -> None:
    """`--data` trains on the file's stream; a second run appends to the log; the seed fixes everything."""
    data = tmp_path / "tokens.npz"
    np.savez(data, tokens=np.tile(np.arange(16), 8))  # 0, 1, ..., 15, 0, 1, ...: each token says the next
    log = tmp_path / "train.jsonl"
    argv = [*TRAIN, "--steps", "6", "--backend", "interp", "--data", str(data), "--log", str(log), "--lr", "0.05"]
    status, first, err = run(*argv)
    assert status == 0, err
    status, second, err = run(*argv)
    assert status == 0, err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [*range(1, 7), *range(1, 7)]
    assert [r["loss"] for r in records[:6]] == [r["loss"] for r in records[6:]]
    assert records[5]["loss"] < records[0]["loss"]
    assert first.splitlines()[1:] != [] and "interp backend" in first.splitlines()[0]


@pytest.mark.parametrize(
    "change,pattern",
    [
        (["--loss", "nope"], r"E4004: no function @nope"),
        (["--loss", "MiniGPT.apply"], r"E4001: --loss MiniGPT.apply: a loss returns one real"),
        (["--step", "loss"], r"E4001: --step loss: a step takes \(params, grads, m, v, b1t, b2t, lr\)"),
        (["--step", "MiniGPT.apply"], r"E4001: --step MiniGPT.apply: a step takes"),
        (["--steps", "0"], r"E4001: --steps 0"),
        (["--lr", "-1"], r"E4001: --lr -1.0"),
        (["--realize", "f32", "--plan", "@p.json"], r"E4001: --plan gives the realization too"),
        (["--threads", "2", "--backend", "kernel"], r"E4001: --threads divides the native backend"),
        (["--eval-every", "-1"], r"E4001: --eval-every is 0 \(never\) or a number of steps"),
        (["--plot", "/nonexistent/dir/loss.png"], r"E0001: cannot write /nonexistent/dir/loss.png"),
        (["--data", "text:/nonexistent.txt"], r"E4003: /nonexistent.txt: cannot read text"),
        # Read as `--inputs` are: not numpy's pickle advice for a file that is no archive at all.
        (["--data", str(ROOT / "corpus" / "mlp.mlir")], r"E4003: .*mlp\.mlir: not an \.npz archive \(a zip of \.npy "
         r"arrays\); write one with numpy\.savez"),
        (["--data", "/nonexistent.npz"], r"E4003: /nonexistent\.npz: cannot read it: No such file or directory"),
    ],
)
def test_bad_input_is_a_diagnostic(change: list[str], pattern: str) -> None:
    argv = [*TRAIN, "--backend", "interp", "--steps", "2"]
    for flag, value in zip(change[::2], change[1::2]):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    status, out, err = run(*argv)
    assert status == 1
    assert "presk: error: " in err or ": error: " in err
    import re

    assert re.search(pattern, err), err
    assert "Traceback" not in err and "internal error" not in err and "step " not in out


@pytest.mark.parametrize(
    "tokens,pattern",
    [
        (np.arange(4), r"4 tokens; a window needs 9"),
        (np.full(64, 16), r"tokens lie in \[16, 16\], the vocabulary is \[0, 16\)"),
        (np.zeros((4, 16), dtype=np.int64), r"'tokens' is a 1-D integer array"),
        (np.linspace(0, 1, 64), r"'tokens' is a 1-D integer array"),
    ],
)
def test_bad_data_file_is_refused(tmp_path: Path, tokens: np.ndarray, pattern: str) -> None:
    import re

    data = tmp_path / "bad.npz"
    np.savez(data, tokens=tokens)
    status, _, err = run(*TRAIN, "--backend", "interp", "--data", str(data))
    assert status == 1 and re.search(f"E4003: {re.escape(str(data))}: {pattern}", err), err


def test_a_loss_whose_first_argument_is_not_parameters_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "ids_first.mlir"
    program.write_text(Path(MINIGPT).read_text() + """
func.func @swapped(%ids: !Ids, %params: !Mini, %targets: !Ids) -> !R {
  %0 = func.call @loss(%params, %ids, %targets) : (!Mini, !Ids, !Ids) -> !R
  func.return %0 : !R
}
""")
    status, _, err = run("train", str(program), "--loss", "swapped", "--step", "adamw.step", *SMALL, "--backend", "interp")
    assert status == 1 and "E4001: --loss swapped: its first argument is the parameters" in err, err


def test_remat_recompute_trains_the_same_bits(tmp_path: Path) -> None:
    """`--remat recompute` runs loss.vjp (the forward pass again inside it) instead of loss.fwd/loss.bwd: the same
    operations on the same values, so the same losses, and more launches a step."""
    logs, headers = {}, {}
    for remat in ("save", "recompute"):
        logs[remat] = tmp_path / f"{remat}.jsonl"
        status, out, err = run(*TRAIN, "--steps", "8", "--backend", "interp", "--remat", remat, "--log", str(logs[remat]))
        assert status == 0, err
        headers[remat] = out.splitlines()[1]
        assert f"remat={remat}" in out.splitlines()[0]
    losses = {r: [json.loads(line)["loss"] for line in logs[r].read_text().splitlines()] for r in logs}
    assert losses["save"] == losses["recompute"] and len(losses["save"]) == 8
    counts = {r: int(headers[r].split(": ")[1].split(" ")[0]) for r in headers}  # launches without fusion
    assert counts["recompute"] > counts["save"]


def test_a_diverging_run_stops_with_a_diagnostic(tmp_path: Path) -> None:
    """In bf16, AdamW's 0.999 rounds to 1 and its bias correction divides by 0: the loss turns nan, and the run
    stops there with a hint, the log holding the steps done (the non-finite loss as null, since NaN is not JSON)."""
    log = tmp_path / "bf16.jsonl"
    # From GPT-2's init the same run trains (2.78 to 2.67 in five steps).
    status, out, err = run(
        *TRAIN, "--backend", "interp", "--realize", "bf16", "--steps", "5", "--log", str(log), "--init", "normal"
    )
    assert status == 1
    assert "E4001: step 2: the loss is nan, training diverged; lower --lr" in err and "realize in f32" in err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and records[1]["loss"] is None and records[0]["loss"] > 0


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a child process")
@pytest.mark.parametrize(("sent", "status", "said"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_or_sigterm_stops_after_the_current_step(tmp_path: Path, sent: int, status: int, said: str) -> None:
    """The log holds every finished step, each line whole; stdout printed the same steps; exit 130 for Ctrl-C,
    143 for SIGTERM (a batch system's time limit); and the checkpoint resumes it as if it had never stopped."""
    log = tmp_path / "interrupted.jsonl"
    folder = tmp_path / "ckpt"
    argv = [sys.executable, "-m", "presk.cli.main", *TRAIN, "--steps", "100000", "--backend", "interp", "--log", str(log),
            "--checkpoint", str(folder)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.05)
    child.send_signal(sent)
    out, err = child.communicate(timeout=60)
    assert child.returncode == status, err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    done = len(records)
    assert 3 <= done < 100000
    assert [r["step"] for r in records] == list(range(1, done + 1))
    assert len([line for line in out.splitlines() if line.startswith("step ")]) == done
    assert f"presk: {said}: stopped after step {done} of 100000" in err and "Traceback" not in err
    assert f"{folder / 'checkpoint.npz'} resumes it" in err
    if sent == signal.SIGTERM:
        return  # the same stop and checkpoint as Ctrl-C's, whose resume is checked
    # Resumed for three more steps, the run gives the losses of one that never stopped (the reference interpreter's
    # state is f64 arrays, saved exactly).
    status, out, err = run(*TRAIN, "--backend", "interp", "--steps", str(done + 3), "--log", str(log),
                           "--checkpoint", str(folder))  # fmt: skip
    assert status == 0, err
    straight = tmp_path / "straight.jsonl"
    status, _, err = run(*TRAIN, "--backend", "interp", "--steps", str(done + 3), "--log", str(straight))
    assert status == 0, err
    resumed = [(r["step"], r["loss"]) for r in map(json.loads, log.read_text().splitlines())]
    assert resumed == [(r["step"], r["loss"]) for r in map(json.loads, straight.read_text().splitlines())]


def test_init_normal_is_presk_runs_inputs_and_gpt2_starts_at_ln_v(tmp_path: Path) -> None:
    """`--init normal` draws the parameters as `presk run` does (N(0, 1)): the loss starts far above ln V."""
    first = {}
    for init in ("gpt2", "normal"):
        status, out, err = run(*TRAIN, "--backend", "interp", "--steps", "1", "--init", init)
        assert status == 0, err and f"init {init}" in out.splitlines()[0]
        first[init] = float(next(line for line in out.splitlines() if line.startswith("step ")).split()[3])
    assert abs(first["gpt2"] - math.log(16)) < 0.05
    assert first["normal"] > math.log(16) + 2


def test_text_data_validation_loss_and_plot(tmp_path: Path) -> None:
    """`--data text:PATH`: more distinct characters than V share one id; the validation loss every N steps and at
    the last, printed and logged; the plot is a PNG."""
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40, encoding="utf-8")  # 28 characters, V = 16
    log, plot = tmp_path / "train.jsonl", tmp_path / "loss.png"
    status, out, err = run(*TRAIN, "--backend", "interp", "--steps", "7", "--data", f"text:{text}", "--eval-every", "3",
                           "--eval-batches", "2", "--log", str(log), "--plot", str(plot))  # fmt: skip
    assert status == 0, err
    assert "28 distinct; the 15 most frequent have an id, the 13 others share id 15" in out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records if "val_loss" in r] == [3, 6, 7]
    printed = [line for line in out.splitlines() if "val_loss" in line]
    assert len(printed) == 3 and all(repr(r["val_loss"]) in line for r, line in zip(
        [r for r in records if "val_loss" in r], printed))  # fmt: skip
    assert all(0 < r["val_loss"] < 2 * math.log(16) for r in records if "val_loss" in r)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_checkpoint_resumes_bit_for_bit_on_native(tmp_path: Path) -> None:
    """Ten steps, then ten more from the checkpoint: the twenty losses and the validation losses of one straight run
    of twenty, bit for bit (the state, the windows' position and the step's bias corrections are restored)."""
    common = ["--backend", "native", "--realize", "f32", "--eval-every", "5", "--eval-batches", "2"]
    straight, resumed = tmp_path / "straight.jsonl", tmp_path / "resumed.jsonl"
    status, _, err = run(*TRAIN, *common, "--steps", "20", "--log", str(straight))
    assert status == 0, err
    folder = tmp_path / "ckpt"
    status, out, err = run(*TRAIN, *common, "--steps", "10", "--log", str(resumed), "--checkpoint", str(folder))
    assert status == 0, err and "resumed" not in out
    status, out, err = run(*TRAIN, *common, "--steps", "20", "--log", str(resumed), "--checkpoint", str(folder),
                           "--plot", str(tmp_path / "p.png"))  # fmt: skip
    assert status == 0, err
    assert f"resumed from {folder / 'checkpoint.npz'} after step 10" in out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("step ")] == [str(t) for t in range(11, 21)]

    def losses(path: Path) -> list[tuple]:
        return [(r["step"], r["loss"], r.get("val_loss")) for r in map(json.loads, path.read_text().splitlines())]

    expected = losses(straight)
    assert [step for step, _, val in expected if val is not None] == [5, 10, 15, 20]
    # The first run's last step (10) is an evaluation step either way, so the logs are the same lines.
    assert losses(resumed) == expected
    saved = np.load(folder / "checkpoint.npz")
    assert saved["params.tok_emb"].dtype == np.float32 and "m.blocks.attn.wq" in saved.files
    status, out, err = run(*TRAIN, *common, "--steps", "20", "--checkpoint", str(folder))
    assert status == 0 and "checkpoint.npz is at step 20; --steps 20 is done" in out
    assert not any(line.startswith("step ") for line in out.splitlines())


def test_a_checkpoint_of_another_program_or_other_flags_is_refused(tmp_path: Path) -> None:
    """Before anything is compiled: a leaf missing or of another shape (E4003 naming it), a flag that differs
    (E4001 naming it), a file that is not a checkpoint (E4003)."""
    folder = tmp_path / "ckpt"
    status, _, err = run(*TRAIN, "--backend", "interp", "--steps", "2", "--checkpoint", str(folder))
    assert status == 0, err
    renamed = tmp_path / "renamed.mlir"
    renamed.write_text(Path(MINIGPT).read_text().replace("w1", "w_in"))
    cases = [
        (["train", str(renamed), *TRAIN[2:]], r"E4003: .*checkpoint.npz: no leaf 'params.blocks.mlp.w_in' \(of shape"),
        (
            [*TRAIN[:-1], "C=16"],
            r"E4003: .*checkpoint.npz: leaf 'params.pos_emb' has shape \[8, 8\], the program's has \[16, 8\]",
        ),
        (
            [*TRAIN, "--lr", "0.02"],
            r"E4001: .*checkpoint.npz was saved after step 2 of a run with --lr 0.01, this run has --lr 0.02",
        ),
        ([*TRAIN[:6], "--dim", "B=3", *SMALL[2:]], r"E4001: .* with sizes .*B=2.*, this run has .*B=3"),
    ]
    import re

    for argv, pattern in cases:
        status, out, err = run(*argv, "--backend", "interp", "--steps", "4", "--checkpoint", str(folder))
        assert status == 1 and re.search(pattern, err), (argv, err)
        assert "Traceback" not in err and "step " not in out
    (folder / "checkpoint.npz").write_bytes(b"not a zip")
    status, _, err = run(*TRAIN, "--backend", "interp", "--steps", "4", "--checkpoint", str(folder))
    assert status == 1 and "E4003" in err and "not a presk train checkpoint" in err, err


FWD_BWD = Path(__file__).resolve().parents[1] / "filecheck" / "autodiff" / "fwd_bwd.mlir"


def test_the_residuals_reported_are_what_the_forward_function_returns() -> None:
    """`residual_bytes` counts from the types; running `loss.fwd` gives the arrays it saves: the same leaves and bytes."""
    from presk.cli.program import load_program
    from presk.cli.train import residual_bytes
    from presk.interp.inputs import make_inputs
    from presk.interp.reference import run_entry
    from presk.interp.values import leaf_items
    from presk.ir.calls import find_entry

    program = load_program(str(FWD_BWD), ["B=3"], [])
    count, total = residual_bytes(program, "loss", "f64")  # type: ignore[misc]
    module = program.parsed.module
    inputs = make_inputs(find_entry(module, "loss.fwd"), program.env, 0)
    _, saved = run_entry(module, "loss.fwd", inputs, program.env)
    arrays = [np.asarray(leaf, dtype=np.float64) for _, leaf in leaf_items(saved)]
    assert count == len(arrays) > 0
    assert total == sum(a.nbytes for a in arrays)
    assert residual_bytes(load_program(str(FWD_BWD), ["B=3"], [], remat="recompute"), "loss", "f64") is None


def test_train_reports_the_residuals_and_the_peak_memory(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = presk(["train", str(ROOT / "corpus" / "minigpt.mlir"), "--loss", "loss", "--step", "adamw.step",
                      "--steps", "1", "--dim", "B=2", "--dim", "T=4", "--backend", "kernel"])  # fmt: skip
    assert code == 0
    text = out.getvalue()
    assert "residuals: " in text and " saved by @loss.fwd for @loss.bwd, " in text
    assert "peak resident memory: " in text


BIGRAM = """
!Ids = !psk_core.index<[batch: B, seq: T], 16>
!Tok = !psk_core.tensor<[vocab: 16, embed: 8]>
!Out = !psk_core.tensor<[embed: 8, logit: 16]>
!H = !psk_core.tensor<[batch: B, seq: T, embed: 8]>
!Logits = !psk_core.tensor<[batch: B, seq: T, logit: 16]>
!P = !psk_core.record<emb: !Tok, out: !Out>
!R = !psk_core.real
!S = !psk_core.tuple<!P, !P, !P>

func.func @loss(%p: !P, %ids: !Ids, %targets: !Ids) -> !R {
  %0 = psk_core.field %p["emb"] : !Tok
  %1 = psk_core.field %p["out"] : !Out
  %2 = psk_core.gather %0, %ids : !H
  %3 = psk_core.dot %2, %1 : !Logits
  %4 = psk_core.cross_entropy %3, %targets [logit] : !R
  func.return %4 : !R
}

// Plain SGD in AdamW's signature: the moments pass through.
func.func @sgd(%p: !P, %g: !P, %m: !P, %v: !P, %b1t: !R, %b2t: !R, %lr: !R) -> !S {
  %0 = psk_core.mul %g, %lr : !P
  %1 = psk_core.sub %p, %0 : !P
  %2 = psk_core.tuple %1, %m, %v : !S
  func.return %2 : !S
}
"""


def test_plan_auto_plans_the_whole_step_and_keeps_the_defaults_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--plan auto` plans `loss.train_step` (forward, derivative contractions, optimiser) with the profile;
    every layout computes the default's bits, so the losses equal a run at the default layouts."""
    from test_plan_static import load_dominated, write_profile

    program = tmp_path / "bigram.mlir"
    program.write_text(BIGRAM)
    profile = write_profile(tmp_path / "p.json", load_dominated())
    saved = tmp_path / "chosen.json"
    common = ["train", str(program), "--loss", "loss", "--step", "sgd", "--steps", "3", "--dim", "B=2", "--dim", "T=8",
              "--lr", "0.1", "--realize", "f32"]  # fmt: skip
    planned_log, default_log = tmp_path / "planned.jsonl", tmp_path / "default.jsonl"
    code = presk([*common, "--plan", "auto", "--profile", str(profile), "--save-plan", str(saved), "--log", str(planned_log)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "--plan auto: @loss.train_step: " in err and f"planned with {profile}" in err
    layouts = json.loads(saved.read_text())["layout"]
    assert any(site.startswith("loss.bwd/") for site in layouts), layouts  # the derivative's contractions are planned
    assert presk([*common, "--log", str(default_log)]) == 0
    losses = [[json.loads(line)["loss"] for line in log.read_text().splitlines()] for log in (planned_log, default_log)]
    assert len(losses[0]) == 3 and losses[0] == losses[1]


def test_plan_auto_needs_the_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "bigram.mlir"
    program.write_text(BIGRAM)
    code = presk(["train", str(program), "--loss", "loss", "--step", "sgd", "--dim", "B=2", "--dim", "T=8",
                  "--plan", "auto", "--backend", "interp"])  # fmt: skip
    assert code != 0 and "--plan auto chooses kernel layouts" in capsys.readouterr().err


def test_checkpoint_every_n_steps_saves_those_and_the_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from presk.training import checkpoint

    saved: list[int] = []
    real_save = checkpoint.save
    monkeypatch.setattr(checkpoint, "save", lambda path, state: (saved.append(state.step), real_save(path, state)))
    folder = tmp_path / "ckpt"
    status, _, err = run(*TRAIN, "--backend", "interp", "--steps", "9", "--checkpoint", str(folder), "--checkpoint-every", "4")
    assert status == 0, err
    assert saved == [4, 8, 9]
    resumed = checkpoint.load(checkpoint.prepare(str(folder)))
    assert resumed is not None and resumed.step == 9
    status, _, err = run(*TRAIN, "--steps", "2", "--checkpoint", str(folder), "--checkpoint-every", "0")
    assert status != 0 and "--checkpoint-every 0" in err


@pytest.mark.parametrize("flag", ["--save-plan", "--profile"])
def test_plan_auto_options_without_plan_auto_are_refused(flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "bigram.mlir"
    program.write_text(BIGRAM)
    code = presk(["train", str(program), "--loss", "loss", "--step", "sgd", "--dim", "B=2", "--dim", "T=8",
                  flag, str(tmp_path / "x.json")])  # fmt: skip
    assert code != 0 and f"{flag} goes with --plan auto" in capsys.readouterr().err
