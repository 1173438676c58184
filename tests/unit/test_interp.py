"""The reference interpreter's semantics of the primitives whose meaning is easy to get wrong."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from presk import sizes
from presk.diagnostics import PreskError
from presk.interp.inputs import check_inputs, make_inputs
from presk.interp.reference import run_entry
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module


def run(text: str, entry: str, inputs: list, dims: dict[str, int] | None = None, bits: int | None = None) -> list:
    parsed = parse_module(presk_context(), text, "test.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, dims or {})
    return run_entry(parsed.module, entry, inputs, env, bits=bits)


def test_broadcast_is_by_axis_name() -> None:
    """A [batch] mean broadcasts along the embed axis, not the leading one."""
    text = """
    func.func @f(%x: !psk_core.tensor<[batch: 2, embed: 3]>, %m: !psk_core.tensor<[batch: 2]>) -> !psk_core.tensor<[batch: 2, embed: 3]> {
      %y = psk_core.sub %x, %m : !psk_core.tensor<[batch: 2, embed: 3]>
      func.return %y : !psk_core.tensor<[batch: 2, embed: 3]>
    }"""
    x = np.arange(6.0).reshape(2, 3)
    (y,) = run(text, "f", [x, np.array([10.0, 20.0])])
    np.testing.assert_array_equal(y, x - np.array([[10.0], [20.0]]))


def test_masked_softmax_refuses_positions_and_a_fully_refused_row_is_zero() -> None:
    text = """
    func.func @f(%s: !psk_core.tensor<[i: 3, j: 3]>) -> !psk_core.tensor<[i: 3, j: 3]> {
      %m = psk_core.causal_mask : !psk_core.index<[i: 3, j: 3], 2>
      %p = psk_core.softmax %s [j] mask %m : !psk_core.tensor<[i: 3, j: 3]>
      func.return %p : !psk_core.tensor<[i: 3, j: 3]>
    }
    func.func @g(%s: !psk_core.tensor<[j: 2]>, %m: !psk_core.index<[j: 2], 2>) -> !psk_core.tensor<[j: 2]> {
      %p = psk_core.softmax %s [j] mask %m : !psk_core.tensor<[j: 2]>
      func.return %p : !psk_core.tensor<[j: 2]>
    }"""
    s = np.array([[1.0, 5.0, 9.0], [2.0, 3.0, 7.0], [0.5, -1.0, 2.0]])
    (p,) = run(text, "f", [s])
    e = np.exp(s - np.where(np.tril(np.ones((3, 3))) > 0, s, -np.inf).max(axis=1, keepdims=True)) * np.tril(np.ones((3, 3)))
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-15)
    assert p[0, 1] == 0.0 and p[0, 2] == 0.0 and p[0, 0] == 1.0
    (q,) = run(text, "g", [np.array([1.0, 2.0]), np.array([0, 0])])
    np.testing.assert_array_equal(q, [0.0, 0.0])


def test_pow_is_repeated_products_left_to_right() -> None:
    text = """
    func.func @f(%x: !psk_core.tensor<[i: 4]>) -> !psk_core.tensor<[i: 4]> {
      %y = psk_core.pow %x, 3 : !psk_core.tensor<[i: 4]>
      func.return %y : !psk_core.tensor<[i: 4]>
    }"""
    x = np.array([1.1, -2.3, 0.7, 3.3])
    (y,) = run(text, "f", [x])
    np.testing.assert_array_equal(y, (x * x) * x)


def test_gelu_is_exact_through_erf() -> None:
    text = """
    func.func @f(%x: !psk_core.real) -> !psk_core.real {
      %y = psk_core.gelu %x : !psk_core.real
      func.return %y : !psk_core.real
    }"""
    (y,) = run(text, "f", [0.75])
    assert y == pytest.approx(0.75 * 0.5 * (1 + math.erf(0.75 / math.sqrt(2))), rel=1e-15)
    (z,) = run(text, "f", [0.75], bits=200)
    with mpmath.workprec(200):
        exact = mpmath.mpf(0.75) * (1 + mpmath.erf(mpmath.mpf(0.75) / mpmath.sqrt(2))) / 2
        assert abs(z - exact) < mpmath.mpf(2) ** -190


def test_cross_entropy_is_mean_of_logsumexp_minus_logit() -> None:
    text = """
    func.func @f(%l: !psk_core.tensor<[pos: 2, vocab: 3]>, %t: !psk_core.index<[pos: 2], 3>) -> !psk_core.real {
      %c = psk_core.cross_entropy %l, %t [vocab] : !psk_core.real
      func.return %c : !psk_core.real
    }"""
    logits = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 4.0]])
    targets = np.array([2, 1])
    (loss,) = run(text, "f", [logits, targets])
    lse = np.log(np.exp(logits).sum(axis=1))
    assert loss == pytest.approx(np.mean(lse - logits[[0, 1], targets]), rel=1e-15)


def test_fold_threads_the_state_through_each_layer() -> None:
    text = """
    func.func @step(%p: !psk_core.record<w: !psk_core.tensor<[i: 2]>>, %x: !psk_core.tensor<[i: 2]>) -> !psk_core.tensor<[i: 2]> {
      %w = psk_core.field %p["w"] : !psk_core.tensor<[i: 2]>
      %y = psk_core.mul %x, %w : !psk_core.tensor<[i: 2]>
      func.return %y : !psk_core.tensor<[i: 2]>
    }
    func.func @f(%ps: !psk_core.record<w: !psk_core.tensor<[layer: L, i: 2]>>, %x: !psk_core.tensor<[i: 2]>) -> !psk_core.tensor<[i: 2]> {
      %y = psk_core.fold @step(%ps, %x) : !psk_core.tensor<[i: 2]>
      func.return %y : !psk_core.tensor<[i: 2]>
    }"""
    w = np.array([[2.0, 3.0], [5.0, 7.0], [11.0, 13.0]])
    (y,) = run(text, "f", [{"w": w}, np.array([1.0, 1.0])], dims={"L": 3})
    np.testing.assert_array_equal(y, [110.0, 273.0])


def test_parameter_tree_arithmetic_is_leaf_by_leaf() -> None:
    text = """
    !P = !psk_core.record<w: !psk_core.tensor<[i: 2]>, b: !psk_core.real>
    func.func @f(%p: !P, %g: !P, %lr: !psk_core.real) -> !P {
      %u = psk_core.mul %g, %lr : !P
      %q = psk_core.sub %p, %u : !P
      func.return %q : !P
    }"""
    p = {"w": np.array([1.0, 2.0]), "b": 3.0}
    g = {"w": np.array([0.5, -0.5]), "b": 1.0}
    (q,) = run(text, "f", [p, g, 0.1])
    np.testing.assert_array_equal(q["w"], p["w"] - g["w"] * 0.1)
    assert q["b"] == 3.0 - 1.0 * 0.1


def test_unbound_dimension_and_bad_input_shape_are_errors() -> None:
    text = """
    func.func @f(%x: !psk_core.tensor<[batch: B]>) -> !psk_core.tensor<[batch: B]> {
      func.return %x : !psk_core.tensor<[batch: B]>
    }"""
    parsed = parse_module(presk_context(), text, "t.mlir")
    func = find_entry(parsed.module, "f")
    with pytest.raises(PreskError) as e:
        make_inputs(func, {}, 0)
    assert e.value.code == "E4002" and "--dim B=N" in e.value.message
    with pytest.raises(PreskError) as e:
        check_inputs(func, [np.zeros(3)], {"B": 2})
    assert e.value.code == "E4003" and "shape (2,)" in e.value.message
    with pytest.raises(PreskError) as e:
        find_entry(parsed.module, "g")
    assert e.value.code == "E4004"


def test_mpmath_run_agrees_with_f64_on_a_smooth_program() -> None:
    text = """
    func.func @f(%x: !psk_core.tensor<[i: 5, j: 4]>) -> !psk_core.real {
      %e = psk_core.exp %x : !psk_core.tensor<[i: 5, j: 4]>
      %t = psk_core.tanh %e : !psk_core.tensor<[i: 5, j: 4]>
      %s = psk_core.softmax %t [j] : !psk_core.tensor<[i: 5, j: 4]>
      %l = psk_core.log %s : !psk_core.tensor<[i: 5, j: 4]>
      %m = psk_core.mean %l [i, j] : !psk_core.real
      func.return %m : !psk_core.real
    }"""
    x = np.random.default_rng(1).standard_normal((5, 4))
    (f64,) = run(text, "f", [x])
    (mp,) = run(text, "f", [x], bits=128)
    assert isinstance(mp, mpmath.mpf)
    assert abs(float(mp) - f64) <= 1e-14 * abs(float(mp))
