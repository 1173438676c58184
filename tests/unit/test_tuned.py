"""The layouts `presk autotune` measured best, kept per machine and applied by `--plan auto`.

The suite runs with `PRESK_TUNED=off` (tests/unit/conftest.py); these tests
name a file of their own. The sweeps are narrowed to a few points, as in
test_autotune; the profile is test_plan_static's synthetic one.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from presk import sizes
from presk.diagnostics import PreskError
from presk.ir.context import presk_context
from presk.ir.parse import parse_module, read_source
from presk.plans import parse_plan
from presk.target import target_machine
from presk.tuning.calibration import terms_code
from presk.tuning.plan import Nest, capture
from presk.tuning.tuned import TUNED_ENV, Tuned, read_tuned, record_tuned, tuned_lines, tuned_path
from conftest import FIRST
from test_plan_static import TWO_DOTS, load_dominated, run_cli, write_profile

BASE = [str(TWO_DOTS), "--entry", "twice", "--dim", "B=4"]


@pytest.fixture
def tuned_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tuned" / "here.jsonl"
    monkeypatch.setenv(TUNED_ENV, str(path))
    return path


def nests() -> list[Nest]:
    module = parse_module(presk_context(), read_source(str(TWO_DOTS)), str(TWO_DOTS)).module
    return capture(module, "twice", sizes.resolve(module, {}, {"B": 4}), parse_plan({"realization": "f32"}, "t"))


def without_epilogue(point: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in point.items() if k != "epilogue"}


def layouts(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A plan's layouts without the epilogues `--plan auto` states, and without the defaults."""
    return {site: bare for site, point in plan["layout"].items() if (bare := without_epilogue(point))}


def run_outputs(how: list[str], target: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, bytes], str]:
    code, _, err = run_cli(["run", *BASE, *how, "--backend", "native", "--output", str(target)], capsys)
    assert code == 0, err
    with np.load(target) as data:
        return {k: data[k].tobytes() for k in data.files}, err


def test_a_finished_sweep_keeps_its_best_points_and_plan_auto_runs_them(
    tmp_path: Path, tuned_file: Path, narrow: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The sweep measures the default and the space's first points, its smallest tiles; the synthetic profile
    # picks the tile of fewest loads, a large one, so what --plan auto runs tells which of the two chose it.
    results, written = tmp_path / "r.jsonl", tmp_path / "autotuned.json"
    code, out, err = run_cli(["autotune", *BASE, "--realize", "f32", "-o", str(results), "--plan-out", str(written)],
                             capsys)  # fmt: skip
    assert code == 0, err
    kept = read_tuned(tuned_file)
    assert f"kept the best measured layout of 2 nests for --plan auto on this machine: {tuned_file}" in out
    # The written plan leaves out a nest whose default measured best; the file keeps it, as {}.
    measured = layouts(json.loads(written.read_text()))
    by_site = {line.site: line for line in kept.values()}
    assert set(by_site) == {"twice/%0", "twice/%1"} and {s: t.point for s, t in by_site.items() if t.point} == measured
    assert all(line.code == terms_code() and line.measured == 1 + FIRST and line.seconds > 0 for line in kept.values())

    profile = write_profile(tmp_path / "p.json", load_dominated())
    static = tmp_path / "static.json"
    code, _, err = run_cli(["plan", *BASE, "--realize", "f32", "--profile", str(profile), "-o", str(static)], capsys)
    assert code == 0, err
    saved = tmp_path / "auto.json"
    auto, err = run_outputs(["--realize", "f32", "--plan", "auto", "--profile", str(profile), "--save-plan",
                             str(saved)], tmp_path / "auto.npz", capsys)  # fmt: skip
    assert f"--plan auto: 2 of the 2 nests take the layout presk autotune measured best here ({tuned_file})" in err
    assert "(0 points priced)" in err  # a nest measured here is not priced
    assert layouts(json.loads(saved.read_text())) == measured != layouts(json.loads(static.read_text()))
    default, _ = run_outputs(["--realize", "f32"], tmp_path / "default.npz", capsys)
    assert auto == default

    # PRESK_TUNED=off: the model's plan, and a sweep keeps nothing.
    monkeypatch.setenv(TUNED_ENV, "off")
    _, err = run_outputs(["--realize", "f32", "--plan", "auto", "--profile", str(profile), "--save-plan", str(saved)],
                         tmp_path / "off.npz", capsys)  # fmt: skip
    assert "presk autotune measured" not in err
    assert json.loads(saved.read_text())["layout"] == json.loads(static.read_text())["layout"]
    code, out, _ = run_cli(["autotune", *BASE, "--realize", "f32", "-o", str(tmp_path / "r2.jsonl")], capsys)
    assert code == 0 and "kept the best" not in out and len(read_tuned(tuned_file)) == len(kept)


def test_a_point_no_longer_legal_is_left_for_the_models_pick(
    tmp_path: Path, tuned_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = next(n for n in nests() if n.site == "twice/%0")
    wide = {"tile": [1, 8], "lanes": 64, "pack": False}  # no register of this machine holds 64 lanes: condition 4
    assert first.shapes[0][0].violation(wide, target_machine()) is not None
    record_tuned(tuned_file, [Tuned(first.key, first.site, wide, 1e-3, 2e-3, 6, "another")])
    profile = write_profile(tmp_path / "p.json", load_dominated())
    static, saved = tmp_path / "static.json", tmp_path / "auto.json"
    assert run_cli(["plan", *BASE, "--realize", "f32", "--profile", str(profile), "-o", str(static)], capsys)[0] == 0
    _, err = run_outputs(["--realize", "f32", "--plan", "auto", "--profile", str(profile), "--save-plan", str(saved)],
                         tmp_path / "auto.npz", capsys)  # fmt: skip
    assert "presk autotune measured" not in err
    assert (f"--plan auto: note: the layout presk autotune kept for twice/%0 is refused by the layout checks here "
            f"({tuned_file}): the model's pick instead") in err
    assert json.loads(saved.read_text())["layout"] == json.loads(static.read_text())["layout"]


def test_a_sweep_whose_layouts_cannot_be_kept_warns_and_succeeds(
    tmp_path: Path, narrow: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(TUNED_ENV, str(blocker / "tuned.jsonl"))  # its folder is a file: it cannot be made
    results, written = tmp_path / "r.jsonl", tmp_path / "plan.json"
    code, out, err = run_cli(["autotune", *BASE, "--realize", "f32", "-o", str(results), "--plan-out", str(written)],
                             capsys)  # fmt: skip
    assert code == 0 and written.exists() and "kept the best" not in out
    assert "presk autotune: warning: the best layouts are not kept for --plan auto: E0001: cannot make the folder of " \
           f"the tuned layouts file '{blocker / 'tuned.jsonl'}'" in err and "Traceback" not in err


def test_the_latest_line_of_a_nest_wins_and_an_older_presks_lines_are_counted(
    tmp_path: Path, tuned_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = next(n for n in nests() if n.site == "twice/%0")
    one = {"tile": [1, 8], "lanes": 8, "pack": False, "order": "JI"}
    two = {"tile": [2, 8], "lanes": 8, "pack": False}
    record_tuned(tuned_file, [Tuned(first.key, first.site, one, 1e-3, None, 3, terms_code())])
    record_tuned(tuned_file, [Tuned(first.key, first.site, two, 2e-3, None, 4, "another")])
    assert read_tuned(tuned_file)[first.key].point == two
    saved = tmp_path / "auto.json"
    profile = write_profile(tmp_path / "p.json", load_dominated())
    _, err = run_outputs(["--realize", "f32", "--plan", "auto", "--profile", str(profile), "--save-plan", str(saved)],
                         tmp_path / "auto.npz", capsys)  # fmt: skip
    assert f"1 of the 2 nests take the layout presk autotune measured best here ({tuned_file}, 1 of them by another " \
           "version of presk)" in err
    assert without_epilogue(json.loads(saved.read_text())["layout"]["twice/%0"]) == two


def test_a_file_that_is_not_one_is_an_error_naming_file_and_line(
    tmp_path: Path, tuned_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = next(n for n in nests() if n.site == "twice/%0")
    record_tuned(tuned_file, [Tuned(first.key, first.site, {"tile": [1, 8]}, 1e-3, None, 3, terms_code())])
    with tuned_file.open("a") as stream:
        stream.write(json.dumps({"nest_key": first.key, "point": {}}) + "\n")
    with pytest.raises(PreskError, match=rf"E8001: {tuned_file}:2: not a line of the tuned layouts file"):
        read_tuned(tuned_file)
    profile = write_profile(tmp_path / "p.json", load_dominated())
    code, _, err = run_cli(["run", *BASE, "--realize", "f32", "--plan", "auto", "--profile", str(profile),
                            "--backend", "native"], capsys)  # fmt: skip
    assert code != 0 and f"{tuned_file}:2: not a line of the tuned layouts file" in err and "Traceback" not in err


def test_only_a_sweep_that_measured_all_it_set_out_to_keeps_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    nest = SimpleNamespace(key="k", site="f/%0")
    outcome = SimpleNamespace(nest=nest, best={"tile": [1, 8]}, best_s=1e-3, default_s=2e-3, measured=6)
    whole = SimpleNamespace(stopped=False, lost=0, differ=[], outcomes=[outcome])
    assert tuned_lines(whole, "c") == [Tuned("k", "f/%0", {"tile": [1, 8]}, 1e-3, 2e-3, 6, "c")]  # type: ignore[arg-type]
    for cut in ({"stopped": True}, {"lost": 1}, {"differ": [{}]}):
        assert tuned_lines(SimpleNamespace(**{**vars(whole), **cut}), "c") == []  # type: ignore[arg-type]
    # The machine's own file, under the presk cache, unless PRESK_TUNED names one.
    monkeypatch.delenv(TUNED_ENV)
    monkeypatch.setenv("PRESK_CACHE_DIR", "/somewhere")
    assert tuned_path(target_machine()) == Path("/somewhere/tuned") / f"{target_machine().file_stem()}.jsonl"


def test_a_nest_key_is_its_shapes_and_launches_not_its_site() -> None:
    first, second = nests()
    assert first.key != second.key  # other shapes (hidden 64, out 12)
    renamed = Nest("elsewhere/%7", first.kind, list(first.shapes))
    assert renamed.key == first.key
    assert Nest(first.site, first.kind, [(iso, 2 * n) for iso, n in first.shapes]).key != first.key
