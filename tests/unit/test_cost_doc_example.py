"""The kernel docs/cost.md §3 works through by hand: the code gives the table's numbers.

Every expected value is the hand count the page prints (its arithmetic is
repeated in the comments); the kernel is the page's own, lowered through
the real pipeline, and the machine is described by hand so that the numbers
hold on any host.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from presk import sizes
from presk.cost.quantities import kernel_terms
from presk.cost.terms import MachineDesc
from presk.dialects.psk_kernel import KernelOp
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.pipeline import lower
from presk.plans import parse_plan
from presk.target import CacheLevel

ROOT = Path(__file__).resolve().parents[2]
KIB = 1024
AVX2_CORE = MachineDesc(
    caches=(CacheLevel(1, 32 * KIB, 64, 1), CacheLevel(2, 512 * KIB, 64, 1), CacheLevel(3, 32 * KIB * KIB, 64, 2)),
    vector_registers=16,
    line=64,
    workers=2,
)


@pytest.fixture(scope="module")
def dot() -> KernelOp:
    path = ROOT / "bench" / "programs" / "gemm.mlir"
    module = parse_module(presk_context(), path.read_text(), str(path)).module
    env = sizes.resolve(module, {}, {"N": 128})
    plan = parse_plan({"realization": "f64", "layout": {"gemm/%0": {"tile": [4, 8], "lanes": 1, "split": "none"}}}, "doc")
    kernels = lower(module, "gemm", env, plan)
    return next(op for op in kernels.walk() if isinstance(op, KernelOp) and op.sym_name.data == "dot")


def test_the_worked_example_of_docs_cost(dot: KernelOp) -> None:
    terms = kernel_terms(dot, AVX2_CORE, 1, frozenset())
    # 32 I blocks · 16 J blocks · 128 k · 32 multiply-adds · 2 operations.
    assert terms.work == 32 * 16 * 128 * 32 * 2 == 4_194_304
    # Three 128 × 128 buffers of 8 bytes.
    assert terms.bytes == 3 * 128 * 128 * 8 == 393_216
    # Per tile: 128 k · (4 loads of A + 8 of B), then 32 stores of C.
    assert terms.loads == 32 * 16 * (128 * (4 + 8) + 32) == 802_816
    # 32 sums + 8 values of B + 4 of A live in the k loop after its loads: 28 over 16 registers, 2 accesses each,
    # 65 536 iterations.
    assert terms.spill == (44 - 16) * 2 * (32 * 16 * 128) == 3_670_016
    # B: one J block's 8 columns over 128 k (8 KiB) per (I, J) block; A and C: one I block's 4 rows (4 KiB) per I block.
    assert terms.q_l2 == 32 * 16 * 8 * KIB + 2 * 32 * 4 * KIB == 4_456_448
    # Every buffer fits L2 and L3 whole.
    assert terms.q_l3 == terms.q_mem == 3 * 128 * KIB
    assert (terms.workers, terms.lanes, terms.dtype) == (1, 1, "f64")


def test_overhead_adds_one_operation_per_loop_iteration(dot: KernelOp) -> None:
    terms = kernel_terms(dot, AVX2_CORE, 1, frozenset({"overhead"}))
    assert terms.work == 4_194_304 + 32 + 32 * 16 + 32 * 16 * 128 == 4_260_384
