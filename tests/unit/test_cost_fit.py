"""The fit: known constants recovered from synthetic samples, Spearman, u, the not-identified rates.

`synthetic` writes the layout model out by hand (not through
presk.cost.models) to time samples from known constants; each sample is
made bound by one term drawn at random, the others a fraction of it, so
every rate binds some samples.

Tolerances: without noise the rates come back within 1e-3 relative. The
descent's last grid step is e^(5e-5) and coupled rates (a sample's work
and memory terms share it) stop within a few steps of each other, so the
error is ~1e-4 (measured: 1.7e-4 at worst); a wrong term (a mispriced
quantity, a missing p) would be off by a factor, not by 1e-3. With 5 %
multiplicative (log-normal) noise, each rate is bound by ~80 samples or more:
standard error ≈ 0.05/√80 ≈ 0.6 %, and minimising the relative error
biases T̂ by −1.5σ² ≈ −0.4 %; 3 % is five standard errors on top of the bias.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pytest

from presk.cost.fit import compare, fit_layout, fit_roofline, median_abs_relative, ranks, spearman
from presk.cost.models import Form
from presk.cost.terms import KernelTerms

Sample = tuple[KernelTerms, float]

TRUE_MACHINE = {"lambda": 2e-6, "spawn": 1e-5, "beta_l2": 8e10, "beta_l3": 4e10, "beta_mem": 1e10}
FEW_GROUPS = (("f64", 1, 1), ("f64", 8, 1), ("f32", 8, 1), ("f32", 8, 2))


def group_name(group: tuple[str, int, int]) -> str:
    return f"{group[0]}/l{group[1]}/p{group[2]}"


def synthetic(
    n: int,
    *,
    seed: int = 0,
    noise: float = 0.0,
    combine: str = "max",
    q: float = 3.0,
    groups: Sequence[tuple[str, int, int]] = FEW_GROUPS,
    memory_bound: bool = True,
    load_scale: float = 1.0,
) -> tuple[list[Sample], dict[str, float]]:
    """Samples timed by the layout model with loads per group, written out here by hand."""
    rng = np.random.default_rng(seed)
    truth = dict(TRUE_MACHINE)
    for i, group in enumerate(groups):
        truth[f"pi[{group_name(group)}]"] = 1e9 * (1 + i)
        truth[f"rho[{group_name(group)}]"] = 2e9 * (1 + 0.5 * i)
    for i, dtype in enumerate(sorted({group[0] for group in groups})):
        truth[f"tau_{dtype}"] = 2e8 * (1 + i)
    samples = []
    kinds = (0, 1, 2, 3, 4, 5) if memory_bound else (0, 1, 2, 3, 5)
    for _ in range(n):
        dtype, lanes, p = groups[int(rng.integers(len(groups)))]
        g = group_name((dtype, lanes, p))
        pi, rho, tau = truth[f"pi[{g}]"], truth[f"rho[{g}]"], truth[f"tau_{dtype}"]
        seconds = 10 ** rng.uniform(-6, -2)  # the binding term's time
        binding = kinds[int(rng.integers(len(kinds)))]

        def share(k: int, top: float = 0.6) -> float:
            return 1.0 if k == binding else float(rng.uniform(0.0, top))

        work = seconds * pi * share(0)
        loads = seconds * rho * share(1) * load_scale
        l2 = seconds * truth["beta_l2"] * share(2)
        l3 = seconds * truth["beta_l3"] / p * share(3)
        mem = seconds * truth["beta_mem"] / p * (share(4) if memory_bound else float(rng.uniform(0.0, 0.3)))
        transcendental = seconds * tau * share(5)
        terms = [work / pi, loads / rho, l2 / truth["beta_l2"], p * l3 / truth["beta_l3"], p * mem / truth["beta_mem"],
                 transcendental / tau]  # fmt: skip
        if combine == "max":
            c = max(terms)
        elif combine == "sum":
            c = max(terms[0], terms[1], terms[5]) + max(terms[2:5])
        else:
            c = sum(t**q for t in terms) ** (1 / q)
        t = truth["lambda"] + (truth["spawn"] if p > 1 else 0.0) + c
        if noise:
            t *= math.exp(rng.normal(0.0, noise))
        samples.append((KernelTerms(work, 4 * work, loads, 0.0, l2, l3, mem, p, lanes, dtype,
                                    transcendental=transcendental), t))  # fmt: skip
    return samples, truth


def relative_errors(values: dict[str, float], truth: dict[str, float]) -> dict[str, float]:
    return {name: values[name] / truth[name] - 1.0 for name in truth}


@pytest.mark.parametrize("combine", ["max", "sum", "pnorm"])
def test_noise_free_samples_give_back_their_constants(combine: str) -> None:
    samples, truth = synthetic(800, seed=1, combine=combine)
    result = fit_layout(samples, Form("group", combine))
    errors = relative_errors(result.constants.values, truth)
    assert max(abs(e) for e in errors.values()) < 1e-3, errors
    assert result.u < 1e-3
    # No synthetic kernel reads runs a page apart from L2 or L3, has its written buffers counted apart, or
    # walks the page tables: those rates alone have no data.
    assert result.constants.unidentified == {"beta_l2_scattered", "beta_l3_scattered", "beta_l2_written", "omega_walk"}
    if combine == "pnorm":
        assert result.constants.form.q == pytest.approx(3.0, abs=0.02)
    else:
        assert result.constants.form.q is None


@pytest.mark.parametrize("combine", ["max", "pnorm"])
def test_noisy_samples_give_back_their_constants_within_the_noise(combine: str) -> None:
    noise = 0.05
    samples, truth = synthetic(2000, seed=2, noise=noise, combine=combine)
    result = fit_layout(samples, Form("group", combine))
    errors = relative_errors(result.constants.values, truth)
    assert max(abs(e) for e in errors.values()) < 0.03, errors
    # u is the median |e^ε − 1| for ε ~ N(0, σ²): about 0.674σ
    assert 0.6 * noise < result.u < 0.8 * noise


def test_roofline_gives_back_its_constants() -> None:
    rng = np.random.default_rng(3)
    lam, beta, pis = 5e-6, 2e10, {"f64/l1": 1e9, "f64/l4": 3e9, "f32/l8": 1.2e10}
    samples = []
    for i in range(400):
        key = list(pis)[i % 3]
        dtype, lanes = key.split("/l")
        seconds = 10 ** rng.uniform(-5, -2)
        compute_bound = i % 2 == 0
        work = seconds * pis[key] * (1.0 if compute_bound else rng.uniform(0, 0.7))
        nbytes = seconds * beta * (rng.uniform(0, 0.7) if compute_bound else 1.0)
        t = lam + max(work / pis[key], nbytes / beta)
        samples.append((KernelTerms(work, nbytes, 0, 0, 0, 0, 0, 1 + i % 2, int(lanes), dtype), t))
    values = fit_roofline(samples).constants.values
    assert values["beta"] == pytest.approx(beta, rel=1e-3)
    assert values["lambda"] == pytest.approx(lam, rel=1e-3)
    for key, pi in pis.items():
        assert values[f"pi[{key}]"] == pytest.approx(pi, rel=1e-3)
    assert set(values) == {"lambda", "beta", *(f"pi[{k}]" for k in pis)}


def test_a_rate_no_sample_binds_is_not_identified() -> None:
    samples, truth = synthetic(600, seed=4, memory_bound=False, groups=FEW_GROUPS[:3])
    result = fit_layout(samples, Form("group", "max"))
    # No sample is memory-bound (its memory term ≤ 0.3 of the binding one), and none is split.
    assert result.constants.unidentified == {"beta_mem", "beta_l2_scattered", "beta_l3_scattered", "beta_l2_written",
                                             "omega_walk", "spawn"}
    errors = relative_errors(result.constants.values, {k: v for k, v in truth.items() if k not in ("beta_mem", "spawn")})
    assert max(abs(e) for e in errors.values()) < 1e-3
    # The value kept is one at which no sample is memory-bound: at least the true one × 0.3 / 1.
    assert result.constants.values["beta_mem"] >= 0.3 * truth["beta_mem"] * 0.999


def test_a_rate_without_any_quantity_is_not_identified_in_every_form() -> None:
    samples, _ = synthetic(300, seed=5, groups=FEW_GROUPS[:2])
    no_l2 = [(KernelTerms(t.work, t.bytes, t.loads, t.spill, 0.0, t.q_l3, t.q_mem, t.workers, t.lanes, t.dtype), s) for t, s in samples]
    for combine in ("max", "pnorm"):
        assert "beta_l2" in fit_layout(no_l2, Form("group", combine)).constants.unidentified


def test_a_group_without_samples_gets_no_rate() -> None:
    samples, _ = synthetic(200, seed=6, groups=FEW_GROUPS[:2])
    names = set(fit_layout(samples, Form("group", "max")).constants.values)
    assert {n for n in names if n.startswith("pi[")} == {"pi[f64/l1/p1]", "pi[f64/l8/p1]"}
    assert "rho" not in names
    machine = set(fit_layout(samples, Form("machine", "max")).constants.values)
    assert "rho" in machine and not any(n.startswith("rho[") for n in machine)
    assert not any(n.startswith("rho") for n in fit_layout(samples, Form("none", "max")).constants.values)


def test_lambda_is_never_negative() -> None:
    # Every time is 80 % of its work term minus a constant: the best λ alone would be negative.
    samples = [(KernelTerms(w, 0, 0, 0, 0, 0, 0, 1, 1, "f64"), w / 1e9 - 1e-7) for w in np.geomspace(1e3, 1e7, 50)]
    result = fit_layout(samples, Form("group", "max"))
    assert result.constants.values["lambda"] == 0.0


def test_compare_fits_the_nine_forms_and_the_true_one_wins() -> None:
    samples, _ = synthetic(400, seed=7, combine="sum", noise=0.02)
    scores = compare(samples)
    assert [(s.form.load_term, s.form.combine) for s in scores] == [
        (load, how) for load in ("group", "machine", "none") for how in ("max", "sum", "pnorm")
    ]
    assert all((s.form.q is not None) == (s.form.combine == "pnorm") for s in scores)
    best = min(scores, key=lambda s: s.u)
    assert (best.form.load_term, best.form.combine) == ("group", "sum")


def test_ranks_average_ties() -> None:
    assert ranks([10, 20, 20, 30, 10]).tolist() == [1.5, 3.5, 3.5, 5.0, 1.5]
    assert ranks([3.0, 3.0, 3.0]).tolist() == [2.0, 2.0, 2.0]


def test_spearman_against_hand_computed_ranks() -> None:
    # ranks of y: 1, 2, 3.5, 5, 3.5; deviations from 3: x (−2, −1, 0, 1, 2), y (−2, −1, .5, 2, .5)
    # Σ dx·dy = 4 + 1 + 0 + 2 + 1 = 8, Σ dx² = 10, Σ dy² = 9.5: ρ = 8/√95
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95), rel=1e-15)
    assert spearman([1, 2, 3], [10, 200, 3000]) == 1.0
    assert spearman([1, 2, 3], [3, 2, 1]) == -1.0
    assert math.isnan(spearman([1, 2, 3], [4, 4, 4]))


def test_u_is_the_median_absolute_relative_residual() -> None:
    measured = np.array([1.0, 2.0, 4.0, 0.5, 10.0])
    predicted = np.array([1.1, 1.6, 4.0, 0.75, 9.5])  # |r|: 0.1, 0.2, 0, 0.5, 0.05
    assert median_abs_relative(predicted, measured) == pytest.approx(0.1, rel=1e-12)


def test_a_large_fit_is_fast() -> None:
    groups = [(d, lanes, p) for d in ("f64", "f32", "bf16") for lanes in (1, 4, 8) for p in (1, 2)]
    samples, truth = synthetic(3000, seed=8, noise=0.05, combine="pnorm", groups=groups)
    assert len(truth) == 44  # λ, spawn, three β, 18 groups' π and ρ, three types' τ
    start = time.process_time()
    result = fit_layout(samples, Form("group", "pnorm"))
    elapsed = time.process_time() - start
    assert len(result.constants.values) == 48  # and β_L2, β_L3 scattered, β_L2 written, ω, which no sample here binds
    assert elapsed < 20.0, f"the fit took {elapsed:.1f} s of CPU"  # measured: about 1 s
