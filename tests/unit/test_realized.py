"""Realized programs on the reference interpreter: what fusion and the storage types change, and what not.

(a) Fusion changes no value in f64 and f32: every corpus entry gives the same
    bytes with psk-fuse (max-nodes 64) and without it (max-nodes=1), whose
    arithmetic is its storage. In bf16 a value inside a group stays in f32
    and separate launches round every intermediate, so fused and unfused
    differ by design: small programs are computed by hand (numpy f32 and
    ml_dtypes) both ways, and shown to differ.
(b) bf16 storage rounds to nearest even, bit for bit: against an integer
    rounding of float32 bit patterns, a scaling rounding of f64 values and
    ml_dtypes; an f64 (an argument) is rounded once, not through f32; f32
    storage is numpy's float32 rounding.
(c) Outputs have the storage dtype (bf16 is held as the f32 of its value);
    arguments are rounded to the default storage type; a realization record
    rounds only the sites it names.
(d) f32 and bf16 results stay within stated tolerances of the f64 reference.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import load_with_aliases
from test_corpus import CASES, SMALL, Case, functions

from presk import sizes
from presk.dialects.psk_realize import SiteOp
from presk.interp.inputs import make_inputs
from presk.interp.realized import to_storage
from presk.interp.reference import run_entry
from presk.interp.values import leaf_items
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.passes.fuse import FuseElementwise
from presk.passes.realize import RealizeSites

SMALL_CASES = [c for c in CASES if c.dims == SMALL]
"""Every corpus entry at the dimensions the corpus tests use (B = 2, T = 4)."""

STORAGE_DTYPE = {"f64": np.float64, "f32": np.float32, "bf16": np.float32}
"""What a realized output is held in: bf16 values are held as the f32 holding them."""


# -- helpers ---------------------------------------------------------------------------


def realize(module: ModuleOp, max_nodes: int, realization: str) -> ModuleOp:
    out = module.clone()
    ctx = presk_context()
    FuseElementwise(max_nodes=max_nodes).apply(ctx, out)
    RealizeSites(realization=realization).apply(ctx, out)
    out.verify()
    return out


@cache
def _realized_file(path: str, max_nodes: int, realization: str) -> ModuleOp:
    module, _ = load_with_aliases(path)
    return realize(module, max_nodes, realization)


CASE_BY_ID = {c.id: c for c in SMALL_CASES}


@cache
def _inputs(case_id: str) -> tuple[Any, ...]:
    case = CASE_BY_ID[case_id]
    module, _ = load_with_aliases(case.path)
    env = sizes.resolve(module, {}, case.dims)
    return tuple(case.prepare(make_inputs(functions(module)[case.entry], env, 0)))


@cache
def _run_case(case_id: str, max_nodes: int | None, realization: str | None) -> tuple[Any, ...]:
    case = CASE_BY_ID[case_id]
    module, _ = load_with_aliases(case.path)
    if realization is not None:
        assert max_nodes is not None
        module = _realized_file(case.path, max_nodes, realization)
    env = sizes.resolve(module, {}, case.dims)
    return tuple(run_entry(module, case.entry, list(_inputs(case_id)), env))


def run_case(case: Case, max_nodes: int | None, realization: str | None) -> tuple[Any, ...]:
    """The entry's outputs on its seed-0 inputs: unrealized (None) or fused with `max_nodes` and realized.

    Cached: the same run serves the exactness, dtype and tolerance tests.
    """
    return _run_case(case.id, max_nodes, realization)


def leaves(outputs: Any) -> list[tuple[str, np.ndarray]]:
    return [(f"#{i}.{path}", np.asarray(leaf)) for i, out in enumerate(outputs) for path, leaf in leaf_items(out)]


def exact(outputs: Any) -> list[tuple[str, str, tuple[int, ...], bytes]]:
    """Each leaf's path, dtype, shape and bytes: equal exactly when the outputs are the same bits."""
    return [(path, a.dtype.str, a.shape, a.tobytes()) for path, a in leaves(outputs)]


def parse(text: str) -> ModuleOp:
    parsed = parse_module(presk_context(), text, "realized.mlir")
    parsed.verify()
    return parsed.module


def run_text(text: str, realization: str, max_nodes: int, inputs: list[Any]) -> list[Any]:
    module = realize(parse(text), max_nodes, realization)
    return run_entry(module, "f", inputs, sizes.resolve(module))


def bf16(x: Any) -> np.ndarray:
    """f32 → bf16 → f32 with ml_dtypes: the hand computations' rounding to storage."""
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def f32_exact_inputs(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """f64 data that are float32 values, so rounding them to bf16 is one rounding whichever way."""
    return rng.uniform(low, high, size=shape).astype(np.float32).astype(np.float64)


# -- (a) fusion changes no value in f64 and f32 ----------------------------------------------------


@pytest.mark.parametrize("realization", ["f64", "f32"])
@pytest.mark.parametrize("case", SMALL_CASES, ids=[c.id for c in SMALL_CASES])
def test_fusion_changes_no_bit(case: Case, realization: str) -> None:
    fused = run_case(case, 64, realization)
    unfused = run_case(case, 1, realization)
    assert exact(fused) == exact(unfused)
    for path, a in leaves(fused):
        assert a.dtype == STORAGE_DTYPE[realization], f"{path}: {a.dtype}"


@pytest.mark.parametrize("case", SMALL_CASES, ids=[c.id for c in SMALL_CASES])
def test_f64_realization_is_the_reference(case: Case) -> None:
    """Realized in f64, fused, a program computes the unrealized reference's bits."""
    reference = [(p, np.asarray(a, dtype=np.float64)) for p, a in leaves(run_case(case, None, None))]
    got = leaves(run_case(case, 64, "f64"))
    assert [(p, a.dtype, a.shape, a.tobytes()) for p, a in got] == [
        (p, a.dtype, a.shape, a.tobytes()) for p, a in reference
    ]


def test_bf16_fusion_changes_the_corpus_layer_norm() -> None:
    """In bf16 the partition is part of what a program computes: (x − μ)/σ · g + b is one group,
    whose two intermediates stay in f32 fused and are rounded to bf16 unfused."""
    case = next(c for c in SMALL_CASES if c.path == "corpus/layernorm.mlir")
    assert exact(run_case(case, 64, "bf16")) != exact(run_case(case, 1, "bf16"))


# -- (a) bf16: fused and unfused by hand ----------------------------------------------------------

T = "!psk_core.tensor<[n: {n}]>"

CANCEL = """
func.func @f(%x: {T}) -> {T} {{
  %one = psk_core.constant 1.0 : !psk_core.real
  %sq = psk_core.mul %x, %x : {T}
  %y = psk_core.sub %sq, %one : {T}
  func.return %y : {T}
}}
"""


def test_bf16_group_keeps_its_interior_in_f32() -> None:
    """x² − 1 at x = 1 + 3·2⁻⁷ (a bf16 value).

    x² = 1.04742431640625 exactly in f32. Fused, x² − 1 = 0.04742431640625
    (exact in f32) is rounded once, to 194·2⁻¹² = 0.04736328125. Unfused, x²
    reaches memory and is rounded to bf16 first, 1.046875 (its 9·2⁻¹⁴ is below
    half an ulp), and x² − 1 = 0.046875: the intermediate rounding moves the
    result by two ulps of bf16 (194 against 192 units of 2⁻¹²).
    """
    text = CANCEL.format(T=T.format(n=1))
    x = np.array([1.0 + 3 * 2.0**-7])
    (fused,) = run_text(text, "bf16", 64, [x])
    (unfused,) = run_text(text, "bf16", 1, [x])
    assert fused.dtype == unfused.dtype == np.float32
    assert fused.tolist() == [0.04736328125]
    assert unfused.tolist() == [0.046875]


CHAIN = """
func.func @f(%x: {T}) -> {T} {{
  %k = psk_core.constant 0.3 : !psk_core.real
  %a = psk_core.mul %x, %k : {T}
  %b = psk_core.exp %a : {T}
  %c = psk_core.add %b, %x : {T}
  %d = psk_core.sqrt %c : {T}
  %e = psk_core.div %d, %x : {T}
  %f = psk_core.tanh %e : {T}
  %g = psk_core.sub %f, %a : {T}
  func.return %g : {T}
}}
"""


def _chain_by_hand(x: np.ndarray, store: Any) -> np.ndarray:
    """The chain in f32, each value passed through `store`: identity inside a group, bf16 where it reaches memory."""
    xb = bf16(x)  # the argument, rounded to the default storage type
    k = np.float32(0.3)  # the constant, read in the arithmetic type
    a = store(xb * k)
    b = store(np.exp(a))
    c = store(b + xb)
    d = store(np.sqrt(c))
    e = store(d / xb)
    f = store(np.tanh(e))
    return bf16(f - a)  # the root reaches memory either way


def test_bf16_fused_and_unfused_chains_match_their_hand_computations() -> None:
    """Fused: one group, interior in f32 and the root rounded once. Unfused: rounded after every op."""
    n = 512
    x = f32_exact_inputs(np.random.default_rng(11), (n,), 0.25, 4.0)
    text = CHAIN.format(T=T.format(n=n))
    (fused,) = run_text(text, "bf16", 64, [x])
    (unfused,) = run_text(text, "bf16", 1, [x])
    by_hand_fused = _chain_by_hand(x, lambda v: v)
    by_hand_unfused = _chain_by_hand(x, bf16)
    assert fused.dtype == unfused.dtype == np.float32
    assert fused.tobytes() == by_hand_fused.tobytes()
    assert unfused.tobytes() == by_hand_unfused.tobytes()
    differ = np.count_nonzero(fused != unfused)
    assert differ > n // 20, f"only {differ} of {n} elements differ"
    # The partition itself: in f64 and f32 the same chain is bit-identical fused or not.
    for realization in ("f64", "f32"):
        (a,) = run_text(text, realization, 64, [x])
        (b,) = run_text(text, realization, 1, [x])
        assert a.tobytes() == b.tobytes()


REDUCE = """
func.func @f(%x: {T}) -> (!psk_core.real, {T}) {{
  %sq = psk_core.mul %x, %x : {T}
  %h = psk_core.mul %sq, %x : {T}
  %s = psk_core.sum %h [n] : !psk_core.real
  %y = psk_core.div %h, %s : {T}
  func.return %s, %y : !psk_core.real, {T}
}}
"""


def test_bf16_values_reaching_memory_are_rounded_fused_or_not() -> None:
    """x³ is read by the sum (a nest) and the division, so it reaches memory: rounded in both programs.

    Fused, x² is interior to x³'s group; unfused it is rounded too.
    """
    n = 64
    x = f32_exact_inputs(np.random.default_rng(5), (n,), -2.0, 2.0)
    text = REDUCE.format(T=T.format(n=n))
    xb = bf16(x)
    for max_nodes, store in ((64, lambda v: v), (1, bf16)):
        s, y = run_text(text, "bf16", max_nodes, [x])
        h = bf16(store(xb * xb) * xb)
        s_hand = bf16(np.sum(h, axis=(0,)))
        assert np.asarray(s).tobytes() == s_hand.tobytes()
        assert y.tobytes() == bf16(h / s_hand).tobytes()


TREE = """
!W = !psk_core.tensor<[rows: 3, cols: 5]>
!E = !psk_core.tensor<[cols: 5]>
!P = !psk_core.record<w: !W, b: !E>
!R = !psk_core.real

func.func @f(%p: !P, %g: !P, %lr: !R) -> !P {
  %a = psk_core.mul %g, %lr : !P
  %b = psk_core.mul %a, %a : !P
  %c = psk_core.sub %p, %b : !P
  func.return %c : !P
}
"""


def test_bf16_group_over_a_parameter_tree_rounds_each_leaf_once() -> None:
    rng = np.random.default_rng(3)
    p = {
        "w": f32_exact_inputs(rng, (3, 5), -1, 1),
        "b": f32_exact_inputs(rng, (5,), -1, 1),
    }
    g = {
        "w": f32_exact_inputs(rng, (3, 5), -1, 1),
        "b": f32_exact_inputs(rng, (5,), -1, 1),
    }
    lr = float(np.float32(0.37))
    (fused,) = run_text(TREE, "bf16", 64, [p, g, lr])
    (unfused,) = run_text(TREE, "bf16", 1, [p, g, lr])
    lrb = bf16(lr)[()]
    for leaf in ("w", "b"):
        a = bf16(g[leaf]) * lrb
        assert fused[leaf].tobytes() == bf16(bf16(p[leaf]) - a * a).tobytes()
        a = bf16(a)
        assert unfused[leaf].tobytes() == bf16(bf16(p[leaf]) - bf16(a * a)).tobytes()
    assert any(fused[k].tobytes() != unfused[k].tobytes() for k in ("w", "b"))


# -- (b) bf16 rounding, bit for bit -------------------------------------------------------------------


def rne_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """Round float32 bit patterns to bf16 (the upper 16 bits), to nearest even, by integer arithmetic.

    Add 0x7FFF plus the lowest kept bit, then clear the low half: a tie
    (low half 0x8000) carries into the kept bits exactly when the kept lsb is
    1. A carry out of the mantissa raises the exponent, which is how the
    largest finite values overflow to ±inf. NaN patterns are left to the caller.
    """
    u = bits.astype(np.uint64)
    lsb = (u >> np.uint64(16)) & np.uint64(1)
    return ((u + np.uint64(0x7FFF) + lsb) & np.uint64(0xFFFF0000)).astype(np.uint32)


def is_nan_bits(bits: np.ndarray) -> np.ndarray:
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)


def round_by_scaling(x: np.ndarray, precision: int, emin: int = -126, emax: int = 127) -> np.ndarray:
    """Round finite f64 values to a binary format with `precision` significand bits, to nearest even.

    With x = m·2^e, 1 ≤ |m| < 2, the format's quantum at x is 2^q for
    q = max(e, emin) − (precision − 1). Scaling by powers of two is exact in
    f64, and np.rint rounds half to even. Anything that rounds to 2^(emax+1)
    or more overflows to ±inf. bf16 is precision 8, f32 precision 24; both
    have f32's exponent range, subnormals included.
    """
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)
    q = np.maximum(e - 1, emin) - (precision - 1)
    y = np.ldexp(np.rint(np.ldexp(x, -q)), q)
    return np.where(np.abs(y) >= 2.0 ** (emax + 1), np.copysign(np.inf, x), y)


def _special_f32_patterns() -> np.ndarray:
    lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    highs = np.arange(0x10000, dtype=np.uint32) << np.uint32(16)
    every_exponent_and_tie = (highs[:, None] | lows[None, :]).ravel()  # 393 216 patterns
    named = np.array(
        [
            0x00000000, 0x80000000,  # ±0
            0x00000001, 0x80000001,  # the smallest subnormals: to ±0
            0x00008000, 0x00018000,  # subnormal ties: to even (down), to even (up)
            0x007FFFFF, 0x00800000,  # the largest subnormal rounds up to the smallest normal
            0x3F808000, 0x3F818000,  # 1 + 2^-8 (tie, to 1), 1 + 3·2^-8 (tie, up)
            0x3F807FFF, 0x3F808001,  # just below, just above a tie
            0x7F7F7FFF, 0x7F7F8000,  # below the overflow tie (to max), the tie itself (to inf)
            0x7F7FFFFF, 0xFF7FFFFF,  # ±FLT_MAX: to ±inf
            0x7F800000, 0xFF800000,  # ±inf
            0x7F800001, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F808000,  # NaNs
        ],
        dtype=np.uint32,
    )  # fmt: skip
    return np.concatenate([named, every_exponent_and_tie])


@pytest.mark.parametrize("which", ["special", "random"])
def test_bf16_storage_rounds_to_nearest_even(which: str) -> None:
    if which == "special":
        bits = _special_f32_patterns()
    else:
        bits = np.random.default_rng(2024).integers(0, 2**32, size=1_200_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    got = to_storage(x, "bf16")
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == x.shape
    got_bits = got.view(np.uint32)
    nan = is_nan_bits(bits)
    assert np.isnan(got[nan]).all(), "NaN stays NaN"
    want = rne_bf16_bits(bits[~nan])
    bad = np.flatnonzero(got_bits[~nan] != want)
    assert bad.size == 0, [
        (hex(b), hex(g), hex(w)) for b, g, w in zip(bits[~nan][bad[:5]], got_bits[~nan][bad[:5]], want[bad[:5]])
    ]
    # Every stored value is a bf16: its low half is zero.
    assert not (got_bits[~nan] & 0xFFFF).any()
    # Two more references: rounding by scaling, and ml_dtypes' own conversion.
    finite = np.isfinite(x)
    with np.errstate(over="ignore"):
        scaled = round_by_scaling(x[finite].astype(np.float64), 8).astype(np.float32)
    assert scaled.tobytes() == got[finite].tobytes()
    ml = (x[~nan].astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)) << np.uint32(16)
    assert ml.tobytes() == got_bits[~nan].tobytes()


def test_bf16_rounding_counts_the_specials() -> None:
    """The named cases do what their comments say (a check on the reference as much as on to_storage)."""
    cases = {
        0x00000001: 0x00000000, 0x80000001: 0x80000000, 0x00008000: 0x00000000, 0x00018000: 0x00020000,
        0x007FFFFF: 0x00800000, 0x3F808000: 0x3F800000, 0x3F818000: 0x3F820000, 0x3F807FFF: 0x3F800000,
        0x3F808001: 0x3F810000, 0x7F7F7FFF: 0x7F7F0000, 0x7F7F8000: 0x7F800000, 0x7F7FFFFF: 0x7F800000,
        0xFF7FFFFF: 0xFF800000, 0x7F800000: 0x7F800000, 0xFF800000: 0xFF800000,
    }  # fmt: skip
    bits = np.array(list(cases), dtype=np.uint32)
    got = to_storage(bits.view(np.float32), "bf16").view(np.uint32)
    assert [hex(b) for b in got] == [hex(v) for v in cases.values()]
    assert [hex(b) for b in rne_bf16_bits(bits)] == [hex(v) for v in cases.values()]


def test_bf16_storage_of_scalars() -> None:
    for value, want in (
        (1.0 + 2.0**-8, 1.0),
        (np.float32(1.0 + 3 * 2.0**-8), 1.0 + 2.0**-6),
        (-2.5, -2.5),
    ):
        got = to_storage(value, "bf16")
        assert isinstance(got, np.float32) and got == want


def test_bf16_storage_of_f64_rounds_once() -> None:
    """An f64 (an argument) is rounded to the nearest bf16, not through the nearest f32.

    1 + 2⁻⁸ + 2⁻⁴⁰ is above the tie 1 + 2⁻⁸, so it rounds up to 1 + 2⁻⁷; rounded
    to f32 first it would become the tie itself and then round to even, 1.
    """
    x = 1.0 + 2.0**-8 + 2.0**-40
    assert np.float32(x).astype(ml_dtypes.bfloat16) == 1.0  # the double rounding
    assert to_storage(x, "bf16") == 1.0 + 2.0**-7
    assert to_storage(np.array([-x]), "bf16").tolist() == [-(1.0 + 2.0**-7)]
    rng = np.random.default_rng(7)
    n = 400_000
    sign = rng.choice([-1.0, 1.0], size=n)
    # Exponents over the whole bf16 range and past both ends, mantissas at random...
    wide = sign * np.ldexp(rng.uniform(1.0, 2.0, size=n), rng.integers(-140, 130, size=n))
    # ...and values a hair above or below a bf16 tie, where rounding through f32 goes wrong.
    kept = np.ldexp(np.floor(np.ldexp(rng.uniform(1.0, 2.0, size=n), 7)) + 0.5, -7)
    hair = np.ldexp(rng.uniform(0.5, 1.0, size=n), rng.integers(-52, -25, size=n)) * rng.choice([-1.0, 1.0], size=n)
    near_ties = sign * np.ldexp(kept + hair, rng.integers(-130, 127, size=n))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 2.0**-133, 2.0**-134, 3 * 2.0**-135, 1e-300, -1e-300, 1e300, -1e300,
                         3.3961775292304654e38, 3.39617752923046e38, float(np.finfo(np.float32).max) * 1.0000001])  # fmt: skip
    for x in (wide, near_ties, specials):
        with np.errstate(over="ignore"):
            want = round_by_scaling(x, 8).astype(np.float32)
        got = to_storage(x, "bf16")
        assert got.dtype == np.float32
        bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        assert bad.size == 0, [(repr(x[i]), float(got[i]), float(want[i])) for i in bad[:5]]
    assert np.isnan(to_storage(np.array([np.nan]), "bf16")).all()


def test_f32_storage_is_numpys_rounding() -> None:
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2**64, size=1_000_000, dtype=np.uint64)
    x = np.concatenate(
        [
            bits.view(np.float64),
            rng.standard_normal(100_000),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-46, 1e39],
        ]
    )
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float32)
        got = to_storage(x, "f32")
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    # numpy's rounding is to nearest even: check it where f32's range holds the values.
    finite = np.isfinite(x) & (np.abs(x) < 3e38)
    assert round_by_scaling(x[finite], 24).astype(np.float32).tobytes() == got[finite].tobytes()
    ties = np.array([1.0 + 2.0**-24, 1.0 + 3 * 2.0**-24, 2.0**-149 / 2, 3 * 2.0**-149 / 2])
    assert to_storage(ties, "f32").tolist() == [1.0, 1.0 + 2.0**-22, 0.0, 2 * 2.0**-149]
    scalar = to_storage(0.1, "f32")
    assert isinstance(scalar, np.float32) and scalar == np.float32(0.1)


# -- (c) outputs, arguments and realization records -----------------------------------------------

ARGS = """
func.func @f(%x: {T}, %s: !psk_core.real) -> ({T}, !psk_core.real, {T}, !psk_core.real) {{
  %y = psk_core.neg %x : {T}
  func.return %x, %s, %y, %s : {T}, !psk_core.real, {T}, !psk_core.real
}}
"""


@pytest.mark.parametrize("realization", ["f64", "f32", "bf16"])
def test_arguments_are_rounded_to_the_default_storage(realization: str) -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(1000), [1.0 + 2.0**-8 + 2.0**-40, 1e-42, 1e39, -0.0, 2.0**-140]])
    s = 1.0 / 3.0
    text = ARGS.format(T=T.format(n=x.size))
    with np.errstate(over="ignore"):  # 1e39 overflows f32 and bf16: rounding to ±inf is what is asked
        x_out, s_out, y, _ = run_text(text, realization, 64, [x, s])
    precision = {"f64": 53, "f32": 24, "bf16": 8}[realization]
    with np.errstate(over="ignore"):
        want = x if realization == "f64" else round_by_scaling(x, precision)
    dtype = STORAGE_DTYPE[realization]
    assert x_out.dtype == dtype and y.dtype == dtype
    assert x_out.tobytes() == want.astype(dtype).tobytes()
    assert y.tobytes() == (-want).astype(dtype).tobytes()
    assert np.asarray(s_out).dtype == dtype and float(s_out) == float(round_by_scaling(np.array(s), precision))


@pytest.mark.parametrize("case", SMALL_CASES, ids=[c.id for c in SMALL_CASES])
def test_bf16_outputs_are_bf16_values_held_in_f32(case: Case) -> None:
    for path, a in leaves(run_case(case, 64, "bf16")):
        assert a.dtype == np.float32, f"{path}: {a.dtype}"
        assert not (np.atleast_1d(a).view(np.uint32) & 0xFFFF).any(), f"{path} holds values that are not bf16"


MIXED = """
func.func @f(%x: {T}) -> ({T}, {T}, !psk_core.real) {{
  %a = psk_core.exp %x : {T}
  %b = psk_core.mul %a, %a : {T}
  %s = psk_core.sum %b [n] : !psk_core.real
  %c = psk_core.add %a, %s : {T}
  func.return %c, %b, %s : {T}, {T}, !psk_core.real
}}
"""


def _mixed_by_hand(x: np.ndarray, record: dict[str, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MIXED under a realization record: each site reads its inputs in its arithmetic type
    (f64 for an f64 site, f32 otherwise), computes, and stores its root in its storage type."""
    default = record.get("default", "f64")

    def storage(site: str) -> str:
        return record.get(f"f/%{site}", default)

    def read(site: str, *values: Any) -> list[np.ndarray]:
        dtype = np.float64 if storage(site) == "f64" else np.float32
        return [np.asarray(v).astype(dtype) for v in values]

    def store(site: str, value: np.ndarray) -> np.ndarray:
        return {
            "f64": lambda v: v,
            "f32": lambda v: v.astype(np.float32),
            "bf16": bf16,
        }[storage(site)](value)

    # The arguments enter memory in the default storage type.
    stored_x = {
        "f64": x,
        "f32": x.astype(np.float32),
        "bf16": round_by_scaling(x, 8).astype(np.float32),
    }[default]
    (xa,) = read("a", stored_x)
    a = store("a", np.exp(xa))
    (ab,) = read("b", a)
    b = store("b", ab * ab)
    (bs,) = read("s", b)
    s = store("s", np.sum(bs, axis=(0,)))
    ac, sc = read("c", a, s)
    c = store("c", ac + sc)
    return c, b, s


RECORDS = [
    {"default": "f32", "f/%b": "bf16"},
    {"default": "f32", "f/%s": "bf16"},
    {"default": "f32", "f/%a": "bf16", "f/%c": "bf16"},
    {"default": "f32", "f/%a": "f64"},
    {"default": "bf16", "f/%c": "f64"},
    {"default": "f64", "f/%b": "bf16"},
    {"default": "f32"},
]


@pytest.mark.parametrize("record", RECORDS, ids=[json.dumps(r) for r in RECORDS])
def test_a_realization_record_rounds_only_its_sites(record: dict[str, str], tmp_path: Path) -> None:
    """`{"default": "f32", "<site>": "bf16"}`: the named sites store their type, every other site the default's,
    and the arguments enter in the default's."""
    n = 48
    x = np.random.default_rng(4).uniform(-1.5, 1.5, size=n)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    module = realize(parse(MIXED.format(T=T.format(n=n))), 64, f"@{path}")
    sites = ("f/%a", "f/%b", "f/%s", "f/%c")
    realized = {op.site_name: op.realization.storage_name for op in module.walk() if isinstance(op, SiteOp)}
    assert realized == {site: record.get(site, record["default"]) for site in sites}
    got = run_entry(module, "f", [x], sizes.resolve(module))
    want = _mixed_by_hand(x, record)
    for name, g, w in zip(("c", "b", "s"), got, want):
        g = np.asarray(g)
        assert g.dtype == STORAGE_DTYPE[record.get(f"f/%{name}", record["default"])], name
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), name
    # A site stated apart from the default changes what the program computes.
    if len(record) > 1:
        uniform = _mixed_by_hand(x, {"default": record["default"]})
        assert any(
            np.asarray(u, dtype=np.float64).tobytes() != np.asarray(w, dtype=np.float64).tobytes()
            for u, w in zip(uniform, want)
        )


# -- (d) f32 and bf16 against the f64 reference ----------------------------------------------------

TOLERANCE = {
    # u = 2^-24 ≈ 6e-8 per rounding. The longest sums in these entries have
    # K ≤ 64 terms (F = 4·D at D = 16 in minigpt; D = 64 in the GPT's dots),
    # whose worst-case error is K·u ≈ 4e-6 of the magnitudes summed; with a
    # few such launches in sequence 2e-5 of the leaf's largest value is the
    # budget (measured: at most 1.6e-6).
    "f32": 2e-5,
    # u = 2^-9 ≈ 2e-3: every launch stores its root in bf16, so an entry made
    # of ~20 launches in sequence (a transformer block: two layer norms,
    # attention with a softmax, the MLP) accumulates about one u per launch,
    # and a layer norm rescales the rounding error of x − μ by 1/σ. 32u =
    # 2^-4 of the leaf's largest value is the budget (measured: at most
    # 4.4e-2 ≈ 22u, on the GPT's attention).
    "bf16": 2.0**-4,
}


@pytest.mark.parametrize("realization", ["f32", "bf16"])
@pytest.mark.parametrize("case", SMALL_CASES, ids=[c.id for c in SMALL_CASES])
def test_close_to_the_f64_reference(case: Case, realization: str) -> None:
    reference = leaves(run_case(case, None, None))
    got = leaves(run_case(case, 64, realization))
    assert [p for p, _ in got] == [p for p, _ in reference]
    for (path, a), (_, e) in zip(got, reference):
        e = np.asarray(e, dtype=np.float64)
        assert np.all(np.isfinite(a)), path
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        err = float(np.max(np.abs(a.astype(np.float64) - e))) if e.size else 0.0
        assert err <= TOLERANCE[realization] * scale, f"{path}: error {err:.3g} of a scale {scale:.3g}"
