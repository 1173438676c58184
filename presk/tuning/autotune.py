"""`presk autotune`: every layout point of every contraction and softmax nest of an entry, compiled and timed.

`presk plan` chooses from the model; this measures, so that the model can
be judged (`presk rank`) and a plan written from what the machine did.

What is measured. The entry's nests are captured as `presk plan` captures
them (`presk.tuning.plan.capture`): each nest at each shape it is launched
at, in isolation (the module of its primitive alone). A point is lowered
under that nest's plan exactly as `presk plan` prices it (no launch
fusion), compiled and called once untimed (compilation, cold caches), then
called until `MIN_CALLS` calls and `MIN_SECONDS` have passed; a call's
time is the sum of its kernels' launches (a packed point's pack kernel
counts), timed one by one (`presk.jit.timed.TimedRunner`), so the host's
own work is not in it. The figures are the median and quartiles of the
calls.

Why the finalists are timed again. One window of calls per point, one
point after another, is a single timing of each: on a shared machine a
burst of another tenant's work can cover a whole window, and the course
GPT's first MLP product under one point measured 21.5 ms in one run and
13.5 ms in the next (the best point 13.1 ms both times). So once a
shape's points are measured, the ones within `FINALISTS` of its best and
the model's pick are timed again in `RETIME_ROUNDS` interleaved rounds
(each round a window of each, in an order that rotates), and a
`"record": "retime"` line gives each the median and quartiles of its
rounds' medians; `with_retimes` lays them over the point lines, and the
plan, `presk rank` and the report read those (bench/timing.py's
discipline: warm-up, interleaving, medians).

Why a bit check. Every layout point computes the default's bits
(docs/layouts.md), so a point whose output differs from the default's on
the same inputs is a bug of the lowering: it is printed on stderr,
recorded with `"bits": "differ"`, never chosen, and the command fails.

Why one line per point. A sweep of a GPT takes many minutes on a shared
machine; each point's line is appended and synced as soon as it is
measured, and a second run skips every (machine, nest shape, point) the
file holds, so an interrupted run loses at most its current point. Nests
of equal shapes (an attention's projections) are measured once. With a
profile, the predicted prices of a shape are kept in the file too (one
`"record": "prices"` line per shape), so a resumed run does not price its
space again. And each shape's isolated module is kept (one `"record":
"nest"` line per shape), so that `presk rank --profile` can price the
measured points under another profile without the program.

Where it is measured. In this process, one point after the other; or,
with a `presk.tuning.distributed.Cluster` (`--ray`), in batches by Ray
actors pinned to cores, each appending the same lines through the same
`measure_record`, each tagged with the machine that measured it.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from presk.cost.profile import load_profile
from presk.diagnostics import PreskError
from presk.records import append_records, read_records
from presk.interp.inputs import make_inputs
from presk.ir.calls import find_entry
from presk.jit.executor import HostProgram, flatten_inputs
from presk.jit.timed import TimedRunner, call_for_a_window
from presk.pipeline import lower
from presk.plans import parse_plan
from presk.target import target_machine
from presk.tuning import calibration
from presk.tuning.calibration import MIN_CALLS, Progress
from presk.tuning.plan import (
    ISOLATED_FUNCTION, Isolated, Nest, Pricer, capture, isolated_record, launched_kernels, legal_points,
    price_ahead, profile_pricer, with_epilogue,
)
from presk.tuning.space import SPACES, Point, point_key

if TYPE_CHECKING:
    from presk.tuning.distributed import Cluster

__all__ = [
    "AutotuneResult",
    "Measurement",
    "NestOutcome",
    "RESULTS_ERROR",
    "Shape",
    "append_record",
    "autotune",
    "lower_point",
    "measure",
    "measure_record",
    "read_results",
    "report",
    "shape_key",
    "with_retimes",
]

RESULTS_ERROR = "E8001"
MAX_CALLS = 5000
"""A bound on timed calls: a microsecond kernel reaches `MIN_SECONDS` after thousands."""
POINT_KEYS = ("machine", "site", "shape_key", "point", "median_s", "q1_s", "q3_s", "bits")
RETIME_KEYS = ("machine", "shape_key", "point", "median_s", "q1_s", "q3_s", "rounds")
NEST_KEYS = ("shape_key", "site", "module", "primitive", "storage", "operand_storage")
FINALISTS = 1.25
"""Points measured within this factor of a shape's best are timed again (with the model's pick)."""
MAX_FINALISTS = 8
RETIME_ROUNDS = 5


# --------------------------------------------------------------------------
# The results file.


def shape_key(iso: Isolated) -> str:
    """A short name of an isolated nest (its module, storage and operands' storage): equal shapes share it."""
    return hashlib.sha1(iso.key.encode("utf-8")).hexdigest()[:16]


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a results file (none if it does not exist); a last line a kill cut short is skipped."""
    records = []
    for number, record in read_records(path, "the results file", RESULTS_ERROR):
        kind = record.get("record", "point") if isinstance(record, dict) else None
        required = {"point": POINT_KEYS, "prices": ("machine", "shape_key", "prices"), "retime": RETIME_KEYS,
                    "nest": NEST_KEYS}.get(kind)  # fmt: skip
        if required is None or any(k not in record for k in required):
            missing = [k for k in (required or ()) if not isinstance(record, dict) or k not in record]
            raise PreskError(RESULTS_ERROR, f"{path}:{number}: not a results line of presk autotune"
                             + (f" (no {', '.join(missing)})" if missing else ""))  # fmt: skip
        records.append(record)
    return records


def with_retimes(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records without their `"retime"` lines, each point line taking the median and quartiles of the last
    retime of its (machine, shape, point), its `"rounds"`, `"batch"` and `"round_s"` (the rounds it was timed in
    and its median in each, when the line says), and what it cost as `"retime_s"`, when it has one."""
    records = list(records)
    latest = {(r["machine"], r["shape_key"], point_key(r["point"])): r for r in records if r.get("record") == "retime"}
    out = []
    for r in records:
        kind = r.get("record", "point")
        if kind == "retime":
            continue
        line = dict(r)
        again = latest.get((r["machine"], r["shape_key"], point_key(r["point"]))) if kind == "point" else None
        if again is not None:
            line.update(median_s=again["median_s"], q1_s=again["q1_s"], q3_s=again["q3_s"], rounds=again["rounds"],
                        retime_s=float(again.get("seconds", 0.0)))  # fmt: skip
            for name in ("batch", "round_s"):
                if name in again:
                    line[name] = again[name]
        out.append(line)
    return out


def append_record(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append one line and sync it (`presk.records`)."""
    append_records(path, [record], "the results file")


# --------------------------------------------------------------------------
# Measuring one point.


@dataclass
class Measurement:
    outputs: list[np.ndarray]
    median_s: float
    q1_s: float
    q3_s: float
    calls: int


def measure(kernels: ModuleOp, leaves: Sequence[Any], runner: Any, min_calls: int = MIN_CALLS,
            min_seconds: float | None = None, max_calls: int = MAX_CALLS,
            site: str | None = None) -> Measurement:  # fmt: skip
    """The outputs of a first, untimed call, then the kernels' time per call (see the module docstring).

    `site`: only that nest's kernels are timed (its packs too), not the launch of a value the isolated
    function computes for it (a causal mask), which `presk plan` does not price either.
    """
    program = TimedProgram(kernels, leaves, runner, site)
    per_call = program.window(min_calls, min_seconds, max_calls)
    q = statistics.quantiles(per_call, n=4) if len(per_call) >= 2 else [per_call[0]] * 3
    return Measurement(program.outputs, statistics.median(per_call), q[0], q[2], len(per_call))


class TimedProgram:
    """A point's kernels compiled and called once untimed (its outputs kept), ready for windows of timed calls."""

    def __init__(self, kernels: ModuleOp, leaves: Sequence[Any], runner: Any, site: str | None = None) -> None:
        timed = TimedRunner(runner)
        self.host = HostProgram(kernels, timed)
        self.prepared = self.host.prepare_inputs(leaves)
        self.outputs = [np.array(o, copy=True) for o in self.host(self.prepared)]
        counted = {k.sym_name.data for k, _ in launched_kernels(kernels, host_only=True, site=site)}
        self.lists = [times for name, times in timed.samples.items() if name in counted]

    def window(self, min_calls: int = MIN_CALLS, min_seconds: float | None = None,
               max_calls: int = MAX_CALLS) -> list[float]:  # fmt: skip
        """The counted kernels' seconds of each call, called until `min_calls` calls and `min_seconds`
        (None: the calibration's `MIN_SECONDS`, read at the call as `kernel_samples` reads it)."""
        if min_seconds is None:
            min_seconds = calibration.MIN_SECONDS
        for times in self.lists:
            times.clear()
        per_call: list[float] = []

        def one_call() -> None:
            before = [len(t) for t in self.lists]
            self.host(self.prepared)
            per_call.append(sum(sum(t[n:]) for t, n in zip(self.lists, before)))

        call_for_a_window(one_call, min_calls, min_seconds, max_calls)
        return per_call


def reference_outputs(kernels: ModuleOp, leaves: Sequence[Any], runner: Any) -> list[np.ndarray]:
    """The default layout's outputs, which every point must equal bit for bit."""
    host = HostProgram(kernels, runner)
    return [np.array(o, copy=True) for o in host(host.prepare_inputs(leaves))]


def same_bits(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if np.ascontiguousarray(x).tobytes() != np.ascontiguousarray(y).tobytes():
            return False
    return True


def lower_point(iso: Isolated, point: Point) -> ModuleOp:
    """The point's kernels, lowered as `presk plan` prices them (no launch fusion): the same kernels."""
    return lower(iso.module, ISOLATED_FUNCTION, {}, iso.plan(point), fuse_launches=False)


# --------------------------------------------------------------------------
# The sweep.


@dataclass
class NestOutcome:
    """One nest after the sweep: its best measured point, the default, and the model's pick."""

    nest: Nest
    best: Point | None
    best_s: float | None
    """Measured seconds per run of the entry (launch-weighted over the nest's shapes)."""
    default_s: float | None
    measured: int
    differ: int
    pick: Point | None = None
    pick_predicted_s: float | None = None
    pick_s: float | None = None
    candidates: int | None = None
    priced: int | None = None


@dataclass
class AutotuneResult:
    outcomes: list[NestOutcome]
    plan: dict[str, Any]
    measured: int
    skipped: int
    refused: int
    stopped: bool
    seconds: float
    differ: list[dict[str, Any]] = field(default_factory=list)
    lost: int = 0
    """Points not measured because every worker that could measure them died (`--ray`): a rerun measures them."""
    workers: list[str] = field(default_factory=list)
    """With `--ray`: a line per machine kind of the cluster, and one per worker that died or point that timed out."""
    timed_out: int = 0
    """Points past their timeout (`--ray`): a line with `"bits": "timeout"` each, never chosen."""


@dataclass
class Shape:
    """One nest shape to measure, with the default layout's outputs once computed (the bit check's reference)."""

    iso: Isolated
    key: str
    site: str
    kind: str
    reference: list[np.ndarray] | None = None
    leaves: list[Any] | None = None


def best_of_each_order(points: Sequence[Point], predicted: Mapping[str, float]) -> set[str]:
    """The keys of the points the model prices best within each loop order (the first such in space order).

    A nest without orders (a softmax: passes and splits) has one group, whose best is the model's pick.
    """
    best: dict[object, tuple[float, str]] = {}
    for point in points:
        key = point_key(point)
        order = point.get("order")
        if order not in best or predicted[key] < best[order][0]:
            best[order] = (predicted[key], key)
    return {key for _, key in best.values()}


def autotune(
    module: ModuleOp,
    entry: str,
    env: Mapping[str, int],
    realization: str,
    results_path: str,
    profile_path: str | None = None,
    candidates: bool = False,
    space: str = "quick",
    budget_s: float | None = None,
    sites: Sequence[str] | None = None,
    runner: Any = None,
    err: TextIO | None = None,
    plan_dir: str = ".",
    cluster: Cluster | None = None,
    each_order: bool = False,
) -> AutotuneResult:
    """Measure the nests' points not yet in `results_path`, then choose the best measured point of each.

    `each_order` (`--each-order`, with `candidates`) adds to the candidates the model's best point of
    every loop order, so that a bias of the model against one order cannot hide all of its points.

    With `cluster` (`presk.tuning.distributed.Cluster`, `--ray`) the points
    are measured by its workers, each machine kind of the cluster measuring
    the points its own lines lack; the plan is chosen from this machine's
    kind's lines only."""
    err = err or sys.stderr
    started = time.perf_counter()
    find_entry(module, entry)
    if space not in SPACES:
        raise PreskError("E4001", f"--space {space}: expected one of {', '.join(SPACES)}")
    if candidates and profile_path is None:
        raise PreskError("E4001", "--candidates needs --profile P.json: the candidates are the model's")
    if each_order and not candidates:
        raise PreskError("E4001", "--each-order adds to the candidates: give it with --candidates")
    machine = target_machine()
    machine_key = machine.key()
    records = read_results(results_path)
    nests = capture(module, entry, env, parse_plan({"realization": realization}, "--realize"))
    if sites:
        known = [n.site for n in nests]
        unknown = [s for s in sites if s not in known]
        if unknown:
            raise PreskError("E4001", f"--nests: no contraction or softmax nest {', '.join(unknown)} in @{entry} "
                             f"(its nests: {', '.join(known)})")  # fmt: skip
        nests = [n for n in nests if n.site in sites]
    legal = {n.site: legal_points(n, machine, space)[0] for n in nests}
    _describe_nests(nests, records, results_path, machine.workers())

    pricer: Pricer | None = None
    u: float | None = None
    profile_id = None
    if profile_path is not None:
        profile = load_profile(profile_path)
        if profile.machine and profile.machine != machine_key:
            err.write(f"presk autotune: warning: {profile_path} was measured on another machine; its predictions "
                      "are compared with this one's times\n")  # fmt: skip
        pricer = profile_pricer(profile, profile_path, machine, keep_terms=False)
        u = profile.u if profile.u is not None else 0.0
        profile_id = hashlib.sha1(Path(profile_path).read_bytes()).hexdigest()[:16]
        _prefill(pricer, nests, records, machine_key, profile_id, space)

    # What to measure, per nest: every legal point, or the model's candidates.
    predicted: dict[tuple[str, str], float | None] = {}
    chosen: dict[str, list[Point]] = {}
    totals: dict[str, dict[str, float]] = {}
    if pricer is not None:
        _price_all(nests, legal, pricer, results_path, machine_key, profile_id, space, err)
    for nest in nests:
        points = legal[nest.site]
        if pricer is not None:
            for iso, _ in nest.shapes:
                default = pricer.price(iso, {})
                predicted[(shape_key(iso), point_key({}))] = default if isinstance(default, float) else None
            per_point: dict[str, float] = {}
            for point in points:
                total = 0.0
                for iso, launches in nest.shapes:
                    value = pricer.price(iso, point)
                    if isinstance(value, PreskError):
                        break
                    predicted[(shape_key(iso), point_key(point))] = value
                    total += launches * value
                else:
                    per_point[point_key(point)] = total
            points = [p for p in points if point_key(p) in per_point]
            totals[nest.site] = per_point
            if candidates and per_point:
                best = min(per_point.values())
                keep = {point_key(p) for p in points if per_point[point_key(p)] <= best * (1 + (u or 0.0))}
                if each_order:
                    keep |= best_of_each_order(points, per_point)
                points = [p for p in points if point_key(p) in keep]
        chosen[nest.site] = points

    done = {(r["machine"], r["shape_key"], point_key(r["point"])): r for r in records
            if r.get("record", "point") == "point"}  # fmt: skip
    shapes: dict[str, Shape] = {}
    items: list[tuple[Shape, Point, bool]] = []
    queued: set[tuple[str, str]] = set()
    for nest in nests:
        for iso, _ in nest.shapes:
            key = shape_key(iso)
            shape = shapes.setdefault(key, Shape(iso, key, nest.site, nest.kind))
            for point, is_default in [({}, True)] + [(p, False) for p in chosen[nest.site]]:
                pair = (key, point_key(point))
                if pair not in queued:
                    queued.add(pair)
                    items.append((shape, point, is_default))

    lost = timed_out = 0
    workers: list[str] = []
    if cluster is not None:
        tally = cluster.autotune(items, set(done), predicted, profile_path, u, results_path, budget_s, err)
        measured, refused, skipped, stopped, new = tally.measured, tally.refused, tally.skipped, tally.stopped, tally.records
        lost, workers, timed_out = tally.lost, tally.notes, tally.timed_out
    else:
        runner = runner if runner is not None else _native_runner()  # one engine for the measuring and the retime
        measured, refused, skipped, stopped, new = _measure_here(items, set(done), runner, machine_key, predicted,
                                                                 profile_path, u, results_path, budget_s, err)  # fmt: skip

    all_records = [r for r in records if r.get("record", "point") in ("point", "retime")] + new
    mine = _machine_points(all_records, machine_key)
    retimed = {(r["shape_key"], point_key(r["point"])) for r in all_records
               if r["machine"] == machine_key and r.get("record") == "retime"}  # fmt: skip
    fresh = {r["shape_key"] for r in new if r["machine"] == machine_key}
    all_records += _retime_shapes(shapes, mine, legal, fresh, retimed, runner, machine_key, results_path, budget_s,
                                  started, err)  # fmt: skip
    mine = _machine_points(with_retimes(all_records), machine_key)  # the finalists at their retimed times
    outcomes = [_outcome(nest, legal[nest.site], mine, totals.get(nest.site), u, candidates) for nest in nests]
    layout = {o.nest.site: with_epilogue(o.nest, o.best, machine) for o in outcomes if o.best}
    plan = {"realization": _relative(realization, plan_dir), "layout": layout}
    shape_keys = {shape_key(iso) for nest in nests for iso, _ in nest.shapes}
    differ = [r for r in mine.values() if r["bits"] == "differ" and r["shape_key"] in shape_keys]
    return AutotuneResult(outcomes, plan, measured, skipped, refused, stopped, time.perf_counter() - started, differ,
                          lost, workers, timed_out)  # fmt: skip


def _measure_here(items: Sequence[tuple[Shape, Point, bool]], done: set[tuple[str, str, str]], runner: Any,
                  machine_key: str, predicted: Mapping[tuple[str, str], float | None], profile_path: str | None,
                  u: float | None, results_path: str, budget_s: float | None,
                  err: TextIO) -> tuple[int, int, int, bool, list[dict[str, Any]]]:  # fmt: skip
    """Measure in this process, one point after the other, each line appended as it is measured.

    Returns (measured, refused, skipped: already in the file, stopped by the budget, the new lines)."""
    todo = [(s, p, d) for s, p, d in items if (machine_key, s.key, point_key(p)) not in done]
    progress = Progress(len(todo), budget_s, "measuring", stream=err)
    measured = refused = 0
    stopped = False
    new: list[dict[str, Any]] = []
    try:
        for shape, point, is_default in todo:
            if progress.over_budget():
                stopped = True
                break
            record = measure_record(shape, point, is_default, runner, machine_key,
                                    predicted.get((shape.key, point_key(point))), profile_path, u, err)  # fmt: skip
            if record is None:
                refused += 1
                progress.step("(refused)")
                continue
            append_record(results_path, record)
            new.append(record)
            measured += 1
            progress.step(f"{shape.site} {json.dumps(point)}")
    finally:
        progress.close()
    return measured, refused, len(items) - len(todo), stopped, new


def _describe_nests(nests: Sequence[Nest], records: Sequence[Mapping[str, Any]], results_path: str,
                    workers: int) -> None:  # fmt: skip
    """A `"nest"` line for each shape the file does not describe yet (`presk.tuning.plan.isolated_record`), with
    the `workers` it was measured on: a point's price depends on them (`PRESK_THREADS`), not on the shape."""
    described = {r["shape_key"] for r in records if r.get("record") == "nest"}
    lines = []
    for nest in nests:
        for iso, _ in nest.shapes:
            key = shape_key(iso)
            if key not in described:
                described.add(key)
                lines.append({"record": "nest", "shape_key": key, "site": nest.site, "workers": workers,
                              **isolated_record(iso)})  # fmt: skip
    if lines:
        append_records(results_path, lines, "the results file")


def _prefill(pricer: Pricer, nests: Sequence[Nest], records: Sequence[Mapping[str, Any]], machine_key: str,
             profile_id: str | None, space: str) -> None:  # fmt: skip
    """The prices an earlier run of this profile and space wrote, back in the pricer's cache."""
    by_key = {shape_key(iso): iso for nest in nests for iso, _ in nest.shapes}
    for r in records:
        if (r.get("record") != "prices" or r["machine"] != machine_key or r.get("profile_id") != profile_id
                or r.get("space") != space or r["shape_key"] not in by_key):  # fmt: skip
            continue
        iso = by_key[r["shape_key"]]
        for key, value in r["prices"].items():
            refusal = PreskError("E7002", "refused when priced by an earlier run")
            pricer.cache[(iso.key, key)] = float(value) if value is not None else refusal


def _price_all(nests: Sequence[Nest], legal: Mapping[str, list[Point]], pricer: Pricer, results_path: str,
               machine_key: str, profile_id: str | None, space: str, err: TextIO) -> None:  # fmt: skip
    """Price every legal point at every shape (the slow, static part), one prices line per shape priced.

    Each shape is priced as `presk plan` prices it (`price_ahead`: the points
    that share a lowering together, over the plan's processes), so that a
    line's seconds are what the static choice costs: statement N of
    `presk rank` compares them with the sweep's.
    """
    work: dict[str, tuple[Isolated, Nest, list[Point]]] = {}
    for nest in nests:
        for iso, _ in nest.shapes:
            entry = work.setdefault(shape_key(iso), (iso, nest, []))
            seen = {point_key(p) for p in entry[2]}
            entry[2].extend(p for p in legal[nest.site] if point_key(p) not in seen)
    todo = sum(1 for iso, _, points in work.values() for p in points if not pricer.cached(iso, p))
    progress = Progress(todo, label="pricing", stream=err)
    try:
        for key, (iso, nest, points) in work.items():
            fresh = [p for p in points if not pricer.cached(iso, p)]
            if not fresh:
                continue
            start = time.perf_counter()
            alone = Nest(nest.site, nest.kind, [(iso, 1)])
            left = price_ahead([alone], [(fresh, {})], {(iso.key, point_key(p)) for p in fresh}, pricer, progress)
            for point in fresh:  # what the processes left: too few to repay them, or a failure to say here
                if (iso.key, point_key(point)) in left:
                    pricer.price(iso, point)
                    progress.step(nest.site)
            seconds = time.perf_counter() - start
            prices = {}
            for point in points:
                value = pricer.price(iso, point)
                prices[point_key(point)] = None if isinstance(value, PreskError) else value
            append_record(results_path, {"record": "prices", "machine": machine_key, "site": nest.site,
                                         "shape": iso.describe(), "shape_key": key, "profile_id": profile_id,
                                         "space": space, "points": len(fresh), "seconds": seconds,
                                         "prices": prices})  # fmt: skip
    finally:
        progress.close()


def measure_record(shape: Shape, point: Point, is_default: bool, runner: Any, machine_key: str,
                   predicted_s: float | None, profile_path: str | None, u: float | None, err: TextIO,
                   kernels: ModuleOp | None = None) -> dict[str, Any] | None:  # fmt: skip
    """One point's line, or None if the lowering refuses it (E7002).

    `kernels`, if given, are `lower_point(shape.iso, point)` already lowered
    (a Ray worker looks at them first: `presk.tuning.distributed`);
    `machine_key` is the machine that measures, which the line records."""
    start = time.perf_counter()
    prepare_shape(shape, runner)
    if kernels is None:
        try:
            kernels = lower_point(shape.iso, point)
        except PreskError as error:
            if error.code != "E7002":
                raise
            return None
    result = measure(kernels, shape.leaves or [], runner, site=shape.iso.name)
    bits = "ok" if same_bits(result.outputs, shape.reference) else "differ"
    if bits == "differ":
        err.write(f"\npresk autotune: BUG: nest \"{shape.site}\" ({shape.iso.describe()}) under {json.dumps(point)} "
                  "gives other bits than its default layout on the same inputs; it is recorded and never chosen\n")  # fmt: skip
    return {
        "machine": machine_key, "site": shape.site, "kind": shape.kind, "shape": shape.iso.describe(),
        "shape_key": shape.key, "point": point, "default": is_default,
        "predicted_s": predicted_s, "profile": profile_path, "u": u,
        "median_s": result.median_s, "q1_s": result.q1_s, "q3_s": result.q3_s, "calls": result.calls,
        "bits": bits, "seconds": time.perf_counter() - start,
    }  # fmt: skip


def _native_runner() -> Any:
    from presk.jit.native import NativeRunner  # loads LLVM: only once something is measured here

    return NativeRunner()


def prepare_shape(shape: Shape, runner: Any) -> None:
    """The shape's inputs, and the default layout's outputs on them (the bit check's reference), once."""
    if shape.reference is None:
        shape.leaves = flatten_inputs(make_inputs(find_entry(shape.iso.module, ISOLATED_FUNCTION), {}, 0))
        shape.reference = reference_outputs(lower_point(shape.iso, {}), shape.leaves, runner)


def model_pick(lines: Sequence[Mapping[str, Any]], space_order: Mapping[str, int] | None = None) -> int | None:
    """The index in `lines` of the point the model prices least among those with the default's bits, or None.

    Ties are broken as `presk plan` breaks them, by the order of the space
    (`space_order`: a point key's position in it), then by the order of
    `lines`. Never by the measurements: the model often prices alike points
    that differ only in a split's depth or a k-block the registers hide, and
    taking the fastest measured of those would credit the model with a
    choice the plan does not make.
    """
    ranked = [
        (r["predicted_s"], (space_order or {}).get(point_key(r["point"]), len(lines)), i)
        for i, r in enumerate(lines)
        if r["bits"] == "ok" and not r.get("default") and isinstance(r.get("predicted_s"), (int, float))
    ]  # fmt: skip
    return min(ranked)[2] if ranked else None


def finalists(
    lines: Sequence[Mapping[str, Any]], space_order: Mapping[str, int] | None = None
) -> list[Mapping[str, Any]]:
    """A shape's points to time again: those measured within `FINALISTS` of its best (at most `MAX_FINALISTS`,
    the fastest) and the model's pick (`model_pick`), among the points with the default's bits."""
    ok = sorted((r for r in lines if r["bits"] == "ok" and not r.get("default")), key=lambda r: r["median_s"])
    if not ok:
        return []
    chosen = [r for r in ok if r["median_s"] <= FINALISTS * ok[0]["median_s"]][:MAX_FINALISTS]
    pick = model_pick(lines, space_order)
    if pick is not None and all(point_key(r["point"]) != point_key(lines[pick]["point"]) for r in chosen):
        chosen.append(lines[pick])
    return chosen


def retime(shape: Shape, lines: Sequence[Mapping[str, Any]], runner: Any, machine_key: str,
           rounds: int = RETIME_ROUNDS, progress: Progress | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The `"retime"` lines of `lines` (points of `shape` measured on this machine): `rounds` interleaved rounds,
    each a window of calls of every point, the order rotating; each line the median and quartiles over the rounds
    of its rounds' medians (see the module docstring)."""
    prepare_shape(shape, runner)
    batch = f"{time.time():.6f}"  # the lines timed in these rounds, which alone compare closely
    spent = [0.0] * len(lines)
    programs = []
    for i, r in enumerate(lines):
        start = time.perf_counter()
        programs.append(TimedProgram(lower_point(shape.iso, r["point"]), shape.leaves or [], runner, shape.iso.name))
        spent[i] += time.perf_counter() - start
    medians: list[list[float]] = [[] for _ in lines]
    for round_ in range(rounds):
        for step in range(len(lines)):
            i = (step + round_) % len(lines)
            start = time.perf_counter()
            medians[i].append(statistics.median(programs[i].window()))
            spent[i] += time.perf_counter() - start
            if progress is not None:
                progress.step(f"{shape.site} again, round {round_ + 1}")
    out = []
    for r, times, seconds in zip(lines, medians, spent):
        q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
        out.append({"record": "retime", "machine": machine_key, "site": shape.site, "shape_key": shape.key,
                    "point": r["point"], "median_s": statistics.median(times), "q1_s": q[0], "q3_s": q[2],
                    "rounds": rounds, "batch": batch, "round_s": times, "seconds": seconds})  # fmt: skip
    return out


def _machine_points(records: Iterable[Mapping[str, Any]], machine_key: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The point lines of `machine_key`'s kind, by (shape key, point key): what the plan is chosen from."""
    return {(r["shape_key"], point_key(r["point"])): r for r in records
            if r["machine"] == machine_key and r.get("record", "point") == "point"}  # fmt: skip


def _retime_shapes(shapes: Mapping[str, Shape], mine: Mapping[tuple[str, str], Mapping[str, Any]],
                   spaces: Mapping[str, Sequence[Point]], fresh: set[str], retimed: set[tuple[str, str]],
                   runner: Any, machine_key: str, results_path: str, budget_s: float | None, started: float,
                   err: TextIO) -> list[dict[str, Any]]:  # fmt: skip
    """Time the finalists of every shape again, where a point was measured in this run or a finalist has no
    retime yet; each shape's lines appended as it is done. Nothing once the budget is spent. `spaces`: each
    nest's legal points in the space's order, which breaks the model's ties."""
    todo: list[tuple[Shape, list[Mapping[str, Any]]]] = []
    for key, shape in shapes.items():
        order = {point_key(p): i for i, p in enumerate(spaces.get(shape.site, ()))}
        chosen = finalists([r for (k, _), r in mine.items() if k == key], order)
        if len(chosen) < 2:
            continue
        if key in fresh or any((key, point_key(r["point"])) not in retimed for r in chosen):
            todo.append((shape, chosen))
    if not todo or (budget_s is not None and time.perf_counter() - started > budget_s):
        return []
    if runner is None:  # measured on a cluster: this process has compiled nothing yet
        runner = _native_runner()
    progress = Progress(sum(len(c) for _, c in todo) * RETIME_ROUNDS, None, "timing the finalists again", stream=err)
    new: list[dict[str, Any]] = []
    try:
        for shape, chosen in todo:
            lines = retime(shape, chosen, runner, machine_key, progress=progress)
            for line in lines:
                append_record(results_path, line)
            new += lines
    finally:
        progress.close()
    return new


def _outcome(nest: Nest, legal: list[Point], mine: Mapping[tuple[str, str], Mapping[str, Any]],
             totals: Mapping[str, float] | None, u: float | None, candidates: bool) -> NestOutcome:  # fmt: skip
    """The nest's best measured point (launch-weighted over its shapes; the default counts), and the model's pick."""

    def measured(point: Point) -> float | None:
        total = 0.0
        for iso, launches in nest.shapes:
            r = mine.get((shape_key(iso), point_key(point)))
            if r is None or r["bits"] != "ok":
                return None
            total += launches * r["median_s"]
        return total

    keys = {shape_key(iso) for iso, _ in nest.shapes}
    differ = sum(1 for (k, _), r in mine.items() if k in keys and r["bits"] == "differ")
    times = [(p, t) for p in [{}] + legal if (t := measured(p)) is not None]
    default_s = measured({})
    best, best_s = min(times, key=lambda pair: pair[1]) if times else (None, None)
    outcome = NestOutcome(nest, best, best_s, default_s, len(times), differ)
    if totals:
        pick_key = min(totals, key=lambda k: totals[k])  # min keeps the first of equals
        pick = next(p for p in legal if point_key(p) == pick_key)
        outcome.pick, outcome.pick_predicted_s, outcome.pick_s = pick, totals[pick_key], measured(pick)
        outcome.priced = len(totals)
        outcome.candidates = sum(1 for t in totals.values() if t <= totals[pick_key] * (1 + (u or 0.0)))
    return outcome


def _relative(realization: str, plan_dir: str) -> str:
    """`@FILE` as the plan reads it: relative to the plan's folder."""
    if not realization.startswith("@"):
        return realization
    return "@" + os.path.relpath(os.path.abspath(realization[1:]), os.path.abspath(plan_dir or "."))


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "not measured"
    return f"{seconds * 1e3:.4g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.4g} µs"


def report(result: AutotuneResult) -> list[str]:
    """Per nest: the best measured point and its time, the default's, the speed-up, and the model's pick."""
    lines = [f"{len(result.outcomes)} nests; {result.measured} points measured, {result.skipped} already in the "
             f"file, {result.refused} refused by the lowering (E7002); {result.seconds:.0f} s"]  # fmt: skip
    for o in result.outcomes:
        shapes = "; ".join(f"{n} × {iso.describe()}" for iso, n in o.nest.shapes)
        lines.append(f"{o.nest.site} ({o.nest.kind}): {shapes}")
        if o.best is None:
            lines.append("  nothing measured")
            continue
        speedup = f", {o.default_s / o.best_s:.3g}× the default" if o.default_s and o.best_s else ""
        best = json.dumps(o.best) if o.best else "the default layout"
        lines.append(f"  best {best}: {_time(o.best_s)} a run; default {_time(o.default_s)}{speedup}; "
                     f"{o.measured} points measured" + (f", {o.differ} WITH OTHER BITS" if o.differ else ""))  # fmt: skip
        if o.pick is not None:
            ratio = f"{o.pick_s / o.best_s:.3g}× the best" if o.pick_s and o.best_s else "not measured"
            lines.append(f"  model's pick {json.dumps(o.pick)}: predicted {_time(o.pick_predicted_s)}, measured "
                         f"{_time(o.pick_s)} ({ratio}); {o.candidates} of {o.priced} points within 1 + u")  # fmt: skip
    lines.extend(result.workers)
    if result.stopped:
        lines.append("the budget stopped it: the same command resumes it")
    if result.lost:
        lines.append(f"{result.lost} points were not measured: every worker that could measure them died; "
                     "the same command measures them")  # fmt: skip
    if result.timed_out:
        lines.append(f"{result.timed_out} points timed out (--point-timeout): recorded with \"bits\": \"timeout\", "
                     "never chosen; remove their lines to measure them again")  # fmt: skip
    return lines
