"""`--plan auto` on `presk run` and `presk bench`: which profile it prices with, what it runs, and misuse.

The profiles are the synthetic ones of test_plan_static (loads cost a
nanosecond each, so the tile of fewest loads wins), except in the first-use
test, which measures a real one: a handful of the small space's points.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from presk.cli import auto_plan as auto
from presk.cost.profile import Profile, load_profile, save_profile
from presk.cost.terms import MachineDesc
from presk.target import target_machine
from presk.tuning.calibration import TERMS_CODE, TIMING, TIMING_WINDOW, coarsely_timed, space, stale_samples
from test_plan_static import TWO_DOTS, load_dominated, run_cli, write_profile


def run_twice(how: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> tuple[dict, str]:
    target = tmp_path / f"{name}.npz"
    code, _, err = run_cli(["run", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", *how, "--backend", "native",
                            "--output", str(target)], capsys)  # fmt: skip
    assert code == 0, err
    with np.load(target) as data:
        return {k: data[k].copy() for k in data.files}, err


def test_auto_runs_the_models_plan_with_the_defaults_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "p.json", load_dominated())
    saved = tmp_path / "chosen.json"
    planned, err = run_twice(["--realize", "f32", "--plan", "auto", "--profile", str(profile), "--save-plan",
                              str(saved)], tmp_path, capsys, "auto")  # fmt: skip
    default, _ = run_twice(["--realize", "f32"], tmp_path, capsys, "default")
    assert {k: v.tobytes() for k, v in planned.items()} == {k: v.tobytes() for k, v in default.items()}
    assert f"--plan auto: @twice: 2 nests planned with {profile}" in err and f"saved to {saved}" in err
    chosen = json.loads(saved.read_text())
    assert chosen["realization"] == "f32" and set(chosen["layout"]) == {"twice/%0", "twice/%1"}
    # It is the plan `presk plan` writes for the same entry, sizes and profile.
    written = tmp_path / "static.json"
    code, _, err = run_cli(["plan", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                            "--profile", str(profile), "-o", str(written)], capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads(written.read_text())["layout"] == chosen["layout"]


def test_the_profile_comes_from_the_environment_then_the_host_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    named = write_profile(tmp_path / "named.json", load_dominated())
    monkeypatch.setenv(auto.PROFILE_ENV, str(named))
    _, err = run_twice(["--realize", "f32", "--plan", "auto"], tmp_path, capsys, "env")
    assert f"planned with {named}" in err

    monkeypatch.delenv(auto.PROFILE_ENV)
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "cache"))
    host = auto.host_profile_path(target_machine())
    assert host.parent == tmp_path / "cache" / "profiles"
    host.parent.mkdir(parents=True)
    write_profile(host, load_dominated())
    _, err = run_twice(["--realize", "f32", "--plan", "auto"], tmp_path, capsys, "host")
    assert f"planned with {host}" in err and "measuring one" not in err

    # The host's full calibration (`presk bench --calibrate host --space calib`) is kept beside the small one
    # and preferred once it is fitted; one still being measured (no constants yet) is not.
    full = auto.host_profile_path(target_machine(), auto.FULL_SPACE)
    assert full.parent == host.parent and full != host
    save_profile(Profile(target_machine().key(), MachineDesc.of(target_machine())), full)
    _, err = run_twice(["--realize", "f32", "--plan", "auto"], tmp_path, capsys, "unfitted")
    assert f"planned with {host}" in err
    write_profile(full, load_dominated())
    _, err = run_twice(["--realize", "f32", "--plan", "auto"], tmp_path, capsys, "full")
    assert f"planned with {full}" in err
    assert auto.calibration_path("host", auto.FULL_SPACE, target_machine()) == str(full)
    assert auto.calibration_path("host", auto.FIRST_USE_SPACE, target_machine()) == str(host)
    assert auto.calibration_path("mine.json", auto.FULL_SPACE, target_machine()) == "mine.json"


def test_a_host_without_a_profile_measures_one_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(auto.PROFILE_ENV, raising=False)
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "cache"))
    machine = target_machine()
    # A few of the small space's f32 points, one product per (lanes, workers) group the plan can price, so the
    # test stays short and every group the plan meets has constants.
    points = space(auto.FIRST_USE_SPACE, machine, ("f32",))
    groups: dict[tuple[int, str], object] = {}
    for p in points:
        layout = dict(p.layout)
        if p.entry == "gemm" and dict(p.sizes)["I"] == 64:
            groups.setdefault((layout["lanes"], str(layout["split"])), p)
    few = [p for p in points if p.entry == "chain"][:2] + list(groups.values())
    monkeypatch.setattr(auto, "space", lambda kind, m: few if kind == auto.FIRST_USE_SPACE else space(kind, m))
    code, _, err = run_cli(["bench", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                            "--plan", "auto", "--rounds", "1", "--warmup", "0"], capsys)  # fmt: skip
    host = auto.host_profile_path(machine)
    assert "no cost profile for this machine yet: measuring one (calib-small" in err and str(host) in err
    assert code == 0, err
    assert "--plan auto: @twice: 2 nests planned with" in err and str(host) in err
    profile = load_profile(host)
    assert profile.layout is not None and len(profile.samples) >= len(few)
    assert stale_samples(profile.samples) == 0
    # Fitted in the form of least u of the nine, the comparison kept beside it.
    assert profile.comparison is not None and len(profile.comparison) == 9
    best = min(profile.comparison, key=lambda score: score.u).form
    assert (profile.form.load_term, profile.form.combine) == (best.load_term, best.combine)

    # Samples another presk priced (another code, other terms: the work doubled), which described the machine
    # otherwise too (other FMA chains). `presk plan` with them says so; `--plan auto` reads their terms again
    # against this presk's description, refits, and prices with exactly the terms this presk reads.
    fresh = [s.to_json() for s in profile.samples]
    other = [replace(s, terms={k: replace(t, work=2 * t.work) for k, t in s.terms.items()},
                     extra={**s.extra, TERMS_CODE: "another"}) for s in profile.samples]  # fmt: skip
    assert profile.machine_desc == MachineDesc.of(machine)
    described_otherwise = replace(profile.machine_desc, fma_chains=profile.machine_desc.fma_chains + 3)
    save_profile(replace(profile, samples=tuple(other), samples_file=None, machine_desc=described_otherwise), host)
    code, _, err = run_cli(["plan", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                            "--profile", str(host), "-o", str(tmp_path / "plan.json")], capsys)  # fmt: skip
    assert code == 0, err
    assert f"note: {len(other)} samples of {host} were priced by another version of presk" in err
    assert f"presk refit {host} --relower" in err
    code, _, err = run_cli(["bench", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                            "--plan", "auto", "--rounds", "1", "--warmup", "0"], capsys)  # fmt: skip
    assert code == 0, err
    assert (f"{len(other)} samples of {host} were priced by another version of presk: pricing them again, "
            "against this presk's description of the machine") in err
    assert "measuring one" not in err and "note:" not in err
    assert [s.to_json() for s in load_profile(host).samples] == fresh
    assert load_profile(host).comparison is not None  # refitted in the best form again
    assert load_profile(host).machine_desc == MachineDesc.of(machine)

    # Samples timed before the window (no "timing": medians of at most 25 calls) are measured again, not refitted.
    coarse = [replace(s, extra={k: v for k, v in s.extra.items() if k != TIMING}) for s in load_profile(host).samples]
    save_profile(replace(load_profile(host), samples=tuple(coarse), samples_file=None), host)
    assert coarsely_timed(load_profile(host).samples) == len(coarse)
    code, _, err = run_cli(["bench", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                            "--plan", "auto", "--rounds", "1", "--warmup", "0"], capsys)  # fmt: skip
    assert code == 0, err
    assert f"{host} was timed by an earlier presk" in err and "measuring one" in err
    again = load_profile(host).samples
    assert len(again) == len(coarse) and coarsely_timed(again) == 0
    assert all(s.extra[TIMING] == TIMING_WINDOW for s in again)

    # A later presk whose space holds a point the profile lacks: when the profile is stale, that point is
    # measured before the samples are relowered and refitted; the points it holds are not measured again.
    added = next(p for p in points if p.entry == "chain" and p not in few)
    grown = [*few, added]
    monkeypatch.setattr(auto, "space", lambda kind, m: grown if kind == auto.FIRST_USE_SPACE else space(kind, m))
    held = load_profile(host)
    stale = [replace(s, extra={**s.extra, TERMS_CODE: "another"}) for s in held.samples]
    save_profile(replace(held, samples=tuple(stale), samples_file=None), host)
    code, _, err = run_cli(["bench", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                            "--plan", "auto", "--rounds", "1", "--warmup", "0"], capsys)  # fmt: skip
    assert code == 0, err
    assert f"{host} holds no sample of 1 of the {len(grown)} points of this presk's calib-small" in err
    assert "measured 1 of them (0 refused by the layout checks)" in err and "measuring one" not in err
    completed = load_profile(host).samples
    assert added.key in {str(s.extra.get("key")) for s in completed} and len(completed) > len(held.samples)
    assert stale_samples(completed) == 0 and load_profile(host).layout is not None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--plan", "auto"], "--plan auto chooses kernel layouts"),
        (["run", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--save-plan", "x.json", "--backend", "native"],
         "--save-plan goes with --plan auto"),
        (["bench", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--save-plan", "x.json"], "--save-plan goes with --plan auto"),
        (["dump", str(TWO_DOTS), "--stage", "kernel", "--entry", "twice", "--dim", "B=4", "--plan", "auto"],
         "--plan auto chooses layouts for `presk run` and `presk bench`"),
        (["bench", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--calibrate", "host"],
         "--calibrate host names the host's profile of a calibration space: give --space calib"),
    ],
)
def test_misuse_is_a_clear_error(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(argv, capsys)
    assert code == 1 and "error: E4001" in err and message in err, err


def test_a_plan_that_could_not_be_saved_is_refused_before_planning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No profile is given and the cache is empty: had the check come after, a first-use calibration would run.
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PRESK_PROFILE", raising=False)
    code, _, err = run_cli(["run", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--backend", "native",
                            "--plan", "auto", "--save-plan", str(tmp_path / "no" / "plan.json")], capsys)  # fmt: skip
    assert code == 1 and "E0001" in err and "is not a writable directory" in err and "Traceback" not in err
    assert not (tmp_path / "cache").exists()


def test_a_host_calibration_a_budget_stops_is_left_unfitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fitted on the first points of the full space, the host's profile would be preferred to the small one
    # while it describes a few small kernels: it waits for the rest, which the same command measures.
    from presk.tuning import calibration

    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "MIN_SECONDS", 0.005)
    plot = tmp_path / "fit.png"
    code, out, err = run_cli(["bench", "--calibrate", "host", "--space", "calib", "--space-types", "f64",
                              "--budget", "1s", "--plot", str(plot)], capsys)  # fmt: skip
    assert code == 0, err
    full = auto.host_profile_path(target_machine(), auto.FULL_SPACE)
    assert "the budget stopped it" in out and f"{full} is not fitted until its space is measured whole" in out
    assert f"{plot} not drawn: there is no fit to draw yet" in out and not plot.exists()
    profile = load_profile(full)
    assert profile.layout is None and len(profile.samples) >= 1
