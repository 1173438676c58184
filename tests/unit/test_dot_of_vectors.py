"""The dot of two vectors, a real: its kernel is the product nest of no loops (`nests.emit_product`).

Autodiff's fold rule makes such dots; before, the kernel lowering failed on
the real result type (an internal error on the kernel and native backends).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from presk import sizes
from presk.interp.kernel import KernelInterpreter
from presk.interp.reference import run_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.pipeline import lower
from presk.plans import plan_from_options

PROGRAM = """
!V = !psk_core.tensor<[i: N]>
!R = !psk_core.real
func.func @f(%a: !V, %b: !V) -> !R {
  %y = psk_core.dot %a, %b : !R
  func.return %y : !R
}
"""


@pytest.mark.parametrize("realization", ["f64", "f32"])
def test_the_dot_of_two_vectors_runs_on_every_backend(realization: str) -> None:
    parsed = parse_module(presk_context(), PROGRAM, "dot.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module, {}, {"N": 37})
    rng = np.random.default_rng(7)
    dtype = np.float64 if realization == "f64" else np.float32
    a, b = (rng.standard_normal(37).astype(dtype) for _ in range(2))
    kernels = lower(parsed.module, "f", env, plan_from_options(realization, None))
    results: dict[str, Any] = {}
    with NativeRunner() as native:
        for name, runner in (("native", native), ("kernel", KernelInterpreter().runner)):
            (results[name],) = (np.array(leaf, copy=True) for leaf in HostProgram(kernels.clone(), runner)([a, b]))
    assert results["native"].shape == () and results["native"].dtype == dtype
    assert results["native"].tobytes() == results["kernel"].tobytes()
    (reference,) = run_entry(parsed.module, "f", [a.astype(np.float64), b.astype(np.float64)], env)
    # 37 terms, each rounded once (FMA): the error is at most 37 units of the type's roundoff of Σ|a_i b_i|.
    scale = float(np.sum(np.abs(a.astype(np.float64) * b.astype(np.float64))))
    assert abs(float(results["native"]) - float(reference)) <= 37 * np.finfo(dtype).eps * scale
