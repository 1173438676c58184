"""The calibration spaces and their measurement (`presk.tuning.calibration`).

What is asserted: a space holds the kinds of points it promises (register
tiles the target's registers hold, one lane and the widest, one worker and
all, k-blocks), a point is measured into one sample per kernel with its
terms under every rule set, and an interrupted calibration keeps every point
it finished and resumes from the next.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from presk.cost.profile import Profile, append_samples, load_profile, save_profile
from presk.cost.terms import RULES, MachineDesc
from presk.diagnostics import PreskError
from presk.jit.native import NativeRunner
from presk.dialects.psk_realize_layout import tile_registers
from presk.target import target_machine
from presk.tuning import calibration
from presk.tuning.calibration import Point, Progress, measure_point, parse_budget, rule_sets, run_space, space


@pytest.fixture(scope="module")
def runner() -> NativeRunner:
    return NativeRunner()


def _gemm_points(points: list[Point], dtype: str) -> list[Point]:
    return [p for p in points if p.entry == "gemm" and p.dtype == dtype]


def _gemm_layouts(points: list[Point], dtype: str) -> list[dict]:
    return [calibration._thaw(dict(p.layout)) for p in _gemm_points(points, dtype)]


@pytest.mark.target
@pytest.mark.parametrize("kind", ["calib", "calib-small"])
def test_a_space_holds_register_tiles_every_lane_width_and_both_worker_counts(kind: str) -> None:
    machine = target_machine()
    points = space(kind, machine)
    assert len({p.key for p in points}) == len(points), "every point is measured once"
    for dtype in ("f32", "f64"):
        layouts = _gemm_layouts(points, dtype)
        widest = machine.register_width(dtype)
        assert {lay["lanes"] for lay in layouts} == {1, *machine.lane_widths(dtype)}
        vector_tiles = {tuple(lay["tile"]) for lay in layouts if lay["lanes"] == widest}
        # Every vector tile holds in the registers, and the largest is a micro-kernel of at least 8 accumulators.
        assert all(tile_registers(tile, widest) <= machine.vector_registers for tile in vector_tiles)
        assert max(m * n // widest for m, n in vector_tiles) >= 8
        splits = {str(lay["split"]) for lay in layouts}
        assert "none" in splits
        if machine.workers() > 1:
            assert any(str(machine.workers()) in s for s in splits if s != "none")
        assert {lay["kblock"] for lay in layouts} >= {"none", 32}
        # Tiles of one and two chains, and the scalar tile, at a K long enough to show the FMA's latency.
        few = {(tuple(lay["tile"]), lay["lanes"]) for lay, p in zip(layouts, _gemm_points(points, dtype))
               if dict(p.sizes)["K"] == calibration.FEW_CHAINS_SIDE}  # fmt: skip
        assert {((1, 1), 1), ((1, widest), widest), ((1, widest), 1), ((2, widest), widest)} <= few
    assert {p.entry for p in points} == {"gemm", "chain", "exp", "rowsum", "softmax", "mask"}
    assert {p.dtype for p in points} == {"f32", "f64", "bf16"}


@pytest.mark.parametrize("kind", ["calib", "calib-small"])
def test_a_space_holds_a_product_whose_column_block_spans_more_pages_than_a_tlb(kind: str) -> None:
    # What identifies the page walks' rate (docs/cost.md §6.14): operand 1's rows a page or more apart in f32
    # (J · 4 ≥ 4 096 bytes) over more rows K than this AMD's TLB holds pages (2 560), read in place.
    thin = calibration.SPACES[kind].thin
    assert any(k > 2560 and 4 * j >= 4096 for _, k, j in thin), thin
    sizes = {tuple(sorted(dict(p.sizes).items())) for p in space(kind, target_machine()) if p.entry == "gemm"}
    assert any(dict(s)["K"] > 2560 and 4 * dict(s)["J"] >= 4096 for s in sizes)


def test_the_full_space_reaches_memory_and_the_thin_products() -> None:
    points = space("calib", target_machine())
    gemm_sizes = {tuple(sorted(dict(p.sizes).items())) for p in points if p.entry == "gemm"}
    assert (("I", 16), ("J", 4096), ("K", 4096)) in gemm_sizes
    assert (("I", 4096), ("J", 16), ("K", 4096)) in gemm_sizes
    assert (("I", 2048), ("J", 2048), ("K", 2048)) in gemm_sizes
    # The largest elementwise buffer, 2^23 elements of f64: 64 MiB, beyond any L3 of the machines presk targets.
    largest = max(dict(p.sizes)["R"] * dict(p.sizes)["M"] for p in points if p.entry == "chain")
    assert largest == 1 << 23


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_few_row_tiles_take_every_order_up_to_1024_and_the_small_space_s_beyond(dtype: str) -> None:
    points = _gemm_points(space("calib", target_machine()), dtype)

    def orders(side: int, few_rows: bool) -> set[tuple[object, str]]:
        layouts = [calibration._thaw(dict(p.layout)) for p in points if set(dict(p.sizes).values()) == {side}]
        return {(lay["kblock"], lay["order"]) for lay in layouts if (lay["tile"][0] < calibration.FEW_ROWS) == few_rows}

    assert orders(2048, few_rows=True) == set(calibration._ORDERS_SMALL)
    assert orders(2048, few_rows=False) == orders(1024, few_rows=True) == set(calibration._ORDERS_FULL)


def test_an_unknown_space_is_refused() -> None:
    with pytest.raises(PreskError) as info:
        space("huge", target_machine())
    assert info.value.code == "E4001" and "calib-small" in info.value.message


def test_rule_sets_are_every_subset_of_the_rules() -> None:
    sets = rule_sets()
    assert len(sets) == len(set(sets)) == 2 ** len(RULES) == 16
    assert sets[0] == "" and "lines,overhead" in sets and "lines,overhead,sets,shared" in sets


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("20m", 1200.0), ("1.5h", 5400.0), ("45", 45.0)])
def test_budgets(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-3m", "0s", "m"])
def test_a_bad_budget_is_refused(text: str) -> None:
    with pytest.raises(PreskError) as info:
        parse_budget(text)
    assert info.value.code == "E4001"


def test_a_point_gives_one_sample_per_kernel_with_its_terms_under_every_rule_set(runner: NativeRunner) -> None:
    point = calibration._point("gemm", {"I": 8, "K": 8, "J": 8}, "f64", {"tile": [1, 4], "lanes": 1, "pack": True})
    samples = measure_point(point, runner, MachineDesc.of(target_machine()))
    by_kernel = {s.extra["kernel"]: s for s in samples}
    assert set(by_kernel) == {"pack", "dot"}
    dot = by_kernel["dot"]
    assert set(dot.terms) == set(rule_sets())
    # 8·8·8 multiply-adds of 2 operations each, whatever the rules but `overhead`.
    assert dot.terms[""].work == 2 * 8**3 == dot.terms["lines,shared"].work
    assert dot.terms["overhead"].work > dot.terms[""].work
    assert dot.seconds > 0 and dot.quartiles[0] <= dot.seconds <= dot.quartiles[1]
    assert dot.extra["key"] == point.key and dot.extra["workers"] == 1 and dot.extra["launches"] == 1


def test_a_refused_layout_is_counted_and_skipped(runner: NativeRunner) -> None:
    refused = calibration._point("gemm", {"I": 8, "K": 8, "J": 8}, "f64", {"tile": [1, 32]})
    fine = calibration._point("gemm", {"I": 8, "K": 8, "J": 8}, "f64", {"tile": [1, 4], "lanes": 1})
    recorded: list = []
    measured, refused_count, stopped = run_space(
        [refused, fine], set(), runner, MachineDesc.of(target_machine()), recorded.extend, Progress(2)
    )
    assert (measured, refused_count, stopped) == (1, 1, False)
    assert [s.extra["key"] for s in recorded] == [fine.key]


def test_an_interrupted_calibration_keeps_its_points_and_resumes(
    tmp_path: Path, runner: NativeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "P.json"
    machine = target_machine()
    save_profile(Profile(machine.key(), MachineDesc.of(machine)), path)
    points = [calibration._point("chain", {"R": 4 * n, "M": 8}, "f64", {"split": "none"}) for n in range(1, 5)]
    measure = calibration.measure_point

    def interrupted_at_the_third(point: Point, *args: object, **kwargs: object) -> list:
        if point is points[2]:
            raise KeyboardInterrupt
        return measure(point, *args, **kwargs)

    monkeypatch.setattr(calibration, "measure_point", interrupted_at_the_third)
    desc = MachineDesc.of(machine)
    with pytest.raises(KeyboardInterrupt):
        run_space(points, set(), runner, desc, lambda s: append_samples(path, s), Progress(4))
    kept = {s.extra["key"] for s in load_profile(path).samples}
    assert kept == {points[0].key, points[1].key}

    monkeypatch.setattr(calibration, "measure_point", measure)
    measured_now: list[str] = []

    def record(samples: list) -> None:
        measured_now.extend(s.extra["key"] for s in samples)
        append_samples(path, samples)

    assert run_space(points, kept, runner, desc, record, Progress(4)) == (2, 0, False)
    assert measured_now == [points[2].key, points[3].key]
    assert len(load_profile(path).samples) == 4


def test_a_budget_stops_before_the_next_point(runner: NativeRunner) -> None:
    points = [calibration._point("exp", {"R": 4, "M": 8}, "f64", {"split": "none"})] * 3
    progress = Progress(3, budget_s=1e-9)
    recorded: list = []
    assert run_space(points, set(), runner, MachineDesc.of(target_machine()), recorded.extend, progress) == (0, 0, True)
    assert recorded == []


def test_progress_in_a_log_is_a_line_a_minute() -> None:
    """No terminal (a log, a CI job): no carriage returns, nothing in the first minute, then one whole line
    at most every `PLAIN_PROGRESS_EVERY_S` with the count and the ETA."""
    import io

    log = io.StringIO()
    progress = Progress(40, stream=log)
    progress.step()
    assert log.getvalue() == ""  # a run of seconds says nothing
    progress.start -= calibration.PLAIN_PROGRESS_EVERY_S  # a minute has gone by
    progress.step()
    progress.step()  # the next line waits another minute
    (line,) = log.getvalue().splitlines()
    assert re.fullmatch(r"calibrating: 2/40 \(5 %\), 1:00 elapsed, ETA 19:00", line), line
    assert "\r" not in log.getvalue()
    progress.last_plain -= calibration.PLAIN_PROGRESS_EVERY_S
    progress.step()
    assert log.getvalue().splitlines()[-1].startswith("calibrating: 4/40 (10 %), 1:00 elapsed, ETA ")


def test_repricing_reads_the_terms_again_against_an_edited_machine(tmp_path: Path, runner: NativeRunner) -> None:
    """`presk refit --relower`: the measured times stay, the terms follow the edited machine description."""
    from dataclasses import replace

    from presk.cost.profile import Sample
    from presk.target import CacheLevel
    from presk.tuning.calibration import reprice

    desc = MachineDesc.of(target_machine())
    point = calibration._point("gemm", {"I": 32, "K": 32, "J": 32}, "f64", {"tile": [1, 4], "lanes": 1})
    samples = measure_point(point, runner, desc)
    entry_sample = Sample(samples[0].terms, 1e-3, None, 7, {"key": "corpus/mlp.mlir:mse:[]", "kernel": "dot"})
    # An L1 of 512 bytes: no operand row of 32 f64 fits it with another, so L2 serves far more.
    tiny = replace(desc, caches=(CacheLevel(1, 512, 64, 1), *desc.caches[1:]))
    repriced, kept = reprice([*samples, entry_sample], tiny)
    assert kept == 1 and repriced[-1] is entry_sample
    dot_before = next(s for s in samples if s.extra["kernel"] == "dot")
    dot_after = next(s for s in repriced if s.extra["kernel"] == "dot")
    assert dot_after.seconds == dot_before.seconds and dot_after.extra == dot_before.extra
    assert dot_after.terms[""].q_l2 > dot_before.terms[""].q_l2
    assert dot_after.terms[""].work == dot_before.terms[""].work
    # Against the description it was measured with, repricing gives the same terms.
    same, _ = reprice(samples, desc)
    assert [s.terms for s in same] == [s.terms for s in samples]
