"""Measuring kernels for the cost models: the calibration spaces and the timed samples they give.

A calibration times kernels natively and records, for every kernel a point
launches, its measured time beside its quantities (`presk.cost.terms`), so
that `presk.cost.fit` can fit a profile's constants and `presk refit` can fit
them again, under other forms or rules, without measuring anything.

What is measured. Each point is lowered through the real pipeline
(`presk.pipeline.lower`) with its layout and compiled; its host program is
called once untimed (the first launch of each kernel includes its
compilation and its cold caches, and is dropped), then until it has been
called `MIN_CALLS` times and `MIN_SECONDS` have passed, or `MAX_CALLS`
times. Every launch is timed by itself (`presk.jit.timed.TimedRunner`); a
kernel's sample is the median of its launches, with their quartiles.

What a space holds. The GEMM at several sizes and two thin products, under
register tiles that suit this target's register file, loop orders with and
without k-blocks, one lane and the widest, one worker and all of them; and
a few kernels that are not contractions (an elementwise chain, an
exponential, a row sum, a softmax) at sizes from L1 to memory, so that the
roofline's memory terms and the transcendental weight have samples that
bind them. The shapes of the programs the cost model is judged on (the
corpus: attention, the GPT's products) are never in a space.

Resuming. Every point has a key (program, entry, sizes, type, layout).
Samples are appended as each point finishes (`presk.cost.profile`), and a
calibration into a file that already holds a point's samples skips that
point, so an interrupted run loses at most the point it was measuring.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from itertools import combinations, permutations
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from presk import sizes
from presk.cost.models import PROFILE_ERROR
from presk.cost.profile import Profile, Sample
from presk.cost.quantities import kernel_terms_by_rules
from presk.cost.terms import RULES, KernelTerms, MachineDesc
from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import KernelOp
from presk.dialects.psk_realize_layout import TILE_COLS, tile_registers
from presk.interp.inputs import make_inputs
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram, flatten_inputs
from presk.jit.timed import TimedRunner, call_for_a_window
from presk.pipeline import lower
from presk.plans import parse_plan
from presk.target import Machine
from presk.tuning.terms_cache import code_version

__all__ = [
    "CALIBRATION_PROGRAM",
    "MAX_CALLS",
    "MIN_CALLS",
    "MIN_SECONDS",
    "SPACES",
    "TERMS_CODE",
    "TIMING",
    "TIMING_WINDOW",
    "Point",
    "Progress",
    "coarsely_timed",
    "kernel_samples",
    "measure_point",
    "operation_count",
    "parse_budget",
    "point_kernels",
    "point_of_key",
    "relowered",
    "reprice",
    "rule_sets",
    "run_space",
    "space",
    "stale_samples",
    "terms_code",
]

MIN_CALLS = 3
"""Timed calls of a point at least, after the dropped first one."""
MIN_SECONDS = 0.05
"""Timed calls go on until this much time has passed (or `MAX_CALLS`): a microsecond kernel gets many launches.

Why a window of time and not a number of calls: a kernel's median over a
few milliseconds of calls moves from one measurement to the next by far
more than the models' differences. On Zen 3 (a shared 2-vCPU machine) a
2-worker product of 128 took a median of 58 to 256 µs over 25 calls
measured every 0.3 s, and 54 to 79 µs (the 10th to 90th percentiles) over
50 ms of calls. Two calibrations of `calib-small` on the same host differed
by a median of 8 to 9 % a sample with 25 calls at most, and by 1.2 to 1.5 %
with the window (docs/cost.md §6.10)."""
MAX_CALLS = 10_000
"""A bound on timed calls, far above what the window needs for anything but the smallest kernels (a
microsecond kernel reaches `MIN_SECONDS` after some ten thousand calls with the host's own time)."""

CALIBRATION_PROGRAM = """
!A = !psk_core.tensor<[i: I, k: K]>
!B = !psk_core.tensor<[k2: K, j: J]>
!C = !psk_core.tensor<[i: I, j: J]>
!V = !psk_core.tensor<[r: R, c: M]>
!W = !psk_core.tensor<[r: R]>
!Mk = !psk_core.index<[r: R, r2: R], 2>
func.func @gemm(%a: !A, %b: !B) -> !C {
  %0 = psk_core.dot %a, %b : !C
  func.return %0 : !C
}
func.func @chain(%x: !V, %y: !V) -> !V {
  %0 = psk_core.mul %x, %y : !V
  %1 = psk_core.add %0, %x : !V
  func.return %1 : !V
}
func.func @exp(%x: !V) -> !V {
  %0 = psk_core.exp %x : !V
  func.return %0 : !V
}
func.func @rowsum(%x: !V) -> !W {
  %0 = psk_core.sum %x [c] : !W
  func.return %0 : !W
}
func.func @softmax(%x: !V) -> !V {
  %0 = psk_core.softmax %x [c] : !V
  func.return %0 : !V
}
func.func @mask() -> !Mk {
  %0 = psk_core.causal_mask : !Mk
  func.return %0 : !Mk
}
"""
"""The programs a calibration measures: a GEMM of any shape, and five nests that are not contractions
(the last writes integers, as a causal mask or an index range does: its group is `i64`)."""


NEST_LETS = {"chain": 1}
"""The let of each entry's one nest where it is not %0: `chain`'s group is rooted at its add."""


@cache
def _calibration_module() -> ModuleOp:
    return parse_module(presk_context(), CALIBRATION_PROGRAM, "<calibration>").module


@dataclass(frozen=True)
class Point:
    """One measurement: an entry of the calibration program at sizes, in a type, under a layout of its nest."""

    entry: str
    sizes: tuple[tuple[str, int], ...]
    dtype: str
    layout: tuple[tuple[str, Any], ...] = ()
    """The layout of the entry's one nest (`<entry>/%0`, `NEST_LETS`), as plan JSON; () is the default layout."""

    @property
    def key(self) -> str:
        return json.dumps({"entry": self.entry, "sizes": dict(self.sizes), "dtype": self.dtype,
                           "layout": _thaw(dict(self.layout))}, sort_keys=True)  # fmt: skip

    def plan(self) -> dict[str, Any]:
        plan: dict[str, Any] = {"realization": self.dtype}
        if self.layout:
            plan["layout"] = {f"{self.entry}/%{NEST_LETS.get(self.entry, 0)}": _thaw(dict(self.layout))}
        return plan


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value):
            return {k: _thaw(v) for k, v in value}
        return [_thaw(v) for v in value]
    return value


def _point(entry: str, dims: dict[str, int], dtype: str, layout: dict[str, Any] | None = None) -> Point:
    return Point(entry, tuple(sorted(dims.items())), dtype, _freeze(layout or {}))


# --------------------------------------------------------------------------
# The spaces.


@dataclass(frozen=True)
class GemmShapes:
    """The GEMMs of a space and which of them are too slow for scalar tiles or for one worker."""

    square: tuple[int, ...]
    thin: tuple[tuple[int, int, int], ...]
    """(I, K, J) of products bound by other terms than the square ones."""
    scalar_up_to: int
    """Scalar tiles (one lane) only where every axis is at most this (they run at a tenth of the vector rate)."""
    one_worker_up_to: int
    """One worker only up to this size: beyond, the one-worker points cost most of the calibration's time."""
    orders: tuple[tuple[Any, str], ...]
    tiles: int
    """How many register tiles of the ladder (`_tile_ladder`)."""
    all_orders_up_to: int
    """Tiles of fewer than `FEW_ROWS` rows take every order only up to this size; beyond, the small space's
    (`_ORDERS_SMALL`): they stream operand 1 once a row or two, run at a fraction of the micro-kernel's rate,
    and at N = 2 048 took seven of a full calibration's 25 minutes on a Zen 3 under the eight orders."""


_ORDERS_FULL: tuple[tuple[Any, str], ...] = (
    ("none", "IJ"), ("none", "JI"), *((128, "".join(p)) for p in permutations("IJK")), (32, "IJK"), (32, "KIJ"),
)  # fmt: skip
_ORDERS_SMALL: tuple[tuple[Any, str], ...] = (("none", "IJ"), ("none", "JI"), (32, "IJK"), (32, "KIJ"))

SPACES: dict[str, GemmShapes] = {
    "calib": GemmShapes(
        square=(256, 512, 1024, 2048), thin=((16, 4096, 4096), (4096, 4096, 16)),
        scalar_up_to=512, one_worker_up_to=1024, orders=_ORDERS_FULL, tiles=5, all_orders_up_to=1024,
    ),
    "calib-small": GemmShapes(
        square=(64, 128, 256), thin=((16, 512, 512), (512, 512, 16), (16, 4096, 1056)),
        scalar_up_to=256, one_worker_up_to=256, orders=_ORDERS_SMALL, tiles=3, all_orders_up_to=512,
    ),
}  # fmt: skip
"""`calib`, the calibration a profile is fitted on (about 20 minutes on 2 cores), and
`calib-small`, the same kinds of points in about a minute (CI, first use)."""

_VECTOR_SIZES = {"calib": (1 << 12, 1 << 16, 1 << 20, 1 << 23), "calib-small": (1 << 10, 1 << 14, 1 << 18)}
"""Elements of the non-contraction nests: inside L1, L2, L3 and beyond (32 MiB and 64 MiB a buffer)."""


def _tile_ladder(machine: Machine, dtype: str, count: int) -> list[list[int]]:
    """Register tiles from one row to the largest the registers hold, `count` of them.

    At L lanes: [1, L], [2, L], [4, L], [4, 2L], then the tile of most
    accumulators that fits the vector registers at 2L columns (BLIS's
    micro-kernel shape: [6, 16] in 8 lanes on 16 registers, [8, 32] in 16
    on 32). bf16 has no lanes and takes the f32 ladder's shapes at 8.
    """
    lanes = machine.register_width(dtype) if dtype != "bf16" else 8
    lanes = min(max(lanes, 4), max(TILE_COLS) // 2)
    rows = max(r for r in (1, 2, 4, 6, 8) if tile_registers((r, 2 * lanes), lanes) <= machine.vector_registers)
    ladder = [[1, lanes], [2, lanes], [4, lanes], [4, 2 * lanes], [rows, 2 * lanes]]
    unique = list(dict.fromkeys(tuple(tile) for tile in ladder))
    return [list(tile) for tile in unique[-count:]] if count < len(unique) else [list(t) for t in unique]


FEW_ROWS = 4
"""Tiles of fewer rows than this ([1, L], [2, L]) re-read operand 1 for every row or two of the output."""

FEW_CHAINS_SIDE = 256
"""The square the few-chain tiles are measured at: K long enough that the out-of-order core cannot
overlap consecutive tiles' chains (at N = 64 a tile's k loop is short enough that it does), so the
latency shows as it does in a model's products."""


def _few_chain_tiles(machine: Machine, dtype: str, count: int) -> list[list[int]]:
    """The scalar tile and the ladder's tiles below its last `count`: few independent FMA chains each.

    They run bound by the FMA's latency (`presk.cost.quantities`, "Stall"), which the stall prices with
    the rate of their group; measured at one square (`FEW_CHAINS_SIDE`) only, as they are slow."""
    ladder = _tile_ladder(machine, dtype, 5)  # the whole ladder
    return [[1, 1], *ladder[: max(0, len(ladder) - count)]]


def _split(order: str, workers: int, all_workers: int) -> Any:
    """One worker: no split. All: the outermost parallel block loop (a K-outer order's I or J)."""
    if workers == 1:
        return "none"
    return {"depth": len(order) - len(order.lstrip("K")), "workers": all_workers}


def _gemm_points(shapes: GemmShapes, machine: Machine, dtypes: Sequence[str]) -> Iterator[Point]:
    """Every (tile, lanes, order, workers) of `shapes`, lanes being one and each width of the target.

    A default layout vectorises at the widest width that divides the tile
    ([1, 8] in f32 is 8 lanes on AVX-512 too), so every width is a group the
    model must price: the narrower ones are measured up to `one_worker_up_to`.
    """
    all_workers = machine.workers()
    worker_counts = tuple(dict.fromkeys((1, all_workers)))
    dims = [(n, n, n) for n in shapes.square] + list(shapes.thin)
    for dtype in dtypes:
        widths = machine.lane_widths(dtype)
        widest = max(widths, default=1)
        micro_kernel = _tile_ladder(machine, dtype, 1)[0]
        n = max(s for s in shapes.square if s <= FEW_CHAINS_SIDE)
        for tile in _few_chain_tiles(machine, dtype, shapes.tiles):
            for lanes in sorted({1, *widths}, reverse=True):
                if tile[1] % lanes == 0:
                    for order in ("IJ", "JI"):
                        for workers in worker_counts:
                            layout = {"tile": tile, "kblock": "none", "order": order, "lanes": lanes,
                                      "split": _split(order, workers, all_workers)}  # fmt: skip
                            yield _point("gemm", {"I": n, "K": n, "J": n}, dtype, layout)
        for i, k, j in dims:
            largest = max(i, k, j)
            for tile in _tile_ladder(machine, dtype, shapes.tiles):
                for lanes in sorted({1, *widths}, reverse=True):
                    if tile[1] % lanes:
                        continue
                    if lanes == 1 and widest > 1 and largest > shapes.scalar_up_to:
                        continue
                    if 1 < lanes < widest and largest > shapes.one_worker_up_to and max(i, j) > 16:
                        continue
                    few_rows = tile[0] < FEW_ROWS and min(i, k, j) > shapes.all_orders_up_to
                    for kblock, order in _ORDERS_SMALL if few_rows else shapes.orders:
                        for workers in worker_counts:
                            if workers == 1 and largest > shapes.one_worker_up_to and all_workers > 1:
                                continue
                            layout = {"tile": tile, "kblock": kblock, "order": order, "lanes": lanes,
                                      "split": _split(order, workers, all_workers)}  # fmt: skip
                            yield _point("gemm", {"I": i, "K": k, "J": j}, dtype, layout)
                            if tile == micro_kernel and lanes == widest and workers == all_workers:
                                yield _point("gemm", {"I": i, "K": k, "J": j}, dtype, {**layout, "pack": True})


def _vector_points(kind: str, machine: Machine, dtypes: Sequence[str]) -> Iterator[Point]:
    all_workers = machine.workers()
    for dtype in dtypes:
        for elements in _VECTOR_SIZES[kind]:
            rows, cols = elements // 256, 256
            for entry in ("chain", "exp", "rowsum", "softmax"):
                for workers in dict.fromkeys((1, all_workers)):
                    split = "none" if workers == 1 else {"depth": 0, "workers": workers}
                    yield _point(entry, {"R": rows, "M": cols}, dtype, {"split": split})
    # Integer outputs have one group whatever the realization: measured once, at a square of each size.
    for elements in _VECTOR_SIZES[kind]:
        side = math.isqrt(elements)
        for workers in dict.fromkeys((1, all_workers)):
            split = "none" if workers == 1 else {"depth": 0, "workers": workers}
            yield _point("mask", {"R": side}, "f64", {"split": split})


def space(kind: str, machine: Machine, dtypes: Sequence[str] = ("f32", "f64", "bf16")) -> list[Point]:
    """The points of calibration space `kind` (`SPACES`) on `machine`, in the order they are measured."""
    if kind not in SPACES:
        raise PreskError("E4001", f"--space {kind}: expected one of {', '.join(SPACES)}")
    gemm_dtypes = [d for d in dtypes if d != "bf16"]
    points = list(_vector_points(kind, machine, dtypes)) + list(_gemm_points(SPACES[kind], machine, gemm_dtypes))
    if "bf16" in dtypes:
        # bf16 computes in f32 one element at a time: its GEMMs are scalar and small.
        small = GemmShapes(
            square=(128, 256), thin=(), scalar_up_to=256, one_worker_up_to=256,
            orders=(("none", "IJ"), ("none", "JI")), tiles=3, all_orders_up_to=256,
        )  # fmt: skip
        points += list(_gemm_points(small, machine, ["bf16"]))
    return points


# --------------------------------------------------------------------------
# Measuring.


def rule_sets() -> list[str]:
    """Every subset of the cost rules, as profiles key them: "" and the names sorted, joined by commas."""
    return [",".join(sorted(subset)) for n in range(len(RULES) + 1) for subset in combinations(RULES, n)]


def operation_count(kernel: KernelOp) -> int:
    """The operations a kernel's text holds, its loops not unrolled: a count that knows no shape.

    It is the predictor a cost without a profile would be, kept beside the
    measured time so that a calibration reports how much better W and the
    fitted model rank the kernels than counting does."""
    return sum(1 for op in kernel.walk() if op.name not in ("arith.constant", "scf.yield") and op is not kernel)


def _inputs(module: ModuleOp, entry: str, env: dict[str, int], seed: int) -> list[np.ndarray]:
    return flatten_inputs(make_inputs(find_entry(module, entry), env, seed))


def kernel_samples(
    kernels: ModuleOp,
    leaves: Sequence[Any],
    runner: Any,
    desc: MachineDesc,
    describe: dict[str, Any],
    min_calls: int = MIN_CALLS,
    min_seconds: float | None = None,
    max_calls: int = MAX_CALLS,
    rules: Sequence[str] | None = None,
) -> list[Sample]:
    """Time every launch of a lowered program and give one sample per kernel (see the module docstring).

    `rules` names the rule sets whose terms a sample keeps (default: every
    one, as a profile needs for a later `presk refit --recost`).

    `describe` is copied into every sample (what was measured: entry,
    sizes, type, layout); the sample adds the kernel's name, launches per
    call, workers, median seconds, quartiles, operation count, and its
    quantities under every rule set."""
    min_seconds = MIN_SECONDS if min_seconds is None else min_seconds  # read at the call: the suite shortens it
    timed = TimedRunner(runner)
    host = HostProgram(kernels, timed)
    prepared = host.prepare_inputs(leaves)
    host(prepared)
    for times in timed.samples.values():
        times.clear()
    calls = call_for_a_window(lambda: host(prepared), min_calls, min_seconds, max_calls)
    samples = []
    for name, times in timed.samples.items():
        if not times:
            continue
        kernel, workers = timed.kernels[name], timed.workers[name]
        quartiles = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
        terms = all_terms(kernel, desc, workers, rules)
        extra = {**describe, "kernel": name, "launches": len(times) // max(calls, 1), "workers": workers,
                 TERMS_CODE: terms_code(), TIMING: TIMING_WINDOW}  # fmt: skip
        samples.append(Sample(terms, statistics.median(times), (quartiles[0], quartiles[2]),
                              operation_count(kernel), extra))  # fmt: skip
    return samples


def point_kernels(point: Point) -> ModuleOp:
    """The kernels and host program of one calibration point (a `PreskError` if its layout is refused, E7002).

    Separate from `measure_point` so that a measurer can look at the kernels
    first: a worker pinned to one core hands back a point whose kernels run
    on several workers (`presk.tuning.distributed`)."""
    module = _calibration_module()
    env = sizes.resolve(module, {}, dict(point.sizes))
    plan = replace(parse_plan(point.plan(), "calibration"), warns_of_spills=False)  # spilling tiles on purpose
    return lower(module, point.entry, env, plan)


def measure_point(point: Point, runner: Any, desc: MachineDesc, seed: int = 0,
                  kernels: ModuleOp | None = None) -> list[Sample]:  # fmt: skip
    """The samples of one calibration point (a `PreskError` if its layout is refused, E7002);
    `kernels`, if given, are `point_kernels(point)` already lowered."""
    module = _calibration_module()
    env = sizes.resolve(module, {}, dict(point.sizes))
    kernels = point_kernels(point) if kernels is None else kernels
    describe = {"key": point.key, "entry": point.entry, "sizes": dict(point.sizes), "dtype": point.dtype,
                "layout": _thaw(dict(point.layout))}  # fmt: skip
    return kernel_samples(kernels, _inputs(module, point.entry, env, seed), runner, desc, describe)


def point_of_key(key: str) -> Point | None:
    """The calibration point a sample's key names, or None (a sample of an entry, `presk bench FILE --entry`)."""
    try:
        data = json.loads(key)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or set(data) != {"entry", "sizes", "dtype", "layout"}:
        return None
    return _point(data["entry"], data["sizes"], data["dtype"], data["layout"])


def all_terms(
    kernel: KernelOp, desc: MachineDesc, workers: int, rules: Sequence[str] | None = None
) -> dict[str, KernelTerms]:
    """A kernel's terms under each rule set of `rules` (default: every one), as a sample keeps them."""
    keys = list(rule_sets() if rules is None else rules)
    terms = kernel_terms_by_rules(kernel, desc, workers, [frozenset(filter(None, key.split(","))) for key in keys])
    return dict(zip(keys, terms))


def reprice(samples: Sequence[Sample], desc: MachineDesc, progress: Progress | None = None) -> tuple[list[Sample], int]:
    """Every calibration sample's terms read again from its point, lowered again, against `desc`.

    What was measured (the times) is kept; what the model reads of each
    kernel is recomputed, so a profile whose machine description was
    edited, or whose samples predate a change of the quantities, is priced
    as a new calibration would price it without timing anything. Samples of
    an entry (not a calibration point) keep their terms: returns the new
    samples and how many were kept as they were.
    """
    kernels_of: dict[str, dict[str, KernelOp]] = {}
    repriced, kept = [], 0
    for sample in samples:
        point = point_of_key(str(sample.extra.get("key")))
        if point is None:
            repriced.append(sample)
            kept += 1
            continue
        if point.key not in kernels_of:
            lowered = point_kernels(point)
            kernels_of[point.key] = {op.sym_name.data: op for op in lowered.walk() if isinstance(op, KernelOp)}
            if progress is not None:
                progress.step(f"{point.entry} {point.dtype} {dict(point.sizes)}")
        kernel = kernels_of[point.key][str(sample.extra["kernel"])]
        terms = all_terms(kernel, desc, int(sample.extra.get("workers", 1)))
        repriced.append(replace(sample, terms=terms, extra={**sample.extra, TERMS_CODE: terms_code()}))
    return repriced, kept


TERMS_CODE = "terms_code"
"""The key, in a calibration sample's `extra`, of the presk that read its terms (`terms_code`)."""


def terms_code() -> str:
    """This presk's sources, hashed (`code_version`, 16 hex digits): what lowers a point and counts its terms."""
    return code_version()[:16]


TIMING = "timing"
TIMING_WINDOW = "window"
"""What a sample's median is over, as each sample records it (`"timing"`): the launches of a window of
`MIN_SECONDS`, on inputs placed on cache lines. A sample without it was timed over at most 25 calls on
inputs wherever numpy put them, whose medians two calibrations disagreed on by 8 to 9 % (docs/cost.md §6.10)."""


def coarsely_timed(samples: Iterable[Sample]) -> int:
    """How many calibration samples were timed before the window (`TIMING_WINDOW`): a profile fitted on them
    has its timing's noise in its u, and is better measured again than refitted."""
    return sum(1 for s in samples
               if s.extra.get(TIMING) != TIMING_WINDOW and point_of_key(str(s.extra.get("key"))) is not None)


def stale_samples(samples: Iterable[Sample]) -> int:
    """How many calibration samples had their terms read by another presk, or by one that did not say.

    A profile's constants are fitted to its samples' terms, and a plan
    prices points with the terms this presk reads: after a change to the
    lowering or the quantities the two disagree until `reprice` reads the
    samples' terms again. Samples of an entry are not counted: they cannot
    be lowered again.
    """
    code = terms_code()
    return sum(
        1 for s in samples if s.extra.get(TERMS_CODE) != code and point_of_key(str(s.extra.get("key"))) is not None
    )


def relowered(profile: Profile, stream: Any = None) -> tuple[Profile, int]:
    """`profile` with its samples' terms read again against its machine_desc (`reprice`), a progress bar on
    `stream`; and how many samples (an entry's) kept theirs. Saving it writes the new samples."""
    if profile.machine_desc is None:
        raise PreskError(PROFILE_ERROR, "the profile has no machine_desc to price its samples against")
    points = len({str(s.extra.get("key")) for s in profile.samples})
    progress = Progress(points, label="relowering", stream=stream or sys.stderr)
    try:
        samples, kept = reprice(profile.samples, profile.machine_desc, progress)
    finally:
        progress.close()
    return replace(profile, samples=tuple(samples), samples_file=None), kept


# --------------------------------------------------------------------------
# Progress.


PLAIN_PROGRESS_EVERY_S = 60.0
"""How often a progress report goes to a stream that is no terminal (a log, a CI job): one whole line
a minute, so that a run of minutes shows it is alive and a run of seconds prints nothing."""


@dataclass
class Progress:
    """A one-line progress bar with an ETA on stderr, and a time budget.

    On a terminal the bar is redrawn in place at every step; elsewhere (a log
    file, a pipe) a plain line is written at most once every
    `PLAIN_PROGRESS_EVERY_S`, since carriage returns would pile up there.
    """

    total: int
    budget_s: float | None = None
    label: str = "calibrating"
    stream: Any = field(default_factory=lambda: sys.stderr)
    start: float = field(default_factory=time.perf_counter)
    done: int = 0
    last_plain: float | None = None
    """When the last plain line was written (`time.perf_counter`), None before the first."""

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def over_budget(self) -> bool:
        return self.budget_s is not None and self.elapsed() >= self.budget_s

    def step(self, note: str = "") -> None:
        self.done += 1
        now = time.perf_counter()
        elapsed = now - self.start
        eta = elapsed / self.done * (self.total - self.done)
        if not self.stream.isatty():
            if now - (self.start if self.last_plain is None else self.last_plain) >= PLAIN_PROGRESS_EVERY_S:
                self.last_plain = now
                self.stream.write(f"{self.label}: {self.done}/{self.total} ({100 * self.done // max(self.total, 1)} %), "
                                  f"{_clock(elapsed)} elapsed, ETA {_clock(eta)}\n")  # fmt: skip
                self.stream.flush()
            return
        bar = "#" * (self.done * 30 // max(self.total, 1))
        self.stream.write(f"\r{self.label} [{bar:<30}] {self.done}/{self.total} {_clock(elapsed)} "
                          f"ETA {_clock(eta)} {note[:40]:<40}")  # fmt: skip
        self.stream.flush()

    def close(self) -> None:
        if self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def parse_budget(text: str, flag: str = "--budget") -> float:
    """`90s`, `20m`, `1.5h` or a number of seconds (`flag` names the option in the errors)."""
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(text[-1:].lower())
    number = text[:-1] if scale else text
    try:
        value = float(number) * (scale or 1.0)
    except ValueError:
        raise PreskError("E4001", f"{flag} {text}: expected a time such as 90s, 20m or 1.5h") from None
    if not value > 0 or value == float("inf"):
        raise PreskError("E4001", f"{flag} {text}: expected a positive time")
    return value


def run_space(
    points: Iterable[Point],
    done: set[str],
    runner: Any,
    desc: MachineDesc,
    record: Callable[[list[Sample]], None],
    progress: Progress,
) -> tuple[int, int, bool]:
    """Measure every point not in `done`, handing each point's samples to `record` as soon as it has them.

    Returns (points measured, points refused, whether the budget stopped it)."""
    measured = refused = 0
    for point in points:
        if point.key in done:
            progress.step("(already measured)")
            continue
        if progress.over_budget():
            return measured, refused, True
        try:
            samples = measure_point(point, runner, desc)
        except PreskError as error:
            if error.code != "E7002":
                raise
            refused += 1
            progress.step("(refused)")
            continue
        record(samples)
        done.add(point.key)
        measured += 1
        progress.step(f"{point.entry} {point.dtype} {dict(point.sizes)}")
    return measured, refused, False
