"""`presk refit`: end to end on a synthetic profile, and every bad input as one diagnostic and an exit code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_cost_fit import synthetic

from presk.cli.main import main
from presk.cost.profile import Profile, Sample, append_samples, load_profile, samples_path, save_profile
from presk.cost.terms import MachineDesc
from presk.target import CacheLevel

DESC = MachineDesc((CacheLevel(1, 49152, 64, 1), CacheLevel(2, 2 << 20, 64, 1)), 32, 64, 2)


def make_profile(path: Path, *, memory_bound: bool = True, combine: str = "max") -> dict[str, float]:
    """A profile of 300 samples timed from known constants; under `lines,overhead` each sample's W is doubled."""
    samples, truth = synthetic(300, seed=21, combine=combine, memory_bound=memory_bound)
    save_profile(Profile("test-host", DESC), path)
    append_samples(path, [
        Sample({"": terms, "lines,overhead": replace(terms, work=2 * terms.work)}, t, None, terms.work,
               {"kernel": f"k{i}", "point": {"tile": i % 3}})  # fmt: skip
        for i, (terms, t) in enumerate(samples)
    ])
    return truth


def refit(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["refit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_default_refit_prints_and_writes_the_seed_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    make_profile(path, combine="pnorm")
    code, out, err = refit(str(path), capsys=capsys)
    assert (code, err) == (0, "")
    assert "300 samples, rules: none, layout model: loads group, combine pnorm (q = 3)" in out
    # Printed to four digits, the fit's 1e-3 (test_cost_fit) in the last: 10 GB/s, 2e8 and 4e8 transcendentals/s.
    assert re.search(r"β_mem = (10|9\.99\d) GB/s", out)
    assert re.search(r"τ \(transcendentals, one a register\) = f32 (200|199\.\d) M/s, f64 (400|399\.\d) M/s", out)
    assert "| f32/l8/p2 | " in out and "| 4 Gop/s | 5 Gaccess/s |" in out  # π and ρ of the fourth group: 4e9, 5e9
    assert re.search(r"u = 0\.00% \(roofline: \d+\.\d\d%\)", out)
    assert "Spearman's rank correlation with the measured times: operation counts " in out
    assert "layout model 1.000" in out
    data = json.loads(path.read_text())
    assert data["model"]["load_term"] == "group" and data["model"]["combine"] == "pnorm"
    assert data["model"]["q"] == pytest.approx(3.0, abs=0.02)
    assert data["constants"]["layout"]["beta_l2"]["value"] == pytest.approx(8e10, rel=1e-3)
    assert data["fitted_samples"] == 300 and data["comparison"] is None


def test_best_keeps_the_form_of_least_u(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    make_profile(path, combine="sum")  # timed by the `sum` form: it fits them exactly, the others do not
    code, out, err = refit(str(path), capsys=capsys)
    assert (code, err) == (0, "") and "combine pnorm" in out
    code, out, err = refit(str(path), "--best", capsys=capsys)
    assert (code, err) == (0, "")
    assert "layout model: loads group, combine sum" in out
    assert re.search(r"\| group \| sum \| +\| 0\.0\d% \| best \|", out)  # the fit ends within 1e-3 (test_cost_fit)
    data = json.loads(path.read_text())
    assert (data["model"]["load_term"], data["model"]["combine"]) == ("group", "sum")
    assert len(data["comparison"]) == 9
    code, _, err = refit(str(path), "--best", "--combine", "max", capsys=capsys)
    assert code != 0 and "--best chooses the load term and the combine: give neither with it" in err


def test_compare_prints_the_nine_forms_and_marks_the_best(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    make_profile(path, combine="max")
    code, out, _ = refit(str(path), "--compare", "--combine", "max", capsys=capsys)
    assert code == 0
    rows = [line.split("|")[1:-1] for line in out.splitlines() if re.match(r"\| (group|machine|none) \|", line)]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        (load, how) for load in ("group", "machine", "none") for how in ("max", "sum", "pnorm")
    ]
    assert [bool(r[2].strip()) for r in rows] == [how == "pnorm" for _ in range(3) for how in ("max", "sum", "pnorm")]
    u = [float(r[3].strip().rstrip("%")) for r in rows]
    marked = [i for i, r in enumerate(rows) if r[4].strip() == "best"]
    assert marked == [u.index(min(u))]
    assert rows[0][3].strip() == "0.00%"  # the samples' own form fits them exactly
    data = json.loads(path.read_text())
    assert len(data["comparison"]) == 9 and data["model"]["combine"] == "max"


def test_recost_refits_under_other_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    truth = make_profile(path)
    code, out, _ = refit(str(path), "--recost", "--rules", "overhead,lines", "--combine", "max", capsys=capsys)
    assert code == 0
    assert "rules: lines,overhead" in out
    data = json.loads(path.read_text())
    assert data["model"]["rules"] == ["lines", "overhead"]
    # Every W doubled, the times kept: each π doubles, the rest stays.
    layout = data["constants"]["layout"]
    assert layout["pi[f64/l1/p1]"]["value"] == pytest.approx(2 * truth["pi[f64/l1/p1]"], rel=1e-3)
    assert layout["beta_mem"]["value"] == pytest.approx(truth["beta_mem"], rel=1e-3)
    # The profile's rules are now the default.
    code, out, _ = refit(str(path), capsys=capsys)
    assert code == 0 and "rules: lines,overhead" in out
    code, out, _ = refit(str(path), "--recost", capsys=capsys)
    assert code == 0 and "rules: none" in out


def test_not_identified_constants_are_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    make_profile(path, memory_bound=False)
    code, out, _ = refit(str(path), "--combine", "max", capsys=capsys)
    assert code == 0
    assert "β_mem = not identified" in out
    assert json.loads(path.read_text())["constants"]["layout"]["beta_mem"]["value"] is None


def test_output_elsewhere_leaves_the_profile_and_copies_the_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, other = tmp_path / "p.json", tmp_path / "other.json"
    make_profile(path)
    before = path.read_text()
    code, out, _ = refit(str(path), "--combine", "sum", "-o", str(other), capsys=capsys)
    assert code == 0 and out.rstrip().endswith(f"wrote {other}")
    assert path.read_text() == before
    assert samples_path(other).read_text() == samples_path(path).read_text()
    copy = load_profile(other)
    assert copy.form.combine == "sum" and len(copy.samples) == 300
    assert copy.samples[4].extra == {"kernel": "k4", "point": {"tile": 1}}


def bad_profiles(tmp_path: Path) -> dict[str, Path]:
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "presk-cost-profile", "version": 1, "machine": ')
    empty = tmp_path / "empty.json"
    save_profile(Profile("m", DESC), empty)
    good = tmp_path / "good.json"
    make_profile(good)
    return {"corrupt": corrupt, "empty": empty, "good": good, "missing": tmp_path / "missing.json"}


@pytest.mark.parametrize(
    ("which", "args", "code", "message"),
    [
        ("missing", [], 1, "presk: error: E0001: cannot open profile '{path}': no such file"),
        ("corrupt", [], 1, "presk: error: E8001: {path}: not a cost profile: invalid JSON at line 1"),
        ("empty", [], 1, "presk: error: E8001: the profile has no samples"),
        ("good", ["--recost", "--rules", "lines,fast"], 1, "presk: error: E8001: unknown rule 'fast'"),
        ("good", ["--recost", "--rules", "shared"], 1,
         "presk: error: E8001: 300 of 300 samples (the first: 0) have no terms for the rules 'shared'"),
        ("good", ["--rules", "lines"], 1, "presk: error: E8001: --rules prices the samples again: give it with --recost"),
        ("good", ["--combine", "mean"], 2, "argument --combine: invalid choice: 'mean'"),
        ("good", ["-o", "/nonexistent-folder/x.json"], 1, "presk: error: E0001: cannot write '/nonexistent-folder/x.json'"),
    ],
)
def test_bad_input_is_one_diagnostic_and_an_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, args: list[str], code: int, message: str
) -> None:
    path = bad_profiles(tmp_path)[which]
    if code == 2:
        with pytest.raises(SystemExit) as exited:
            main(["refit", str(path), *args])
        assert exited.value.code == 2
        err = capsys.readouterr().err
    else:
        got, _, err = refit(str(path), *args, capsys=capsys)
        assert got == code
    assert message.format(path=path) in err
    assert "Traceback" not in err and "internal error" not in err


def test_the_installed_command(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    make_profile(path)
    presk = Path(sys.executable).parent / "presk"
    done = subprocess.run([str(presk), "refit", str(path), "--combine", "max"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PRESK_DEBUG": "0"}, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "layout model: loads group, combine max" in done.stdout
    bad = subprocess.run([str(presk), "refit", str(tmp_path / "nothing.json")], capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.startswith("presk: error: E0001: cannot open profile")


def noisy_profile(path: Path) -> None:
    """200 samples timed from known constants with log-normal noise (σ = 0.2), so u is well above zero."""
    samples, _ = synthetic(200, seed=5, combine="max", noise=0.2)
    save_profile(Profile("test-host|znver3|avx2", DESC), path)
    append_samples(path, [Sample({"": terms}, t, None, terms.work, {"kernel": f"k{i}"})
                          for i, (terms, t) in enumerate(samples)])  # fmt: skip


def test_plot_draws_both_models_fit_with_the_profile_s_u(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--plot` draws the fitted profile's own predictions: the median errors it reports are the fit's u."""
    path, png = tmp_path / "p.json", tmp_path / "fit.png"
    noisy_profile(path)
    code, out, err = refit(str(path), "--combine", "max", "--plot", str(png), capsys=capsys)
    assert (code, err) == (0, "")
    fitted = re.search(r"u = (\d+\.\d\d)% \(roofline: (\d+\.\d\d)%\)", out)
    drew = re.search(rf"drew {re.escape(str(png))}: 200 samples, layout model u = (\d+\.\d\d)%, roofline u = "
                     r"(\d+\.\d\d)%", out)  # fmt: skip
    assert fitted and drew and fitted.groups() == drew.groups(), out
    assert 5.0 < float(fitted.group(1)) < float(fitted.group(2))
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000  # three panels of 200 points, not a blank

    from presk.cost.fit_plot import plot_fit

    profile = load_profile(path)
    drawn = plot_fit(profile, str(tmp_path / "again.png"))
    assert drawn.samples == 200
    assert list(drawn.by_order) == ["default"]  # the synthetic samples state no layout
    # A profile with the roofline alone draws that model only.
    alone = plot_fit(replace(profile, layout=None), str(tmp_path / "roofline.png"))
    assert alone.errors == {"roofline": pytest.approx(profile.u_roofline, rel=1e-12)}
    assert (tmp_path / "roofline.png").read_bytes().startswith(b"\x89PNG")
    assert drawn.errors == {"layout model": pytest.approx(profile.u, rel=1e-12),
                            "roofline": pytest.approx(profile.u_roofline, rel=1e-12)}  # fmt: skip


def test_plot_refuses_what_it_cannot_draw_or_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from presk.cost.fit_plot import plot_fit
    from presk.diagnostics import PreskError

    path = tmp_path / "p.json"
    noisy_profile(path)
    with pytest.raises(PreskError, match="E8001: the profile has no fitted constants to draw"):
        plot_fit(load_profile(path), str(tmp_path / "x.png"))  # measured, never fitted
    before = path.read_bytes()
    code, out, err = refit(str(path), "--plot", "/nonexistent-folder/fit.png", capsys=capsys)
    assert code == 1 and "presk: error: E0001: cannot write /nonexistent-folder/fit.png" in err
    assert out == "" and path.read_bytes() == before, "refused before fitting anything"
    code = main(["bench", "--plot", str(tmp_path / "fit.png"), "corpus/mlp.mlir", "--entry", "mse"])
    assert code == 1 and "E4001: --plot draws a calibration's fit: give it with --calibrate P.json" in capsys.readouterr().err
