"""`psk-fuse-slices` (presk/passes/fuse_slices.py): which launches run row by row in one kernel, and that no bit changes.

Exactness: programs of the corpus, forward in f64, f32 and bf16 and the
GPT's gradient in f32, run on the kernel interpreter and natively, with and
without the pass; the results are byte for byte the same (the merged kernel executes the same
loads, operations and stores per row, in the same order). Legality:
hand-written host programs where running row by row would change the
result (a read of another row, a view, a launch in between, a write to what
the first reads) or where the loops differ are left alone.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

sys.path.insert(0, str(Path(__file__).parent))

from conftest import load_with_aliases  # noqa: E402
from host_programs import kernel, launches, parse_host_module, run_bytes, same_results  # noqa: E402

from presk import sizes  # noqa: E402
from presk.analysis import affine_index  # noqa: E402
from presk.dialects.psk_kernel import WORKERS  # noqa: E402
from presk.interp.inputs import make_inputs  # noqa: E402
from presk.interp.kernel import KernelInterpreter  # noqa: E402
from presk.ir.calls import find_entry  # noqa: E402
from presk.ir.context import presk_context  # noqa: E402
from presk.jit.executor import flatten_inputs  # noqa: E402
from presk.jit.native import NativeRunner  # noqa: E402
from presk.lowering.llvm import streaming_stores  # noqa: E402
from presk.lowering.row_blocks import JAM_ROWS  # noqa: E402
from presk.passes import fuse_slices  # noqa: E402
from presk.passes.fuse_slices import FuseSlices, sliced_kernel  # noqa: E402
from presk.pipeline import lower  # noqa: E402
from presk.plans import plan_from_options  # noqa: E402
from presk.target import target_machine  # noqa: E402


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    with NativeRunner() as runner:
        yield runner


def lowered(path: str, entry: str, dims: dict[str, int], realize: str, slices: bool) -> ModuleOp:
    """The program's kernels with or without `psk-fuse-slices` (and without `psk-promote-to-scratch`, which
    `lower` runs after it: tests/unit/test_promote_to_scratch.py)."""
    module = load_with_aliases(path)[0]
    env = sizes.resolve(module, {}, dims)
    kernels = lower(module, entry, env, plan_from_options(realize, None), fuse_slices=False)
    return with_slices(kernels) if slices else kernels


def with_slices(kernels: ModuleOp) -> ModuleOp:
    """A copy of `kernels` after `psk-fuse-slices`: what `lowered(..., True)` gives, without lowering again."""
    after = kernels.clone()
    FuseSlices().apply(presk_context(), after)
    return after


# ----------------------------------------------------------------------------- the corpus

CORPUS = [
    ("corpus/layernorm.mlir", "LayerNorm.apply", {"B": 2, "T": 8}),
    ("corpus/attention.mlir", "SelfAttention.apply", {"B": 2, "T": 5}),
    ("corpus/minigpt.mlir", "loss", {"B": 2, "T": 8}),
    ("bench/programs/layernorm.mlir", "layernorm", {"R": 33, "E": 40}),
]
# The GPT's gradient (a hundred merges) in one type: the merges are the same in every type, and the three
# types are covered by the entries above.
CASES = [
    *(pytest.param(*case, realize, id=f"{case[1]}-{realize}") for case in CORPUS for realize in ("f64", "f32", "bf16")),
    pytest.param("corpus/nlp/gpt.mlir", "loss_grad", {"B": 2, "T": 8}, "f32", id="loss_grad-f32"),
]


@pytest.mark.parametrize(("path", "entry", "dims", "realize"), CASES)
def test_corpus_same_bytes(native: NativeRunner, path: str, entry: str, dims: dict[str, int], realize: str) -> None:
    module = load_with_aliases(path)[0]
    leaves = flatten_inputs(make_inputs(find_entry(module, entry), sizes.resolve(module, {}, dims), 0))
    without = lowered(path, entry, dims, realize, False)
    with_pass = with_slices(without)
    assert len(launches(with_pass)) < len(launches(without))
    reference = run_bytes(without, KernelInterpreter().runner, leaves)
    assert run_bytes(with_pass, KernelInterpreter().runner, leaves) == reference
    assert run_bytes(with_pass, native, leaves) == reference


def test_chains_of_merges_take_their_kernels_ops_and_leave_what_copying_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A merged kernel that the next merge of its chain takes gives its ops instead of a copy; the layers of the
    GPT's fold reuse the first layer's merged kernels, so some taken ones are built again. The kernels and host
    program left are those copying every merged kernel leaves, op for op."""
    taken: set[str] = set()
    rebuilt: set[str] = set()
    build, materialized = fuse_slices.MergeSlices.build, fuse_slices.MergeSlices._materialized

    def counting_build(self: fuse_slices.MergeSlices, *args: object) -> object:
        taken.update(self.taken)
        return build(self, *args)  # type: ignore[arg-type]

    def counting_materialized(self: fuse_slices.MergeSlices, name: str, kernels: object) -> object:
        if name in self.taken:
            rebuilt.add(name)
        return materialized(self, name, kernels)  # type: ignore[arg-type]

    monkeypatch.setattr(fuse_slices.MergeSlices, "build", counting_build)
    monkeypatch.setattr(fuse_slices.MergeSlices, "_materialized", counting_materialized)
    dims = {"B": 2, "T": 8}
    taking = lowered("corpus/nlp/gpt.mlir", "loss_grad", dims, "f32", True)
    assert taken and rebuilt, "no merge took a kernel's ops, or none was built again"
    monkeypatch.setattr(fuse_slices.MergeSlices, "takes_ops", False)
    copying = lowered("corpus/nlp/gpt.mlir", "loss_grad", dims, "f32", True)
    taking.verify()
    assert str(taking) == str(copying)


def test_layernorm_runs_row_by_row() -> None:
    """The mean's blocks of rows set the loop; the elementwise kernels run the rows of a block one by one."""
    after = lowered("bench/programs/layernorm.mlir", "layernorm", {"R": 32, "E": 16}, "f32", True)
    (launch,) = launches(after)
    merged = kernel(after, launch.kernel.string_value())
    assert launch.kernel.string_value() == "mean+sub+pow+mean_1+sqrt+add"
    analysis = sliced_kernel(merged)
    assert analysis is not None and analysis.trips[0] == 32 // JAM_ROWS
    strips = [op for op in analysis.loops[0].body.block.ops if isinstance(op, scf.ForOp) and not op.iter_args]
    assert strips and all(op.ub.owner.value.value.data == JAM_ROWS for op in strips)  # type: ignore[union-attr]


def test_a_machine_whose_caches_are_unknown_still_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the OS describes no cache, the budget is the smallest private cache in use, not nothing."""
    bare = dataclasses.replace(target_machine(), caches=())
    assert bare.private_cache is None
    monkeypatch.setattr(fuse_slices, "target_machine", lambda: bare)
    after = lowered("bench/programs/layernorm.mlir", "layernorm", {"R": 32, "E": 16}, "f32", True)
    assert len(launches(after)) == 1


def test_mean_is_sliced_by_its_blocks_of_rows() -> None:
    before = lowered("bench/programs/layernorm.mlir", "layernorm", {"R": 32, "E": 16}, "f32", False)
    mean, sub = sliced_kernel(kernel(before, "mean")), sliced_kernel(kernel(before, "sub+pow"))
    assert mean is not None and mean.trips == (32 // JAM_ROWS,) and mean.steps == (JAM_ROWS,)
    assert mean.prefixes == (1, 1)
    assert sub is not None and sub.trips == (32, 16) and sub.steps == (1, 1) and not sub.innermost_at(1)


# ----------------------------------------------------------------------------- legality

KERNELS = """
  psk_kernel.kernel @rowsum(%0: memref<4x3xf32>, %1: memref<4xf32>) "f/%1" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %z = arith.constant 0.0 : f32
    scf.for %b = %c0 to %c2 step %c1 {
      %r0 = arith.muli %b, %c2 : index
      %r1 = arith.addi %r0, %c1 : index
      %s0, %s1 = scf.for %j = %c0 to %c3 step %c1 iter_args(%a0 = %z, %a1 = %z) -> (f32, f32) {
        %x0 = memref.load %0[%r0, %j] : memref<4x3xf32>
        %n0 = arith.addf %a0, %x0 : f32
        %x1 = memref.load %0[%r1, %j] : memref<4x3xf32>
        %n1 = arith.addf %a1, %x1 : f32
        scf.yield %n0, %n1 : f32, f32
      }
      memref.store %s0, %1[%r0] : memref<4xf32>
      memref.store %s1, %1[%r1] : memref<4xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @rowsum_split(%0: memref<4x3xf32>, %1: memref<4xf32>) "f/%7" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %z = arith.constant 0.0 : f32
    scf.for %b = %c0 to %c2 step %c1 {
      %r0 = arith.muli %b, %c2 : index
      %r1 = arith.addi %r0, %c1 : index
      %s0, %s1 = scf.for %j = %c0 to %c3 step %c1 iter_args(%a0 = %z, %a1 = %z) -> (f32, f32) {
        %x0 = memref.load %0[%r0, %j] : memref<4x3xf32>
        %n0 = arith.addf %a0, %x0 : f32
        %x1 = memref.load %0[%r1, %j] : memref<4x3xf32>
        %n1 = arith.addf %a1, %x1 : f32
        scf.yield %n0, %n1 : f32, f32
      }
      memref.store %s0, %1[%r0] : memref<4xf32>
      memref.store %s1, %1[%r1] : memref<4xf32>
    } {psk_kernel.parallel, psk_kernel.workers = 2 : i64}
  }
  psk_kernel.kernel @center(%0: memref<4x3xf32>, %1: memref<4xf32>, %2: memref<4x3xf32>) "f/%2" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c3 step %c1 {
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %m = memref.load %1[%i] : memref<4xf32>
        %y = arith.subf %x, %m : f32
        memref.store %y, %2[%i, %j] : memref<4x3xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @center_reversed(%0: memref<4x3xf32>, %1: memref<4xf32>, %2: memref<4x3xf32>) "f/%3" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      %k = arith.subi %c3, %i : index
      scf.for %j = %c0 to %c3 step %c1 {
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %m = memref.load %1[%k] : memref<4xf32>
        %y = arith.subf %x, %m : f32
        memref.store %y, %2[%i, %j] : memref<4x3xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @center_split(%0: memref<4x3xf32>, %1: memref<4xf32>, %2: memref<4x3xf32>) "f/%4" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c3 step %c1 {
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %m = memref.load %1[%i] : memref<4xf32>
        %y = arith.subf %x, %m : f32
        memref.store %y, %2[%i, %j] : memref<4x3xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel, psk_kernel.workers = 2 : i64}
  }
  psk_kernel.kernel @negate(%0: memref<4xf32>, %1: memref<4xf32>) "f/%5" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      %x = memref.load %0[%i] : memref<4xf32>
      %y = arith.negf %x : f32
      memref.store %y, %1[%i] : memref<4xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @wide(%0: memref<6x3xf32>, %1: memref<6x3xf32>) "f/%6" {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c6 = arith.constant 6 : index
    scf.for %i = %c0 to %c6 step %c1 {
      scf.for %j = %c0 to %c3 step %c1 {
        %x = memref.load %0[%i, %j] : memref<6x3xf32>
        %y = arith.negf %x : f32
        memref.store %y, %1[%i, %j] : memref<6x3xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
  }
"""


def host_module(body: str, args: str = "%x: memref<4x3xf32>", results: str = "memref<4x3xf32>") -> ModuleOp:
    return parse_host_module(KERNELS, body, args, results)


def fused(module: ModuleOp, budget: int | None = None) -> ModuleOp:
    out = module.clone()
    FuseSlices(budget=budget).apply(presk_context(), out)
    out.verify()
    return out


SUM_THEN = """
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {{site = "f/%1"}} : memref<4x3xf32>, memref<4xf32>
    %c = psk_kernel.alloc : memref<4x3xf32>
    psk_kernel.launch @{reader}(%x, %s, %c) {{site = "f/%2"}} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    psk_kernel.return %c : memref<4x3xf32>"""


def test_a_sum_and_its_row_reader_merge(native: NativeRunner) -> None:
    module = host_module(SUM_THEN.format(reader="center"))
    after = fused(module)
    assert [l.kernel.string_value() for l in launches(after)] == ["rowsum+center"]
    same_results(module, after, native)


def test_a_reader_of_one_axis_runs_inside_the_blocks(native: NativeRunner) -> None:
    """negate's loop over the four sums is its innermost: it runs two rows a block after the sums."""
    module = host_module(
        """
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {site = "f/%1"} : memref<4x3xf32>, memref<4xf32>
    %n = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @negate(%s, %n) {site = "f/%5"} : memref<4xf32>, memref<4xf32>
    psk_kernel.return %n : memref<4xf32>""",
        results="memref<4xf32>",
    )
    after = fused(module)
    assert [l.kernel.string_value() for l in launches(after)] == ["rowsum+negate"]
    same_results(module, after, native)


def test_kernels_stating_the_same_workers_merge(native: NativeRunner) -> None:
    """Both loops state two workers (`psk-split`): the merged kernel's loop states them; the block's rows do not."""
    module = host_module(SUM_THEN.format(reader="center_split").replace("@rowsum(", "@rowsum_split("))
    after = fused(module)
    (launch,) = launches(after)
    merged = kernel(after, launch.kernel.string_value())
    (top,) = [op for op in merged.body.block.ops if isinstance(op, scf.ForOp)]
    assert top.attributes[WORKERS] == IntegerAttr(2, 64)
    assert sum(WORKERS in op.attributes for op in merged.walk() if isinstance(op, scf.ForOp)) == 1
    same_results(module, after, native)


def test_the_budget_bounds_what_one_iteration_touches() -> None:
    module = host_module(SUM_THEN.format(reader="center"))
    # One block of two rows: x's two rows (24 bytes), two sums (8), two rows of the result (24).
    assert len(launches(fused(module, budget=56))) == 1
    assert len(launches(fused(module, budget=55))) == 2


@pytest.mark.parametrize(
    "body",
    [
        # the reader takes another row's sum
        SUM_THEN.format(reader="center_reversed"),
        # a layout stated the reader's workers
        SUM_THEN.format(reader="center_split"),
        # the reader reads a view of the sums
        """
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {site = "f/%1"} : memref<4x3xf32>, memref<4xf32>
    %v = psk_kernel.view %s : memref<4xf32> to memref<4xf32>
    %c = psk_kernel.alloc : memref<4x3xf32>
    psk_kernel.launch @center(%x, %v, %c) {site = "f/%2"} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    psk_kernel.return %c : memref<4x3xf32>""",
        # a launch in between reads other rows' sums: the row sum cannot move down to the reader
        """
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {site = "f/%1"} : memref<4x3xf32>, memref<4xf32>
    %r = psk_kernel.alloc : memref<4x3xf32>
    psk_kernel.launch @center_reversed(%x, %s, %r) {site = "f/%3"} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    %c = psk_kernel.alloc : memref<4x3xf32>
    psk_kernel.launch @center(%x, %s, %c) {site = "f/%2"} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    psk_kernel.return %c : memref<4x3xf32>""",
        # the second writes what the first reads
        """
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {site = "f/%1"} : memref<4x3xf32>, memref<4xf32>
    psk_kernel.launch @center(%x, %s, %x) {site = "f/%2"} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    psk_kernel.return %x : memref<4x3xf32>""",
    ],
    ids=["other-row", "workers-stated", "view", "reader-between", "write-after-read"],
)
def test_illegal_merges_are_left_alone(body: str) -> None:
    after = fused(host_module(body))
    assert not any(l.kernel.string_value().startswith("rowsum+") for l in launches(after))


def test_other_row_counts_do_not_merge() -> None:
    module = host_module(
        """
    %w = psk_kernel.alloc : memref<6x3xf32>
    psk_kernel.launch @wide(%y, %w) {site = "f/%6"} : memref<6x3xf32>, memref<6x3xf32>
    %s = psk_kernel.alloc : memref<4xf32>
    psk_kernel.launch @rowsum(%x, %s) {site = "f/%1"} : memref<4x3xf32>, memref<4xf32>
    %c = psk_kernel.alloc : memref<4x3xf32>
    psk_kernel.launch @center(%x, %s, %c) {site = "f/%2"} : memref<4x3xf32>, memref<4xf32>, memref<4x3xf32>
    psk_kernel.return %c : memref<4x3xf32>""",
        args="%x: memref<4x3xf32>, %y: memref<6x3xf32>",
    )
    names = [l.kernel.string_value() for l in launches(fused(module))]
    assert names == ["wide", "rowsum+center"]


def test_affine_index_follows_index_arithmetic() -> None:
    module = host_module(SUM_THEN.format(reader="center_reversed"))
    rowsum, reversed_ = kernel(module, "rowsum"), kernel(module, "center_reversed")
    (outer,) = [op for op in rowsum.body.block.ops if isinstance(op, scf.ForOp)]
    b = outer.body.block.args[0]
    stores = [op for op in outer.body.block.ops if op.name == "memref.store"]
    assert [affine_index(s.operands[2], [b]) for s in stores] == [((2,), 0), ((2,), 1)]
    (loop,) = [op for op in reversed_.body.block.ops if isinstance(op, scf.ForOp)]
    (k,) = [op for op in loop.body.block.ops if op.name == "arith.subi"]
    assert affine_index(k.results[0], [loop.body.block.args[0]]) == ((-1,), 3)
    assert affine_index(k.results[0], []) is None  # the counter is not one of those asked for


def test_registered_in_the_universe() -> None:
    from presk.universe import PRESK_UNIVERSE

    assert PRESK_UNIVERSE.all_passes["psk-fuse-slices"]() is FuseSlices


def test_a_row_stored_for_the_next_loop_stays_in_the_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the merged LayerNorm, every kernel big enough to stream: the loops storing what a later loop reads
    (the centred rows and their squares, the deviations) store through the caches; the result's loop streams."""
    if target_machine().vector_bits < 512:
        pytest.skip("streaming stores need a vector as wide as a cache line (AVX-512)")
    monkeypatch.setattr(streaming_stores, "STREAMING_BYTES", 0)
    after = lowered("bench/programs/layernorm.mlir", "layernorm", {"R": 32, "E": 16}, "f32", True)
    (launch,) = launches(after)
    merged = kernel(after, launch.kernel.string_value())
    args = list(merged.body.block.args)
    loads: dict[SSAValue, list[Operation]] = {}
    for op in merged.walk():
        if op.name in ("memref.load", "vector.load"):
            loads.setdefault(op.operands[0], []).append(op)
    read = set(loads)
    streamed: dict[bool, list[bool]] = {True: [], False: []}
    for loop in merged.walk():
        if isinstance(loop, scf.ForOp) and not any(isinstance(op, scf.ForOp) for op in loop.body.block.ops):
            stored = [op.operands[1] for op in loop.body.block.ops if op.name == "memref.store"]
            if stored:
                plan = streaming_stores.streaming(loop, target_machine(), 1, loads)
                streamed[any(b in read for b in stored)].append(plan is not None)
    assert streamed[True] and not any(streamed[True])  # read again: through the caches
    assert streamed[False] == [True]  # the result (args[-1]) alone goes around them
    assert args[-1] not in read
