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


def same_bits_as_the_default(module: ModuleOp, entry: str, env: dict[str, int], packed: ModuleOp, storage: str) -> None:
    """`packed`'s output equals the default layout's, byte for byte, on the native backend and the kernel interpreter."""
    default = lower(module, entry, env, plan_from_options(storage, None))
    inputs = flatten_inputs(make_inputs(find_entry(module, entry), env, 0))
    (expected,) = HostProgram(default, NativeRunner())(inputs)
    for runner in (NativeRunner(), KernelInterpreter().runner):
        (got,) = HostProgram(packed, runner)(inputs)
        assert got.tobytes() == expected.tobytes()


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
    same_bits_as_the_default(module, "gram", env, packed, "f32")


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
    same_bits_as_the_default(module, "shared", env, packed, storage)


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
    same_bits_as_the_default(module, entry, env, packed, storage)


SQUARE_WEIGHT = """
!X = !psk_core.tensor<[i: 16, k: 16]>
!W = !psk_core.tensor<[k: 16, j: 16]>
!O = !psk_core.tensor<[i: 16, j: 16]>
func.func @twice(%x: !X, %w: !W) -> !O {
  %0 = psk_core.dot %x, %w : !O
  %1 = psk_core.ein %x[i, k], %w[j, k] : !O
  %2 = psk_core.add %0, %1 : !O
  func.return %2 : !O
}
"""


def test_a_square_operand_blocked_by_columns_and_by_rows_gets_two_copy_kernels(tmp_path: Path) -> None:
    """One [16, 16] weight packed for the NN dot (its columns in blocks of 8) and for the NT ein (its rows in
    blocks of 8, transposed): both panels are [2, 16, 8], and each needs its own copy kernel. One kernel per
    pair of types alone would give the ein the dot's panel (wrong bits)."""
    program_path = tmp_path / "twice.mlir"
    program_path.write_text(SQUARE_WEIGHT)
    program = load_program(str(program_path), [], [])
    module, env = program.parsed.module, program.env
    plan = tmp_path / "plan.json"
    tile = '{"tile": [4, 8], "lanes": 1, "pack": true}'
    plan.write_text(f'{{"realization": "f32", "layout": {{"twice/%0": {tile}, "twice/%1": {tile}}}}}')
    packed = lower(module, "twice", env, plan_from_options(None, f"@{plan}"), fuse_slices=False)
    copies = [k for k in packed.walk() if isinstance(k, kernel.KernelOp) and k.sym_name.data.startswith("pack")]
    assert [[str(t) for t in k.body.block.arg_types] for k in copies] == [["memref<16x16xf32>", "memref<2x16x8xf32>"]] * 2
    same_bits_as_the_default(module, "twice", env, packed, "f32")


BOTH_OPERANDS = """
!X = !psk_core.tensor<[b: 2, i: 10, k: 36]>
!W = !psk_core.tensor<[k: 36, j: 24]>
!O = !psk_core.tensor<[b: 2, i: 10, j: 24]>
!K = !psk_core.tensor<[b: 2, j: 24, k: 36]>
func.func @nn(%x: !X, %w: !W) -> !O {
  %0 = psk_core.ein %x[b, i, k], %w[k, j] : !O
  func.return %0 : !O
}
func.func @nt(%x: !X, %y: !K) -> !O {
  %0 = psk_core.ein %x[b, i, k], %y[b, j, k] : !O
  func.return %0 : !O
}
"""


@pytest.mark.parametrize(
    ("entry", "layout", "storage"),
    [
        *[("nn", '"tile": [4, 8], "pack": "both"', storage) for storage in ("f64", "f32", "bf16")],
        *[("nt", '"tile": [6, 8], "kblock": 32, "order": "JIK", "pack": "both"', storage) for storage in ("f64", "f32", "bf16")],
        # The k-block loop around the I block loop: a tile of 2 rows divides I. The sums wait in the output: no bf16.
        *[(entry, '"tile": [2, 8], "kblock": 32, "order": "KIJ", "pack": "both"', storage) for entry in ("nn", "nt") for storage in ("f64", "f32")],
    ],
)
def test_both_packs_give_operand_0_a_panel_of_the_tiles_rows(tmp_path: Path, entry: str, layout: str, storage: str) -> None:
    """`"pack": "both"` copies operand 0 [b, i, k] to [b, ⌈I/m_i⌉, K, m_i] as well as operand 1 to its panel,
    on an NN and an NT contraction. I = 10 leaves a shifted last block (rows 6–9 in tiles of 4, 4–9 in tiles
    of 6), K = 36 a k-block cut short, and KIJ a k-block loop that encloses the I block loop. Same bits as the
    default layout on both executors."""
    program_path = tmp_path / "both.mlir"
    program_path.write_text(BOTH_OPERANDS)
    program = load_program(str(program_path), [], [])
    module, env = program.parsed.module, program.env
    plan = tmp_path / "plan.json"
    plan.write_text(f'{{"realization": "{storage}", "layout": {{"{entry}/%0": {{{layout}, "lanes": 1}}}}}}')
    packed = lower(module, entry, env, plan_from_options(None, f"@{plan}"), fuse_slices=False)
    contraction = next(k for k in packed.walk() if isinstance(k, kernel.KernelOp) and k.sym_name.data == "ein")
    m = int(layout.split("[")[1].split(",")[0])
    assert str(contraction.body.block.arg_types[0]) == f"memref<2x{-(-10 // m)}x36x{m}x{storage}>"
    assert str(contraction.body.block.arg_types[1]).startswith("memref<" + ("3x36x8" if entry == "nn" else "2x3x36x8"))
    same_bits_as_the_default(module, entry, env, packed, storage)


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ('"tile": [1, 8]', "this tile has one row"),
        ('"tile": [4, 8], "kblock": 32, "order": "KJI"', "clamps its rows past I's end"),
    ],
)
def test_both_packs_are_refused_where_operand_0_has_no_panel_of_whole_blocks(tmp_path: Path, layout: str, reason: str) -> None:
    """A tile of one row has no panel of rows to pack into; with the k-block loop around the I block loop a
    tile of 4 rows over I = 10 clamps its last rows, which no block of the panel holds: E7002 condition 3."""
    program_path = tmp_path / "both.mlir"
    program_path.write_text(BOTH_OPERANDS)
    program = load_program(str(program_path), [], [])
    plan = tmp_path / "plan.json"
    plan.write_text(f'{{"realization": "f32", "layout": {{"nn/%0": {{{layout}, "pack": "both"}}}}}}')
    with pytest.raises(PreskError, match=r'E7002: nest "nn/%0", decision "pack": condition 3: .*' + reason):
        lower(program.parsed.module, "nn", program.env, plan_from_options(None, f"@{plan}"))
