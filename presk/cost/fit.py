"""Fitting the cost models to measured times, on the relative error.

Times span five orders of magnitude, so the fit minimises Σ (T̂/t − 1)²:
a 10 µs kernel weighs what a 1 s kernel does. The method is the seed's:

* **Rates by coordinate descent on a log grid.** Each rate (π_g, ρ, β) is
  tried over `v·e^{kh}`, k = −3..3, around its value v, keeping the best;
  sweeps repeat until no rate moves, then h is divided by 4, from h = ln 2
  down to ~4·10⁻⁵ (the rates' last relative step). One more coordinate
  scales every rate at once: at a sample where two terms of a max tie, no
  single rate can lower the prediction, and that move can. A rate moves
  only the samples that have its quantity, so each trial is evaluated on
  those alone, all grid points at once.
* **λ and spawn in closed form.** For fixed rates T̂ᵢ = λ + spawn·sᵢ + Cᵢ
  (sᵢ = [pᵢ>1]), and the objective is Σ (λ·xᵢ + spawn·yᵢ − zᵢ)² with
  xᵢ = 1/tᵢ, yᵢ = sᵢ/tᵢ, zᵢ = 1 − Cᵢ/tᵢ: linear least squares in
  (λ, spawn) ≥ 0. With spawn fixed, λ* = max(0, Σ xᵢ(zᵢ − spawn·yᵢ) / Σ xᵢ²);
  jointly, the 2×2 normal equations, or when their solution leaves the
  quadrant, the better of the two one-variable solutions on its edges
  (the objective is a convex quadratic, so its constrained minimum lies on
  the edge whose own minimum is best). They are re-solved after every rate
  that moves.
* **q of the p-norm by a 1-D search** over [1, 8]: a coarse grid, then a
  golden-section search between the best point's neighbours, the rates
  refitted (warm, from the nearest q's) at every q tried.
* **Initial rates** from simple statistics: each rate the median of
  quantity/t over the samples that have the quantity (the rate at which
  a typical sample would be bound by that term alone).

A rate no sample binds is **not identified**: raising it (so its term
shrinks further) leaves the objective unchanged, because the term never
decides a prediction. It is detected so: the rate raised ×2, ×4, ×16 and
×256 changes Σ r² by at most 10⁻⁶ of itself (+10⁻¹² per sample), which a
max or sum meets exactly and a p-norm meets when the term stays below a few
percent of the largest wherever it occurs. It is reported, and its value
kept as where the fit left it (predictions use it; any larger fits as well). spawn is not identified when no
sample runs on more than one worker. A group with no sample gets no rate.

u, the figure of merit, is the median of |T̂/t − 1|: a typical relative
error, robust to the few points the shared machine disturbed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from presk.cost.models import (
    COMBINES,
    LAYOUT,
    LOAD_TERMS,
    PROFILE_ERROR,
    ROOFLINE,
    Constants,
    Form,
    TermArrays,
    combine_groups,
    model_terms,
    predict_many,
)
from presk.cost.terms import KernelTerms
from presk.diagnostics import PreskError

__all__ = [
    "Q_RANGE",
    "FitResult",
    "FormScore",
    "compare",
    "fit_layout",
    "fit_roofline",
    "median_abs_relative",
    "ranks",
    "spearman",
]

Sample = tuple[KernelTerms, float]

Q_RANGE: tuple[float, float] = (1.0, 8.0)
_Q_GRID: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
_GOLDEN_STEPS = 6
_K = 3
_H0 = math.log(2.0)
_H_MIN = 5e-5
_MAX_SWEEPS = 60
_IDENTIFY_FACTORS = np.array([2.0, 4.0, 16.0, 256.0])


@dataclass(frozen=True)
class FitResult:
    constants: Constants
    u: float
    objective: float
    """Σ (T̂/t − 1)² at the constants."""
    predicted: np.ndarray


@dataclass(frozen=True)
class FormScore:
    """One form of the nine `compare` fits, and how well it fits."""

    form: Form
    u: float
    objective: float


@functools.cache
def _factors(h: float) -> np.ndarray:
    """The trial factors of a move at step h, e^(h·j) for j in [−K, K] (read-only: shared by every move at h)."""
    factors = np.exp(h * np.arange(-_K, _K + 1))
    factors.flags.writeable = False
    return factors


def median_abs_relative(predicted: np.ndarray, seconds: np.ndarray) -> float:
    """u: the median of |T̂/t − 1|."""
    return float(np.median(np.abs(predicted / seconds - 1.0)))


def ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the average of the ranks they span."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Each run of equal values [start, end) gets the mean of ranks start+1 .. end.
    starts = np.flatnonzero(np.concatenate(([True], sorted_x[1:] != sorted_x[:-1])))
    ends = np.concatenate((starts[1:], [len(x)]))
    average = (starts + 1 + ends) / 2.0
    result = np.empty(len(x), dtype=np.float64)
    result[order] = np.repeat(average, ends - starts)
    return result


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's on average ranks); NaN when either side is constant."""
    rx, ry = ranks(x), ranks(y)
    if len(rx) != len(ry):
        raise ValueError("spearman: the two series differ in length")
    dx, dy = rx - rx.mean(), ry - ry.mean()
    norm = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / norm if norm > 0 else float("nan")


@dataclass(frozen=True)
class _RateMove:
    """The index sets a move of one rate reads, built once per problem: a move is tried thousands of times
    in a fit, and on a few dozen samples building them again cost more than its arithmetic."""

    term: int
    """The term the rate prices."""
    members: np.ndarray
    """The samples that have its quantity."""
    others: tuple[np.ndarray, ...] | None
    """The other terms of its group at those samples (an `np.ix_` index), None when it is alone."""
    rest: tuple[tuple[np.ndarray, ...], ...]
    """Each other group's terms at those samples (`sum`'s second group)."""
    x: np.ndarray
    y: np.ndarray | None


class _Problem:
    """The fit of one model form on fixed samples, in units of each sample's measured time.

    Every term is kept divided by tᵢ (`tau`, K × n), so a prediction's
    ratio T̂/t is λ·x + spawn·y + C(tau): C is homogeneous of degree 1.
    """

    def __init__(self, kind: str, form: Form, arrays: TermArrays, seconds: np.ndarray) -> None:
        self.kind, self.form = kind, form
        specs = model_terms(kind, form, arrays)
        self.term_names = [spec.name for spec in specs]
        self.how, self.groups = combine_groups(kind, form, self.term_names)
        self.q = form.q if form.q is not None else 2.0
        self.x = 1.0 / seconds
        spawned = arrays.workers > 1
        self.y = spawned / seconds if kind == LAYOUT and spawned.any() else None
        self.has_spawn_data = self.y is not None
        self.a = np.stack([spec.quantity for spec in specs]) / seconds  # K × n
        names: list[str] = []
        index: dict[str, int] = {}
        self.rate_of = np.empty(self.a.shape, dtype=np.int64)
        for k, spec in enumerate(specs):
            for i, name in enumerate(spec.rates):
                r = index.get(name)
                if r is None:
                    r = index[name] = len(names)
                    names.append(name)
                self.rate_of[k, i] = r
        self.names = names
        # Each rate prices one term; its samples are those with that quantity.
        self.term_of = np.empty(len(names), dtype=np.int64)
        self.members: list[np.ndarray] = []
        for r in range(len(names)):
            k = int(np.flatnonzero((self.rate_of == r).any(axis=1))[0])
            self.term_of[r] = k
            self.members.append(np.flatnonzero((self.rate_of[k] == r) & (self.a[k] > 0)))
        self.moves = [self._move_of(r) for r in range(len(names))]
        self.theta = np.ones(len(names))
        self.lam = 0.0
        self.spawn = 0.0

    # -- state ---------------------------------------------------------------
    def initial_rates(self) -> None:
        for r, members in enumerate(self.members):
            k = self.term_of[r]
            self.theta[r] = float(np.median(self.a[k, members])) if len(members) else math.inf
        self.refresh()

    def set_rates(self, values: dict[str, float]) -> None:
        for r, name in enumerate(self.names):
            if name in values and len(self.members[r]):
                self.theta[r] = values[name]
        self.refresh()

    def refresh(self) -> None:
        with np.errstate(divide="ignore", invalid="ignore"):
            self.tau = np.where(self.a == 0.0, 0.0, self.a / self.theta[self.rate_of])
        self._refresh_powers()
        self.c = self._combine(self.tau)

    def _refresh_powers(self, k: int | None = None, members: np.ndarray | None = None) -> None:
        """`tau_q`, every term's τ to the q (the p-norm's), kept beside τ: a move prices one rate's trials
        against the others' powers, which change only when a move is taken (the same values, so the same
        sums, as raising them at every trial)."""
        if self.how == "max":
            return
        with np.errstate(over="ignore"):
            if k is None:
                self.tau_q = np.power(self.tau, self.q)
            else:
                self.tau_q[k, members] = np.power(self.tau[k, members], self.q)

    def _combine(self, tau: np.ndarray) -> np.ndarray:
        total = None
        for group in self.groups:
            part = tau[group]
            if self.how == "max":
                value = part.max(axis=0)
            else:
                with np.errstate(over="ignore"):
                    value = np.power(np.power(part, self.q).sum(axis=0), 1.0 / self.q)
            total = value if total is None else total + value
        assert total is not None
        return total

    def ratio(self) -> np.ndarray:
        fixed = self.lam * self.x + self.c
        return fixed if self.y is None else fixed + self.spawn * self.y

    def objective(self) -> float:
        r = self.ratio() - 1.0
        return float(r @ r)

    # -- moves ---------------------------------------------------------------
    def solve_offsets(self) -> None:
        """λ and spawn ≥ 0 in closed form for the current rates (see the module docstring)."""
        z = 1.0 - self.c
        x, y = self.x, self.y
        xx, xz = float(x @ x), float(x @ z)
        if y is None:
            self.lam = max(0.0, xz / xx)
            return
        yy, xy, yz = float(y @ y), float(x @ y), float(y @ z)
        candidates = [(max(0.0, xz / xx), 0.0), (0.0, max(0.0, yz / yy))]
        det = xx * yy - xy * xy
        if det > 1e-12 * xx * yy:
            lam, spawn = (yy * xz - xy * yz) / det, (xx * yz - xy * xz) / det
            if lam >= 0.0 and spawn >= 0.0:
                candidates.append((lam, spawn))

        def cost(lam: float, spawn: float) -> float:
            r = lam * x + spawn * y - z
            return float(r @ r)

        self.lam, self.spawn = min(candidates, key=lambda ls: cost(*ls))

    def _move_of(self, r: int) -> _RateMove:
        """What a move of rate r reads, fixed for the problem (see `_RateMove`)."""
        k, members = int(self.term_of[r]), self.members[r]
        own = next(g for g, group in enumerate(self.groups) if k in group)
        others = np.array([j for j in self.groups[own] if j != k], dtype=np.intp)
        rest = tuple(np.ix_(np.array(group, dtype=np.intp), members) for g, group in enumerate(self.groups) if g != own)
        y = None if self.y is None else self.y[members]
        return _RateMove(k, members, np.ix_(others, members) if len(others) else None, rest, self.x[members], y)

    def _trial(self, r: int, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The objective over rate r's samples with θ_r × each factor: (objectives, C per trial, members).

        Called inside `descend`, whose error state lets a power overflow to inf (a trial no better than any)."""
        move = self.moves[r]
        members = move.members
        cand = self.tau[move.term, members][None, :] / factors[:, None]  # J × m
        if self.how == "max":
            rest = self.tau[move.others].max(axis=0) if move.others is not None else np.zeros(len(members))
            trial_c = np.maximum(rest[None, :], cand)
            for group in move.rest:
                trial_c = trial_c + self.tau[group].max(axis=0)[None, :]
        else:  # one group, every term: the others' powers summed, and the trial's own
            rest = self.tau_q[move.others].sum(axis=0) if move.others is not None else np.zeros(len(members))
            trial_c = np.power(rest[None, :] + np.power(cand, self.q), 1.0 / self.q)
        offset = self.lam * move.x
        if move.y is not None:
            offset = offset + self.spawn * move.y
        resid = trial_c + offset[None, :] - 1.0
        return np.einsum("ij,ij->i", resid, resid), trial_c, members

    def move_rate(self, r: int, h: float) -> bool:
        if not len(self.members[r]) or not math.isfinite(self.theta[r]):
            return False
        factors = _factors(h)
        objectives, trial_c, members = self._trial(r, factors)
        objectives = np.where(np.isfinite(objectives), objectives, np.inf)
        best = int(np.argmin(objectives))
        if not objectives[best] < objectives[_K] * (1.0 - 1e-13):
            return False
        self.theta[r] *= factors[best]
        k = int(self.term_of[r])
        self.tau[k, members] = self.tau[k, members] / factors[best]
        self._refresh_powers(k, members)
        self.c[members] = trial_c[best]
        return True

    def move_scale(self, h: float) -> bool:
        """Every rate × f at once: C/f, since C is homogeneous."""
        factors = _factors(h)
        offset = self.lam * self.x if self.y is None else self.lam * self.x + self.spawn * self.y
        resid = self.c[None, :] / factors[:, None] + offset[None, :] - 1.0
        objectives = np.einsum("ij,ij->i", resid, resid)
        best = int(np.argmin(objectives))
        if not objectives[best] < objectives[_K] * (1.0 - 1e-13):
            return False
        self.theta *= factors[best]
        self.tau /= factors[best]
        self._refresh_powers()
        self.c /= factors[best]
        return True

    def descend(self, h0: float = _H0) -> None:
        self.solve_offsets()
        h = h0
        with np.errstate(over="ignore"):
            while h >= _H_MIN:
                for _ in range(_MAX_SWEEPS):
                    moved = False
                    for r in range(len(self.names)):
                        if self.move_rate(r, h):
                            moved = True
                            self.solve_offsets()
                    if self.move_scale(h):
                        moved = True
                        self.solve_offsets()
                    if not moved:
                        break
                h /= 4.0

    def unidentified(self) -> set[str]:
        """Rates whose term decides no prediction: raising them leaves the objective as it is."""
        result = set()
        base = self.objective()
        tolerance = 1e-6 * base + 1e-12 * len(self.x)
        for r, name in enumerate(self.names):
            if not len(self.members[r]) or not math.isfinite(self.theta[r]):
                result.add(name)
                continue
            with np.errstate(over="ignore"):
                objectives, _, members = self._trial(r, _IDENTIFY_FACTORS)
            here = self.ratio()[members] - 1.0
            if float(np.max(np.abs(objectives - float(here @ here)))) <= tolerance:
                result.add(name)
        if self.kind == LAYOUT and not self.has_spawn_data:
            result.add("spawn")
        return result

    def constants(self) -> Constants:
        values = {name: float(self.theta[r]) for r, name in enumerate(self.names)}
        values["lambda"] = float(self.lam)
        if self.kind == LAYOUT:
            values["spawn"] = float(self.spawn)
        form = replace(self.form, q=self.q if self.form.combine == "pnorm" else None) if self.kind == LAYOUT else Form()
        return Constants(self.kind, values, form, frozenset(self.unidentified()))


def _prepare(samples: Sequence[Sample]) -> tuple[TermArrays, np.ndarray]:
    if not samples:
        raise PreskError(PROFILE_ERROR, "nothing to fit: there are no samples")
    seconds = np.array([float(t) for _, t in samples], dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(seconds) & (seconds > 0)))
    if len(bad):
        raise PreskError(PROFILE_ERROR, f"sample {int(bad[0])} has a measured time of {seconds[bad[0]]}: times are positive seconds")
    return TermArrays.of([terms for terms, _ in samples]), seconds


def _result(problem: _Problem, arrays: TermArrays, seconds: np.ndarray) -> FitResult:
    constants = problem.constants()
    predicted = predict_many(constants, arrays)
    r = predicted / seconds - 1.0
    return FitResult(constants, median_abs_relative(predicted, seconds), float(r @ r), predicted)


def fit_roofline(samples: Sequence[Sample]) -> FitResult:
    """λ, one β and a π per machine type and lane width."""
    arrays, seconds = _prepare(samples)
    problem = _Problem(ROOFLINE, Form(), arrays, seconds)
    problem.initial_rates()
    problem.descend()
    return _result(problem, arrays, seconds)


def fit_layout(samples: Sequence[Sample], form: Form = Form()) -> FitResult:
    """The layout model of `form`; q is searched over `Q_RANGE` unless `form` fixes it."""
    arrays, seconds = _prepare(samples)
    if form.combine != "pnorm" or form.q is not None:
        problem = _Problem(LAYOUT, form, arrays, seconds)
        problem.initial_rates()
        problem.descend()
        return _result(problem, arrays, seconds)
    return _search_q(form, arrays, seconds)


def _search_q(form: Form, arrays: TermArrays, seconds: np.ndarray) -> FitResult:
    tried: dict[float, tuple[float, Constants]] = {}
    last: dict[str, float] | None = None

    def fit_at(q: float, warm: dict[str, float] | None) -> float:
        problem = _Problem(LAYOUT, replace(form, q=q), arrays, seconds)
        if warm is None:
            problem.initial_rates()
            problem.descend()
        else:
            problem.set_rates(warm)
            problem.descend(_H0 / 4.0)
        tried[q] = (problem.objective(), problem.constants())
        return tried[q][0]

    for q in _Q_GRID:
        fit_at(q, last)
        last = tried[q][1].values
    grid = sorted(tried)
    best = min(grid, key=lambda q: tried[q][0])
    i = grid.index(best)
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)

    def warm_for(q: float) -> dict[str, float]:
        return tried[min(tried, key=lambda t: abs(t - q))][1].values

    fa, fb = fit_at(a, warm_for(a)), fit_at(b, warm_for(b))
    for _ in range(_GOLDEN_STEPS):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = fit_at(a, warm_for(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = fit_at(b, warm_for(b))
    q = min(tried, key=lambda t: tried[t][0])
    constants = tried[q][1]
    predicted = predict_many(constants, arrays)
    r = predicted / seconds - 1.0
    return FitResult(constants, median_abs_relative(predicted, seconds), float(r @ r), predicted)


def compare_fits(samples: Sequence[Sample]) -> list[tuple[FormScore, FitResult]]:
    """The nine forms (load term × combine) fitted on the same samples, in a fixed order, with their fits."""
    fits = []
    for load_term in LOAD_TERMS:
        for how in COMBINES:
            result = fit_layout(samples, Form(load_term, how))
            fits.append((FormScore(result.constants.form, result.u, result.objective), result))
    return fits


def compare(samples: Sequence[Sample]) -> list[FormScore]:
    """The nine forms' scores (`compare_fits` without the fits)."""
    return [score for score, _ in compare_fits(samples)]
