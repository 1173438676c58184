"""`presk rank`: the model's predictions against the measured times of a `presk autotune` results file.

A choice needs a model that orders points the way the machine does, not one
that predicts their times: so the figures are about order. Per nest shape
(the file's unit: nests of equal shapes were measured once), over the
points that have a prediction, were measured with the default's bits, and
are not the default layout itself (a duplicate of one of them):

* **Spearman** between predicted and measured times.
* **Pairs**: a pair of points is *distinguished* by the measurement when
  their medians differ by more than the run-to-run noise. That noise is
  measured where the file can show it, in the rounds of the points timed
  again (`run_to_run_noise`: the median factor between two rounds of one
  point), and taken as at least `DISTINCT` (3 %); a shape without such
  rounds falls back to its medians differing by more than `DISTINCT` or
  their quartile ranges (the calls of one window) not overlapping. On a
  shared host two windows of one point differ by far more than the calls
  of one window do, and a pair inside that noise is ordered by chance,
  whoever orders it. The share of distinguished pairs the model orders the
  same way (a predicted tie is not right). *Decided* pairs are those whose
  predicted times differ by more than 1 + u (the profile's median relative
  error): the pairs the model claims to know; their share right. *Tied*
  pairs are predicted exactly equal: the model cannot tell them apart.
* **By decision**: the distinguished pairs whose two points differ in one
  decision alone (the tile, the split, the lanes, the loop order, the
  k-block, the pack, the passes, ...), the others equal: the share of each
  decision's pairs ordered right, and tied. What a decision costs the model
  shows there, apart from the pairs that differ in several at once.
* **O**, the pick's measured time over the best measured one: what choosing
  by the model costs.
* **Q**, whether the candidates (predicted within 1 + u of the model's
  best) hold a point within `DISTINCT` of the best measured one: whether
  measuring only the candidates would have found the best. A file measured
  with `--candidates` holds only candidates, and Q holds trivially there.
  And what that hybrid choice costs against the sweep (the goal is 5 % at
  most): the static pricing plus the candidates' measurement, over
  the whole space's sweep estimated as for N.
* **N**, what each choice cost: the static one, its points priced (the
  `"prices"` lines' seconds), against the sweep's, its points measured
  (their lines' seconds, and the finalists' timing again), and the whole
  space's sweep extrapolated two ways: every point at the measured points'
  mean seconds (`sweep_estimate`), and each point at what measuring it
  would take given its predicted time (`sweep_by_prediction`). The first
  undercounts where the file measured candidates, the fast points: a slow
  point's window is its calls, three of them at least.
* **Halide's ordering rate** (Adams et al. 2019): of the points more than
  1.3× slower than the best measured one, the share the model predicts
  slower than its prediction of that best.

The predictions are those the file recorded (the profile `presk autotune
--profile` priced with), or another profile's (`priced_under`, `presk rank
--profile`): each measured point priced again statically on this host from
the nest the file keeps, so that a model fitted after the measurement, or
on other samples, is judged on times it never saw, without measuring again.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from presk.cost.fit import spearman
from presk.cost.profile import load_profile
from presk.diagnostics import PreskError
from presk.plots import png_figure
from presk.dialects.psk_realize_layout import DECISIONS
from presk.target import cpu_of_key, target_machine
from presk.tuning import calibration
from presk.tuning.autotune import model_pick, with_retimes
from presk.tuning.calibration import MIN_CALLS, Progress
from presk.tuning.plan import Nest, isolated_from_record, price_ahead, profile_pricer, unpriced
from presk.tuning.space import Point, point_key

__all__ = ["DISTINCT", "HALIDE_SLOWER", "NestFigures", "PairCount", "Repriced", "as_json", "by_decision",
           "decision_table", "figures", "plot", "pooled", "priced_under", "report", "run_to_run_noise",
           "side_by_side"]  # fmt: skip

DISTINCT = 1.03
HALIDE_SLOWER = 1.3
DECISION_NAMES = {"kblock": "k-block", "jblock": "J-block"}
_PAIR_BLOCK = 256
"""Rows of the pair matrix counted at once: memory a block × points × decisions, whatever the space's size."""
_PAIR_TOTALS = ("distinguished", "right", "decided", "decided_right", "tied")
"""`_pairs`' counts, in the order it sums them."""


@dataclass(frozen=True)
class PairCount:
    """Distinguished pairs of one kind: how many, how many the model orders right, how many it predicts equal."""

    pairs: int = 0
    right: int = 0
    tied: int = 0

    def __add__(self, other: PairCount) -> PairCount:
        return PairCount(self.pairs + other.pairs, self.right + other.right, self.tied + other.tied)

    def to_json(self) -> dict[str, int]:
        return {"pairs": self.pairs, "right": self.right, "tied": self.tied}


@dataclass
class NestFigures:
    """The ranking figures of one nest shape (see the module docstring)."""

    machine: str
    shape_key: str
    site: str
    shape: str
    u: float
    points: list[dict[str, Any]]
    spearman: float
    distinguished: int
    right: int
    decided: int
    decided_right: int
    tied: int
    by_decision: dict[str, PairCount]
    """The distinguished pairs that differ in one decision alone, by that decision (`DECISIONS`)."""
    pick: dict[str, Any] | None
    best: dict[str, Any] | None
    pick_ratio: float | None
    q_holds: bool | None
    only_candidates: bool
    slower: int
    slower_behind: int
    priced_points: int = 0
    priced_seconds: float = 0.0
    measured_seconds: float = 0.0
    candidates: int = 0
    """The measured points predicted within 1 + u of the pick: what the hybrid chooser (statement Q) measures."""
    candidates_seconds: float = 0.0
    """What measuring them cost (their lines' seconds)."""
    retimed: int = 0
    """Points timed again with the shape's other finalists (`presk.tuning.autotune.retime`), and what it cost:
    part of what choosing by measurement cost, not of a point's measurement (the sweep's estimate)."""
    retimed_seconds: float = 0.0
    rounds_best: dict[str, Any] | None = None
    """The best of the points timed in the same rounds as the pick (`"batch"`), when the pick was timed again:
    O against it compares times taken side by side, which a best from another hour of a shared host may not."""
    noise: float | None = None
    """The run-to-run noise the pairs were judged against (`run_to_run_noise`, at least `DISTINCT`), and
    `noise_points` the points timed in rounds it was read from; None where no point was (the fallback rule)."""
    noise_points: int = 0
    round_ratio: float | None = None
    """Round by round, the pick's time over the fastest of that round, the median over the rounds (`"round_s"`):
    a slow phase of the host that spans a round slows the pick and the round's best alike and cancels here."""
    default: dict[str, Any] | None = None
    other_sites: list[str] = field(default_factory=list)
    space_points: int = 0
    """The legal points of the shape's space, as its prices line priced them (0: the file has no prices line)."""
    sweep_by_prediction: float | None = None
    """The seconds measuring every priced point would take: for each, the measured points' median seconds
    beyond their windows (lowering, compiling, the bit check), plus the window (`_window`) of its predicted
    time scaled by the measured points' median measured/predicted; None where the prices line does not hold
    the predictions judged."""
    space_pick: dict[str, Any] | None = None
    """The model's own pick over the whole space (`"point"`, `"predicted_s"`, whether `"measured"`), where the
    prices line holds the predictions judged; None where it does not (`priced_under` without `whole_space`)."""

    @property
    def own_rounds_ratio(self) -> float | None:
        """O against the best of the pick's own rounds (`rounds_best`), or None where there are none."""
        if self.rounds_best is None or self.pick is None:
            return None
        return float(self.pick["median_s"] / self.rounds_best["median_s"])

    @property
    def sweep_estimate(self) -> float | None:
        """The seconds measuring every priced point would take, at this file's mean seconds a point."""
        if not self.priced_points or not self.points:
            return None
        return self.priced_points * self.measured_seconds / len(self.points)

    @property
    def hybrid_seconds(self) -> float:
        """What the hybrid chooser costs: the static pricing, then the candidates measured (statement Q's cost)."""
        return self.priced_seconds + self.candidates_seconds


def _u_of(lines: Sequence[Mapping[str, Any]], override: float | None, cache: dict[str, float]) -> float:
    if override is not None:
        return override
    for r in lines:
        if isinstance(r.get("u"), (int, float)):
            return float(r["u"])
    for r in lines:
        path = r.get("profile")
        if isinstance(path, str):
            if path not in cache:
                try:
                    cache[path] = load_profile(path).u or 0.0
                except PreskError:
                    continue
            return cache[path]
    raise PreskError("E4001", f"nest {lines[0].get('site')}: the file names no profile whose u it could read: give --u")


@dataclass
class Repriced:
    """A results file's lines with every measured point's prediction under another profile (`priced_under`)."""

    records: list[dict[str, Any]]
    u: float
    """That profile's median relative error."""
    points: int
    """Points priced."""
    seconds: float
    refused: int = 0
    """Points the profile's lowering refused (no prediction: left out of the figures)."""
    other_machines: list[str] = field(default_factory=list)
    """The CPUs of the lines left out: measured on another machine than this host."""
    space_points: int = 0
    """Points of the shapes' spaces priced besides (`whole_space`)."""


def priced_under(files: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], profile_path: str,
                 err: TextIO | None = None, whole_space: bool = False) -> Repriced:  # fmt: skip
    """The lines of results files (each with its name) with each measured point of this host's machine priced
    by `profile_path`'s layout model.

    A point is priced as `presk plan` prices it, on this host's target, from
    the isolated nest its file keeps for its shape (`"record": "nest"`), so
    the program is not needed; the terms go to the presk cache, and a second
    call under a profile of the same description and rules lowers nothing.
    Lines measured on another machine are left out (their kernels are not
    this target's): `other_machines` names them. The points are priced on the
    workers they were measured on, which the nest lines state: a process on
    another `PRESK_THREADS` is refused. The errors name the file.

    With `whole_space`, every point of each shape's space (its `"prices"`
    line's, in its order) is priced too and the line's prices replaced, so
    the figures can say whether the profile's own pick, the one `presk plan`
    would make, was measured. Otherwise those lines keep the file's
    profile's prices, marked `"stale"`: their order is the space's, their
    values not the predictions judged.
    """
    err = err or sys.stderr
    profile = load_profile(profile_path)
    u = profile.u if profile.u is not None else 0.0
    machine = target_machine()
    here = machine.key()
    if profile.machine and profile.machine != here:
        err.write(f"presk rank: warning: {profile_path} was measured on another machine "
                  f"({cpu_of_key(profile.machine)}); its predictions are compared with this one's times\n")  # fmt: skip
    workers = machine.workers()
    described: dict[str, Mapping[str, Any]] = {}
    origin: dict[str, str] = {}  # the file of each shape's nest line, for its errors
    mine: list[dict[str, Any]] = []
    todo: list[dict[str, Any]] = []
    other: set[str] = set()
    for where, records in files:
        nests = {r["shape_key"]: r for r in records if r.get("record") == "nest"}
        lines = [dict(r) for r in records if r.get("machine", here) == here]
        others = sorted({cpu_of_key(str(r["machine"])) for r in records if r.get("machine", here) != here})
        points = [r for r in lines if r.get("record", "point") == "point" and not r.get("default") and r["bits"] == "ok"]
        if not points:
            raise PreskError("E4001", f"{where}: no point measured on this machine to price"
                             + (f" (the file's points were measured on {', '.join(others)})" if others else ""))  # fmt: skip
        missing = sorted({(r["site"], r["shape_key"]) for r in points if r["shape_key"] not in nests})
        if missing:
            site, key = missing[0]
            raise PreskError("E8001", f"{where}: no nest line for {site} (shape {key}), and {len(missing) - 1} more: "
                             "the file was written before presk autotune kept its nests; the same presk autotune "
                             "command adds them and measures nothing again")  # fmt: skip
        other_workers = sorted({int(nests[r["shape_key"]].get("workers", workers)) for r in points} - {workers})
        if other_workers:
            raise PreskError("E4001", f"{where} was measured on {other_workers[0]} workers, and this process would "
                             f"price on {workers}: set PRESK_THREADS={other_workers[0]} to price as it measured")  # fmt: skip
        for key, nest in nests.items():
            if key not in described:
                described[key], origin[key] = nest, where
        mine += lines
        todo += points
        other.update(others)
    spaces: dict[str, dict[str, Any]] = {}
    measured_shapes = {r["shape_key"] for r in todo}
    for r in mine:
        if r.get("record") != "prices":
            continue
        if whole_space and r["shape_key"] in measured_shapes and r["shape_key"] not in spaces:
            spaces[r["shape_key"]] = r
        else:
            r["stale"] = True
    # Every point to price, by shape (the measured ones, then the spaces'), priced ahead as presk plan prices.
    wanted: dict[str, list[Point]] = {}
    for r in todo:
        wanted.setdefault(r["shape_key"], []).append(r["point"])
    for key, line in spaces.items():
        wanted.setdefault(key, []).extend(json.loads(p) for p, v in line["prices"].items() if v is not None)
    isolated = {key: isolated_from_record(described[key], f"{origin[key]}: the nest of {described[key]['site']}")
                for key in wanted}  # fmt: skip
    shapes = [Nest(described[key]["site"], "", [(isolated[key], 1)]) for key in wanted]
    legal: list[tuple[list[Point], dict[str, int]]] = [(points, {}) for points in wanted.values()]
    pricer = profile_pricer(profile, profile_path, machine, keep_terms=True)
    start = time.perf_counter()
    left = unpriced(shapes, legal, pricer)
    progress = Progress(len(left), label="pricing", stream=err)

    def price(key: str, point: Point, site: str) -> float | None:
        iso = isolated[key]
        priced = (iso.key, point_key(point))
        if priced in left:  # not priced ahead: priced here, one by one
            left.discard(priced)
            progress.step(site)
        try:
            value = pricer.price(iso, point)
        except PreskError as error:  # a group the profile has no constants for: say where
            raise PreskError(error.code, f"nest \"{site}\" ({iso.describe()}), layout {json.dumps(point)}: "
                             f"{error.message}") from None  # fmt: skip
        return value if isinstance(value, float) else None

    refused = 0
    try:
        left = price_ahead(shapes, legal, left, pricer, progress)
        for r in todo:
            value = price(r["shape_key"], r["point"], r["site"])
            refused += value is None
            r.update(predicted_s=value, profile=profile_path, u=u)
        for key, line in spaces.items():
            line["prices"] = {p: None if v is None else price(key, json.loads(p), str(line.get("site", "")))
                              for p, v in line["prices"].items()}  # fmt: skip
    finally:  # what was lowered is kept, even when Ctrl-C stops the pricing
        progress.close()
        if pricer.store is not None:
            pricer.store.save()
    space_points = sum(v is not None for line in spaces.values() for v in line["prices"].values())
    return Repriced(mine, u, len(todo), time.perf_counter() - start, refused, sorted(other), space_points)


def figures(records: Iterable[Mapping[str, Any]], u: float | None = None) -> list[NestFigures]:
    """The figures of every nest shape of the file that has predictions, in the file's order; a point timed
    again with the shape's other finalists (`presk.tuning.autotune.with_retimes`) counts with those times."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    prices: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in with_retimes(records):
        key = (r.get("machine", ""), r["shape_key"])
        kind = r.get("record", "point")
        if kind == "prices":
            prices.setdefault(key, []).append(r)
        elif kind == "point":
            groups.setdefault(key, []).append(dict(r))
    out = []
    profiles: dict[str, float] = {}
    for key, lines in groups.items():
        default = next((r for r in lines if r.get("default") and r["bits"] == "ok"), None)  # not one timed out
        points = [r for r in lines if not r.get("default") and r["bits"] == "ok"
                  and isinstance(r.get("predicted_s"), (int, float))]  # fmt: skip
        if not points:
            continue
        predictors = sorted({str(r.get("profile")) for r in points})
        if len(predictors) > 1:
            raise PreskError("E4001", f"{points[0]['site']} ({points[0].get('shape', '')}): its points were "
                             f"predicted by {len(predictors)} profiles ({', '.join(predictors)}), whose times do not "
                             "compare: `presk rank --profile P.json` prices them all under one")  # fmt: skip
        out.append(_figures(key, points, default, _u_of(points, u, profiles), prices.get(key, [])))
    return out


def _figures(key: tuple[str, str], points: list[dict[str, Any]], default: dict[str, Any] | None, u: float,
             prices: Sequence[Mapping[str, Any]]) -> NestFigures:  # fmt: skip
    predicted = np.array([r["predicted_s"] for r in points], dtype=float)
    measured = np.array([r["median_s"] for r in points], dtype=float)
    # The first of equals in the space's order, as presk plan keeps it: the order its prices line kept.
    order = {key: i for i, key in enumerate(prices[0]["prices"])} if prices else None
    pick_i = model_pick(points, order)
    assert pick_i is not None, "every point here has a prediction and the default's bits"
    best_i = int(np.argmin(measured))
    best_m = measured[best_i]
    candidates = predicted <= predicted[pick_i] * (1 + u)
    q_holds = bool(np.any(measured[candidates] <= DISTINCT * best_m))
    slower = measured > HALIDE_SLOWER * best_m
    noise, noise_points = run_to_run_noise(points)
    if noise is not None:
        noise = max(noise, DISTINCT)
    judged = prices[0] if prices and not prices[0].get("stale") else None  # a prices line of the predictions judged
    sites = list(dict.fromkeys(r["site"] for r in points))
    return NestFigures(
        machine=key[0], shape_key=key[1], site=sites[0], shape=str(points[0].get("shape", "")), u=u, points=points,
        spearman=spearman(predicted, measured) if len(points) >= 2 else math.nan,
        **_pairs(points, predicted, measured, u, noise),
        noise=noise, noise_points=noise_points,
        pick=points[pick_i], best=points[best_i], pick_ratio=float(measured[pick_i] / best_m),
        q_holds=q_holds, only_candidates=bool(candidates.all()),
        slower=int(slower.sum()), slower_behind=int(np.sum(slower & (predicted > predicted[best_i]))),
        priced_points=sum(int(p.get("points", 0)) for p in prices),
        priced_seconds=sum(float(p.get("seconds", 0.0)) for p in prices),
        measured_seconds=sum(float(r.get("seconds", 0.0)) for r in points),
        candidates=int(candidates.sum()),
        candidates_seconds=sum(float(r.get("seconds", 0.0)) for r, c in zip(points, candidates) if c),
        retimed=sum(1 for r in points if "rounds" in r),
        rounds_best=_rounds_best(points, points[pick_i]),
        round_ratio=_round_ratio(points, points[pick_i]),
        retimed_seconds=sum(float(r.get("retime_s", 0.0)) for r in points),
        default=default, other_sites=sites[1:],
        space_points=sum(1 for v in prices[0]["prices"].values() if v is not None) if prices else 0,
        space_pick=_space_pick(judged, points) if judged else None,
        sweep_by_prediction=_sweep_by_prediction(judged, points) if judged else None,
    )  # fmt: skip


def _decisions(points: Sequence[Mapping[str, Any]]) -> tuple[list[str], np.ndarray]:
    """Every decision some point states, in `DECISIONS`, and each point's value of each as an integer
    code (a decision a point leaves out is its own value)."""
    ordered = _in_decision_order({name for r in points for name in r["point"]})
    codes = np.zeros((len(points), len(ordered)), dtype=np.int32)
    for d, name in enumerate(ordered):
        values: dict[str, int] = {}
        for i, r in enumerate(points):
            codes[i, d] = values.setdefault(json.dumps(r["point"].get(name), sort_keys=True), len(values))
    return ordered, codes


def run_to_run_noise(points: Sequence[Mapping[str, Any]]) -> tuple[float | None, int]:
    """The factor by which two runs of one point typically differ, and the points it was read from.

    Read from the points timed again in rounds (`"round_s"`, at least three
    rounds): for each, the median over its pairs of rounds of max/min; then
    the median over the points. None (and 0) with fewer than two such points.
    The rounds interleave the finalists seconds apart, while a sweep's points
    are timed minutes apart, so this is the least the sweep's windows differ
    by, not the most.
    """
    spreads = []
    for r in points:
        rounds = [float(x) for x in r.get("round_s") or () if x > 0]
        if len(rounds) >= 3:
            spreads.append(statistics.median(abs(math.log(a / b)) for i, a in enumerate(rounds) for b in rounds[i + 1 :]))
    if len(spreads) < 2:
        return None, 0
    return math.exp(statistics.median(spreads)), len(spreads)


def _pairs(points: Sequence[Mapping[str, Any]], predicted: np.ndarray, measured: np.ndarray, u: float,
           noise: float | None = None) -> dict[str, Any]:  # fmt: skip
    """The pair counts of the module docstring, over every pair of points (a block of rows at a time: a full
    space's million pairs take a second), as `NestFigures`' fields of the same names; `noise`, where measured,
    the factor two medians must differ by to be told apart."""
    n = len(points)
    q1 = np.array([r["q1_s"] for r in points], dtype=float)
    q3 = np.array([r["q3_s"] for r in points], dtype=float)
    names, codes = _decisions(points)
    totals = np.zeros(len(_PAIR_TOTALS), dtype=np.int64)
    per = np.zeros((len(names), 3), dtype=np.int64)  # pairs, right, tied
    j = np.arange(n)[None, :]
    for start in range(0, n, _PAIR_BLOCK):
        i = np.arange(start, min(start + _PAIR_BLOCK, n))[:, None]
        mi, mj, pi, pj = measured[i], measured[j], predicted[i], predicted[j]
        if noise is None:
            apart = (q1[i] > q3[j]) | (q1[j] > q3[i]) | (np.maximum(mi, mj) > DISTINCT * np.minimum(mi, mj))
        else:
            apart = np.maximum(mi, mj) > noise * np.minimum(mi, mj)
        distinguished = apart & (j > i)
        right = distinguished & ((pi - pj) * (mi - mj) > 0)
        decided = distinguished & (np.maximum(pi, pj) > (1 + u) * np.minimum(pi, pj))
        tied = distinguished & (pi == pj)
        totals += [distinguished.sum(), right.sum(), decided.sum(), (decided & right).sum(), tied.sum()]
        if not names:
            continue
        differ = codes[i[:, 0]][:, None, :] != codes[None, :, :]
        alone = distinguished & (differ.sum(axis=2) == 1)
        which = np.where(alone, differ.argmax(axis=2), -1)
        for d in range(len(names)):
            mine = which == d
            per[d] += [mine.sum(), (mine & right).sum(), (mine & tied).sum()]
    by_decision = {name: PairCount(*map(int, per[d])) for d, name in enumerate(names) if per[d, 0]}
    return {**{name: int(t) for name, t in zip(_PAIR_TOTALS, totals)}, "by_decision": by_decision}


def by_decision(nests: Sequence[NestFigures]) -> dict[str, PairCount]:
    """The pairs that differ in one decision alone, summed over `nests`, in `DECISIONS`."""
    summed: dict[str, PairCount] = {}
    for f in nests:
        for name, count in f.by_decision.items():
            summed[name] = summed.get(name, PairCount()) + count
    return {name: summed[name] for name in _in_decision_order(set(summed))}


def _in_decision_order(names: set[str]) -> list[str]:
    """`names` in the layout dialect's order of its decisions (`DECISIONS`); a name it does not know follows."""
    return [n for n in DECISIONS if n in names] + sorted(names.difference(DECISIONS))


def _label(decision: str) -> str:
    """A decision's name as the tables print it (`kblock`: "k-block")."""
    return DECISION_NAMES.get(decision, decision)


def decision_table(judged: Sequence[tuple[str, Sequence[NestFigures]]]) -> list[str]:
    """A Markdown table, a row per decision and one for every distinguished pair, a column per model: the
    share of the pairs it orders right, and how many it ties."""
    counts = [by_decision(nests) for _, nests in judged]
    names = _in_decision_order({name for c in counts for name in c})
    every = [PairCount(sum(f.distinguished for f in nests), sum(f.right for f in nests), sum(f.tied for f in nests))
             for _, nests in judged]  # fmt: skip
    header = "| decision |" + "".join(f" {label}: right | tied |" for label, _ in judged)
    lines = [header, "|---" * (1 + 2 * len(judged)) + "|"]
    for name in [*names, None]:
        row = f"| {_label(name) if name else 'every pair'} |"
        for c, all_pairs in zip(counts, every):
            count = all_pairs if name is None else c.get(name)
            row += " – | – |" if count is None else f" {_share(count.right, count.pairs)} | {_share(count.tied, count.pairs)} |"
        lines.append(row)
    return lines


def _window(seconds: float) -> float:
    """What timing a point whose calls take `seconds` takes (`presk.tuning.autotune.measure`): the first call,
    then `MIN_CALLS` calls and `MIN_SECONDS` at least."""
    return seconds + max(MIN_CALLS * seconds, calibration.MIN_SECONDS)


def _sweep_by_prediction(prices: Mapping[str, Any], points: Sequence[Mapping[str, Any]]) -> float | None:
    timed = [r for r in points if isinstance(r.get("seconds"), (int, float)) and r["predicted_s"] > 0]
    values = [float(v) for v in prices["prices"].values() if v is not None]
    if not timed or not values:
        return None
    overhead = max(0.0, statistics.median(r["seconds"] - _window(r["median_s"]) for r in timed))
    scale = statistics.median(r["median_s"] / r["predicted_s"] for r in timed)
    return sum(overhead + _window(v * scale) for v in values)


def _space_pick(prices: Mapping[str, Any], points: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The least priced point of the space (the first of equals, as `presk plan` keeps it), and whether the
    file measured it with the default's bits."""
    priced = [(value, i, key) for i, (key, value) in enumerate(prices["prices"].items()) if value is not None]
    if not priced:
        return None
    value, _, key = min(priced)
    measured = any(point_key(r["point"]) == key for r in points)
    return {"point": json.loads(key), "predicted_s": float(value), "measured": measured}


def _share(right: int, total: int) -> str:
    return f"{right}/{total} ({right / total:.0%})" if total else "0/0"


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.3g} %"


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.4g} µs"


def _clock(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.1f} s"


def _rounds_best(points: Sequence[dict[str, Any]], pick: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fastest of the points timed again in the pick's rounds, or None (the pick was not timed again, or its
    line does not say in which rounds)."""
    batch = pick.get("batch")
    if batch is None:
        return None
    return min((r for r in points if r.get("batch") == batch), key=lambda r: r["median_s"])


def _round_ratio(points: Sequence[dict[str, Any]], pick: Mapping[str, Any]) -> float | None:
    """The median over the pick's rounds of its time over the round's fastest point, or None (no rounds kept)."""
    batch, mine = pick.get("batch"), pick.get("round_s")
    if batch is None or not mine:
        return None
    rounds = [r["round_s"] for r in points if r.get("batch") == batch and len(r.get("round_s") or ()) == len(mine)]
    return float(statistics.median(t / min(times) for t, times in zip(mine, zip(*rounds))))


def _how(line: Mapping[str, Any]) -> str:
    """How a point's time was taken: in the finalists' interleaved rounds, or in its single window. The two
    compare only roughly (a window on a busy host reads high), so O says which it divides."""
    return f", timed again in {line['rounds']} rounds" if "rounds" in line else ", one window"


def report(nests: Sequence[NestFigures]) -> list[str]:
    lines = []
    for f in nests:
        lines.append(f"{f.site} ({f.shape}): {len(f.points)} points, u = {f.u:.3g}"
                     + (f"; also {', '.join(f.other_sites)}" if f.other_sites else ""))  # fmt: skip
        if f.space_points > len(f.points):
            lines.append(f"  the file measured {len(f.points)} of the space's {f.space_points} points: the figures "
                         "are over those, the pick the model's best among them")  # fmt: skip
        rho = "n/a" if math.isnan(f.spearman) else f"{f.spearman:.3f}"
        if f.noise is not None:
            lines.append(f"  run-to-run noise {f.noise:.3g}× (two rounds of one point, the median over the "
                         f"{f.noise_points} points timed again): pairs are distinguished beyond it")  # fmt: skip
        lines.append(f"  Spearman {rho}; pairs the measurement distinguishes ordered right "
                     f"{_share(f.right, f.distinguished)}, {f.tied} tied; decided (beyond 1 + u) right "
                     f"{_share(f.decided_right, f.decided)}; within 1 + u right "
                     f"{_share(f.right - f.decided_right, f.distinguished - f.decided)}")  # fmt: skip
        if f.by_decision:
            lines.append("  pairs differing in one decision alone, right: " + ", ".join(
                f"{_label(name)} {_share(c.right, c.pairs)}" + (f" ({c.tied} tied)" if c.tied else "")
                for name, c in f.by_decision.items()))  # fmt: skip
        assert f.pick is not None and f.best is not None
        lines.append(f"  O: the pick {json.dumps(f.pick['point'])} measured {_time(f.pick['median_s'])}{_how(f.pick)}, "
                     f"{f.pick_ratio:.3g}× the best {json.dumps(f.best['point'])} ({_time(f.best['median_s'])}"
                     f"{_how(f.best)})")  # fmt: skip
        if f.rounds_best is not None and f.rounds_best is not f.best:
            lines.append(f"  O in the pick's own rounds: {f.own_rounds_ratio:.3g}× the "
                         f"best of them {json.dumps(f.rounds_best['point'])} ({_time(f.rounds_best['median_s'])})")  # fmt: skip
        if f.round_ratio is not None:
            lines.append(f"  O round by round: the pick {f.round_ratio:.3g}× each round's fastest (the median over "
                         f"its {f.pick['rounds']} rounds)")  # fmt: skip
        if f.space_pick is not None and not f.space_pick["measured"]:
            lines.append(f"  the model's own pick over the space, {json.dumps(f.space_pick['point'])} (predicted "
                         f"{_time(f.space_pick['predicted_s'])}), was not measured: O is over the measured points")  # fmt: skip
        trivially = " (trivially: the file holds only candidates)" if f.only_candidates else ""
        lines.append(f"  Q: the candidates within 1 + u {'hold' if f.q_holds else 'do not hold'} a point within "
                     f"{DISTINCT}× of the best{trivially}")  # fmt: skip
        lines.append(f"  Halide's ordering: of {f.slower} points > {HALIDE_SLOWER}× slower than the best, "
                     f"{_share(f.slower_behind, f.slower)} predicted behind it")  # fmt: skip
        if f.priced_points:
            estimate = f.sweep_estimate
            lines.append(f"  N: static {f.priced_points} points priced in {_clock(f.priced_seconds)}; measured "
                         f"{len(f.points)} points in {_clock(f.measured_seconds)}"
                         + (f" and {f.retimed} of them again" if f.retimed else "")
                         + (f" in {_clock(f.retimed_seconds)}" if f.retimed_seconds else "")
                         + (f"; the whole space measured: about {_clock(estimate)} at their mean" if estimate else "")
                         + (f", or {_clock(f.sweep_by_prediction)} with each point's window at its predicted time "
                            f"({f.sweep_by_prediction / f.priced_seconds:.3g}× the static choice)"
                            if f.sweep_by_prediction and f.priced_seconds else ""))  # fmt: skip
            if estimate:
                lines.append(f"  Q's cost: the static choice and its {f.candidates} candidate"
                             f"{'s' if f.candidates != 1 else ''} measured, "
                             f"{_clock(f.hybrid_seconds)}: {_percent(f.hybrid_seconds, estimate)} of the whole space's "
                             "sweep at the measured mean"
                             + (f", {_percent(f.hybrid_seconds, f.sweep_by_prediction)} with its windows at the "
                                "predicted times" if f.sweep_by_prediction else ""))  # fmt: skip
        if f.default is not None:
            lines.append(f"  the default measured {_time(f.default['median_s'])}: "
                         f"{f.default['median_s'] / f.best['median_s']:.3g}× the best")  # fmt: skip
    if nests:
        lines += ["", f"by decision, over the {len(nests)} nest shape{'s' if len(nests) > 1 else ''} (the distinguished "
                  "pairs whose points differ in that decision alone):", ""]  # fmt: skip
        lines += decision_table([("model", nests)])
    else:
        lines.append("no measured point has a prediction (measure with --profile P.json)")
    return lines


def as_json(nests: Sequence[NestFigures]) -> list[dict[str, Any]]:
    """The figures `report` prints, one object per nest shape, for scripts (`presk rank --json`): times in
    seconds, shares as counts over their totals, a figure that has no value (Spearman of one point) null."""

    def number(value: float | None) -> float | None:
        return None if value is None or math.isnan(value) else float(value)

    def timed(line: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if line is None:
            return None
        return {"point": line["point"], "median_s": line["median_s"], "rounds": line.get("rounds")}

    out = []
    for f in nests:
        assert f.pick is not None and f.best is not None
        out.append({
            "machine": f.machine, "shape_key": f.shape_key, "site": f.site, "other_sites": f.other_sites,
            "shape": f.shape, "u": f.u, "points": len(f.points), "spearman": number(f.spearman),
            "pairs": {"distinguished": int(f.distinguished), "right": int(f.right), "decided": int(f.decided),
                      "decided_right": int(f.decided_right), "tied": int(f.tied)},
            "by_decision": {name: c.to_json() for name, c in f.by_decision.items()},
            "noise": {"factor": f.noise, "points": f.noise_points},
            "pick": {**timed(f.pick), "predicted_s": f.pick["predicted_s"]}, "best": timed(f.best),  # type: ignore[dict-item]
            "o": number(f.pick_ratio),
            "o_own_rounds": f.own_rounds_ratio,
            "o_round_by_round": number(f.round_ratio),
            "q": None if f.q_holds is None else bool(f.q_holds), "only_candidates": bool(f.only_candidates),
            "q_cost": {"candidates": f.candidates, "candidates_seconds": f.candidates_seconds,
                       "seconds": f.hybrid_seconds},
            "halide": {"slower": int(f.slower), "behind": int(f.slower_behind)},
            "n": {"priced_points": f.priced_points, "priced_seconds": f.priced_seconds,
                  "measured_seconds": f.measured_seconds, "retimed": f.retimed, "retimed_seconds": f.retimed_seconds,
                  "sweep_estimate_seconds": f.sweep_estimate, "sweep_by_prediction_seconds": f.sweep_by_prediction},
            "default": timed(f.default), "space_points": f.space_points, "space_pick": f.space_pick,
        })  # fmt: skip
    return out


def pooled(nests: Sequence[NestFigures]) -> dict[str, Any]:
    """One model's figures over all the file's shapes: pairs summed, O counted against 1.05 and as a geometric
    mean (`"o_round_by_round"` over the shapes that have it), the median Spearman over those that have one."""
    rhos = [f.spearman for f in nests if not math.isnan(f.spearman)]
    ratios = [f.pick_ratio for f in nests if f.pick_ratio is not None]
    rounds = [f.round_ratio for f in nests if f.round_ratio is not None]
    return {
        "shapes": len(nests), "spearman_median": statistics.median(rhos) if rhos else None,
        "pairs": {name: int(sum(getattr(f, name) for f in nests))  # numpy's counts made ints, for JSON
                  for name in _PAIR_TOTALS},
        "by_decision": {name: c.to_json() for name, c in by_decision(nests).items()},
        "o_within_1_05": sum(r <= 1.05 for r in ratios), "o_geomean": statistics.geometric_mean(ratios) if ratios else None,
        "o_round_by_round": {"shapes": len(rounds), "within_1_05": sum(r <= 1.05 for r in rounds),
                             "geomean": statistics.geometric_mean(rounds) if rounds else None},
        "q_holds": sum(bool(f.q_holds) for f in nests),
    }  # fmt: skip


def side_by_side(judged: Sequence[tuple[str, Sequence[NestFigures]]]) -> list[str]:
    """Several models' figures on the same measurements (`presk rank --profile A --profile B`): a table per
    nest shape, a row per model, then the figures pooled over the shapes (`pooled`)."""
    columns = "| profile | u | Spearman | pairs right | decided right | O | O round by round | Q |"
    lines: list[str] = []
    by_shape = [{f.shape_key: f for f in nests} for _, nests in judged]
    order = list(dict.fromkeys(key for shapes in by_shape for key in shapes))
    for key in order:
        first = next(shapes[key] for shapes in by_shape if key in shapes)
        lines += [f"{first.site} ({first.shape}): {len(first.points)} points", "", columns, "|---" * 8 + "|"]
        for (path, _), shapes in zip(judged, by_shape):
            f = shapes.get(key)
            if f is None:
                lines.append(f"| {path} | no prediction | | | | | | |")
                continue
            rho = "n/a" if math.isnan(f.spearman) else f"{f.spearman:.3f}"
            rounds = "" if f.round_ratio is None else f"{f.round_ratio:.3g}"
            unmeasured = " (its own pick not measured)" if f.space_pick is not None and not f.space_pick["measured"] else ""
            lines.append(f"| {path} | {f.u:.3g} | {rho} | {_share(f.right, f.distinguished)} | "
                         f"{_share(f.decided_right, f.decided)} | {f.pick_ratio:.3g}{unmeasured} | {rounds} | "
                         f"{'holds' if f.q_holds else 'fails'} |")  # fmt: skip
        lines.append("")
    lines += ["all shapes:", "", "| profile | shapes | median Spearman | pairs right | decided right | O ≤ 1.05 | "
              "geomean O | O round by round ≤ 1.05 | Q holds |", "|---" * 9 + "|"]  # fmt: skip
    for path, nests in judged:
        p = pooled(nests)
        rho = "n/a" if p["spearman_median"] is None else f"{p['spearman_median']:.3f}"
        geomean = "n/a" if p["o_geomean"] is None else f"{p['o_geomean']:.3f}"
        rounds = p["o_round_by_round"]
        pairs = p["pairs"]
        lines.append(f"| {path} | {p['shapes']} | {rho} | {_share(pairs['right'], pairs['distinguished'])} | "
                     f"{_share(pairs['decided_right'], pairs['decided'])} | {p['o_within_1_05']}/{p['shapes']} | "
                     f"{geomean} | {rounds['within_1_05']}/{rounds['shapes']} | {p['q_holds']}/{p['shapes']} |")  # fmt: skip
    lines += ["", "by decision, over every shape (the distinguished pairs whose points differ in that decision alone):",
              ""]  # fmt: skip
    return lines + decision_table(judged)


def plot(nests: Sequence[NestFigures], path: str) -> None:
    """Predicted against measured, log-log, a panel per nest shape, the pick and the best marked."""
    from matplotlib.ticker import NullFormatter

    count = max(len(nests), 1)
    cols = min(count, 3)
    rows = math.ceil(count / cols)
    with png_figure(path, rows, cols, size=(4.5 * cols, 4 * rows), dpi=110) as (_, axes):
        for ax, f in zip(axes.flat, nests):
            x = [r["predicted_s"] * 1e6 for r in f.points]
            y = [r["median_s"] * 1e6 for r in f.points]
            ax.scatter(x, y, s=8, alpha=0.6, label="points")
            assert f.pick is not None and f.best is not None
            ax.scatter([f.pick["predicted_s"] * 1e6], [f.pick["median_s"] * 1e6], marker="x", s=80, c="red",
                       label="pick")  # fmt: skip
            ax.scatter([f.best["predicted_s"] * 1e6], [f.best["median_s"] * 1e6], marker="*", s=120, c="green",
                       label="best measured")  # fmt: skip
            ax.set_xscale("log")
            ax.set_yscale("log")
            for axis in (ax.xaxis, ax.yaxis):  # a narrow range's minor labels overlap
                axis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("predicted µs")
            ax.set_ylabel("measured µs")
            rho = "n/a" if math.isnan(f.spearman) else f"{f.spearman:.2f}"
            ax.set_title(f"{f.site}\nρ = {rho}, O = {f.pick_ratio:.2f}", fontsize=9)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(nests):]:
            ax.set_visible(False)
