"""`psk_core.grad` through every `presk` command: the program is differentiated when it is loaded.

`presk.cli.program.load_program` runs `psk-autodiff` (after `psk-bind` for a
program with a `fold`) once the user's `--pass-pipeline` has run, so the
reference interpreter, `presk launches` and `presk dump --stage core` see the
generated functions, as the kernel backends do. Here: the three backends of
`presk run` give the same gradient of MiniGPT's loss (the kernel backends
bit for bit, the reference within the whole-program bound of
docs/numerics.md), `presk launches` counts the generated launches, a user's
`remat=recompute` stands, and a rule missing is a located E3004.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main as presk

pytestmark = pytest.mark.usefixtures("memoized_lowering")  # conftest.py: one lowering per program and flags
ROOT = Path(__file__).resolve().parents[2]
SIZES = ["--dim", "B=2", "--dim", "T=3", "--const", "D=4", "--const", "V=5", "--const", "C=4"]
LOSS_GRAD = """
func.func @loss_grad(%params: !Mini, %ids: !Ids, %targets: !Ids) -> !psk_core.tuple<!R, !Mini> {
  %0 = psk_core.value_and_grad @loss(%params, %ids, %targets) wrt [0] : !psk_core.tuple<!R, !Mini>
  func.return %0 : !psk_core.tuple<!R, !Mini>
}
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = presk(list(argv))
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def minigpt_grad(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("autodiff") / "minigpt_grad.mlir"
    path.write_text((ROOT / "corpus" / "minigpt.mlir").read_text() + LOSS_GRAD)
    return str(path)


def test_run_gives_the_same_gradient_on_every_backend(minigpt_grad: str, tmp_path: Path) -> None:
    """Kernel interpreter = native, bit for bit; the reference interpreter within 256 ulps of each leaf's scale
    (docs/numerics.md's whole-program bound of f64 kernels against the reference: summation order and presk's
    own exp are the only differences)."""
    results = {}
    for backend in ("interp", "kernel", "native"):
        out_file = tmp_path / f"{backend}.npz"
        status, out, err = run("run", minigpt_grad, "--entry", "loss_grad", *SIZES, "--backend", backend,
                               "--seed", "3", "--output", str(out_file))  # fmt: skip
        assert status == 0, err
        results[backend] = dict(np.load(out_file))
    kernel, native, reference = results["kernel"], results["native"], results["interp"]
    assert sorted(kernel) == sorted(native) == sorted(reference)
    assert len(kernel) == 15  # the loss and MiniGPT's fourteen parameter leaves
    assert "value" in kernel and "params.blocks.attn.wq" in kernel
    for key in kernel:
        assert kernel[key].tobytes() == native[key].tobytes(), key
        bound = 256 * np.spacing(np.max(np.abs(reference[key])))
        assert np.max(np.abs(kernel[key] - reference[key])) <= bound, key
    assert np.max(np.abs(reference["params.tok_emb"])) > 0  # a gradient, not zeros


def test_gradient_leaves_are_keyed_as_the_inputs(minigpt_grad: str, tmp_path: Path) -> None:
    """`--output` writes the gradient of `params` under `params.…`: the same keys `--inputs` reads, so the
    gradient file (with the ids added) is a valid input file of the same entry."""
    out_file, in_file = tmp_path / "g.npz", tmp_path / "in.npz"
    status, out, err = run("run", minigpt_grad, "--entry", "loss_grad", *SIZES, "--output", str(out_file))
    assert status == 0, err
    printed = [line.split(":")[0].strip() for line in out.splitlines()[2:] if line.startswith("    ")]
    assert printed[0] == "value" and "params.tok_emb" in printed  # printed as the file keys them
    gradient = {k: v for k, v in np.load(out_file).items() if k != "value"}
    ids = np.zeros((2, 3), dtype=np.int64)
    np.savez(in_file, **gradient, ids=ids, targets=ids)
    status, out, err = run("run", minigpt_grad, "--entry", "loss_grad", *SIZES, "--inputs", str(in_file))
    assert status == 0, err
    assert all(key.startswith("params.") for key in gradient)


def _launches(out: str, entry: str) -> tuple[int, int]:
    row = next(line for line in out.splitlines() if line.startswith(f"| {entry} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    return int(cells[1]), int(cells[2])


def test_launches_counts_the_generated_functions(minigpt_grad: str) -> None:
    """The implicit psk-autodiff counts what naming the passes counts; a gradient launches more than the loss."""
    status, out, err = run("launches", minigpt_grad, "--entry", "loss", "--entry", "loss_grad", *SIZES)
    assert status == 0, err
    unfused, fused = _launches(out, "loss_grad")
    loss_unfused, _ = _launches(out, "loss")
    assert unfused > 2 * loss_unfused and 0 < fused < unfused
    pipeline = 'builtin.module(psk-bind{dims="B=2,T=3" consts="D=4,V=5,C=4"},psk-autodiff)'
    status, named, err = run("launches", minigpt_grad, "--entry", "loss_grad", "--pass-pipeline", pipeline)
    assert status == 0, err
    assert _launches(named, "loss_grad") == (unfused, fused)


def test_dump_core_shows_the_generated_functions(minigpt_grad: str) -> None:
    status, out, err = run("dump", minigpt_grad, "--stage", "core", *SIZES)
    assert status == 0, err
    assert "func.func @loss.fwd(" in out and "func.func @loss.bwd(" in out
    assert "value_and_grad" not in out
    assert "!H = !psk_core.tensor<[batch: 2, seq: 3, embed: 4]>" in out  # bound, as without a gradient


def test_a_pipeline_that_differentiates_keeps_its_choice(minigpt_grad: str) -> None:
    pipeline = 'builtin.module(psk-bind{dims="B=2,T=3" consts="D=4,V=5,C=4"},psk-autodiff{remat=recompute})'
    status, out, err = run("dump", minigpt_grad, "--stage", "core", "--pass-pipeline", pipeline)
    assert status == 0, err
    assert "func.func @loss.vjp(" in out and "@loss.fwd" not in out


def test_a_missing_rule_is_located(tmp_path: Path) -> None:
    path = tmp_path / "max.mlir"
    path.write_text("""!R = !psk_core.real
func.func @f(%x: !R) -> !R {
  %c = psk_core.constant 2.0 : !R
  %0 = psk_core.max %x, %c : !R
  func.return %0 : !R
}
func.func @g(%x: !R) -> !R {
  %0 = psk_core.grad @f(%x) wrt [0] : !R
  func.return %0 : !R
}
""")
    status, out, err = run("run", str(path), "--entry", "g")
    assert status == 1
    assert f"{path}:4:" in err and "E3004: no derivative for psk_core.max" in err
    assert "Traceback" not in err and "internal error" not in err
