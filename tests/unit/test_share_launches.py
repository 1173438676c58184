"""`psk-share-launches` (presk/passes/share_launches.py): a repeated launch reads the first one's output.

Exactness: the GPT's gradient (where each layer packs one buffer three
times, and builds the causal mask and the attention scale once per layer)
runs on the kernel interpreter and natively, with and without the pass, in
f32 and bf16 (a stored type narrower than the arithmetic), byte for byte the
same. Legality: hand-written host
programs where the repeat would not hold the first's bits, or where
sharing would alias a result, are left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import load_with_aliases  # noqa: E402
from host_programs import launches, parse_host_module, run_bytes  # noqa: E402

from presk import sizes  # noqa: E402
from presk.interp.inputs import make_inputs  # noqa: E402
from presk.interp.kernel import KernelInterpreter  # noqa: E402
from presk.ir.calls import find_entry  # noqa: E402
from presk.ir.context import presk_context  # noqa: E402
from presk.jit.executor import flatten_inputs  # noqa: E402
from presk.jit.native import NativeRunner  # noqa: E402
from presk.passes.share_launches import ShareLaunches  # noqa: E402
from presk.pipeline import lower  # noqa: E402
from presk.plans import parse_plan  # noqa: E402


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    with NativeRunner() as runner:
        yield runner


def shared(module: ModuleOp) -> ModuleOp:
    out = module.clone()
    ShareLaunches().apply(presk_context(), out)
    out.verify()
    return out


# The weight gradients of the projections packed as the plans of bench/plans pack them: x transposed, three times.
PACKED = {"tile": [4, 8], "lanes": 1, "pack": True}


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_the_gpt_gradient_same_bytes(native: NativeRunner, realize: str) -> None:
    module = load_with_aliases("corpus/nlp/gpt.mlir")[0]
    env = sizes.resolve(module, {}, {"B": 2, "T": 8})
    sites = [f"SelfAttention.apply.bwd/%{n}" for n in (26, 30, 35)]
    plan = parse_plan({"realization": realize, "layout": {site: PACKED for site in sites}}, "test")
    before = lower(module, "loss_grad", env, plan, fuse_launches=False)
    after = shared(before)
    packs = [l.kernel.string_value() for l in launches(before) if l.kernel.string_value().startswith("pack")]
    packs_after = [l.kernel.string_value() for l in launches(after) if l.kernel.string_value().startswith("pack")]
    layers = env["L"]
    assert len(packs) - len(packs_after) == 2 * layers  # xᵀ packed once a layer, not three times
    leaves = flatten_inputs(make_inputs(find_entry(module, "loss_grad"), env, 0))
    reference = run_bytes(before, KernelInterpreter().runner, leaves)
    assert run_bytes(after, KernelInterpreter().runner, leaves) == reference
    assert run_bytes(after, native, leaves) == reference


# ----------------------------------------------------------------------------- legality

KERNELS = """
  psk_kernel.kernel @double(%0: memref<8xf32>, %1: memref<8xf32>) "f/%1" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %x = memref.load %0[%i] : memref<8xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %1[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @add(%0: memref<8xf32>, %1: memref<8xf32>, %2: memref<8xf32>) "f/%2" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %x = memref.load %0[%i] : memref<8xf32>
      %y = memref.load %1[%i] : memref<8xf32>
      %z = arith.addf %x, %y : f32
      memref.store %z, %2[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @both(%0: memref<8xf32>, %1: memref<8xf32>) "f/%3" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %x = memref.load %0[%i] : memref<8xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %0[%i] : memref<8xf32>
      memref.store %y, %1[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }
"""


def host_module(body: str, results: str = "memref<8xf32>") -> ModuleOp:
    return parse_host_module(KERNELS, body, "%a: memref<8xf32>", results)


def test_a_repeat_reads_the_first_output(native: NativeRunner) -> None:
    module = host_module("""
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %c) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %d = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @add(%b, %c, %d) {site = "f/%2"} : memref<8xf32>, memref<8xf32>, memref<8xf32>
    psk_kernel.return %d : memref<8xf32>""")
    after = shared(module)
    (first, second) = launches(after)
    assert first.kernel.string_value() == "double" and second.buffers[0] is second.buffers[1]
    leaves = [np.arange(8, dtype=np.float32) * 0.37 - 1.1]
    assert run_bytes(after, native, leaves) == run_bytes(module, KernelInterpreter().runner, leaves)


@pytest.mark.parametrize(
    "body",
    [
        # the input is written between the two launches
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %e = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @both(%a, %e) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %c) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %d = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @add(%b, %c, %d) {site = "f/%2"} : memref<8xf32>, memref<8xf32>, memref<8xf32>
    psk_kernel.return %d : memref<8xf32>""",
        # the first output is overwritten later (through a view)
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %c) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %v = psk_kernel.view %b : memref<8xf32> to memref<8xf32>
    %e = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @both(%v, %e) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %d = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @add(%b, %c, %d) {site = "f/%2"} : memref<8xf32>, memref<8xf32>, memref<8xf32>
    psk_kernel.return %d : memref<8xf32>""",
        # both outputs are results: sharing would return one buffer twice
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %c) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b, %c : memref<8xf32>, memref<8xf32>""",
        # the kernel writes one of its inputs too
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @both(%a, %b) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @both(%a, %c) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %d = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @add(%b, %c, %d) {site = "f/%2"} : memref<8xf32>, memref<8xf32>, memref<8xf32>
    psk_kernel.return %d : memref<8xf32>""",
    ],
    ids=["input-written-between", "first-output-overwritten", "both-returned", "writes-an-input"],
)
def test_repeats_that_may_differ_are_kept(body: str) -> None:
    results = "memref<8xf32>, memref<8xf32>" if "%b, %c" in body else "memref<8xf32>"
    module = host_module(body, results)
    assert len(launches(shared(module))) == len(launches(module))


def test_registered_in_the_universe() -> None:
    from presk.universe import PRESK_UNIVERSE

    assert PRESK_UNIVERSE.all_passes["psk-share-launches"]() is ShareLaunches
