"""The two cost models: a kernel launch's `KernelTerms` and a profile's constants give a time.

* The **roofline**: T̂ = λ + max(W/π, Q/β), π per machine type and lane
  width (`roofline_key`), one β and one λ. It is the baseline the layout
  model must beat, and what a profile without layout constants predicts.
* The **layout model**: T̂ = λ + spawn·[p>1] + C(W/π_g, (N_ld+S)/ρ_g,
  Q_L2/β_L2, p·Q_L3/β_L3, p·Q_mem/β_mem, Q_L2s/β_L2s, p·Q_L3s/β_L3s,
  Q_L2w/β_L2w, N_tr/τ_d, N_pw/ω), g = `group_key(terms)`, d its machine type, W
  with its latency stall
  (`KernelTerms.stall`) added, and the L2 and L3 lines in runs a page
  apart (`q_l2_scattered`, `q_l3_scattered`) and the L2 bytes of written
  buffers (`q_l2_written`) priced again at rates of their own (a profile
  without β_L2s, β_L3s or β_L2w: 0), and the transcendental functions
  evaluated (`transcendental`) priced at a rate per machine type, τ_d
  (`tau_f32`; a profile without it: 0), and the page walks (`page_walks`)
  at one rate for the machine, ω (`omega_walk`; a profile without it: 0),
  among the traffic terms. Its
  `Form` says how loads are priced (ρ per group, one ρ, or none: then the
  spill joins the work, (W+S)/π_g) and how the terms combine (`max`; `sum`
  = max(work, loads, transcendental) + max(l2, l3, mem, l2_scattered, l3_scattered,
  l2_written, page_walks); `pnorm` =
  (Σ tᵢ^q)^(1/q)). The L3 and memory terms are bytes of shared levels that
  every worker draws at once, hence p·Q; the L2 is private.

Constants are one flat mapping of names (`lambda`, `spawn`, `beta_l2`,
`pi[f64/l8/p1]`, ...) to values, so the fit sees a vector of rates and the
profile a readable table. A rate that no sample had any quantity for is
`inf` (its term is zero wherever it was measured, so it is dropped); a
group's rate missing altogether means the group was never measured, and a
prediction for it is refused (E8001) rather than guessed.

Everything is vectorised over samples (`TermArrays`): the fit evaluates the
model thousands of times, and per-sample Python loops would dominate it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from presk.cost.terms import KernelTerms, group_key
from presk.diagnostics import PreskError

__all__ = [
    "COMBINES",
    "LOAD_TERMS",
    "PROFILE_ERROR",
    "Breakdown",
    "Constants",
    "Form",
    "TermArrays",
    "TermSpec",
    "UnmeasuredGroup",
    "combine",
    "explain",
    "layout_terms",
    "model_terms",
    "predict_many",
    "roofline_key",
    "roofline_terms",
]

PROFILE_ERROR = "E8001"
"""The code of every error about a cost profile or a prediction from it."""

LOAD_TERMS: tuple[str, ...] = ("group", "machine", "none")
COMBINES: tuple[str, ...] = ("max", "sum", "pnorm")

LAYOUT = "layout"
ROOFLINE = "roofline"


@dataclass(frozen=True)
class Form:
    """Which layout model: how loads are priced, how terms combine, and q for `pnorm`.

    q is None until fitted: the fit searches it; a fixed q is only for a
    prediction or a fit that is told it.
    """

    load_term: str = "group"
    combine: str = "pnorm"
    q: float | None = None

    def __post_init__(self) -> None:
        if self.load_term not in LOAD_TERMS:
            raise PreskError(PROFILE_ERROR, f"unknown load term '{self.load_term}': expected one of {', '.join(LOAD_TERMS)}")
        if self.combine not in COMBINES:
            raise PreskError(PROFILE_ERROR, f"unknown combine '{self.combine}': expected one of {', '.join(COMBINES)}")
        if self.q is not None and not (np.isfinite(self.q) and self.q >= 1.0):
            raise PreskError(PROFILE_ERROR, f"q of a p-norm is a number of at least 1, not {self.q}")

    @property
    def name(self) -> str:
        return f"{self.load_term}/{self.combine}"


@dataclass(frozen=True)
class Constants:
    """One model's constants: `kind` is `layout` (with its `form`) or `roofline`.

    `unidentified` names the constants no sample binds: their value in
    `values` is where the fit left them (any larger rate fits as well), kept
    so predictions can be made, and the profile writes them as not identified.
    """

    kind: str
    values: dict[str, float]
    form: Form = field(default_factory=Form)
    unidentified: frozenset[str] = frozenset()

    def value(self, name: str) -> float:
        return self.values.get(name, 0.0 if name in ("lambda", "spawn") else float("inf"))


def roofline_key(terms: KernelTerms) -> str:
    """The roofline's π is per machine type and lane width, whatever the workers."""
    return f"{terms.dtype}/l{terms.lanes}"


@dataclass(frozen=True)
class TermArrays:
    """The quantities of many samples as columns, for vectorised models."""

    work: np.ndarray
    bytes: np.ndarray
    loads: np.ndarray
    stall: np.ndarray
    spill: np.ndarray
    q_l2_scattered: np.ndarray
    q_l3_scattered: np.ndarray
    q_l2_written: np.ndarray
    transcendental: np.ndarray
    page_walks: np.ndarray
    q_l2: np.ndarray
    q_l3: np.ndarray
    q_mem: np.ndarray
    workers: np.ndarray
    groups: tuple[str, ...]
    keys: tuple[str, ...]
    """The roofline key of each sample."""
    dtypes: tuple[str, ...]

    @staticmethod
    def of(terms: Sequence[KernelTerms]) -> TermArrays:
        def column(name: str) -> np.ndarray:
            return np.array([float(getattr(t, name)) for t in terms], dtype=np.float64)

        return TermArrays(
            column("work"),
            column("bytes"),
            column("loads"),
            column("stall"),
            column("spill"),
            column("q_l2_scattered"),
            column("q_l3_scattered"),
            column("q_l2_written"),
            column("transcendental"),
            column("page_walks"),
            column("q_l2"),
            column("q_l3"),
            column("q_mem"),
            column("workers"),
            tuple(group_key(t) for t in terms),
            tuple(roofline_key(t) for t in terms),
            tuple(t.dtype for t in terms),
        )

    def __len__(self) -> int:
        return len(self.work)


@dataclass(frozen=True)
class TermSpec:
    """One term of a model: its quantity per sample, divided by the rate each sample names."""

    name: str
    quantity: np.ndarray
    rates: tuple[str, ...]
    """The name of the rate pricing each sample's quantity (a group's, or the machine's)."""


def layout_terms(form: Form, arrays: TermArrays) -> list[TermSpec]:
    """The layout model's terms in order work, [loads,] l2, l3, mem, l2_scattered, l3_scattered, l2_written,
    transcendental, page_walks."""
    n = len(arrays)
    by_group = tuple(f"pi[{g}]" for g in arrays.groups)
    work = arrays.work + arrays.stall
    if form.load_term == "none":
        specs = [TermSpec("work", work + arrays.spill, by_group)]
    else:
        rho = tuple(f"rho[{g}]" for g in arrays.groups) if form.load_term == "group" else ("rho",) * n
        specs = [TermSpec("work", work, by_group), TermSpec("loads", arrays.loads + arrays.spill, rho)]
    return specs + [
        TermSpec("l2", arrays.q_l2, ("beta_l2",) * n),
        TermSpec("l3", arrays.workers * arrays.q_l3, ("beta_l3",) * n),
        TermSpec("mem", arrays.workers * arrays.q_mem, ("beta_mem",) * n),
        TermSpec("l2_scattered", arrays.q_l2_scattered, ("beta_l2_scattered",) * n),
        TermSpec("l3_scattered", arrays.workers * arrays.q_l3_scattered, ("beta_l3_scattered",) * n),
        TermSpec("l2_written", arrays.q_l2_written, ("beta_l2_written",) * n),
        # Without brackets: a type no sample evaluated a transcendental in prices them at 0, not E8001.
        TermSpec("transcendental", arrays.transcendental, tuple(f"tau_{d}" for d in arrays.dtypes)),
        TermSpec("page_walks", arrays.page_walks, ("omega_walk",) * n),
    ]


def roofline_terms(arrays: TermArrays) -> list[TermSpec]:
    return [
        TermSpec("work", arrays.work, tuple(f"pi[{k}]" for k in arrays.keys)),
        TermSpec("bytes", arrays.bytes, ("beta",) * len(arrays)),
    ]


def model_terms(constants_kind: str, form: Form, arrays: TermArrays) -> list[TermSpec]:
    return roofline_terms(arrays) if constants_kind == ROOFLINE else layout_terms(form, arrays)


def combine_groups(kind: str, form: Form, names: Sequence[str]) -> tuple[str, list[list[int]]]:
    """How the terms combine: (`max` or `pnorm`, index groups); C sums the groups' max or p-norm.

    `sum` is max(work, loads, transcendental) + the max of the traffic terms; the roofline and `max` are one group.
    """
    if kind == ROOFLINE or form.combine == "max":
        return "max", [list(range(len(names)))]
    if form.combine == "pnorm":
        return "pnorm", [list(range(len(names)))]
    compute = [i for i, name in enumerate(names) if name in ("work", "loads", "transcendental")]
    return "max", [compute, [i for i in range(len(names)) if i not in compute]]


def combine(how: str, groups: list[list[int]], q: float, times: np.ndarray) -> np.ndarray:
    """C over the term axis (0) of `times`, groups summed.

    The p-norm is taken relative to the largest term, so that q-th powers of
    tiny or huge times neither underflow nor overflow.
    """
    total: np.ndarray | None = None
    for group in groups:
        part = times[group]
        if how == "max":
            value = part.max(axis=0)
        else:
            top = part.max(axis=0)
            safe = np.where(top > 0, top, 1.0)
            powers = np.power(part / safe, q)
            summed = powers[0].copy()
            for row in powers[1:]:  # in term order: numpy's own sum pairs eight terms of one sample otherwise
                summed += row
            value = top * np.power(summed, 1.0 / q)
        total = value if total is None else total + value
    assert total is not None
    return total


def _rate_matrix(constants: Constants, specs: list[TermSpec]) -> np.ndarray:
    rates = np.empty((len(specs), len(specs[0].quantity)), dtype=np.float64)
    known: dict[str, float] = {}
    for k, spec in enumerate(specs):
        for i, name in enumerate(spec.rates):
            value = known.get(name)
            if value is None:
                value = known[name] = _rate(constants, name)
            rates[k, i] = value
    return rates


def _rate(constants: Constants, name: str) -> float:
    if name in constants.values:
        return constants.values[name]
    if "[" in name:
        group = name[name.index("[") + 1 : -1]
        what = "machine type and lane width" if constants.kind == ROOFLINE else "group (machine type/lanes/workers)"
        measured = sorted({n[n.index("[") + 1 : -1] for n in constants.values if n.startswith(name[: name.index("[")] + "[")})
        raise UnmeasuredGroup(
            PROFILE_ERROR,
            f"the {constants.kind} model has no constants for {what} '{group}': no calibration sample was of it "
            f"(measured: {', '.join(measured) or 'none'}); calibrate kernels of that group",
            group=group,
        )
    return float("inf")


@dataclass(eq=False)
class UnmeasuredGroup(PreskError):
    """E8001 for a kernel whose group (`group`) no calibration sample was of: its rates are not known.

    A chooser may skip such a point and say so, rather than guess its price."""

    group: str = ""


def _term_times(constants: Constants, arrays: TermArrays) -> tuple[list[TermSpec], np.ndarray]:
    specs = model_terms(constants.kind, constants.form, arrays)
    rates = _rate_matrix(constants, specs)
    quantities = np.stack([spec.quantity for spec in specs])
    with np.errstate(divide="ignore", invalid="ignore"):
        times = np.where(quantities == 0.0, 0.0, quantities / rates)
    return specs, times


def predict_many(constants: Constants, terms: Sequence[KernelTerms] | TermArrays) -> np.ndarray:
    """Predicted seconds of every sample; E8001 when a sample's group has no constants."""
    arrays = terms if isinstance(terms, TermArrays) else TermArrays.of(terms)
    if len(arrays) == 0:
        return np.zeros(0)
    specs, times = _term_times(constants, arrays)
    how, groups = combine_groups(constants.kind, constants.form, [s.name for s in specs])
    body = combine(how, groups, _q(constants), times)
    if constants.kind == ROOFLINE:
        return constants.value("lambda") + body
    spawn = np.where(arrays.workers > 1, constants.value("spawn"), 0.0)
    return constants.value("lambda") + spawn + body


def _q(constants: Constants) -> float:
    if constants.kind == LAYOUT and constants.form.combine == "pnorm":
        if constants.form.q is None:
            raise PreskError(PROFILE_ERROR, "the layout model combines by p-norm but its q was never fitted")
        return constants.form.q
    return 1.0


@dataclass(frozen=True)
class Breakdown:
    """One prediction taken apart, for reports: which term binds, and by how much."""

    seconds: float
    lam: float
    spawn: float
    terms: dict[str, float]
    """Each term's time before combining (work, loads, l2, l3, mem; or work, bytes)."""
    combined: float
    binding: str
    """The largest term: the one a faster kernel would have to shrink first."""


def explain(constants: Constants, terms: KernelTerms) -> Breakdown:
    arrays = TermArrays.of([terms])
    specs, times = _term_times(constants, arrays)
    how, groups = combine_groups(constants.kind, constants.form, [s.name for s in specs])
    combined = float(combine(how, groups, _q(constants), times)[0])
    parts = {spec.name: float(times[k, 0]) for k, spec in enumerate(specs)}
    spawn = constants.value("spawn") if constants.kind == LAYOUT and terms.workers > 1 else 0.0
    lam = constants.value("lambda")
    total = float(predict_many(constants, arrays)[0])
    return Breakdown(total, lam, spawn, parts, combined, max(parts, key=lambda name: parts[name]))
