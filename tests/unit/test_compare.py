"""`psk_core.compare`: the same masks on the reference interpreter, the kernel interpreter and native code.

The inputs hold what a comparison can get wrong: NaN (false for every
predicate but `ne`), +0 against −0 (equal), ties, and in bf16 values that
round to equal in storage (the reference rounds them at the argument, the
kernels store them rounded; both then compare the stored values).
"""

from __future__ import annotations

import numpy as np
import pytest

from presk import sizes
from presk.dialects.psk_core import COMPARISONS
from presk.interp.kernel import KernelInterpreter
from presk.interp.reference import run_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.pipeline import lower, realize
from presk.plans import plan_from_options

PROGRAM = """
!V = !psk_core.tensor<[n: 8]>
!M = !psk_core.index<[n: 8], 2>
func.func @mask(%a: !V, %b: !V) -> !V {{
  %m = psk_core.compare {predicate} %a, %b : !M
  %one = psk_core.constant 1.0 : !psk_core.real
  %zero = psk_core.constant 0.0 : !psk_core.real
  %ones = psk_core.broadcast_like %one, %a : !V
  %0 = psk_core.where %m, %ones, %zero : !V
  func.return %0 : !V
}}
"""
"""The mask comes back as reals through `where` (1 where it holds, else 0)."""

A = np.array([1.0, np.nan, 0.0, -0.0, 2.0, 3.0, 1.0, 1.00390625])
B = np.array([1.0, 1.0, -0.0, 0.0, np.nan, 2.0, 5.0, 1.0])
"""Equal, NaN left, +0 / −0, −0 / +0, NaN right, greater, less, and 1 + 2⁻⁸ against 1 (equal in bf16)."""

EXPECTED = {
    "eq": [1, 0, 1, 1, 0, 0, 0, 0],
    "ne": [0, 1, 0, 0, 1, 1, 1, 1],
    "lt": [0, 0, 0, 0, 0, 0, 1, 0],
    "le": [1, 0, 1, 1, 0, 0, 1, 0],
    "gt": [0, 0, 0, 0, 0, 1, 0, 1],
    "ge": [1, 0, 1, 1, 0, 1, 0, 1],
}
"""In f64 and f32; in bf16 the last pair is a tie (1 + 2⁻⁸ rounds to 1)."""


def _expected(predicate: str, realization: str) -> list[int]:
    want = list(EXPECTED[predicate])
    if realization == "bf16":
        want[-1] = EXPECTED[predicate][0]
    return want


@pytest.mark.parametrize("realization", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("predicate", sorted(COMPARISONS))
def test_every_executor_gives_the_ieee_mask(predicate: str, realization: str) -> None:
    parsed = parse_module(presk_context(), PROGRAM.format(predicate=predicate), f"{predicate}.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, {})
    plan = plan_from_options(realization, None)
    reference = np.asarray(run_entry(realize(parsed.module, env, plan), "mask", [A, B], env)[0], dtype=np.float64)
    kernels = lower(parsed.module, "mask", env, plan)
    want = np.array(_expected(predicate, realization), dtype=np.float64)
    assert np.array_equal(reference, want)
    for runner in (KernelInterpreter().runner, NativeRunner()):
        (got,) = HostProgram(kernels, runner)([A, B])
        assert np.array_equal(np.asarray(got, dtype=np.float64), want), runner
