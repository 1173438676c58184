"""`psk-autodiff` against the truth: every rule checked by finite differences in mpmath.

Each case is a PSK-Core `@loss` returning a real; the harness adds
`@grad_loss`, a `psk_core.grad` of it, runs `psk-autodiff` (saving residuals,
and recomputing them), prints the module, parses and verifies it again, and
runs the gradient on the reference interpreter in mpmath at `BITS` bits.
The truth it is compared with is a central finite difference of `@loss`
itself, along random directions `v` (every component of the gradient
counts, so one wrong entry shows), in the same precision:

    (loss(x + h·v) − loss(x − h·v)) / 2h  =  ⟨∇loss(x), v⟩ + O(h²)

**Tolerance.** With `BITS = 256` (unit roundoff ε ≈ 1e−77) and `h = 2⁻⁶⁴`
(≈ 5e−20), the difference's truncation error is h²/6·|∂³loss/∂v³| ≈ 1e−40
times third derivatives of order one to a thousand on these inputs, and its
rounding error about ε·|loss|/h ≈ 1e−57; the gradient itself is computed to
a few ε. `RTOL = 1e−30` relative to max(1, |FD|) is ten orders above both,
and a wrong rule (a factor, a sign, a transposed operand, a missing
broadcast sum) is off by O(1): there is no tolerance in which both fit.

Inputs avoid the points where a primitive is not differentiable (`log`,
`sqrt` and divisors take `psk_core.init = "positive"`), and `gelu` is not
evaluated at 0, where its rule divides by x (docs/training.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.ir import Block, Region

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT

from presk import sizes
from presk.dialects.psk_core_autodiff import GradOp
from presk.dialects.psk_core_types import IndexTensorType
from presk.interp.func_calls import FuncCalls
from presk.interp.inputs import make_inputs
from presk.interp.numerics import mp_numerics
from presk.interp.reference import PSKCoreFunctions, convert, run_entry
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.ir.print import print_module
from presk.passes.autodiff import AutoDiff
from presk.passes.bind import BindSizes

BITS = 256
H = mpmath.mpf(2) ** -64
RTOL = mpmath.mpf(10) ** -30
RTOL_GELU = mpmath.mpf(10) ** -15
"""gelu's and erf's rules read 1/√2, √(2π) and 2/√π as doubles (PSK-Core has no π): their relative
error, 2⁻⁵³ ≈ 1.1e−16, enters the derivative, so a program through gelu or erf is checked to 1e−15
(a wrong rule is still off by O(1))."""
DIRECTIONS = 2


# -- the harness ------------------------------------------------------------------------


def differentiated(text: str, wrt: list[int], remat: str, bind: str | None = None) -> tuple[ModuleOp, dict[str, Any]]:
    """`text` with `@grad_loss` (the gradient of `@loss` wrt `wrt`) after psk-autodiff, printed and parsed back.

    `bind` (psk-bind's `consts`) binds the sizes first, as a fold's gradient needs its layer count.
    """
    parsed = parse_module(presk_context(), text, "case.mlir")
    parsed.verify()
    module = parsed.module
    if bind is not None:
        BindSizes(consts=bind).apply(presk_context(), module)
    loss = find_entry(module, "loss")
    inputs = list(loss.function_type.inputs.data)
    block = Block(arg_types=inputs)
    request = GradOp("loss", list(block.args), wrt)
    block.add_ops([request, func.ReturnOp(request.result)])
    module.body.block.add_op(func.FuncOp("grad_loss", (inputs, [request.result.type]), Region(block)))
    AutoDiff(remat=remat).apply(presk_context(), module)
    text_after = print_module(module, parsed.aliases)
    assert "psk_core.grad" not in text_after
    again = parse_module(presk_context(), text_after, "differentiated.mlir")
    again.verify()
    return again.module, parsed.aliases


def run_mp(module: ModuleOp, entry: str, args: list[Any], env: dict[str, int]) -> list[Any]:
    """Run `entry` on arguments already in mpmath (perturbations below f64's precision survive)."""
    numerics = mp_numerics(BITS)
    with numerics.context:
        interpreter = Interpreter(module)
        interpreter.register_implementations(FuncCalls())
        interpreter.register_implementations(PSKCoreFunctions(numerics, env))
        return list(interpreter.call_op(entry, tuple(args)))


def tree_map(fn: Callable[..., Any], *trees: Any) -> Any:
    first = trees[0]
    if isinstance(first, dict):
        return {k: tree_map(fn, *(t[k] for t in trees)) for k in first}
    if isinstance(first, tuple):
        return tuple(tree_map(fn, *(t[i] for t in trees)) for i in range(len(first)))
    return fn(*trees)


def leaves(tree: Any) -> list[Any]:
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in leaves(v)]
    if isinstance(tree, tuple):
        return [x for v in tree for x in leaves(v)]
    return [tree]


def inner(a: Any, b: Any) -> Any:
    return mpmath.fsum(mpmath.mpf(x) * y for la, lb in zip(leaves(a), leaves(b)) for x, y in zip(np.ravel(la), np.ravel(lb)))


def check_gradient(text: str, wrt: list[int], dims: dict[str, int] | None = None, seed: int = 0,
                   remats: tuple[str, ...] = ("save", "recompute"), consts: dict[str, int] | None = None,
                   rtol: Any = RTOL) -> None:  # fmt: skip
    """The gradient of `@loss` wrt `wrt`, in both remat modes, against central differences at BITS bits."""
    bind = None
    if "psk_core.fold" in text:
        bind = ",".join(f"{k}={v}" for k, v in (consts or {}).items())
    for remat in remats:
        module, _ = differentiated(text, wrt, remat, bind)
        env = sizes.resolve(module, {} if bind is not None else consts or {}, dims or {})
        loss = find_entry(module, "loss")
        types = loss.function_type.inputs.data
        numerics = mp_numerics(BITS)
        with numerics.context:
            args = [convert(v, t, numerics) for v, t in zip(make_inputs(loss, env, seed), types)]
        got = run_mp(module, "grad_loss", args, env)[0]
        grads = [got] if len(wrt) == 1 else list(got)
        rng = np.random.default_rng(seed + 1)
        for _ in range(DIRECTIONS):
            with numerics.context:
                directions = {i: tree_map(lambda x: _random_like(x, rng), args[i]) for i in wrt}
                plus = [tree_map(lambda x, v: x + H * v, a, directions[i]) if i in directions else a for i, a in enumerate(args)]
                minus = [tree_map(lambda x, v: x - H * v, a, directions[i]) if i in directions else a for i, a in enumerate(args)]
                fd = (run_mp(module, "loss", plus, env)[0] - run_mp(module, "loss", minus, env)[0]) / (2 * H)
                ad = mpmath.fsum(inner(g, directions[i]) for g, i in zip(grads, wrt))
                assert abs(ad - fd) <= rtol * max(1, abs(fd)), (
                    f"{remat}: ⟨gradient, v⟩ = {mpmath.nstr(ad, 25)}, central difference {mpmath.nstr(fd, 25)}"
                )


def _random_like(x: Any, rng: np.random.Generator) -> Any:
    if np.ndim(x) == 0:
        return mpmath.mpf(float(rng.standard_normal()))
    return np.frompyfunc(mpmath.mpf, 1, 1)(rng.standard_normal(np.shape(x))).astype(object)


# -- one case per rule ----------------------------------------------------------------------

ARITHMETIC = """
!X = !psk_core.tensor<[a: 2, b: 3]>
!Y = !psk_core.tensor<[b: 3]>
func.func @loss(%x: !X, %y: !Y {psk_core.init = "positive"}, %s: !psk_core.real, %c: !X) -> !psk_core.real {
  %0 = psk_core.add %x, %y : !X
  %1 = psk_core.mul %0, %s : !X
  %2 = psk_core.div %1, %y : !X
  %3 = psk_core.sub %s, %2 : !X
  %4 = psk_core.div %s, %y : !Y
  %5 = psk_core.sub %3, %4 : !X
  %6 = psk_core.neg %5 : !X
  %7 = psk_core.mul %6, %c : !X
  %8 = psk_core.sum %7 [a, b] : !psk_core.real
  func.return %8 : !psk_core.real
}
"""

UNARY = """
!X = !psk_core.tensor<[n: 4]>
func.func @loss(%x: !X {psk_core.init = "positive"}, %z: !X, %c: !X) -> !psk_core.real {
  %0 = psk_core.exp %z : !X
  %1 = psk_core.log %x : !X
  %2 = psk_core.sqrt %x : !X
  %3 = psk_core.tanh %z : !X
  %4 = psk_core.exp %3 : !X
  %5 = psk_core.pow %z, 3 : !X
  %6 = psk_core.pow %x, 1 : !X
  %7 = psk_core.pow %0, 2 : !X
  %s1 = psk_core.add %0, %1 : !X
  %s2 = psk_core.mul %s1, %2 : !X
  %s3 = psk_core.add %s2, %3 : !X
  %s4 = psk_core.mul %s3, %4 : !X
  %s5 = psk_core.add %s4, %5 : !X
  %s6 = psk_core.mul %s5, %6 : !X
  %s7 = psk_core.add %s6, %7 : !X
  %s8 = psk_core.mul %s7, %c : !X
  %r = psk_core.sum %s8 [n] : !psk_core.real
  func.return %r : !psk_core.real
}
"""

WHERE = """
!S = !psk_core.tensor<[q: 3, k: 3]>
func.func @loss(%s: !S, %m: !psk_core.index<[k: 3], 2>, %v: !psk_core.tensor<[k: 3]>, %c: !S) -> !psk_core.real {
  %causal = psk_core.causal_mask : !psk_core.index<[q: 3, k: 3], 2>
  %big = psk_core.constant -1.0e+30 : !psk_core.real
  %0 = psk_core.where %causal, %s, %big : !S
  %1 = psk_core.where %m, %v, %0 : !S
  %2 = psk_core.exp %1 : !S
  %3 = psk_core.mul %2, %c : !S
  %4 = psk_core.sum %3 [q, k] : !psk_core.real
  func.return %4 : !psk_core.real
}
"""

REDUCTIONS = """
!X = !psk_core.tensor<[a: 2, b: 3, c: 2]>
func.func @loss(%x: !X, %c: !psk_core.tensor<[b: 3]>, %t: !psk_core.tensor<[a: 2, c: 2]>) -> !psk_core.real {
  %0 = psk_core.sum %x [a, c] : !psk_core.tensor<[b: 3]>
  %1 = psk_core.mul %0, %c : !psk_core.tensor<[b: 3]>
  %2 = psk_core.mean %x [b] : !psk_core.tensor<[a: 2, c: 2]>
  %3 = psk_core.mul %2, %2 : !psk_core.tensor<[a: 2, c: 2]>
  %4 = psk_core.broadcast_like %1, %x : !X
  %5 = psk_core.sum_to %x, %t : !psk_core.tensor<[a: 2, c: 2]>
  %6 = psk_core.mul %5, %3 : !psk_core.tensor<[a: 2, c: 2]>
  %7 = psk_core.mul %4, %x : !X
  %8 = psk_core.mean %7 [a, b, c] : !psk_core.real
  %9 = psk_core.sum %6 [a, c] : !psk_core.real
  %10 = psk_core.add %8, %9 : !psk_core.real
  func.return %10 : !psk_core.real
}
"""

MAXIMA = """
!X = !psk_core.tensor<[a: 2, b: 3]>
!B = !psk_core.tensor<[b: 3]>
func.func @loss(%x: !X, %y: !X, %v: !B, %c: !X) -> !psk_core.real {
  %z = psk_core.constant 0.25 : !psk_core.real
  %0 = psk_core.max %x, %y : !X
  %1 = psk_core.max %0, %v : !X
  %2 = psk_core.max %1, %z : !X
  %3 = psk_core.mul %2, %c : !X
  %4 = psk_core.reduce_max %3 [a] : !B
  %5 = psk_core.reduce_max %x [a, b] : !psk_core.real
  %6 = psk_core.sum %4 [b] : !psk_core.real
  %7 = psk_core.mul %5, %6 : !psk_core.real
  func.return %7 : !psk_core.real
}
"""
"""max of tensors, of a tensor and a broadcast vector, of a tensor and a real constant; reduce_max
over one axis and over all. Random inputs have no ties, so each step routes the cotangent one way."""

DOT = """
!X = !psk_core.tensor<[batch: 2, in: 3]>
!W = !psk_core.tensor<[in: 3, out: 2]>
func.func @loss(%x: !X, %w: !W, %u: !psk_core.tensor<[in: 3]>, %v: !psk_core.tensor<[k: 3]>,
                %w3: !psk_core.tensor<[j: 3, p: 2, q: 2]>, %c: !psk_core.tensor<[batch: 2, out: 2]>) -> !psk_core.real {
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[batch: 2, out: 2]>
  %1 = psk_core.mul %0, %c : !psk_core.tensor<[batch: 2, out: 2]>
  %2 = psk_core.sum %1 [batch, out] : !psk_core.real
  %3 = psk_core.dot %u, %v : !psk_core.real
  %4 = psk_core.dot %u, %w3 : !psk_core.tensor<[p: 2, q: 2]>
  %5 = psk_core.mul %4, %4 : !psk_core.tensor<[p: 2, q: 2]>
  %6 = psk_core.sum %5 [p, q] : !psk_core.real
  %7 = psk_core.mul %2, %3 : !psk_core.real
  %8 = psk_core.add %7, %6 : !psk_core.real
  func.return %8 : !psk_core.real
}
"""

# A transposing dot: the contracted axis of x is named like an output axis of w.
DOT_RENAMED = """
func.func @loss(%x: !psk_core.tensor<[b: 2, o: 3]>, %w: !psk_core.tensor<[i: 3, o2: 2]>, %c: !psk_core.tensor<[b: 2, o2: 2]>) -> !psk_core.real {
  %0 = psk_core.dot %x, %w : !psk_core.tensor<[b: 2, o2: 2]>
  %1 = psk_core.mul %0, %c : !psk_core.tensor<[b: 2, o2: 2]>
  %2 = psk_core.sum %1 [b, o2] : !psk_core.real
  func.return %2 : !psk_core.real
}
"""

EIN = """
!Q = !psk_core.tensor<[b: 2, s: 3, d: 2]>
!K = !psk_core.tensor<[b: 2, t: 3, d: 2]>
!S = !psk_core.tensor<[b: 2, s: 3, t: 3]>
func.func @loss(%q: !Q, %k: !K, %w: !psk_core.tensor<[i: 2, o: 3]>, %z: !psk_core.tensor<[e: 2]>, %c: !S) -> !psk_core.real {
  %0 = psk_core.ein %q[b, s, d], %k[b, t, d] : !S
  %1 = psk_core.mul %0, %c : !S
  %2 = psk_core.sum %1 [b, s, t] : !psk_core.real
  %3 = psk_core.ein %w[i, o] : !psk_core.tensor<[o: 3, i: 2]>
  %4 = psk_core.mul %3, %3 : !psk_core.tensor<[o: 3, i: 2]>
  %5 = psk_core.ein %4[o, i] : !psk_core.tensor<[i: 2]>
  %6 = psk_core.ein %z[e], %5[i] : !psk_core.tensor<[i: 2]>
  %7 = psk_core.ein %6[x], %5[x], %z[x] : !psk_core.tensor<[x: 2]>
  %8 = psk_core.sum %7 [x] : !psk_core.real
  %9 = psk_core.add %2, %8 : !psk_core.real
  func.return %9 : !psk_core.real
}
"""

SOFTMAX = """
!S = !psk_core.tensor<[h: 2, q: 3, k: 3]>
func.func @loss(%s: !S, %c: !S) -> !psk_core.real {
  %m = psk_core.causal_mask : !psk_core.index<[q: 3, k: 3], 2>
  %0 = psk_core.softmax %s [k] mask %m : !S
  %1 = psk_core.softmax %s [q] : !S
  %2 = psk_core.add %0, %1 : !S
  %3 = psk_core.mul %2, %c : !S
  %4 = psk_core.sum %3 [h, q, k] : !psk_core.real
  func.return %4 : !psk_core.real
}
"""

CROSS_ENTROPY = """
func.func @loss(%l: !psk_core.tensor<[b: 2, v: 4, t: 3]>, %y: !psk_core.index<[b: 2, t: 3], 4>) -> !psk_core.real {
  %0 = psk_core.cross_entropy %l, %y [v] : !psk_core.real
  func.return %0 : !psk_core.real
}
"""

GATHER = """
!T = !psk_core.tensor<[vocab: 5, e: 2]>
func.func @loss(%table: !T, %ids: !psk_core.index<[b: 2, s: 3], 5>, %c: !psk_core.tensor<[b: 2, s: 3, e: 2]>,
                %pos: !psk_core.tensor<[ctx: 4, e: 2]>, %v: !psk_core.tensor<[w: 3]>, %vi: !psk_core.index<[n: 4], 3>) -> !psk_core.real {
  %0 = psk_core.gather %table, %ids : !psk_core.tensor<[b: 2, s: 3, e: 2]>
  %at = psk_core.arange : !psk_core.index<[s: 3], 4>
  %1 = psk_core.gather %pos, %at : !psk_core.tensor<[s: 3, e: 2]>
  %2 = psk_core.add %0, %1 : !psk_core.tensor<[b: 2, s: 3, e: 2]>
  %3 = psk_core.mul %2, %c : !psk_core.tensor<[b: 2, s: 3, e: 2]>
  %4 = psk_core.sum %3 [b, s, e] : !psk_core.real
  %5 = psk_core.gather %v, %vi : !psk_core.tensor<[n: 4]>
  %6 = psk_core.pow %5, 2 : !psk_core.tensor<[n: 4]>
  %7 = psk_core.sum %6 [n] : !psk_core.real
  %8 = psk_core.add %4, %7 : !psk_core.real
  func.return %8 : !psk_core.real
}
"""

SPLIT_MERGE = """
!X = !psk_core.tensor<[b: 2, e: 6]>
!Hd = !psk_core.tensor<[b: 2, h: 2, d: 3]>
func.func @loss(%x: !X, %c: !Hd, %c2: !X) -> !psk_core.real {
  %0 = psk_core.split %x [e -> h, d] : !Hd
  %1 = psk_core.mul %0, %c : !Hd
  %2 = psk_core.merge %1 [h, d -> e] : !X
  %3 = psk_core.mul %2, %c2 : !X
  %4 = psk_core.mul %3, %x : !X
  %5 = psk_core.sum %4 [b, e] : !psk_core.real
  func.return %5 : !psk_core.real
}
"""

TREES = """
!W = !psk_core.tensor<[n: 3]>
!P = !psk_core.record<w: !W, s: !psk_core.real, t: !psk_core.tuple<!W, !psk_core.real>>
func.func @loss(%p: !P, %lr: !psk_core.real, %g: !P, %c: !W) -> !psk_core.real {
  %step = psk_core.mul %lr, %g : !P
  %q = psk_core.sub %p, %step : !P
  %w = psk_core.field %q["w"] : !W
  %s = psk_core.field %q["s"] : !psk_core.real
  %t = psk_core.field %q["t"] : !psk_core.tuple<!W, !psk_core.real>
  %t0 = psk_core.proj %t[0] : !W
  %t1 = psk_core.proj %t[1] : !psk_core.real
  %0 = psk_core.mul %w, %t0 : !W
  %1 = psk_core.mul %0, %s : !W
  %2 = psk_core.add %1, %t1 : !W
  %z = psk_core.zeros_like %2 : !W
  %3 = psk_core.add %2, %z : !W
  %pair = psk_core.tuple %3, %s : !psk_core.tuple<!W, !psk_core.real>
  %r = psk_core.set_field %q["t"], %pair : !P
  %rec = psk_core.record w = %c, s = %t1, t = %pair : !P
  %sum = psk_core.add %r, %rec : !P
  %u = psk_core.field %sum["t"] : !psk_core.tuple<!W, !psk_core.real>
  %u0 = psk_core.proj %u[0] : !W
  %u1 = psk_core.proj %u[1] : !psk_core.real
  %v = psk_core.field %sum["w"] : !W
  %4 = psk_core.mul %u0, %v : !W
  %5 = psk_core.mul %4, %c : !W
  %6 = psk_core.sum %5 [n] : !psk_core.real
  %7 = psk_core.mul %6, %u1 : !psk_core.real
  func.return %7 : !psk_core.real
}
"""

CONSTANTS_AND_SIZES = """
psk_core.const_dim @N = 3
func.func @loss(%x: !psk_core.tensor<[n: N]>, %c: !psk_core.tensor<[n: N]>) -> !psk_core.real {
  %k = psk_core.constant 2.5 : !psk_core.real
  %n = psk_core.size N : !psk_core.real
  %0 = psk_core.mul %x, %k : !psk_core.tensor<[n: N]>
  %1 = psk_core.div %0, %n : !psk_core.tensor<[n: N]>
  %2 = psk_core.mul %1, %x : !psk_core.tensor<[n: N]>
  %3 = psk_core.mul %2, %c : !psk_core.tensor<[n: N]>
  %4 = psk_core.sum %3 [n] : !psk_core.real
  func.return %4 : !psk_core.real
}
"""

CALLS = """
!V = !psk_core.tensor<[n: 3]>
func.func @inner(%a: !V, %b: !V) -> !V {
  %0 = psk_core.mul %a, %b : !V
  %1 = psk_core.tanh %0 : !V
  func.return %1 : !V
}
func.func @middle(%a: !V, %k: !V) -> !V {
  %0 = func.call @inner(%a, %k) : (!V, !V) -> !V
  %1 = func.call @inner(%0, %a) : (!V, !V) -> !V
  func.return %1 : !V
}
func.func @loss(%x: !V, %k: !V, %c: !V) -> !psk_core.real {
  %0 = func.call @middle(%x, %k) : (!V, !V) -> !V
  %1 = func.call @middle(%k, %k) : (!V, !V) -> !V
  %2 = psk_core.add %0, %1 : !V
  %3 = psk_core.mul %2, %c : !V
  %4 = psk_core.sum %3 [n] : !psk_core.real
  func.return %4 : !psk_core.real
}
"""

GELU = """
!X = !psk_core.tensor<[n: 5]>
func.func @loss(%z: !X, %c: !X) -> !psk_core.real {
  %0 = psk_core.gelu %z : !X
  %1 = psk_core.mul %0, %c : !X
  %2 = psk_core.sum %1 [n] : !psk_core.real
  func.return %2 : !psk_core.real
}
"""

ERF = """
!X = !psk_core.tensor<[n: 5]>
func.func @loss(%z: !X, %c: !X) -> !psk_core.real {
  %0 = psk_core.erf %z : !X
  %1 = psk_core.mul %0, %c : !X
  %2 = psk_core.sum %1 [n] : !psk_core.real
  func.return %2 : !psk_core.real
}
"""

FOLD = """
!Blocks = !psk_core.record<w: !psk_core.tensor<[layer: L, embed: 2]>, s: !psk_core.tensor<[layer: L]>,
                           t: !psk_core.tuple<!psk_core.tensor<[layer: L, embed: 2, k: 2]>>>
!Block = !psk_core.record<w: !psk_core.tensor<[embed: 2]>, s: !psk_core.real, t: !psk_core.tuple<!psk_core.tensor<[embed: 2, k: 2]>>>
!X = !psk_core.tensor<[embed: 2]>
psk_core.const_dim @L = 3
func.func @Block.apply(%p: !Block, %x: !X) -> !X {
  %w = psk_core.field %p["w"] : !X
  %s = psk_core.field %p["s"] : !psk_core.real
  %t = psk_core.field %p["t"] : !psk_core.tuple<!psk_core.tensor<[embed: 2, k: 2]>>
  %m = psk_core.proj %t[0] : !psk_core.tensor<[embed: 2, k: 2]>
  %0 = psk_core.mul %w, %s : !X
  %1 = psk_core.mul %x, %0 : !X
  %2 = psk_core.tanh %1 : !X
  %3 = psk_core.dot %2, %m : !psk_core.tensor<[k: 2]>
  %4 = psk_core.ein %3[embed] : !X
  %5 = psk_core.add %x, %4 : !X
  func.return %5 : !X
}
func.func @loss(%blocks: !Blocks, %x: !X, %c: !X) -> !psk_core.real {
  %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
  %1 = psk_core.mul %0, %c : !X
  %2 = psk_core.sum %1 [embed] : !psk_core.real
  func.return %2 : !psk_core.real
}
"""

CASES = {
    "arithmetic": (ARITHMETIC, [0, 1, 2]),
    "unary": (UNARY, [0, 1]),
    "gelu": (GELU, [0]),
    "erf": (ERF, [0]),
    "where": (WHERE, [0, 2]),
    "reductions": (REDUCTIONS, [0, 1]),
    "maxima": (MAXIMA, [0, 1, 2, 3]),
    "dot": (DOT, [0, 1, 2, 3, 4]),
    "dot_renamed": (DOT_RENAMED, [0, 1]),
    "ein": (EIN, [0, 1, 2, 3]),
    "softmax": (SOFTMAX, [0]),
    "cross_entropy": (CROSS_ENTROPY, [0]),
    "gather": (GATHER, [0, 3, 4]),
    "split_merge": (SPLIT_MERGE, [0]),
    "trees": (TREES, [0, 1, 2]),
    "constants_and_sizes": (CONSTANTS_AND_SIZES, [0]),
    "calls": (CALLS, [0, 1]),
    "fold": (FOLD, [0, 1]),
    "fold_state_only": (FOLD, [1]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_against_central_differences(case: str) -> None:
    text, wrt = CASES[case]
    check_gradient(text, wrt, rtol=RTOL_GELU if "gelu" in text or "erf" in text else RTOL)


def test_gelu_has_a_finite_derivative_at_zero() -> None:
    """gelu'(0) = ½ and erf'(0) = 2/√π, computed through erf, not through gelu(x)/x (0/0)."""
    module, _ = differentiated(GELU, [0], "save", None)
    zeros, ones = np.zeros(5), np.ones(5)
    (grad,) = run_entry(module, "grad_loss", [zeros, ones], {})
    assert np.array_equal(grad, np.full(5, 0.5))


TIES = """
!V = !psk_core.tensor<[n: 4]>
func.func @loss(%x: !V, %y: !V) -> !psk_core.real {
  %0 = psk_core.max %x, %y : !V
  %1 = psk_core.reduce_max %x [n] : !psk_core.real
  %2 = psk_core.sum %0 [n] : !psk_core.real
  %3 = psk_core.add %1, %2 : !psk_core.real
  func.return %3 : !psk_core.real
}
"""


def test_ties_share_the_cotangent_equally() -> None:
    """At x = y, max gives each operand half; reduce_max's two maxima take half each (JAX's convention)."""
    module, _ = differentiated(TIES, [0, 1], "save", None)
    x = np.array([1.0, 3.0, 3.0, -2.0])
    y = np.array([1.0, 2.0, 4.0, 0.0])
    gx, gy = run_entry(module, "grad_loss", [x, y], {})[0]
    # max: tie at 0 (½ each), x at 1, y at 2 and 3; reduce_max: x's maxima at 1 and 2, ½ each.
    assert np.array_equal(gx, [0.5, 1.5, 0.5, 0.0])
    assert np.array_equal(gy, [0.5, 0.0, 1.0, 1.0])


def test_calls_are_differentiated_callee_by_callee() -> None:
    """`middle` is called with a varied first operand and with none: one `.fwd`/`.bwd` pair, wrt [0]."""
    module, _ = differentiated(CALLS, [0], "save")
    names = sorted(f.sym_name.data for f in module.walk() if isinstance(f, func.FuncOp))
    assert names == sorted(["inner", "middle", "loss", "grad_loss", "loss.fwd", "loss.bwd", "middle.fwd",
                            "middle.bwd", "inner.fwd", "inner.bwd", "inner.wrt0_1.fwd", "inner.wrt0_1.bwd"])  # fmt: skip
    bwd = find_entry(module, "middle.bwd")
    assert len(bwd.function_type.outputs.data) == 1  # the cotangent of %a only: no caller reads %k's


def test_mlp_gradient() -> None:
    """corpus/mlp.mlir's mean squared error, wrt the parameters and the input, at small sizes."""
    text = (ROOT / "corpus" / "mlp.mlir").read_text().replace("@mse(", "@loss(")
    check_gradient(text, [0, 1], dims={"B": 2}, consts={"D_IN": 3, "D_HID": 4, "D_OUT": 2}, rtol=RTOL_GELU)


def test_a_loss_that_does_not_read_the_argument_has_a_zero_gradient() -> None:
    text = """
func.func @loss(%x: !psk_core.tensor<[n: 3]>, %y: !psk_core.tensor<[n: 3]>) -> !psk_core.real {
  %0 = psk_core.exp %x : !psk_core.tensor<[n: 3]>
  %1 = psk_core.sum %y [n] : !psk_core.real
  func.return %1 : !psk_core.real
}
"""
    for remat in ("save", "recompute"):
        module, _ = differentiated(text, [0], remat)
        env: dict[str, int] = {}
        inputs = make_inputs(find_entry(module, "loss"), env, 0)
        (g,) = run_entry(module, "grad_loss", inputs, env)
        assert np.array_equal(g, np.zeros(3))
        assert not any(op.name == "psk_core.exp" for f in module.walk() if isinstance(f, func.FuncOp)
                       and f.sym_name.data.startswith("loss.") for op in f.walk())  # fmt: skip


def test_minigpt_gradient() -> None:
    """corpus/minigpt.mlir's loss, wrt its whole parameter tree (a fold over two blocks), at small constants."""
    text = (ROOT / "corpus" / "minigpt.mlir").read_text()
    check_gradient(text, [0], dims={"B": 1, "T": 3}, consts={"D": 4, "H": 2, "V": 5, "C": 4, "L": 2}, rtol=RTOL_GELU)


# -- the corpus losses against an independent numpy implementation ---------------------------

CORPUS_LOSSES = {
    "mlp": ("corpus/mlp.mlir", "mse", "MLP", "!X, !Y", {"D_IN": 3, "D_HID": 4, "D_OUT": 2}),
    "minigpt": ("corpus/minigpt.mlir", "loss", "Mini", "!Ids, !Ids", {"D": 4, "H": 2, "V": 5, "C": 4, "L": 2}),
    "gpt": ("corpus/nlp/gpt.mlir", "loss", "GPT", "!Ids, !Ids", {"D": 4, "H": 2, "V": 5, "C": 4, "L": 2}),
}


@pytest.mark.parametrize("name", sorted(CORPUS_LOSSES))
def test_corpus_gradient_against_numpy(name: str) -> None:
    """Each corpus loss's gradient (reference interpreter, f64) against central differences of the
    loss as `tests/unit/numpy_reference.py` writes it from the math, independently of the IR.

    Tolerance: f64 central differences with h = 1e−6 are accurate to about ε·|loss|/h + h²·|∂³loss|
    ≈ 1e−9 here; 1e−6 relative to max(1, |FD|) leaves a margin of a thousand and is far below the
    O(1) error of a wrong rule.
    """
    import numpy_reference as ref

    path, entry, params_t, rest_t, consts = CORPUS_LOSSES[name]
    # The GPT file asks for its own gradient (loss_grad, a value_and_grad), which is checked as it is.
    own = name == "gpt"
    text = (ROOT / path).read_text() + ("" if own else f"""
func.func @grad_{entry}(%p: !{params_t}, %a: {rest_t.split(", ")[0]}, %b: {rest_t.split(", ")[1]}) -> !{params_t} {{
  %0 = psk_core.grad @{entry}(%p, %a, %b) wrt [0] : !{params_t}
  func.return %0 : !{params_t}
}}
""")
    parsed = parse_module(presk_context(), text, f"{name}_grad.mlir")
    parsed.verify()
    module = parsed.module
    dims = {"B": 2} if name == "mlp" else {"B": 2, "T": 3}
    BindSizes(dims=",".join(f"{k}={v}" for k, v in dims.items()),
              consts=",".join(f"{k}={v}" for k, v in consts.items())).apply(presk_context(), module)  # fmt: skip
    AutoDiff().apply(presk_context(), module)
    env: dict[str, int] = {}
    inputs = make_inputs(find_entry(module, entry), env, 11)
    if own:
        ((value, grad),) = run_entry(module, "loss_grad", inputs, env)
        assert value == run_entry(module, entry, inputs, env)[0]
    else:
        (grad,) = run_entry(module, f"grad_{entry}", inputs, env)
    loss = {"mlp": lambda p: ref.mse(p, *inputs[1:]),
            "minigpt": lambda p: ref.minigpt_loss(p, *inputs[1:], consts["H"]),
            "gpt": lambda p: ref.gpt_loss(p, *inputs[1:], consts["H"])}[name]  # fmt: skip
    assert abs(loss(inputs[0]) - run_entry(module, entry, inputs, env)[0]) <= 1e-12 * abs(loss(inputs[0]))
    rng = np.random.default_rng(12)
    h = 1e-6
    for _ in range(DIRECTIONS):
        v = tree_map(lambda x: rng.standard_normal(np.shape(x)), inputs[0])
        plus = tree_map(lambda x, d: np.asarray(x) + h * d, inputs[0], v)
        minus = tree_map(lambda x, d: np.asarray(x) - h * d, inputs[0], v)
        fd = (loss(plus) - loss(minus)) / (2 * h)
        ad = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(leaves(grad), leaves(v)))
        assert abs(ad - fd) <= 1e-6 * max(1.0, abs(fd)), (ad, fd)


# -- random elementwise programs (hypothesis) -------------------------------------------------

BINARY = ("add", "sub", "mul", "div", "max", "max_free")
UNARY_OPS = ("neg", "exp", "tanh", "erf", "gelu", "pow2", "pow3", "sqrt_sq", "log_exp")
STRUCTURED = ("sum_b", "mean_a", "reduce_max_b", "softmax_b", "softmax_a", "dot", "transpose")


@settings(max_examples=12, deadline=None)
@given(
    sizes_=st.lists(st.integers(1, 3), min_size=2, max_size=2),
    broadcast=st.sampled_from(["a", "b", "", "ab"]),
    program=st.lists(st.tuples(st.sampled_from(BINARY + UNARY_OPS + STRUCTURED), st.booleans()), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_random_programs(sizes_: list[int], broadcast: str, program: list[tuple[str, bool]], seed: int) -> None:
    """Random well-typed chains over x[a, b]: elementwise ops (max included) with an operand broadcast into
    it by name (or a real), reductions (reduce_max included) broadcast back, softmax over either axis, a
    product with a weight, a transpose."""
    na, nb = sizes_
    big = f"!psk_core.tensor<[a: {na}, b: {nb}]>"
    small = {"a": f"!psk_core.tensor<[a: {na}]>", "b": f"!psk_core.tensor<[b: {nb}]>", "": "!psk_core.real", "ab": big}[broadcast]
    lines, x = [], "%x"
    for i, (op, flag) in enumerate(program):
        v = f"%v{i}"
        if op in ("add", "sub", "mul", "max"):  # random values: max meets no tie
            lhs, rhs = (x, "%y") if flag else ("%y", x)
            lines.append(f"  {v} = psk_core.{op} {lhs}, {rhs} : {big}")
        elif op == "div":  # only %y (positive) divides
            lines.append(f"  {v} = psk_core.div {x}, %y : {big}")
        elif op == "max_free":  # max of values that do not depend on a wrt argument needs no rule
            lines += [f"  %m{i} = psk_core.max %c, %c : {big}", f"  {v} = psk_core.mul {x}, %m{i} : {big}"]
        elif op.startswith("pow"):
            lines.append(f"  {v} = psk_core.pow {x}, {op[3]} : {big}")
        elif op == "sqrt_sq":
            lines += [f"  %q{i} = psk_core.mul {x}, {x} : {big}", f"  %o{i} = psk_core.add %q{i}, %y : {big}",
                      f"  {v} = psk_core.sqrt %o{i} : {big}"]  # fmt: skip
        elif op == "log_exp":
            lines += [f"  %e{i} = psk_core.exp {x} : {big}", f"  {v} = psk_core.log %e{i} : {big}"]
        elif op in ("sum_b", "mean_a", "reduce_max_b"):
            kind, axis = op.rsplit("_", 1)
            rest = f"!psk_core.tensor<[a: {na}]>" if axis == "b" else f"!psk_core.tensor<[b: {nb}]>"
            lines += [f"  %r{i} = psk_core.{kind} {x} [{axis}] : {rest}", f"  {v} = psk_core.add {x}, %r{i} : {big}"]
        elif op.startswith("softmax"):
            lines.append(f"  {v} = psk_core.softmax {x} [{op[-1]}] : {big}")
        elif op == "dot":
            lines += [f"  %d{i} = psk_core.dot {x}, %w : !psk_core.tensor<[a: {na}, b2: {nb}]>",
                      f"  {v} = psk_core.ein %d{i}[a, b] : {big}"]  # fmt: skip
        elif op == "transpose" and na == nb:
            lines.append(f"  {v} = psk_core.ein {x}[b, a] : {big}")
        else:
            lines.append(f"  {v} = psk_core.{op if op != 'transpose' else 'neg'} {x} : {big}")
        lines.append(f"  %t{i} = psk_core.tanh {v} : {big}")  # keeps values bounded
        x = f"%t{i}"
    text = (
        f'func.func @loss(%x: {big}, %y: {small} {{psk_core.init = "positive"}}, %c: {big}, '
        f"%w: !psk_core.tensor<[b: {nb}, b2: {nb}]>) -> !psk_core.real {{\n"
        + "\n".join(lines)
        + f"\n  %p = psk_core.mul {x}, %c : {big}\n  %r = psk_core.sum %p [a, b] : !psk_core.real\n"
        + "  func.return %r : !psk_core.real\n}\n"
    )
    check_gradient(text, [0, 1, 3], seed=seed, remats=("save",),
                   rtol=RTOL_GELU if "gelu" in text or "erf" in text else RTOL)  # fmt: skip


# -- the rule table and the documents --------------------------------------------------------


def test_every_primitive_has_a_rule() -> None:
    """No primitive of the dialect is left out: each has a rule, is differentiated through its callee, or is a request."""
    from presk.dialects.psk_core import PSKCore
    from presk.dialects.psk_core_autodiff import AUTODIFF_OPS
    from presk.passes.autodiff_rules import BY_CALLEE, RULES

    ops = set(PSKCore.operations) - {*AUTODIFF_OPS} - {op for op in PSKCore.operations if op.name == "psk_core.const_dim"}
    assert ops == set(RULES) | BY_CALLEE
    assert not set(RULES) & BY_CALLEE
    table = (ROOT / "docs" / "training.md").read_text()
    for op in ops:
        assert f"`{op.name.removeprefix('psk_core.')}`" in table, op.name


def test_reference_example_is_the_lit_tests() -> None:
    """docs/reference.md §4.19's example is the module tests/filecheck/autodiff/reference_example.mlir runs."""
    doc = (ROOT / "docs" / "reference.md").read_text()
    section = doc[doc.index("### 4.19") :]
    block = section.split("```text\n")[2].split("```")[0]
    lit = (ROOT / "tests" / "filecheck" / "autodiff" / "reference_example.mlir").read_text()
    code = [line for line in lit.splitlines() if line.strip() and not line.startswith("//")]
    assert code == [line for line in block.splitlines() if line.strip()]


# -- the differentiated MLP through the pipeline and the native backend -----------------------


def test_mlp_gradient_native_f64_matches_reference() -> None:
    """`presk run --backend native`'s way (`pipeline.lower`, the host program) against the reference in f64.

    Bound: 256 ulps of each leaf's largest magnitude, the whole-program bound
    of f64 native against the reference (docs/numerics.md): summation order
    and presk's own exp/erf are the only differences.
    """
    from presk.jit.executor import HostProgram, flatten_inputs, rebuild_results
    from presk.jit.native import NativeRunner
    from presk.pipeline import lower
    from presk.plans import plan_from_options

    text = (ROOT / "corpus" / "mlp.mlir").read_text() + """
func.func @train(%params: !MLP, %x: !X, %y: !Y) -> !psk_core.tuple<!R, !MLP> {
  %0 = psk_core.value_and_grad @mse(%params, %x, %y) wrt [0] : !psk_core.tuple<!R, !MLP>
  func.return %0 : !psk_core.tuple<!R, !MLP>
}
"""
    parsed = parse_module(presk_context(), text, "mlp_train.mlir")
    parsed.verify()
    module = parsed.module
    env = sizes.resolve(module, {}, {"B": 4})
    inputs = make_inputs(find_entry(module, "train"), env, 3)
    kernels = lower(module, "train", env, plan_from_options("f64", None))  # runs psk-autodiff first
    with NativeRunner() as native:
        host = HostProgram(kernels, native)
        (got,) = rebuild_results(host(flatten_inputs(inputs)), host.result_paths, 1)
    reference = parse_module(presk_context(), text, "mlp_train.mlir").module
    AutoDiff().apply(presk_context(), reference)
    (want,) = run_entry(reference, "train", inputs, env)
    assert len(leaves(got)) == len(leaves(want)) == 5  # the value and the four parameter leaves
    for g, w in zip(leaves(got), leaves(want)):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        assert g.shape == w.shape
        bound = 256 * np.spacing(np.max(np.abs(w)))
        assert np.max(np.abs(g - w)) <= bound


LOSS_GRAD = """
func.func @loss_grad(%params: !{P}, %ids: !Ids, %targets: !Ids) -> !psk_core.tuple<!R, !{P}> {{
  %0 = psk_core.value_and_grad @loss(%params, %ids, %targets) wrt [0] : !psk_core.tuple<!R, !{P}>
  func.return %0 : !psk_core.tuple<!R, !{P}>
}}
"""

GRADIENT_MODELS = {
    # file, parameter tree's alias, constants, leaves of (loss, gradient)
    "minigpt": ("corpus/minigpt.mlir", "Mini", {"D": 4, "V": 5, "C": 4}, 15),
    "gpt": ("corpus/nlp/gpt.mlir", "GPT", {"D": 4, "H": 2, "V": 5, "C": 4, "L": 2}, 18),
}


@pytest.mark.parametrize("model", sorted(GRADIENT_MODELS))
@pytest.mark.parametrize("realization", ["f64", "f32"])
def test_gradient_on_the_kernel_backends(model: str, realization: str) -> None:
    """MiniGPT's and the course GPT's value and gradient lowered as `presk run --backend` lowers them
    (psk-autodiff after psk-bind): native equals the kernel interpreter bit for bit, fused; in f64 both
    are within 256 scale ulps of the reference interpreter (docs/numerics.md's whole-program bound).
    The GPT's derivative contractions are TN and NT contraction nests (docs/layouts.md §1)."""
    from presk.interp.kernel import KernelInterpreter
    from presk.jit.executor import HostProgram, rebuild_results
    from presk.jit.native import NativeRunner
    from presk.pipeline import lower
    from presk.plans import plan_from_options

    path, params, consts, count = GRADIENT_MODELS[model]
    text = (ROOT / path).read_text()
    if "@loss_grad(" not in text:  # the GPT file has its own
        text += LOSS_GRAD.format(P=params)
    parsed = parse_module(presk_context(), text, f"{model}_grad.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module, consts, {"B": 2, "T": 3})
    inputs = make_inputs(find_entry(parsed.module, "loss_grad"), env, 5)
    kernels = lower(parsed.module, "loss_grad", env, plan_from_options(realization, None), fuse_launches=False)
    (interpreted,) = rebuild_results(*_run_host(HostProgram(kernels, KernelInterpreter().runner), inputs), 1)
    with NativeRunner() as native:
        (compiled,) = rebuild_results(*_run_host(HostProgram(kernels, native), inputs), 1)
    assert len(leaves(compiled)) == len(leaves(interpreted)) == count  # the loss and every parameter leaf
    for n, k in zip(leaves(compiled), leaves(interpreted)):
        assert np.asarray(n).dtype == np.asarray(k).dtype and np.asarray(n).tobytes() == np.asarray(k).tobytes()
    if realization != "f64":
        return
    bound = parse_module(presk_context(), text, f"{model}_grad.mlir").module
    BindSizes(consts=",".join(f"{k}={v}" for k, v in consts.items()), dims="B=2,T=3").apply(presk_context(), bound)
    AutoDiff().apply(presk_context(), bound)
    (want,) = run_entry(bound, "loss_grad", inputs, env)
    for g, w in zip(leaves(compiled), leaves(want)):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        assert np.max(np.abs(g - w)) <= 256 * np.spacing(np.max(np.abs(w)))


def _run_host(host: Any, inputs: list[Any]) -> tuple[list[Any], Any]:
    from presk.jit.executor import flatten_inputs

    return host(flatten_inputs(inputs)), host.result_paths


def test_index_arguments_get_no_gradient_and_bad_remat_is_refused() -> None:
    from presk.diagnostics import PreskError

    text, _ = CASES["cross_entropy"]
    module, _ = differentiated(text, [0], "save")
    bwd = find_entry(module, "loss.bwd")
    assert not any(isinstance(t, IndexTensorType) for t in bwd.function_type.outputs.data)
    with pytest.raises(PreskError, match="E3002: psk-autodiff: remat='sometimes'"):
        AutoDiff(remat="sometimes").apply(presk_context(), module)
