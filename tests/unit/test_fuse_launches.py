"""`psk-fuse-launches` (presk/passes/fuse_launches.py): which launches merge, and that no bit changes.

Exactness: every program below runs on the kernel interpreter and natively,
with and without the pass, in f64, f32 and bf16; all four results are byte
for byte the same (the pass replaces a load by the value just stored, which
is the memory round trip exactly). Legality: hand-written host programs where
a merge would change the result (a read at another index, through a view,
a launch in between reading the first's output, a write to what the first
reads, other iteration spaces) are left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT, load_with_aliases  # noqa: E402
from host_programs import kernel, launches, parse_host_module, run_bytes, same_results  # noqa: E402

from presk import sizes  # noqa: E402
from presk.dialects import psk_kernel as pk  # noqa: E402
from presk.interp.inputs import make_inputs  # noqa: E402
from presk.interp.kernel import KernelInterpreter  # noqa: E402
from presk.ir.calls import find_entry  # noqa: E402
from presk.ir.context import presk_context  # noqa: E402
from presk.jit.executor import flatten_inputs  # noqa: E402
from presk.jit.native import NativeRunner  # noqa: E402
from presk.pipeline import lower  # noqa: E402
from presk.passes.fuse_launches import FuseLaunches, pure_nest  # noqa: E402
from presk.passes.share_launches import ShareLaunches  # noqa: E402
from presk.plans import plan_from_options  # noqa: E402


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    with NativeRunner() as runner:
        yield runner


def lowered(path: str, entry: str, dims: dict[str, int], realize: str, fuse_launches: bool) -> ModuleOp:
    module = load_with_aliases(path)[0]
    env = sizes.resolve(module, {}, dims)
    kernels = lower(module, entry, env, plan_from_options(realize, None), fuse_launches=False, fuse_slices=False)
    return with_launches_fused(kernels) if fuse_launches else kernels


def with_launches_fused(kernels: ModuleOp) -> ModuleOp:
    """A copy of `kernels` after `psk-share-launches` and `psk-fuse-launches`, as `lower` runs them."""
    after = kernels.clone()
    ShareLaunches().apply(presk_context(), after)
    FuseLaunches().apply(presk_context(), after)
    return after


def inputs(path: str, entry: str, dims: dict[str, int]) -> list[np.ndarray]:
    module = load_with_aliases(path)[0]
    env = sizes.resolve(module, {}, dims)
    return flatten_inputs(make_inputs(find_entry(module, entry), env, 0))


# ----------------------------------------------------------------------------- AdamW


def test_adamw_becomes_one_chain() -> None:
    """m', v' and p' (three groups, since m' and v' are results) run as one kernel with three stores."""
    before = lowered("bench/programs/adamw.mlir", "adamw", {"N": 64}, "f32", False)
    after = lowered("bench/programs/adamw.mlir", "adamw", {"N": 64}, "f32", True)
    assert len(launches(before)) == 7
    assert len(launches(after)) == 5  # four scalar kernels (1 - b1t, ...) and the chain
    (chain,) = [l for l in launches(after) if "+" in l.kernel.string_value()]
    merged = kernel(after, chain.kernel.string_value())
    stores = [op for op in merged.walk() if op.name == "memref.store"]
    assert len(stores) == 3
    # 4 arrays in (p, g, m, v), 3 out: the chain loads nothing it stored.
    nest = pure_nest(merged)
    assert nest is not None
    args = list(chain.buffers)
    big = {i for i, v in enumerate(args) if v.type.get_shape() == (64,)}  # type: ignore[attr-defined]
    loaded = {args[nest.argument_index(l.memref)] for l in nest.loads}  # type: ignore[index]
    stored = {args[nest.argument_index(s.memref)] for s in nest.stores}  # type: ignore[index]
    assert len({v for v in loaded if args.index(v) in big}) == 4
    assert len(stored) == 3 and not (loaded & stored)
    assert chain.attributes["site"].data.count("+") == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(
    ("path", "entry", "dims"),
    [
        ("bench/programs/adamw.mlir", "adamw", {"N": 1003}),
        ("corpus/minigpt.mlir", "adamw.step", {"B": 2, "T": 8}),
        ("corpus/nlp/gpt.mlir", "adamw.step", {"B": 2, "T": 8}),
    ],
)
def test_adamw_step_same_bytes(native: NativeRunner, path: str, entry: str, dims: dict[str, int], realize: str) -> None:
    leaves = inputs(path, entry, dims)
    without = lowered(path, entry, dims, realize, False)
    with_pass = with_launches_fused(without)
    assert len(launches(with_pass)) < len(launches(without))
    reference = run_bytes(without, KernelInterpreter().runner, leaves)
    assert run_bytes(without, native, leaves) == reference
    assert run_bytes(with_pass, KernelInterpreter().runner, leaves) == reference
    assert run_bytes(with_pass, native, leaves) == reference


CORPUS = [
    ("corpus/mlp.mlir", "MLP.apply", {"B": 4}),
    ("corpus/mlp.mlir", "mse", {"B": 4}),
    ("corpus/layernorm.mlir", "LayerNorm.apply", {"B": 2, "T": 8}),
    ("corpus/attention.mlir", "SelfAttention.apply", {"B": 2, "T": 5}),
    ("corpus/minigpt.mlir", "MiniGPT.apply", {"B": 2, "T": 8}),
    ("corpus/minigpt.mlir", "loss", {"B": 2, "T": 8}),
    ("corpus/nlp/gpt.mlir", "loss", {"B": 2, "T": 8}),
    ("bench/programs/layernorm.mlir", "layernorm", {"R": 33, "E": 40}),
    ("bench/programs/stream.mlir", "stream", {"N": 1000}),
]


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("path", "entry", "dims"), CORPUS)
def test_corpus_same_bytes(native: NativeRunner, path: str, entry: str, dims: dict[str, int], realize: str) -> None:
    leaves = inputs(path, entry, dims)
    without = lowered(path, entry, dims, realize, False)
    with_pass = with_launches_fused(without)
    assert len(launches(with_pass)) <= len(launches(without))
    reference = run_bytes(without, KernelInterpreter().runner, leaves)
    assert run_bytes(with_pass, KernelInterpreter().runner, leaves) == reference
    assert run_bytes(with_pass, native, leaves) == reference


def test_layernorm_merges_its_two_readers() -> None:
    """`x − μ` (read twice, so a group of its own) and its square run as one kernel with two stores."""
    after = lowered("bench/programs/layernorm.mlir", "layernorm", {"R": 8, "E": 16}, "f32", True)
    names = [l.kernel.string_value() for l in launches(after)]
    assert "sub+pow" in names and len(names) == 5


def test_fold_layers_share_merged_kernels() -> None:
    """The same pair of kernels on the same pattern of buffers gets one merged kernel."""
    after = lowered("corpus/minigpt.mlir", "adamw.step", {"B": 2, "T": 8}, "f32", True)
    merged = [op for op in after.walk() if isinstance(op, pk.KernelOp) and "+" in op.sym_name.data]
    launched = [l for l in launches(after) if "+" in l.kernel.string_value()]
    assert len(merged) < len(launched)
    names = {op.sym_name.data for op in after.walk() if isinstance(op, pk.KernelOp)}
    assert {l.kernel.string_value() for l in launches(after)} == names  # no kernel left unlaunched


def test_launch_counts_of_psk_realize_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    """`presk launches` counts PSK-Realize launches (7 for AdamW with fusion); the pass runs below them."""
    from presk.cli.main import main

    assert main(["launches", str(ROOT / "bench/programs/adamw.mlir"), "--entry", "adamw", "--dim", "N=64"]) == 0
    assert "| adamw | 20 | 7 |" in capsys.readouterr().out
    assert len(launches(lowered("bench/programs/adamw.mlir", "adamw", {"N": 64}, "f32", False))) == 7


def test_registered_in_the_universe() -> None:
    from presk.universe import PRESK_UNIVERSE

    assert PRESK_UNIVERSE.all_passes["psk-fuse-launches"]() is FuseLaunches
    assert FuseLaunches.name == "psk-fuse-launches"


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
  psk_kernel.kernel @square(%0: memref<8xf32>, %1: memref<8xf32>) "f/%2" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %x = memref.load %0[%i] : memref<8xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %1[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @reverse(%0: memref<8xf32>, %1: memref<8xf32>) "f/%3" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %m = arith.muli %i, %c7 : index
      %x = memref.load %0[%c7] : memref<8xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %1[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @wide(%0: memref<9xf32>, %1: memref<9xf32>) "f/%4" {
    %c0 = arith.constant 0 : index
    %c9 = arith.constant 9 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c9 step %c1 {
      %x = memref.load %0[%i] : memref<9xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %1[%i] : memref<9xf32>
    } {psk_kernel.parallel}
  }
"""


def host_module(body: str, args: str = "%a: memref<8xf32>", results: str = "memref<8xf32>") -> ModuleOp:
    return parse_host_module(KERNELS, body, args, results)


def fused(module: ModuleOp) -> ModuleOp:
    out = module.clone()
    FuseLaunches().apply(presk_context(), out)
    out.verify()
    return out


def test_producer_consumer_merges(native: NativeRunner) -> None:
    module = host_module("""
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @square(%b, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c : memref<8xf32>""")
    after = fused(module)
    assert [l.kernel.string_value() for l in launches(after)] == ["double+square"]
    body = kernel(after, "double+square")
    assert sum(op.name == "memref.load" for op in body.walk()) == 1  # square's load is the stored value
    assert sum(op.name == "memref.store" for op in body.walk()) == 2  # double's output still written
    same_results(module, after, native)


def test_moves_past_independent_launches(native: NativeRunner) -> None:
    module = host_module("""
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %d = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @reverse(%z, %d) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @square(%b, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c, %d : memref<8xf32>, memref<8xf32>""",
        args="%a: memref<8xf32>, %z: memref<8xf32>", results="memref<8xf32>, memref<8xf32>",
    )
    after = fused(module)
    names = [l.kernel.string_value() for l in launches(after)]
    assert names == ["reverse", "double+square"]
    same_results(module, after, native)


@pytest.mark.parametrize(
    "body",
    [
        # square reads double's output at another index (the reverse kernel reads element 7).
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @reverse(%b, %c) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c : memref<8xf32>""",
        # the reader reads a view of double's output
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %v = psk_kernel.view %b : memref<8xf32> to memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @square(%v, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c : memref<8xf32>""",
        # a launch in between writes what double reads (double cannot move down to square), and another
        # reads what square writes (square cannot move up to double)
        """
    %b = psk_kernel.alloc : memref<8xf32>
    %d = psk_kernel.alloc : memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    %e = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%d, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.launch @reverse(%a, %d) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    psk_kernel.launch @reverse(%c, %e) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    psk_kernel.launch @square(%b, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c, %e : memref<8xf32>, memref<8xf32>""",
        # the second writes what the first reads
        """
    %b = psk_kernel.alloc : memref<8xf32>
    %e = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%b, %e) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.launch @square(%e, %b) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b : memref<8xf32>""",
    ],
    ids=["other-index", "view", "writer-between", "write-after-read"],
)
def test_illegal_merges_are_left_alone(body: str) -> None:
    module = host_module(body)
    after = fused(module)
    names = [l.kernel.string_value() for l in launches(after)]
    assert not any(name.startswith("double+") for name in names), names


def test_the_second_moves_up_where_the_first_cannot_move_down(native: NativeRunner) -> None:
    """reverse overwrites what double reads, so double cannot run in the last square's place; that square can
    run in double's: the merged launch stands before reverse, and the allocation of square's output moves up."""
    module = host_module(
        """
    %d = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @square(%a, %d) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%d, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.launch @reverse(%a, %d) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @square(%b, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c, %d : memref<8xf32>, memref<8xf32>""",
        results="memref<8xf32>, memref<8xf32>",
    )
    after = fused(module)
    assert [l.kernel.string_value() for l in launches(after)] == ["square+double+square", "reverse"]
    same_results(module, after, native)


def test_a_launch_that_only_shares_an_input_does_not_move_up() -> None:
    """double and square both read %a, and square reads nothing double writes: merged at double's place
    (reverse reads what double writes, so double cannot move down), square's result would be made before
    reverse and held until read, one read of %a saved for a buffer kept longer. So they stay apart."""
    module = host_module(
        """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %e = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @reverse(%b, %e) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @square(%a, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c, %e : memref<8xf32>, memref<8xf32>""",
        results="memref<8xf32>, memref<8xf32>",
    )
    after = fused(module)
    assert [l.kernel.string_value() for l in launches(after)] == ["double", "reverse", "square"]


def test_other_iteration_spaces_do_not_merge() -> None:
    module = host_module(
        """
    %b = psk_kernel.alloc : memref<9xf32>
    psk_kernel.launch @wide(%w, %b) {site = "f/%4"} : memref<9xf32>, memref<9xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %c) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c : memref<8xf32>""",
        args="%a: memref<8xf32>, %w: memref<9xf32>",
    )
    after = fused(module)
    assert len(launches(after)) == 2


def test_reductions_are_not_pure_nests() -> None:
    module = lowered("bench/programs/layernorm.mlir", "layernorm", {"R": 8, "E": 16}, "f32", False)
    kinds = {op.sym_name.data: pure_nest(op) is not None for op in module.walk() if isinstance(op, pk.KernelOp)}
    assert kinds["mean"] is False and kinds["sub"] is True


def test_presk_opt_runs_the_pass(tmp_path: Path) -> None:
    """`presk-opt FILE -p psk-fuse-launches` on a printed kernel module."""
    import subprocess

    source = tmp_path / "adamw.mlir"
    source.write_text(str(lowered("bench/programs/adamw.mlir", "adamw", {"N": 8}, "f32", False)))
    tool = Path(sys.executable).parent / "presk-opt"
    done = subprocess.run([str(tool), str(source), "-p", "psk-fuse-launches"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("psk_kernel.launch") == 5
    assert '@"add+add_1+sub_4"' in done.stdout
