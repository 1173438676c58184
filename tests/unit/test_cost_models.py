"""The two cost models on hand-computed terms: each combine form, the load terms, the roofline to the bit."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from presk.cost.models import Constants, Form, explain, predict_many
from presk.cost.profile import Profile, predict
from presk.cost.terms import KernelTerms
from presk.diagnostics import PreskError

# One worker's terms chosen so that every term is a round time with the constants below:
# work W/π = 6/3 = 2, loads (N_ld+S)/ρ = (0.75+0.25)/1 = 1, L2 1/2 = 0.5,
# L3 p·Q_L3/β = 2·3/4 = 1.5, memory p·Q_mem/β = 2·0.5/4 = 0.25; λ = 0.125, spawn = 0.5.
TERMS = KernelTerms(work=6.0, bytes=40.0, loads=0.75, spill=0.25, q_l2=1.0, q_l3=3.0, q_mem=0.5, workers=2, lanes=8, dtype="f32")
GROUP = "f32/l8/p2"


def layout(form: Form, **extra: float) -> Constants:
    values = {"lambda": 0.125, "spawn": 0.5, "beta_l2": 2.0, "beta_l3": 4.0, "beta_mem": 4.0,
              f"pi[{GROUP}]": 3.0, f"rho[{GROUP}]": 1.0, "rho": 1.0, **extra}  # fmt: skip
    return Constants("layout", values, form)


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        (Form("group", "max"), 0.125 + 0.5 + 2.0),
        # max(work 2, loads 1) + max(l2 0.5, l3 1.5, mem 0.25)
        (Form("group", "sum"), 0.125 + 0.5 + 2.0 + 1.5),
        # sqrt(4 + 1 + 0.25 + 2.25 + 0.0625) = sqrt(7.5625) = 2.75
        (Form("group", "pnorm", 2.0), 0.125 + 0.5 + 2.75),
        # (8 + 1 + 0.125 + 3.375 + 0.015625)^(1/3) = 12.515625^(1/3)
        (Form("machine", "pnorm", 3.0), 0.125 + 0.5 + 12.515625 ** (1 / 3)),
        # no load term: work is (W+S)/π = 6.25/3; l3 1.5 then binds the sum's second part
        (Form("none", "max"), 0.125 + 0.5 + 6.25 / 3),
        (Form("none", "sum"), 0.125 + 0.5 + 6.25 / 3 + 1.5),
    ],
)
def test_each_combine_form_on_hand_computed_terms(form: Form, expected: float) -> None:
    assert predict_many(layout(form), [TERMS])[0] == pytest.approx(expected, rel=1e-14)


def test_machine_load_term_reads_the_one_rho_not_the_groups() -> None:
    constants = layout(Form("machine", "max"), rho=0.25, **{f"rho[{GROUP}]": 1000.0})
    # loads now (0.75 + 0.25)/0.25 = 4 bind
    assert predict_many(constants, [TERMS])[0] == 0.125 + 0.5 + 4.0


def test_l3_bytes_a_page_apart_are_priced_again_only_by_a_profile_that_fitted_their_rate() -> None:
    # 1.5 of Q_L3's 3 bytes arrive in runs a page apart: p·Q_L3s/β_L3s = 2·1.5/1 = 3 binds the max.
    scattered = dataclasses.replace(TERMS, q_l3_scattered=1.5)
    assert predict_many(layout(Form("group", "max"), beta_l3_scattered=1.0), [scattered])[0] == 0.125 + 0.5 + 3.0
    # Summed with the other traffic terms' max under `sum`: 2 + max(0.5, 1.5, 0.25, 3).
    assert predict_many(layout(Form("group", "sum"), beta_l3_scattered=1.0), [scattered])[0] == 0.125 + 0.5 + 5.0
    # A profile fitted before the quantity existed has no β_L3s: the term is 0, the prediction as before.
    for form in (Form("group", "max"), Form("group", "pnorm", 2.0)):
        assert predict_many(layout(form), [scattered])[0] == predict_many(layout(form), [TERMS])[0]


def test_l2_lines_a_page_apart_are_priced_at_their_own_rate_for_one_worker() -> None:
    # Q_L2s = 1.5 at β_L2s = 0.5: 3 binds the max, and L2 is private, so not times p (2) as L3's is.
    scattered = dataclasses.replace(TERMS, q_l2_scattered=1.5)
    assert predict_many(layout(Form("group", "max"), beta_l2_scattered=0.5), [scattered])[0] == 0.125 + 0.5 + 3.0
    for form in (Form("group", "max"), Form("group", "pnorm", 2.0)):
        assert predict_many(layout(form), [scattered])[0] == predict_many(layout(form), [TERMS])[0]


def test_transcendentals_are_priced_at_the_rate_of_their_machine_type() -> None:
    # 12 transcendental registers at τ_f32 = 4: 3 binds the max; τ of another type prices nothing here.
    exps = dataclasses.replace(TERMS, transcendental=12.0)
    assert predict_many(layout(Form("group", "max"), tau_f32=4.0, tau_f64=0.001), [exps])[0] == 0.125 + 0.5 + 3.0
    # Under `sum` it joins the in-core part: max(work 2, loads 1, 3) + max(l2 0.5, l3 1.5, mem 0.25).
    assert predict_many(layout(Form("group", "sum"), tau_f32=4.0), [exps])[0] == 0.125 + 0.5 + 3.0 + 1.5
    # A profile without τ_f32 (fitted before the term, or on no transcendental of f32): the term is 0.
    for form in (Form("group", "max"), Form("group", "pnorm", 2.0)):
        assert predict_many(layout(form, tau_f64=0.001), [exps])[0] == predict_many(layout(form), [TERMS])[0]
    assert explain(layout(Form("group", "max"), tau_f32=4.0), exps).binding == "transcendental"


def test_written_l2_bytes_are_priced_at_their_own_rate_for_one_worker() -> None:
    # Q_L2w = 1.5 at β_L2w = 0.5: 3 binds the max, not times p; a profile without β_L2w prices it at 0.
    written = dataclasses.replace(TERMS, q_l2_written=1.5)
    assert predict_many(layout(Form("group", "max"), beta_l2_written=0.5), [written])[0] == 0.125 + 0.5 + 3.0
    for form in (Form("group", "max"), Form("group", "pnorm", 2.0)):
        assert predict_many(layout(form), [written])[0] == predict_many(layout(form), [TERMS])[0]


def test_page_walks_are_priced_at_the_machines_rate_among_the_traffic() -> None:
    # 6 page walks at ω = 2: 3 binds the max as any term does.
    walked = dataclasses.replace(TERMS, page_walks=6.0)
    assert predict_many(layout(Form("group", "max"), omega_walk=2.0), [walked])[0] == 0.125 + 0.5 + 3.0
    # Under `sum` it is traffic: max(work 2, loads 1) + max(l2 0.5, l3 1.5, mem 0.25, walks 3).
    assert predict_many(layout(Form("group", "sum"), omega_walk=2.0), [walked])[0] == 0.125 + 0.5 + 2.0 + 3.0
    # A profile fitted before the term has no ω: the walks price nothing, in every form.
    for form in (Form("group", "max"), Form("group", "sum"), Form("group", "pnorm", 2.0)):
        assert predict_many(layout(form), [walked])[0] == predict_many(layout(form), [TERMS])[0]
    assert explain(layout(Form("group", "max"), omega_walk=2.0), walked).binding == "page_walks"


def test_the_stall_joins_the_work_of_the_layout_model_not_the_roofline() -> None:
    # A stall of 3 W-units: work (6 + 3)/3 = 3 binds the max; with no load term (6 + 3 + 0.25)/3.
    stalled = dataclasses.replace(TERMS, stall=3.0)
    assert predict_many(layout(Form("group", "max")), [stalled])[0] == 0.125 + 0.5 + 3.0
    assert predict_many(layout(Form("none", "max")), [stalled])[0] == pytest.approx(0.125 + 0.5 + 9.25 / 3, rel=1e-14)
    # The roofline is the seed's: W/π only.
    roofline = Constants("roofline", {"lambda": 0.125, "beta": 1000.0, "pi[f32/l8]": 3.0})
    assert predict_many(roofline, [stalled])[0] == predict_many(roofline, [TERMS])[0] == 0.125 + 2.0


def test_spawn_only_when_split() -> None:
    single = KernelTerms(6.0, 40.0, 0.75, 0.25, 1.0, 3.0, 0.5, workers=1, lanes=8, dtype="f32")
    constants = Constants("layout", {"lambda": 0.125, "spawn": 0.5, "beta_l2": 2.0, "beta_l3": 4.0, "beta_mem": 4.0,
                                     "pi[f32/l8/p1]": 3.0, "rho[f32/l8/p1]": 1.0}, Form("group", "max"))  # fmt: skip
    # p = 1: L3 and memory bytes are not multiplied; work 2 binds, no spawn
    assert predict_many(constants, [single])[0] == 0.125 + 2.0


def test_many_samples_at_once_match_one_by_one() -> None:
    rng = np.random.default_rng(1)
    terms = [
        KernelTerms(*(float(v) for v in rng.uniform(0, 10, 7)), workers=2, lanes=8, dtype="f32")  # type: ignore[misc]
        for _ in range(50)
    ]
    constants = layout(Form("group", "pnorm", 2.5))
    many = predict_many(constants, terms)
    assert [float(v) for v in many] == [float(predict_many(constants, [t])[0]) for t in terms]


def test_roofline_only_profile_is_the_roofline_formula_to_the_bit() -> None:
    lam, beta, pi64, pi32 = 3.7e-6, 1.7e10, 2.3e9, 7.9e9
    roofline = Constants("roofline", {"lambda": lam, "beta": beta, "pi[f64/l4]": pi64, "pi[f32/l8]": pi32})
    profile = Profile("m", None, roofline=roofline)
    cases = [
        KernelTerms(1.234567e7, 9.87e5, 1.0, 0.0, 0.0, 0.0, 0.0, workers=1, lanes=4, dtype="f64"),  # compute-bound
        KernelTerms(3.3e5, 7.77e7, 1.0, 0.0, 0.0, 0.0, 0.0, workers=2, lanes=4, dtype="f64"),  # memory-bound, split
        KernelTerms(5.5e8, 1.1e6, 1.0, 0.0, 0.0, 0.0, 0.0, workers=1, lanes=8, dtype="f32"),
        KernelTerms(0.0, 3.0e3, 0.0, 0.0, 0.0, 0.0, 0.0, workers=1, lanes=8, dtype="f32"),
    ]
    by_hand = [
        lam + max(1.234567e7 / pi64, 9.87e5 / beta),
        lam + max(3.3e5 / pi64, 7.77e7 / beta),
        lam + max(5.5e8 / pi32, 1.1e6 / beta),
        lam + max(0.0 / pi32, 3.0e3 / beta),
    ]
    assert [predict(profile, t) for t in cases] == by_hand
    assert [float(v) for v in predict_many(roofline, cases)] == by_hand


def test_a_group_without_constants_is_refused_by_name() -> None:
    other = KernelTerms(6.0, 40.0, 0.75, 0.25, 1.0, 3.0, 0.5, workers=2, lanes=16, dtype="bf16")
    with pytest.raises(PreskError) as caught:
        predict_many(layout(Form("group", "max")), [other])
    assert caught.value.code == "E8001"
    assert "'bf16/l16/p2'" in caught.value.message and GROUP in caught.value.message
    roofline = Constants("roofline", {"lambda": 0.0, "beta": 1.0, "pi[f64/l1]": 1.0})
    with pytest.raises(PreskError, match="'bf16/l16'"):
        predict_many(roofline, [other])


def test_a_profile_without_constants_cannot_predict() -> None:
    with pytest.raises(PreskError, match="no fitted constants"):
        predict(Profile("m", None), TERMS)


def test_an_unidentified_rate_without_data_drops_its_term() -> None:
    values = {"lambda": 0.125, "spawn": 0.5, "beta_l2": 2.0, "beta_l3": 4.0, "beta_mem": math.inf,
              f"pi[{GROUP}]": 3.0, f"rho[{GROUP}]": 1.0}  # fmt: skip
    constants = Constants("layout", values, Form("group", "pnorm", 2.0), frozenset({"beta_mem"}))
    # sqrt(4 + 1 + 0.25 + 2.25) = sqrt(7.5)
    assert predict_many(constants, [TERMS])[0] == pytest.approx(0.625 + math.sqrt(7.5), rel=1e-14)


def test_explain_names_the_binding_term() -> None:
    parts = explain(layout(Form("group", "sum")), TERMS)
    assert parts.terms == {"work": 2.0, "loads": 1.0, "l2": 0.5, "l3": 1.5, "mem": 0.25, "l2_scattered": 0.0,
                           "l3_scattered": 0.0, "l2_written": 0.0, "transcendental": 0.0, "page_walks": 0.0}
    assert (parts.lam, parts.spawn, parts.combined, parts.seconds) == (0.125, 0.5, 3.5, 4.125)
    assert parts.binding == "work"
    memory = KernelTerms(6.0, 40.0, 0.75, 0.25, 1.0, 3.0, 50.0, workers=2, lanes=8, dtype="f32")
    assert explain(layout(Form("group", "max")), memory).binding == "mem"  # 2·50/4 = 25


def test_forms_are_checked() -> None:
    with pytest.raises(PreskError, match="unknown load term 'groups'"):
        Form("groups", "max")
    with pytest.raises(PreskError, match="unknown combine 'mean'"):
        Form("group", "mean")
    with pytest.raises(PreskError, match="at least 1"):
        Form("group", "pnorm", 0.5)
    with pytest.raises(PreskError, match="q was never fitted"):
        predict_many(layout(Form("group", "pnorm")), [TERMS])
