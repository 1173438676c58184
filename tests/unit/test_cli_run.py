"""`presk run` and `presk dump` as a user drives them (in-process, same `main` as the script)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import mpmath
import numpy as np
import pytest

from presk.cli.main import main as presk

ROOT = Path(__file__).resolve().parents[2]
GPT = str(ROOT / "corpus" / "nlp" / "gpt.mlir")
LAYERNORM = str(ROOT / "corpus" / "layernorm.mlir")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = presk(list(argv))
    return code, out.getvalue(), err.getvalue()


def loss_of(output: str) -> str:
    return output.strip().splitlines()[-1].strip()


def test_gpt_loss_in_f64_matches_mpmath_at_128_bits() -> None:
    """The f64 loss is the 128-bit loss rounded, up to the f64 error of the whole forward pass.

    The bound 1e-13 relative: a few hundred roundings of ~1e-16 each along the
    longest dependency chain (reductions over 64 and 92 terms, two layers).
    """
    dims = ["--dim", "B=1", "--dim", "T=8"]
    code, f64_out, _ = run("run", GPT, "--entry", "loss", *dims)
    assert code == 0
    code, mp_out, _ = run("run", GPT, "--entry", "loss", *dims, "--bits", "128")
    assert code == 0
    f64, exact = float(loss_of(f64_out)), mpmath.mpf(loss_of(mp_out))
    assert len(loss_of(mp_out)) > 30  # printed at 128-bit precision, not as a double
    assert abs(f64 - exact) <= 1e-13 * abs(exact)


def test_inputs_and_outputs_round_trip_through_npz(tmp_path: Path) -> None:
    out1 = tmp_path / "out1.npz"
    code, text, _ = run("run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--dim", "T=3",
                        "--seed", "5", "--output", str(out1))  # fmt: skip
    assert code == 0 and "shape (2, 3, 16)" in text
    rng = np.random.default_rng(5)
    inputs = {"p.g": rng.standard_normal(16), "p.b": rng.standard_normal(16), "x": rng.standard_normal((2, 3, 16))}
    np.savez(tmp_path / "in.npz", **inputs)
    out2 = tmp_path / "out2.npz"
    code, _, err = run("run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--dim", "T=3",
                       "--inputs", str(tmp_path / "in.npz"), "--output", str(out2))  # fmt: skip
    assert code == 0, err
    # Same seed, same generation order (g, b, x): the generated and the saved inputs agree.
    np.testing.assert_array_equal(np.load(out1)["result0"], np.load(out2)["result0"])


@pytest.mark.parametrize(
    "argv,code,pattern",
    [
        (["run", "missing.mlir", "--entry", "f"], "E0001", r"no such file"),
        (["run", LAYERNORM, "--entry", "nope"], "E4004", r"no function @nope"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=two"], "E4001", r"NAME=POSITIVE_INTEGER"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "T=2"], "E4002", r"'B' is not bound"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--dim", "T=2", "--dim", "B=3"], "E4001",
         r"--dim B is bound twice, to 2 and to 3"),
        # Past 2^63 the size could not be a kernel's i64 constant; past 2^40 it is no machine's buffer.
        (["dump", LAYERNORM, "--stage", "kernel", "--entry", "LayerNorm.apply", "--dim", "B=99999999999999999999",
          "--dim", "T=2"], "E4001", r"--dim 'B=\.\.\.' \(20 digits\): sizes are at most 2\^40 = 1099511627776"),
        # More digits than Python reads (4300) are refused before they are read.
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=" + "9" * 5000, "--dim", "T=2"], "E4001",
         r"--dim 'B=\.\.\.' \(5000 digits\): sizes are at most 2\^40"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=1099511627777", "--dim", "T=2"], "E4001",
         r"--dim 'B=1099511627777': sizes are at most 2\^40"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--dim", "T=2", "--const", "D=1099511627777"],
         "E4001", r"--const 'D=1099511627777': sizes are at most 2\^40"),
        # 2^40 x 2^10 x 16 elements of 8 bytes (128 PiB): refused before numpy allocates anything.
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=1099511627776", "--dim", "T=1024"], "E4006",
         r"the arguments of @LayerNorm.apply at B=1099511627776, .*T=1024 take 131072\.0 TiB, more than this "
         r"machine's [0-9.]+ [GT]iB of memory"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--const", "Q=2"], "E4001", r"no constant of that name"),
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "D=4"], "E4001", r"is a constant of the program"),
        (["dump", LAYERNORM, "--stage", "nope"], "E4001", r"--stage nope"),
        # Refused before the run (the save at its end would say "No such file or directory").
        (["run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--dim", "T=2", "--output",
          "/nonexistent-folder/out.npz"], "E0001", r"cannot write /nonexistent-folder/out.npz: /nonexistent-folder is "
         r"not a writable directory"),
    ],
)
def test_user_errors_are_diagnostics(argv: list[str], code: str, pattern: str) -> None:
    exit_code, _, err = run(*argv)
    assert exit_code == 1
    assert re.search(rf"error: {code}: .*{pattern}", err), err
    assert "Traceback" not in err


def test_bad_inputs_file_is_refused_before_running(tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", **{"p.g": np.zeros(16), "p.b": np.zeros(16), "x": np.zeros((2, 2, 16))})
    code, _, err = run("run", LAYERNORM, "--entry", "LayerNorm.apply", "--dim", "B=2", "--dim", "T=3",
                       "--inputs", str(tmp_path / "in.npz"))  # fmt: skip
    assert code == 1 and "E4003" in err and "shape (2, 3, 16)" in err


def test_dump_binds_sizes_and_keeps_aliases() -> None:
    code, out, _ = run("dump", LAYERNORM, "--stage", "core", "--dim", "B=2", "--dim", "T=4")
    assert code == 0
    assert "!X = !psk_core.tensor<[batch: 2, seq: 4, embed: 16]>" in out
    assert "%2 = psk_core.sub %x, %1 : !X" in out


@pytest.mark.parametrize("command", ["run", "bench", "train"])
def test_a_negative_seed_is_a_usage_error_not_a_crash(command: str) -> None:
    """numpy's generators refuse a negative seed with a ValueError: the option's type says so first (exit 2)."""
    argv = {"run": ["--entry", "LayerNorm.apply"], "bench": ["--entry", "LayerNorm.apply"],
            "train": ["--loss", "loss", "--step", "adamw.step"]}[command]  # fmt: skip
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stderr(err):
        presk([command, LAYERNORM, *argv, "--seed", "-1"])
    assert exited.value.code == 2
    assert err.getvalue().rstrip().endswith(f"presk {command}: error: argument --seed: a seed is a non-negative integer, not -1")


def test_a_long_chain_of_calls_runs_on_the_reference_interpreter(tmp_path: Path) -> None:
    """xDSL's interpreter runs a call inside its caller's Python frames: 200 nested calls exceeded Python's
    default recursion limit (an internal error) before the run raised it to what the chain takes."""
    t = "!psk_core.tensor<[a: 4]>"
    lines = [f"func.func @f0(%x: {t}) -> {t} {{", f"  func.return %x : {t}", "}"]
    for i in range(1, 200):  # f_i(x) = f_{i-1}(x) + x, so f_199(x) = 200 x
        lines += [f"func.func @f{i}(%x: {t}) -> {t} {{", f"  %0 = func.call @f{i - 1}(%x) : ({t}) -> {t}",
                  f"  %1 = psk_core.add %0, %x : {t}", f"  func.return %1 : {t}", "}"]  # fmt: skip
    (tmp_path / "chain.mlir").write_text("\n".join(lines) + "\n")
    np.savez(tmp_path / "in.npz", x=np.array([1.0, 2.0, 3.0, 4.0]))
    code, _, err = run("run", str(tmp_path / "chain.mlir"), "--entry", "f199", "--inputs", str(tmp_path / "in.npz"),
                       "--output", str(tmp_path / "out.npz"))  # fmt: skip
    assert code == 0, err
    assert np.load(tmp_path / "out.npz")["result0"].tolist() == [200.0, 400.0, 600.0, 800.0]
