"""`presk autotune` and `presk rank`: the results file, resuming, the bit check, candidates, the plan, the figures.

The sweeps are cut to a few points of a tiny GEMM (N = 16) or of
tests/plan/two_dots.mlir (B = 4) by narrowing each nest's space
(`autotune.legal_points`), so each run compiles a handful of kernels; the
candidates test prices a whole space under a synthetic profile (loads cost
a nanosecond each, a split a second), built for the target's own register
file, so the tests hold on AVX2 and AVX-512 alike.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from presk import sizes
from presk.cli.main import main
from presk.cost.models import Constants, Form
from presk.cost.profile import Profile, load_profile, save_profile
from presk.cost.terms import MachineDesc
from presk.diagnostics import PreskError
from presk.ir.context import presk_context
from presk.ir.parse import parse_module, read_source
from presk.plans import parse_plan
from presk.target import target_machine
from presk.tuning import autotune as at
from presk.tuning import plan
from presk.tuning.rank import PairCount, by_decision, figures, pooled, priced_under, report, run_to_run_noise
from presk.tuning.space import point_key
from conftest import FIRST

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "bench/programs/gemm.mlir"
TWO_DOTS = ROOT / "tests/plan/two_dots.mlir"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def gemm(n: int = 16) -> tuple[Any, dict[str, int]]:
    module = parse_module(presk_context(), read_source(str(GEMM)), str(GEMM)).module
    return module, sizes.resolve(module, {}, {"N": n})


def points_of(path: Path) -> list[dict[str, Any]]:
    return [r for r in at.read_results(path) if r.get("record", "point") == "point"]


def load_dominated(path: Path, u: float = 0.1, slower: float = 1.0) -> Path:
    """A profile whose every f32 group prices loads at a nanosecond, work and traffic at nothing, a split at a second;
    every time `slower` times that (a power of two keeps every prediction's bits but the exponent's)."""
    machine = target_machine()
    values = {"lambda": 1e-7 * slower, "spawn": 1.0 * slower, "beta_l2": 1e30 / slower, "beta_l3": 1e30 / slower,
              "beta_mem": 1e30 / slower}  # fmt: skip
    for lanes in (1, *machine.lane_widths("f32")):
        for workers in {1, *machine.allowed_workers(), machine.workers()}:
            values[f"pi[f32/l{lanes}/p{workers}]"] = 1e30 / slower
            values[f"rho[f32/l{lanes}/p{workers}]"] = 1e9 / slower
    constants = Constants("layout", values, Form("group", "max"))
    save_profile(Profile(machine.key(), MachineDesc.of(machine), Form("group", "max"), layout=constants, u=u), path)
    return path


# --------------------------------------------------------------------------
# The results file and resuming.


def test_lines_and_resume_after_an_interruption(tmp_path: Path, narrow: None, monkeypatch: pytest.MonkeyPatch) -> None:
    module, env = gemm()
    results = tmp_path / "r.jsonl"
    measure = at.measure
    calls: list[int] = []

    def interrupted(*args: Any, **kwargs: Any) -> at.Measurement:
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(1)
        return measure(*args, **kwargs)

    monkeypatch.setattr(at, "measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        at.autotune(module, "gemm", env, "f32", str(results))
    lines = points_of(results)
    assert len(lines) == 3
    first = lines[0]
    assert first["machine"] == target_machine().key() and first["site"] == "gemm/%0"
    assert first["default"] is True and first["point"] == {} and first["predicted_s"] is None
    assert first["bits"] == "ok" and 0 < first["q1_s"] <= first["median_s"] <= first["q3_s"]
    assert "16" in first["shape"] and first["calls"] >= 3
    # A kill mid-line leaves a torn last line: skipped on read, cut before the next append.
    with open(results, "a") as stream:
        stream.write('{"machine": "x", "site"')
    assert len(points_of(results)) == 3

    calls.clear()
    monkeypatch.setattr(at, "measure", lambda *a, **k: (calls.append(1), measure(*a, **k))[1])
    result = at.autotune(module, "gemm", env, "f32", str(results))
    assert len(calls) == 1 + FIRST - 3 == result.measured and result.skipped == 3
    lines = points_of(results)
    assert len(lines) == 1 + FIRST
    assert len({point_key(r["point"]) for r in lines}) == 1 + FIRST
    (outcome,) = result.outcomes
    timed = [r for r in at.with_retimes(at.read_results(results)) if r.get("record", "point") == "point"]
    best = min(timed, key=lambda r: r["median_s"])  # a finalist's median is its retime's
    assert outcome.best == best["point"] and outcome.best_s == best["median_s"]
    assert outcome.default_s == lines[0]["median_s"] and outcome.measured == 1 + FIRST


def test_a_point_with_other_bits_is_reported_and_never_chosen(
    tmp_path: Path, narrow: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module, env = gemm()
    legal = at.legal_points
    (nest,) = at.capture(module, "gemm", env, at.parse_plan({"realization": "f32"}, "test"))
    bad = legal(nest, at.target_machine(), "quick")[0][2]
    measure, lower_point = at.measure, at.lower_point
    lowered: list[Any] = []
    monkeypatch.setattr(at, "lower_point", lambda iso, point: (lowered.append(point), lower_point(iso, point))[1])

    def corrupt(*args: Any, **kwargs: Any) -> at.Measurement:
        m = measure(*args, **kwargs)
        if lowered[-1] == bad:  # the wrong bits, and the fastest time of all
            m.outputs[0].view(np.uint32).flat[3] ^= 1
            m.median_s = m.q1_s = m.q3_s = 1e-12
        return m

    monkeypatch.setattr(at, "measure", corrupt)
    results, plan = tmp_path / "r.jsonl", tmp_path / "plan.json"
    code, out, err = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=16", "--realize", "f32",
                              "-o", str(results), "--plan-out", str(plan)], capsys)  # fmt: skip
    assert code == 1
    assert "BUG" in err and json.dumps(bad) in err and "other bits" in err
    differ = [r for r in points_of(results) if r["bits"] == "differ"]
    assert [r["point"] for r in differ] == [bad]
    chosen = json.loads(plan.read_text())["layout"].get("gemm/%0")
    assert chosen != bad and "WITH OTHER BITS" in out
    # A second run measures nothing and still fails: the bug is in the file.
    code, _, err = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=16", "--realize", "f32",
                            "-o", str(results)], capsys)  # fmt: skip
    assert code == 1 and "1 points gave other bits" in err


def test_candidates_are_the_points_within_1_plus_u(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = load_dominated(tmp_path / "p.json", u=0.1)
    results = tmp_path / "r.jsonl"
    # The grouped pricing whatever the space's size on this target's register file (`price_ahead`).
    grouped: list[int] = []
    price_groups = plan._price_groups
    monkeypatch.setattr(plan, "PARALLEL_MIN", 2)
    monkeypatch.setattr(plan, "_price_groups", lambda *args: grouped.append(1) or price_groups(*args))
    code, out, err = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "--realize", "f32",
                              "--profile", str(profile), "--candidates", "-o", str(results)], capsys)  # fmt: skip
    assert code == 0, err
    (prices,) = [r for r in at.read_results(results) if r.get("record") == "prices"]
    priced = {k: v for k, v in prices["prices"].items() if v is not None}
    best = min(priced.values())
    expected = {k for k, v in priced.items() if v <= best * 1.1}
    lines = points_of(results)
    measured = {point_key(r["point"]) for r in lines if not r["default"]}
    assert measured == expected and 0 < len(expected) < len(priced)
    for r in lines:
        assert r["predicted_s"] == pytest.approx(priced.get(point_key(r["point"]), r["predicted_s"]))
        assert r["u"] == 0.1 and r["profile"] == str(profile)
    pick = min(priced, key=lambda k: priced[k])
    assert pick in measured and "model's pick" in out and "1.1× the best" not in err
    # Priced as `presk plan` prices (grouped, over its processes), to the bit.
    assert grouped
    module, env = gemm(8)
    iso = plan.capture(module, "gemm", env, parse_plan({"realization": "f32"}, "test"))[0].shapes[0][0]
    serial = plan.profile_pricer(load_profile(str(profile)), str(profile), target_machine(), keep_terms=False)
    for key, value in prices["prices"].items():
        alone = serial.price(iso, json.loads(key))
        assert (None if isinstance(alone, PreskError) else alone) == value, key
    # Rerun: nothing priced or measured again.
    code, out, _ = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "--realize", "f32",
                            "--profile", str(profile), "--candidates", "-o", str(results)], capsys)  # fmt: skip
    assert code == 0 and "0 points measured" in out
    assert len([r for r in at.read_results(results) if r.get("record") == "prices"]) == 1


def test_each_order_adds_the_models_best_point_of_every_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--each-order`: the candidates within 1 + u, and the best-priced point of every loop order besides."""
    profile = load_dominated(tmp_path / "p.json", u=0.1)
    results = tmp_path / "r.jsonl"
    code, _, err = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "--realize", "f32",
                            "--profile", str(profile), "--candidates", "--each-order", "-o", str(results)], capsys)  # fmt: skip
    assert code == 0, err
    (prices,) = [r for r in at.read_results(results) if r.get("record") == "prices"]
    priced = {k: v for k, v in prices["prices"].items() if v is not None}
    best = min(priced.values())
    within = {k for k, v in priced.items() if v <= best * 1.1}
    by_order: dict[object, str] = {}
    for key, value in priced.items():
        order = json.loads(key).get("order")
        if order not in by_order or value < priced[by_order[order]]:
            by_order[order] = key
    measured = {point_key(r["point"]) for r in points_of(results) if not r["default"]}
    assert measured == within | set(by_order.values())
    assert len(by_order) > 2 and not set(by_order.values()) <= within  # the rule adds points here
    code, _, err = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "--each-order",
                            "-o", str(tmp_path / "s.jsonl")], capsys)  # fmt: skip
    assert code != 0 and "--each-order adds to the candidates" in err


def test_the_written_plan_runs_with_the_defaults_bits(
    tmp_path: Path, narrow: None, capsys: pytest.CaptureFixture[str]
) -> None:
    results, plan = tmp_path / "r.jsonl", tmp_path / "plan.json"
    base = [str(TWO_DOTS), "--entry", "twice", "--dim", "B=4"]
    code, out, err = run_cli(["autotune", *base, "--realize", "f32", "-o", str(results), "--plan-out", str(plan)],
                             capsys)  # fmt: skip
    assert code == 0, err
    written = json.loads(plan.read_text())
    assert written["realization"] == "f32" and set(written["layout"]) <= {"twice/%0", "twice/%1"}
    assert "twice/%0" in out and "twice/%1" in out
    outputs = []
    for how in (["--plan", f"@{plan}"], ["--realize", "f32"]):
        target = tmp_path / f"out{len(outputs)}.npz"
        code, _, err = run_cli(["run", *base, *how, "--backend", "native", "--output", str(target)], capsys)
        assert code == 0, err
        outputs.append(np.load(target))
    assert all(outputs[0][k].tobytes() == outputs[1][k].tobytes() for k in outputs[1])


# --------------------------------------------------------------------------
# presk rank on a file made by hand.


def hand_made(path: Path) -> Path:
    """Four points of one nest, u = 0.1: predicted 1, 2, 3, 10 µs; measured 5, 4, 5.1, 9 µs."""
    common = {"machine": "m", "site": "f/%0", "shape_key": "k", "shape": "[i: 4]", "bits": "ok", "u": 0.1,
              "profile": None, "seconds": 0.5}  # fmt: skip
    rows = [  # (point, predicted, median, q1, q3)
        ({"tile": [1, 1]}, 1e-6, 5.0e-6, 4.9e-6, 5.2e-6),
        ({"tile": [1, 8]}, 2e-6, 4.0e-6, 3.9e-6, 4.1e-6),
        ({"tile": [2, 8]}, 3e-6, 5.1e-6, 5.0e-6, 5.3e-6),
        ({"tile": [4, 8]}, 10e-6, 9.0e-6, 8.8e-6, 9.2e-6),
    ]
    lines = [{**common, "point": {}, "default": True, "predicted_s": 1.5e-6, "median_s": 6e-6, "q1_s": 6e-6,
              "q3_s": 6e-6}]  # fmt: skip
    lines += [{**common, "point": p, "default": False, "predicted_s": pr, "median_s": m, "q1_s": q1, "q3_s": q3}
              for p, pr, m, q1, q3 in rows]  # fmt: skip
    lines.append({"record": "prices", "machine": "m", "shape_key": "k", "points": 40, "seconds": 2.0, "prices": {}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_rank_figures_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (f,) = figures(at.read_results(hand_made(tmp_path / "r.jsonl")))
    # Ranks: predicted 1 2 3 4, measured 2 1 3 4: d² = 1 + 1 = 2, ρ = 1 − 6·2 / (4·15) = 0.8.
    assert f.spearman == pytest.approx(0.8)
    # Pairs: (1,3) 5.0 vs 5.1 differ by 2 % and their quartiles overlap: not distinguished; the other
    # five are. Right: (1,2) wrong (predicted 1 < 2, measured 5 > 4), (1,4), (2,3), (2,4), (3,4) right.
    assert (f.distinguished, f.right) == (5, 4)
    # Decided (predicted ratio > 1.1): all five (2, 10, 1.5, 5, 3.33); the same four right.
    assert (f.decided, f.decided_right) == (5, 4)
    # O: the pick (predicted 1 µs) measured 5 µs, the best 4 µs.
    assert f.pick is not None and f.pick["point"] == {"tile": [1, 1]} and f.pick_ratio == pytest.approx(1.25)
    # Q: the candidates (predicted ≤ 1.1 µs) are the pick alone, 1.25× the best: Q fails.
    assert f.q_holds is False and not f.only_candidates
    # Halide: only the 9 µs point is > 1.3 × 4 µs; predicted 10 > 2 (the best's): behind it.
    assert (f.slower, f.slower_behind) == (1, 1)
    assert f.priced_points == 40 and f.measured_seconds == pytest.approx(2.0) and f.sweep_estimate == pytest.approx(20)
    # Q's cost: the pricing (2 s) and the one candidate's measurement (0.5 s), 12.5 % of the 20 s sweep.
    assert (f.candidates, f.candidates_seconds, f.hybrid_seconds) == (1, pytest.approx(0.5), pytest.approx(2.5))
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl"), "--plot", str(tmp_path / "r.png")], capsys)
    assert code == 0, err
    assert "Spearman 0.800" in out and "4/5 (80%)" in out and "1.25×" in out and "do not hold" in out
    assert "Q's cost: the static choice and its 1 candidate measured, 2.5 s: 12.5 % of the whole space's sweep" in out
    assert "measured 5 µs, one window, 1.25× the best" in out and "(4 µs, one window)" in out
    # --json: the same figures for a script, one object per nest shape.
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl"), "--json"], capsys)
    assert code == 0, err
    (shape,) = json.loads(out)
    assert shape["spearman"] == pytest.approx(0.8) and shape["pairs"] == {
        "distinguished": 5, "right": 4, "decided": 5, "decided_right": 4, "tied": 0}
    # Every pair differs in the tile alone: the tile's row is every pair.
    assert shape["by_decision"] == {"tile": {"pairs": 5, "right": 4, "tied": 0}}
    assert shape["pick"]["point"] == {"tile": [1, 1]} and shape["best"]["point"] == {"tile": [1, 8]}
    assert shape["o"] == pytest.approx(1.25) and shape["q"] is False and shape["halide"] == {"slower": 1, "behind": 1}
    assert shape["n"]["priced_points"] == 40 and shape["n"]["sweep_estimate_seconds"] == pytest.approx(20)
    assert shape["q_cost"] == {"candidates": 1, "candidates_seconds": 0.5, "seconds": 2.5}
    assert shape["o_round_by_round"] is None and shape["default"]["median_s"] == 6e-6
    assert (tmp_path / "r.png").stat().st_size > 1000
    # Several files rank together, each shape in one of them; a shape in two is refused.
    other = tmp_path / "other.jsonl"
    other.write_text((tmp_path / "r.jsonl").read_text().replace('"shape_key": "k"', '"shape_key": "k2"'))
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl"), str(other), "--json"], capsys)
    assert code == 0, err
    assert [shape["shape_key"] for shape in json.loads(out)] == ["k", "k2"]
    again = tmp_path / "again.jsonl"
    again.write_text((tmp_path / "r.jsonl").read_text())
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl"), str(other), str(again)], capsys)
    assert code == 1 and "E4001" in err and "rank the two apart" in err
    code, out, err = run_cli(["rank", str(other), str(other)], capsys)
    assert code == 1 and "is given 2 times" in err
    # --u 0.6: the decided pairs are those beyond 1.6: (1,2), (1,4), (2,4), (3,4); three right.
    (g,) = figures(at.read_results(tmp_path / "r.jsonl"), u=0.6)
    assert (g.decided, g.decided_right) == (4, 3) and g.q_holds is False

    # The pick timed again with the best, in rounds: 3.9 µs against 4 µs. It is now the best (O = 1), the
    # figures say two points were timed again and what that cost, apart from the sweep's estimate.
    lines = at.read_results(tmp_path / "r.jsonl")
    common = {"record": "retime", "machine": lines[0]["machine"], "site": lines[0]["site"],
              "shape_key": lines[0]["shape_key"], "rounds": 5, "seconds": 0.25}  # fmt: skip
    pick, best = f.pick["point"], f.best["point"]
    for point, median in ((pick, 3.9e-6), (best, 4e-6)):
        at.append_record(tmp_path / "r.jsonl", {**common, "point": point, "median_s": median, "q1_s": median,
                                                "q3_s": median})  # fmt: skip
    (h,) = figures(at.read_results(tmp_path / "r.jsonl"))
    assert h.pick_ratio == pytest.approx(1.0) and h.pick["median_s"] == 3.9e-6
    assert (h.retimed, h.retimed_seconds) == (2, pytest.approx(0.5)) and h.sweep_estimate == pytest.approx(20)
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl")], capsys)
    assert code == 0, err
    assert "and 2 of them again in" in out
    assert "measured 3.9 µs, timed again in 5 rounds, 1× the best" in out


def test_rank_tells_pairs_apart_beyond_the_run_to_run_noise_of_the_rounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two of `hand_made`'s points timed again in three rounds each, two of them equal and the third 1.3× the
    others: two runs of one point differ by 1.3× in median, so only pairs more than 1.3× apart count."""
    path = hand_made(tmp_path / "r.jsonl")
    common = {"record": "retime", "machine": "m", "site": "f/%0", "shape_key": "k", "rounds": 3, "seconds": 0.25}
    for point, rounds in (({"tile": [1, 1]}, [5e-6, 5e-6, 6.5e-6]), ({"tile": [4, 8]}, [9e-6, 9e-6, 11.7e-6])):
        at.append_record(path, {**common, "point": point, "median_s": rounds[0], "q1_s": rounds[0],
                                "q3_s": rounds[2], "batch": "b", "round_s": rounds})  # fmt: skip
    assert run_to_run_noise(at.with_retimes(at.read_results(path))) == (pytest.approx(1.3), 2)
    (f,) = figures(at.read_results(path))
    # Medians 5, 4, 5.1, 9 µs: (5, 4) is 1.25×, (4, 5.1) 1.275× and (5, 5.1) 1.02×, all inside 1.3; the three
    # pairs with the 9 µs point are beyond it, and the model orders all three right (predicted 10 µs, last).
    assert (f.noise, f.noise_points) == (pytest.approx(1.3), 2)
    assert (f.distinguished, f.right) == (3, 3) and (f.decided, f.decided_right) == (3, 3)
    code, out, err = run_cli(["rank", str(path)], capsys)
    assert code == 0, err
    assert "run-to-run noise 1.3× (two rounds of one point, the median over the 2 points timed again)" in out
    assert "ordered right 3/3 (100%)" in out
    code, out, err = run_cli(["rank", str(path), "--json"], capsys)
    assert code == 0, err
    (shape,) = json.loads(out)
    assert shape["noise"] == {"factor": pytest.approx(1.3), "points": 2} and shape["pairs"]["distinguished"] == 3
    # Noise below 3 % is taken as 3 %; one point in rounds is too few to read it (the rule of the window's calls).
    assert run_to_run_noise([{"round_s": [1.0, 1.0, 1.0]}, {"round_s": [2.0, 2.0, 2.0]}]) == (1.0, 2)
    steady = hand_made(tmp_path / "steady.jsonl")
    for point, median in (({"tile": [1, 1]}, 5e-6), ({"tile": [4, 8]}, 9e-6)):
        at.append_record(steady, {**common, "point": point, "median_s": median, "q1_s": median, "q3_s": median,
                                  "batch": "b", "round_s": [median] * 3})  # fmt: skip
    (h,) = figures(at.read_results(steady))
    assert h.noise == pytest.approx(1.03) and (h.distinguished, h.right) == (5, 4)  # (5, 5.1) stays inside 3 %
    assert run_to_run_noise([{"round_s": [5e-6, 5e-6, 6.5e-6]}]) == (None, 0)
    (g,) = figures(at.read_results(hand_made(tmp_path / "plain.jsonl")))
    assert g.noise is None and (g.distinguished, g.right) == (5, 4)


def two_decisions(path: Path, shape_key: str = "k") -> Path:
    """Four points of one nest, two tiles × two orders, u = 0.1 (predicted, measured, in µs):
    A [1, 8] IJ 1, 2; B [1, 8] JI 2, 1; C [2, 8] IJ 3, 3; D [2, 8] JI 3, 4."""
    common = {"machine": "m", "site": "f/%0", "shape_key": shape_key, "shape": "[i: 4]", "bits": "ok", "u": 0.1,
              "profile": None, "seconds": 0.5, "default": False}  # fmt: skip
    rows = [([1, 8], "IJ", 1e-6, 2e-6), ([1, 8], "JI", 2e-6, 1e-6), ([2, 8], "IJ", 3e-6, 3e-6), ([2, 8], "JI", 3e-6, 4e-6)]
    path.write_text("".join(json.dumps({**common, "point": {"tile": tile, "order": order}, "predicted_s": pr,
                                        "median_s": m, "q1_s": m, "q3_s": m}) + "\n"
                            for tile, order, pr, m in rows))  # fmt: skip
    return path


def test_rank_counts_ties_and_each_decision_s_pairs_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (f,) = figures(at.read_results(two_decisions(tmp_path / "r.jsonl")))
    # Every pair's measured times differ by more than 3 %: six distinguished pairs. A–B (the order alone):
    # predicted 1 < 2, measured 2 > 1, wrong. A–C (the tile alone), B–D (the tile), A–D and B–C (both): right.
    # C–D (the order alone): predicted 3 = 3, a tie, not right.
    assert (f.distinguished, f.right, f.tied) == (6, 4, 1)
    assert f.by_decision == {"tile": PairCount(2, 2, 0), "order": PairCount(2, 0, 1)}
    # Decided (predicted beyond 1.1×): all but the tie; A–B among them, wrong. Within 1 + u: the tie alone.
    assert (f.decided, f.decided_right) == (5, 4)
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl")], capsys)
    assert code == 0, err
    assert "ordered right 4/6 (67%), 1 tied; decided (beyond 1 + u) right 4/5 (80%); within 1 + u right 0/1 (0%)" in out
    assert "pairs differing in one decision alone, right: tile 2/2 (100%), order 0/2 (0%) (1 tied)" in out
    table = out[out.index("| decision |"):].splitlines()
    assert table[2:5] == ["| tile | 2/2 (100%) | 0/2 (0%) |", "| order | 0/2 (0%) | 1/2 (50%) |",
                          "| every pair | 4/6 (67%) | 1/6 (17%) |"]  # fmt: skip
    # Over several shapes the table sums their pairs, and so does --json's pooled figure.
    other = two_decisions(tmp_path / "other.jsonl", "k2")
    nests = figures([*at.read_results(tmp_path / "r.jsonl"), *at.read_results(other)])
    assert by_decision(nests) == {"tile": PairCount(4, 4, 0), "order": PairCount(4, 0, 2)}
    assert pooled(nests)["by_decision"]["order"] == {"pairs": 4, "right": 0, "tied": 2}
    assert pooled(nests)["pairs"]["tied"] == 2
    code, out, err = run_cli(["rank", str(tmp_path / "r.jsonl"), str(other), "--json"], capsys)
    assert code == 0, err
    assert [shape["by_decision"]["order"] for shape in json.loads(out)] == [{"pairs": 2, "right": 0, "tied": 1}] * 2


def test_the_sweep_by_prediction_times_each_point_of_the_space_at_its_predicted_time(tmp_path: Path) -> None:
    """Two points measured (1 ms each, predicted 0.5 ms, a second of wall time each); a space of three, one of
    them predicted at a second: measuring it would take its calls, far above the measured points' mean."""
    common = {"machine": "m", "site": "f/%0", "shape_key": "k", "shape": "[i: 4]", "bits": "ok", "u": 0.1,
              "profile": None, "seconds": 1.0, "default": False, "predicted_s": 0.5e-3, "median_s": 1e-3,
              "q1_s": 1e-3, "q3_s": 1e-3}  # fmt: skip
    a, b, c = ({"tile": [1, n]} for n in (1, 8, 16))
    prices = {"record": "prices", "machine": "m", "shape_key": "k", "points": 3, "seconds": 0.1,
              "prices": {point_key(a): 0.5e-3, point_key(b): 0.5e-3, point_key(c): 1.0}}  # fmt: skip
    (f,) = figures([{**common, "point": a}, {**common, "point": b}, prices])
    # Each point's window: its first call, then 3 calls or 50 ms. Measured: 1 ms → 51 ms, so 0.949 s of overhead.
    # Scaled by measured / predicted = 2: the two fast points 51 ms each, the slow one 2 s + 3 × 2 s = 8 s.
    assert f.sweep_by_prediction == pytest.approx(3 * 0.949 + 2 * 0.051 + 8.0)
    assert f.sweep_estimate == pytest.approx(3.0)  # the measured points' mean: a second each
    (n_line,) = [line for line in report([f]) if line.startswith("  N: ")]
    assert "or 10.9 s with each point's window at its predicted time (109× the static choice)" in n_line


def test_rank_gives_o_in_the_picks_own_rounds_where_the_best_was_timed_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pick and a third point timed again together (one batch), on a slower hour than the best's single
    window: O against the best reads high, and `presk rank` also gives it against the best of the pick's rounds."""
    path = hand_made(tmp_path / "r.jsonl")
    lines = at.read_results(path)
    common = {"record": "retime", "machine": "m", "site": "f/%0", "shape_key": "k", "rounds": 5, "seconds": 0.25}
    # Each round's medians: the first round in a slow phase of the host, which slows both alike.
    rounds = {"[1, 1]": [12e-6, 6e-6, 6e-6, 6e-6, 5.5e-6], "[2, 8]": [10e-6, 5e-6, 5e-6, 5e-6, 5.5e-6]}
    for point, median, batch in (({"tile": [1, 1]}, 6.0e-6, "b"), ({"tile": [2, 8]}, 5.0e-6, "b")):
        at.append_record(path, {**common, "point": point, "median_s": median, "q1_s": median, "q3_s": median,
                                "batch": batch, "round_s": rounds[str(point["tile"])]})  # fmt: skip
    assert any(r.get("batch") == "b" for r in at.with_retimes(at.read_results(path)))
    (f,) = figures(at.read_results(path))
    assert f.best is not None and f.best["point"] == {"tile": [1, 8]} and f.pick_ratio == pytest.approx(1.5)
    assert f.rounds_best is not None and f.rounds_best["point"] == {"tile": [2, 8]}
    # Round by round: 12/10, 6/5, 6/5, 6/5, 5.5/5.5: the median 1.2.
    assert f.round_ratio == pytest.approx(1.2)
    code, out, err = run_cli(["rank", str(path)], capsys)
    assert code == 0, err
    assert "O in the pick's own rounds: 1.2× the best of them" in out
    assert "O round by round: the pick 1.2× each round's fastest (the median over its 5 rounds)" in out
    # A pick never timed again, or timed in rounds its line does not name (a file written before batches): none.
    (g,) = figures(lines)
    assert g.rounds_best is None
    old = hand_made(tmp_path / "old.jsonl")
    at.append_record(old, {**common, "point": {"tile": [1, 1]}, "median_s": 6e-6, "q1_s": 6e-6, "q3_s": 6e-6})
    (h,) = figures(at.read_results(old))
    assert h.pick is not None and h.pick["rounds"] == 5 and h.rounds_best is None and h.round_ratio is None


def test_a_tie_in_the_models_prices_goes_to_the_first_point_of_the_space_not_the_fastest_measured(
    tmp_path: Path,
) -> None:
    """Two points priced alike, the second in the space measured faster: the model's pick, the one timed
    again and the one `presk rank` judges, is the first, as `presk plan` would choose it."""
    common = {"machine": "m", "site": "f/%0", "shape_key": "k", "shape": "[i: 4]", "bits": "ok", "u": 0.1,
              "profile": None, "seconds": 0.5, "default": False}  # fmt: skip
    first, second, other = ({"tile": [1, 8], "kblock": kb} for kb in ("none", 32, 64))
    lines = [
        {**common, "point": first, "predicted_s": 2e-6, "median_s": 6.5e-6, "q1_s": 6.4e-6, "q3_s": 6.6e-6},
        {**common, "point": second, "predicted_s": 2e-6, "median_s": 5.0e-6, "q1_s": 4.9e-6, "q3_s": 5.1e-6},
        {**common, "point": other, "predicted_s": 3e-6, "median_s": 5.1e-6, "q1_s": 5.0e-6, "q3_s": 5.2e-6},
    ]
    # The space's order: first, second, other. `first` is beyond `FINALISTS` of the best: only as the pick is it
    # timed again (the measurements would have given the tie to `second`).
    assert 6.5e-6 > at.FINALISTS * 5.0e-6
    chosen = [r["point"] for r in at.finalists(lines, {point_key(p): i for i, p in enumerate([first, second, other])})]
    assert first in chosen and second in chosen and other in chosen
    assert at.model_pick(lines) == 0
    # A space that lists `second` first gives it the tie, whatever the file's order.
    assert at.model_pick(lines, {point_key(second): 0, point_key(first): 1, point_key(other): 2}) == 1
    # `presk rank` reads the space's order from the shape's prices line.
    prices = {"record": "prices", "machine": "m", "shape_key": "k", "points": 3, "seconds": 1.0}
    for n, (order, pick) in enumerate((([first, second, other], first), ([second, first, other], second))):
        path = tmp_path / f"r{n}.jsonl"
        records = [*lines, {**prices, "prices": {point_key(p): 2e-6 for p in order}}]
        path.write_text("".join(json.dumps(line) + "\n" for line in records))
        (f,) = figures(at.read_results(path))
        assert f.pick is not None and f.pick["point"] == pick
        assert f.pick_ratio == pytest.approx((6.5 if pick == first else 5.0) / 5.0)


def test_rank_judges_another_profile_on_the_files_measurements(
    tmp_path: Path, narrow: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`presk rank --profile`: the points a file measured, priced again from the nests it keeps, as autotune
    prices them; a file measured without a profile gets its figures so."""
    results = tmp_path / "r.jsonl"
    base = ["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=16", "--realize", "f32", "-o", str(results)]
    code, _, err = run_cli(base, capsys)
    assert code == 0, err
    (nest,) = [r for r in at.read_results(results) if r.get("record") == "nest"]
    assert {r["shape_key"] for r in points_of(results)} == {nest["shape_key"]} and nest["site"] == "gemm/%0"
    assert "psk_core.dot" in nest["module"] and nest["storage"] == "f32"
    code, out, err = run_cli(["rank", str(results)], capsys)
    assert code == 1 and "error: E4001: no measured point has a prediction: give --profile P.json" in err, err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, err = run_cli(["rank", str(empty)], capsys)
    assert code == 1 and f"error: E8001: {empty}: the results file holds no measured point" in err, err

    # The same command with a profile prices the space (measuring nothing) and keeps the nest line it had.
    profile = load_dominated(tmp_path / "p.json", u=0.1)
    code, out, err = run_cli([*base, "--profile", str(profile)], capsys)
    assert code == 0 and "0 points measured" in out, err
    records = at.read_results(results)
    assert sum(r.get("record") == "nest" for r in records) == 1
    (prices,) = [r for r in records if r.get("record") == "prices"]
    repriced = priced_under([(str(results), records)], str(profile))
    measured = [r for r in repriced.records if r.get("record", "point") == "point" and not r["default"]]
    assert len(measured) == FIRST == repriced.points and repriced.u == 0.1 and not repriced.other_machines
    for r in measured:  # what autotune priced, to the bit
        assert r["predicted_s"] == prices["prices"][point_key(r["point"])]
    # Lines that do not record their u (written before they did) take their profile's.
    (unrecorded,) = figures([{k: v for k, v in r.items() if k != "u"} for r in repriced.records])
    assert unrecorded.u == 0.1
    # A profile twice as slow: every prediction twice, the order and the pick the same.
    slower = load_dominated(tmp_path / "slow.json", u=0.1, slower=2.0)
    twice = priced_under([(str(results), records)], str(slower))
    doubled = [r for r in twice.records if r.get("record", "point") == "point" and not r["default"]]
    assert [r["predicted_s"] for r in doubled] == [2 * r["predicted_s"] for r in measured]
    (f,), (g,) = figures(repriced.records, repriced.u), figures(twice.records, twice.u)
    assert f.pick is not None and g.pick is not None and f.pick["point"] == g.pick["point"]
    assert f.spearman == g.spearman
    assert f.space_points == sum(v is not None for v in prices["prices"].values()) == FIRST  # the narrowed space
    # A space the file measured part of (candidates): the report says the figures are over that part.
    wider = [r if r.get("record") != "prices" else {**r, "prices": {**r["prices"], '{"tile": [9, 9]}': 1.0}}
             for r in repriced.records]  # fmt: skip
    (h,) = figures(wider, repriced.u)
    assert h.space_points == FIRST + 1
    assert f"the file measured {FIRST} of the space's {FIRST + 1} points: the figures are over those" in report([h])[1]
    code, out, err = run_cli(["rank", str(results), "--profile", str(slower), "--json"], capsys)
    assert code == 0, err
    (shape,) = json.loads(out)
    assert shape["pick"]["predicted_s"] == g.pick["predicted_s"] and shape["u"] == 0.1
    assert f"predictions of {slower} (u = 0.1): {FIRST} points priced here" in err

    # The profile's own pick over the whole space: priced with --whole-space, and said when it was not measured.
    assert f.space_pick is None  # the prices line still holds the file's profile's prices
    whole = priced_under([(str(results), records)], str(slower), whole_space=True)
    assert whole.space_points == FIRST
    (w,) = figures(whole.records, whole.u)
    assert w.space_pick is not None and w.space_pick["measured"] and w.space_pick["point"] == g.pick["point"]
    assert w.space_pick["predicted_s"] == 2 * min(v for v in prices["prices"].values() if v is not None)
    unmeasured = [r for r in records if r.get("record", "point") != "point" or r["point"] != g.pick["point"]]
    (v,) = figures(priced_under([(str(results), unmeasured)], str(slower), whole_space=True).records, 0.1)
    assert v.space_pick is not None and not v.space_pick["measured"] and v.pick is not None
    assert v.pick["point"] != g.pick["point"] and "was not measured: O is over the measured points" in "".join(report([v]))
    code, out, err = run_cli(["rank", str(results), "--whole-space"], capsys)
    assert code == 1 and "--whole-space goes with --profile" in err

    # Several profiles side by side: a table per shape, a row per profile, then the figures pooled.
    code, out, err = run_cli(["rank", str(results), "--profile", str(profile), "--profile", str(slower)], capsys)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert rows[1].startswith(f"| {profile} | 0.1 | ") and rows[2].startswith(f"| {slower} | 0.1 | ")
    assert rows[1].split(" | ")[2:] == rows[2].split(" | ")[2:]  # twice as slow orders alike
    pooled_rows = out[out.index("all shapes:"):out.index("by decision")].splitlines()
    assert pooled_rows[-2].startswith(f"| {slower} | 1 | ")
    # The decision table, a pair of columns per profile: alike too.
    header, _, *decisions = out[out.index("| decision |"):].splitlines()
    assert header == f"| decision | {profile}: right | tied | {slower}: right | tied |"
    assert decisions[-1].startswith("| every pair |") and all(
        row.strip("| ").split(" | ")[1:3] == row.strip("| ").split(" | ")[3:5] for row in decisions)  # fmt: skip
    code, out, err = run_cli(["rank", str(results), "--profile", str(profile), "--profile", str(slower), "--json"],
                             capsys)  # fmt: skip
    assert code == 0, err
    both = json.loads(out)
    assert [b["profile"] for b in both] == [str(profile), str(slower)] and both[0]["pooled"] == both[1]["pooled"]
    assert both[0]["pooled"]["pairs"]["distinguished"] == f.distinguished and both[0]["pooled"]["shapes"] == 1
    code, _, err = run_cli(["rank", str(results), "--profile", str(profile), "--profile", str(slower), "--plot",
                            str(tmp_path / "x.png")], capsys)  # fmt: skip
    assert code == 1 and "--plot draws one model's predictions" in err
    code, out, err = run_cli(["rank", str(results), "--profile", str(profile), "--plot", "/no/folder/r.png"], capsys)
    assert code == 1 and "E0001: cannot write /no/folder/r.png" in err and out == "", "refused before pricing"

    # Points predicted by two profiles (a second --candidates run under another) do not rank together.
    mixed = tmp_path / "mixed.jsonl"
    lines = repriced.records
    first = next(i for i, r in enumerate(lines) if r.get("record", "point") == "point" and not r["default"])
    mixed.write_text("".join(json.dumps({**r, "profile": str(slower)} if i == first else r) + "\n"
                             for i, r in enumerate(lines)))  # fmt: skip
    code, _, err = run_cli(["rank", str(mixed)], capsys)
    assert code == 1 and "E4001" in err and "predicted by 2 profiles" in err and "presk rank --profile" in err
    code, out, err = run_cli(["rank", str(mixed), "--profile", str(profile)], capsys)
    assert code == 0 and f"{FIRST} points, u = 0.1" in out, err

    # Errors: a file from before the nest lines, a file of another machine, a missing profile.
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in records if r.get("record") != "nest"))
    code, _, err = run_cli(["rank", str(old), "--profile", str(profile)], capsys)
    assert code == 1 and "E8001" in err and "no nest line for gemm/%0" in err and "measures nothing again" in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps({**r, "module": "builtin.module { nonsense"} if r.get("record") == "nest"
                                         else r) + "\n" for r in records))  # fmt: skip
    code, _, err = run_cli(["rank", str(broken), "--profile", str(profile)], capsys)
    assert code == 1 and "E8001" in err and "not a nest presk can rebuild" in err and "Traceback" not in err
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({**r, "machine": "x86_64|zen9|avx9"} if "machine" in r else r) + "\n"
                             for r in records))  # fmt: skip
    code, _, err = run_cli(["rank", str(other), "--profile", str(profile)], capsys)
    assert code == 1 and "E4001" in err and "measured on zen9" in err and "Traceback" not in err
    code, _, err = run_cli(["rank", str(results), "--profile", str(tmp_path / "missing.json")], capsys)
    assert code == 1 and "E0001" in err and "Traceback" not in err
    # Priced on other workers than it was measured on, a split point would be priced for another machine.
    assert nest["workers"] == target_machine().workers()
    monkeypatch.setenv("PRESK_THREADS", str(nest["workers"] + 1))
    code, _, err = run_cli(["rank", str(results), "--profile", str(profile)], capsys)
    assert code == 1 and f"set PRESK_THREADS={nest['workers']}" in err


# --------------------------------------------------------------------------
# Errors.


def corrupt_files(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n{}\n")
    yield bad, f"{bad}:1"
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"machine": "m"}\n')
    yield odd, f"{odd}:1"


def test_a_corrupt_results_file_is_an_e8001_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path, where in corrupt_files(tmp_path):
        with pytest.raises(PreskError) as caught:
            at.read_results(path)
        assert caught.value.code == "E8001" and where in caught.value.message
        code, _, err = run_cli(["rank", str(path)], capsys)
        assert code == 1 and "E8001" in err and where in err and "Traceback" not in err
        code, _, err = run_cli(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "-o", str(path)], capsys)
        assert code == 1 and "E8001" in err and where in err


def test_errors_are_diagnostics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["autotune", str(GEMM), "--dim", "N=8", "-o", str(tmp_path / "r.jsonl")]
    code, _, err = run_cli([*base, "--entry", "nope"], capsys)
    assert code == 1 and "E4004" in err and "Traceback" not in err
    code, _, err = run_cli([*base, "--entry", "gemm", "--candidates"], capsys)
    assert code == 1 and "E4001" in err and "--profile" in err
    code, _, err = run_cli([*base, "--entry", "gemm", "--nests", "gemm/%7"], capsys)
    assert code == 1 and "E4001" in err and "gemm/%0" in err
    code, _, err = run_cli(["rank", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 1 and "E0001" in err
    # A plan that could not be written at the end is refused before a point is measured.
    code, _, err = run_cli([*base, "--entry", "gemm", "--plan-out", str(tmp_path / "no" / "plan.json")], capsys)
    assert code == 1 and "E0001" in err and "is not a writable directory" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_a_nest_is_timed_without_the_launch_of_the_mask_it_computes() -> None:
    """The isolated causal softmax launches `causal_mask` too (the program computes the mask); only the
    softmax's own launches are timed, as only they are priced. The mask's launch is slowed by 50 ms
    here, so the figure shows which launches it counts."""
    from test_plan_static import softmax_nest

    from presk.interp.inputs import make_inputs
    from presk.ir.calls import find_entry
    from presk.jit.executor import flatten_inputs
    from presk.jit.native import NativeRunner
    from presk.tuning.plan import launched_kernels

    ((masked, _),) = softmax_nest("scaled").shapes
    kernels = at.lower_point(masked, {"passes": 3})
    own = {k.sym_name.data for k, _ in launched_kernels(kernels, site=masked.name)}
    assert len(launched_kernels(kernels)) == len(own) + 1
    leaves = flatten_inputs(make_inputs(find_entry(masked.module, at.ISOLATED_FUNCTION), {}, 0))
    with NativeRunner() as native:

        def runner(kernel: Any) -> Any:
            call = native(kernel)
            if kernel.sym_name.data in own:
                return call

            def slowed(arrays: Any) -> None:
                time.sleep(0.05)
                call(arrays)

            return slowed

        alone = at.measure(kernels, leaves, runner, min_calls=3, min_seconds=0, site=masked.name)
        everything = at.measure(kernels, leaves, runner, min_calls=3, min_seconds=0)
    assert alone.median_s < 0.05 <= everything.median_s


def test_the_finalists_are_timed_again_in_interleaved_rounds(
    tmp_path: Path, narrow: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every measured point a finalist here (`FINALISTS` unbounded): each is timed again once a round, the order
    rotating, and the plan, the outcome and `presk rank` read the retimed medians; a second run with nothing new
    measured times nothing again."""
    monkeypatch.setattr(at, "FINALISTS", float("inf"))
    windows: list[int] = []
    window = at.TimedProgram.window

    def noted(self: at.TimedProgram, *args: Any, **kwargs: Any) -> list[float]:
        windows.append(id(self))
        return window(self, *args, **kwargs)

    monkeypatch.setattr(at.TimedProgram, "window", noted)
    module, env = gemm(32)
    results = tmp_path / "r.jsonl"
    result = at.autotune(module, "gemm", env, "f32", str(results))
    records = at.read_results(results)
    points = [r for r in records if r.get("record", "point") == "point" and not r["default"] and r["bits"] == "ok"]
    again = [r for r in records if r.get("record") == "retime"]
    assert len(points) == FIRST and len(again) == FIRST
    assert {point_key(r["point"]) for r in again} == {point_key(r["point"]) for r in points}
    assert all(r["rounds"] == at.RETIME_ROUNDS and 0 < r["q1_s"] <= r["median_s"] <= r["q3_s"] for r in again)
    # One batch of rounds, each line its median in each round.
    assert len({r["batch"] for r in again}) == 1
    assert all(len(r["round_s"]) == at.RETIME_ROUNDS and r["median_s"] == np.median(r["round_s"]) for r in again)
    # The retime's windows: FIRST a round, each program once a round, each round starting one further on.
    retime_windows = windows[-FIRST * at.RETIME_ROUNDS :]
    programs = list(dict.fromkeys(retime_windows))
    assert len(programs) == FIRST
    for round_ in range(at.RETIME_ROUNDS):
        turn = retime_windows[round_ * FIRST : (round_ + 1) * FIRST]
        assert turn == programs[round_:] + programs[:round_]
    # What the outcome and the figures read: the retimed medians.
    overlaid = {point_key(r["point"]): r for r in at.with_retimes(records) if r.get("record", "point") == "point"}
    retimed = {point_key(r["point"]): r["median_s"] for r in again}
    assert all(overlaid[k]["median_s"] == t and overlaid[k]["rounds"] == at.RETIME_ROUNDS for k, t in retimed.items())
    (outcome,) = result.outcomes
    default = next(r for r in records if r.get("record", "point") == "point" and r["default"])
    assert outcome.best_s == min([*retimed.values(), default["median_s"]])
    assert all(r["seconds"] > 0 and overlaid[point_key(r["point"])]["retime_s"] == r["seconds"] for r in again)
    again_lines = len(again)
    at.autotune(module, "gemm", env, "f32", str(results))
    assert sum(1 for r in at.read_results(results) if r.get("record") == "retime") == again_lines
