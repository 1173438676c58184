"""The layout passes as passes: what psk-lower-kernel leaves for them, and what each leaves behind.

`psk-lower-kernel` writes contractions and softmaxes as structured ops and
stamps each nest's kernel with its pending layout; the passes
(`apply_layouts`) apply every decision and remove it, so the kernels the
executors see hold loops only and no `layout`. Applying the passes a second
time changes nothing, and a structured op that reaches an executor is
refused with a clear error rather than run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp

from presk.analysis import constant_int
from presk.cli.program import load_program
from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_kernel_structured import STRUCTURED_OPS, ContractOp, SoftmaxOp
from presk.interp.inputs import make_inputs
from presk.interp.kernel import KernelInterpreter
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.jit.executor import HostProgram, flatten_inputs
from presk.jit.native import NativeRunner
from presk.pipeline import apply_layouts, lower, realize
from presk.lowering.realize_to_kernel import LowerToKernel
from presk.passes.kernel_layout import LAYOUT
from presk.plans import plan_from_options
from targets import WIDEST, lowering_for

pytestmark = pytest.mark.target

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "tests" / "plan"

CASES = [
    ("corpus/nlp/gpt.mlir", "loss", {"B": 2, "T": 8}, None),
    ("tests/plan/epilogue.mlir", "masked_scores", {"B": 2, "T": 16}, "epilogue.json"),
    ("tests/plan/epilogue.mlir", "bias_before", {"B": 2, "T": 16}, "epilogue.json"),
    ("tests/plan/epilogue.mlir", "residual", {"B": 2, "T": 16}, "epilogue.json"),
    ("tests/plan/two_dots.mlir", "attend", {"B": 4}, "two_dots.json"),
]


def lowered(path: str, entry: str, env: dict[str, int], plan_file: str | None) -> ModuleOp:
    program = load_program(str(ROOT / path), [f"{k}={v}" for k, v in env.items()], [])
    plan = plan_from_options(None, None if plan_file is None else f"@{PLANS / plan_file}")
    realized = realize(program.parsed.module, program.env, plan)
    LowerToKernel(entry=entry).apply(presk_context(), realized)
    return realized


def structured(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if isinstance(op, STRUCTURED_OPS)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[1])
def test_lowering_leaves_structured_ops_with_their_layout(case: tuple) -> None:
    module = lowered(*case)
    found = structured(module)
    assert found, "a contraction or softmax nest becomes a structured op"
    for op in module.walk():
        if isinstance(op, ContractOp | SoftmaxOp):
            owner = op.parent_op()
            assert isinstance(owner, kernel.KernelOp) and LAYOUT in owner.attributes
            assert isinstance(owner.location, FileLineColLoc), "errors of the passes are placed at the nest's line"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[1])
def test_the_passes_apply_every_decision_and_are_idempotent(case: tuple) -> None:
    module = lowered(*case)
    apply_layouts(module)
    assert structured(module) == []
    assert [k.sym_name.data for k in module.walk() if isinstance(k, kernel.KernelOp) and LAYOUT in k.attributes] == []
    once = str(module)
    apply_layouts(module)
    assert str(module) == once


def test_epilogue_leaves_one_launch_and_no_product_buffer() -> None:
    module = lowered("tests/plan/epilogue.mlir", "bias_before", {"B": 2, "T": 16}, "epilogue.json")
    apply_layouts(module)
    launches = [op for op in module.walk() if isinstance(op, kernel.LaunchOp)]
    assert [op.kernel.string_value() for op in launches] == ["dot+add"]
    assert len([op for op in module.walk() if isinstance(op, kernel.AllocOp)]) == 1
    names = [k.sym_name.data for k in module.walk() if isinstance(k, kernel.KernelOp)]
    assert names == ["dot+add"]


def test_a_structured_op_is_refused_by_the_kernel_interpreter() -> None:
    module = lowered("tests/plan/two_dots.mlir", "attend", {"B": 4}, "two_dots.json")
    contract = next(op for op in module.walk() if isinstance(op, ContractOp))
    k = contract.parent_op()
    assert isinstance(k, kernel.KernelOp)
    with pytest.raises(PreskError, match="cannot run psk_kernel.contract"):
        KernelInterpreter().runner(k)


@pytest.mark.parametrize("plan_file", ["attention.json", "attention_values.json"])
def test_the_attention_plans_give_the_defaults_bits_on_both_executors(plan_file: str) -> None:
    """tests/plan's attention plans (scores tiled [4, 16], k-block 32, JIK, the register's lanes, packed,
    split at depth 1; the softmax in two passes; the values ein tiled) through every layout pass, on the
    native backend and the kernel interpreter, against the default layout's bits (f32), at the
    smallest sizes where the plans hold: B=2, T=32 (the corpus GPT's head dimension is 32)."""
    program = load_program(str(ROOT / "corpus/nlp/gpt.mlir"), ["B=2", "T=32"], [])
    module, env, entry = program.parsed.module, program.env, "SelfAttention.apply"
    planned = lower(module, entry, env, plan_from_options(None, f"@{PLANS / plan_file}"))
    default = lower(module, entry, env, plan_from_options("f32", None))
    # psk-fuse-slices may have merged the pack with the launches beside it: `pack+ein_3` and the like.
    assert any("pack" in k.sym_name.data.split("+") for k in planned.walk() if isinstance(k, kernel.KernelOp))
    assert any(op.name == "vector.fma" for op in planned.walk()), "the scores' lanes are vector code"
    inputs = flatten_inputs(make_inputs(find_entry(module, entry), env, 0))
    native = NativeRunner()
    (expected,) = HostProgram(default, native)(inputs)
    for runner in (native, KernelInterpreter().runner):
        (got,) = HostProgram(planned, runner)(inputs)
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


GRAM = """
!Q = !psk_core.tensor<[batch: 2, seq: 16, hd: 8]>
!S = !psk_core.tensor<[batch: 2, seq: 16, seq2: 16]>
func.func @gram(%q: !Q) -> !S {
  %0 = psk_core.ein %q[batch, seq, hd], %q[batch, seq2, hd] : !S
  func.return %0 : !S
}
"""


def test_pack_of_an_operand_the_contraction_also_reads_as_operand_0(tmp_path: Path) -> None:
    """q qᵀ: one buffer is both operands, so psk-pack gives the panel (transposed into one block of the
    tile's 16 columns) a buffer of its own (second) rather than retyping the shared one; the result keeps
    the default's bits on both executors."""
    program_path = tmp_path / "gram.mlir"
    program_path.write_text(GRAM)
    program = load_program(str(program_path), [], [])
    module, env = program.parsed.module, program.env
    plan = tmp_path / "plan.json"
    plan.write_text('{"realization": "f32", "layout": {"gram/%0": {"tile": [4, 16], "lanes": 8, "pack": true}}}')
    packed = lower(module, "gram", env, plan_from_options(None, f"@{plan}"), fuse_slices=False)
    contraction = next(k for k in packed.walk() if isinstance(k, kernel.KernelOp) and k.sym_name.data == "ein")
    assert [str(t) for t in contraction.body.block.arg_types] == [
        "memref<2x16x8xf32>", "memref<2x1x8x16xf32>", "memref<2x16x16xf32>"
    ]  # fmt: skip
    default = lower(module, "gram", env, plan_from_options("f32", None))
    inputs = flatten_inputs(make_inputs(find_entry(module, "gram"), env, 0))
    (expected,) = HostProgram(default, NativeRunner())(inputs)
    for runner in (NativeRunner(), KernelInterpreter().runner):
        (got,) = HostProgram(packed, runner)(inputs)
        assert got.tobytes() == expected.tobytes()


SHARED_WEIGHT = """
!X = !psk_core.tensor<[b: 3, i: 4, k: 24]>
!W = !psk_core.tensor<[k: 24, j: 32]>
!O = !psk_core.tensor<[b: 3, i: 4, j: 32]>
func.func @shared(%x: !X, %w: !W) -> !O {
  %0 = psk_core.ein %x[b, i, k], %w[k, j] : !O
  func.return %0 : !O
}
"""


@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
def test_blocked_pack_of_an_operand_without_the_outer_axes(tmp_path: Path, storage: str) -> None:
    """An NN ein whose operand 1 carries no outer axis (one weight for every b): the blocked panel is
    [J / n_j, K, n_j] = [4, 24, 8], read by every outer iteration, with the default's bits on both executors."""
    program_path = tmp_path / "shared.mlir"
    program_path.write_text(SHARED_WEIGHT)
    program = load_program(str(program_path), [], [])
    module, env = program.parsed.module, program.env
    lanes = 1 if storage == "bf16" else 8
    plan = tmp_path / "plan.json"
    plan.write_text(
        f'{{"realization": "{storage}", "layout": {{"shared/%0": {{"tile": [2, 8], "lanes": {lanes}, "pack": true}}}}}}'
    )
    with lowering_for(WIDEST):  # 8 f64 lanes are AVX-512's
        packed = lower(module, "shared", env, plan_from_options(None, f"@{plan}"))
    panels = {k.sym_name.data: [str(t) for t in k.body.block.arg_types] for k in packed.walk() if isinstance(k, kernel.KernelOp)}
    element = {"f64": "f64", "f32": "f32", "bf16": "bf16"}[storage]
    assert panels["pack"] == [f"memref<24x32x{element}>", f"memref<4x24x8x{element}>"]
    assert panels["ein"][1] == f"memref<4x24x8x{element}>"
    default = lower(module, "shared", env, plan_from_options(storage, None))
    inputs = flatten_inputs(make_inputs(find_entry(module, "shared"), env, 0))
    (expected,) = HostProgram(default, NativeRunner())(inputs)
    for runner in (NativeRunner(), KernelInterpreter().runner):
        (got,) = HostProgram(packed, runner)(inputs)
        assert got.tobytes() == expected.tobytes()


ROWS_TOGETHER = """
!X = !psk_core.tensor<[b: 2, i: 8, k: 48]>
!W = !psk_core.tensor<[k: 48, j: 40]>
!O = !psk_core.tensor<[b: 2, i: 8, j: 40]>
!A = !psk_core.tensor<[b: 2, s: 32, m: 12]>
!C = !psk_core.tensor<[b: 2, s: 32, n: 40]>
!G = !psk_core.tensor<[m: 12, n: 40]>
func.func @nn(%x: !X, %w: !W) -> !O {
  %0 = psk_core.ein %x[b, i, k], %w[k, j] : !O
  func.return %0 : !O
}
func.func @tn(%a: !A, %c: !C) -> !G {
  %0 = psk_core.ein %a[b, s, m], %c[b, s, n] : !G
  func.return %0 : !G
}
"""


@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("entry", ["nn", "tn"])
def test_blocked_pack_copies_rows_together_with_the_defaults_bits(tmp_path: Path, entry: str, storage: str) -> None:
    """A blocked pack whose last summed axis (48, 32) is a multiple of PACK_ROWS copies 16 rows at a time,
    every column block of them; J = 40 leaves a shifted last block of 16. Same bits as the default layout,
    on both executors."""
    from presk.lowering.contraction import PACK_ROWS

    program_path = tmp_path / "rows.mlir"
    program_path.write_text(ROWS_TOGETHER)
    program = load_program(str(program_path), [], [])
    module, env = program.parsed.module, program.env
    plan = tmp_path / "plan.json"
    plan.write_text(f'{{"realization": "{storage}", "layout": {{"{entry}/%0": {{"tile": [4, 16], "lanes": 1, "pack": true}}}}}}')
    packed = lower(module, entry, env, plan_from_options(None, f"@{plan}"))
    pack = next(k for k in packed.walk() if isinstance(k, kernel.KernelOp) and k.sym_name.data.startswith("pack")
                and str(k.body.block.arg_types[0]).startswith(("memref<48x40", "memref<2x32x40")))  # fmt: skip
    trips = [constant_int(op.ub) for op in pack.walk() if isinstance(op, scf.ForOp)]
    assert PACK_ROWS in trips and trips[-1] == 16  # rows together, then a block's 16 columns
    default = lower(module, entry, env, plan_from_options(storage, None))
    inputs = flatten_inputs(make_inputs(find_entry(module, entry), env, 0))
    (expected,) = HostProgram(default, NativeRunner())(inputs)
    for runner in (NativeRunner(), KernelInterpreter().runner):
        (got,) = HostProgram(packed, runner)(inputs)
        assert got.tobytes() == expected.tobytes()
