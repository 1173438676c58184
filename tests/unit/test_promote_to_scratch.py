"""`psk-promote-to-scratch` (presk/passes/promote_to_scratch.py): which buffers move into their kernel, and that no
bit changes.

Exactness: programs of the corpus (LayerNorm in f64, f32 and bf16, the
attention in f32, MiniGPT's loss in bf16, the GPT's gradient in f32) after `psk-fuse-slices`, run with and without the
pass on the kernel interpreter and natively: the same bytes. Legality:
hand-written host programs where the buffer is seen outside the kernel (a
result, another launch, a view), where an iteration reads another's rows,
or where the blocks do not fit the budget keep their buffer.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import load_with_aliases  # noqa: E402
from host_programs import kernel, launches, parse_host_module, run_bytes, same_results  # noqa: E402

from presk import sizes  # noqa: E402
from presk.dialects import psk_kernel as pk  # noqa: E402
from presk.interp.inputs import make_inputs  # noqa: E402
from presk.interp.kernel import KernelInterpreter  # noqa: E402
from presk.ir.calls import find_entry  # noqa: E402
from presk.ir.context import presk_context  # noqa: E402
from presk.jit.executor import flatten_inputs  # noqa: E402
from presk.jit.native import NativeRunner  # noqa: E402
from presk.lowering.llvm.translator import translate_kernel  # noqa: E402
from presk.lowering.row_blocks import JAM_ROWS  # noqa: E402
from presk.passes import promote_to_scratch  # noqa: E402
from presk.passes.fuse_slices import FuseSlices  # noqa: E402
from presk.passes.promote_to_scratch import PromoteToScratch  # noqa: E402
from presk.pipeline import lower  # noqa: E402
from presk.plans import plan_from_options  # noqa: E402


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    with NativeRunner() as runner:
        yield runner


def promoted(module: ModuleOp) -> ModuleOp:
    after = module.clone()
    PromoteToScratch().apply(presk_context(), after)
    after.verify()
    return after


def scratches(module: ModuleOp) -> list[pk.ScratchOp]:
    return [op for op in module.walk() if isinstance(op, pk.ScratchOp)]


def allocations(module: ModuleOp) -> int:
    return sum(isinstance(op, pk.AllocOp) for op in module.walk())


# ----------------------------------------------------------------------------- the corpus

CORPUS = [
    ("corpus/layernorm.mlir", "LayerNorm.apply", {"B": 2, "T": 8}),
    ("corpus/attention.mlir", "SelfAttention.apply", {"B": 2, "T": 5}),
    ("corpus/minigpt.mlir", "loss", {"B": 2, "T": 8}),
]
# Every element type a scratch can hold, each on one program (the scratch is the same op in all three); the
# GPT's gradient for the attention's and LayerNorm's merged kernels.
CASES = [
    *(pytest.param(*CORPUS[0], realize, id=f"{CORPUS[0][1]}-{realize}") for realize in ("f64", "f32", "bf16")),
    pytest.param(*CORPUS[1], "f32", id=f"{CORPUS[1][1]}-f32"),
    pytest.param(*CORPUS[2], "bf16", id=f"{CORPUS[2][1]}-bf16"),
    pytest.param("corpus/nlp/gpt.mlir", "loss_grad", {"B": 2, "T": 8}, "f32", id="loss_grad-f32"),
]


@pytest.mark.parametrize(("path", "entry", "dims", "realize"), CASES)
def test_corpus_same_bytes(native: NativeRunner, path: str, entry: str, dims: dict[str, int], realize: str) -> None:
    module = load_with_aliases(path)[0]
    env = sizes.resolve(module, {}, dims)
    leaves = flatten_inputs(make_inputs(find_entry(module, entry), env, 0))
    before = lower(module, entry, env, plan_from_options(realize, None), fuse_slices=False)
    FuseSlices().apply(presk_context(), before)
    after = promoted(before)
    assert scratches(after) and allocations(after) < allocations(before)
    reference = run_bytes(before, KernelInterpreter().runner, leaves)
    assert run_bytes(after, KernelInterpreter().runner, leaves) == reference
    assert run_bytes(after, native, leaves) == reference


def test_the_layer_norm_gradient_keeps_one_block_of_rows_of_each_temporary() -> None:
    """The GPT's LayerNorm backward kernel: its row sums and products live per block of rows, its result stays."""
    module = load_with_aliases("corpus/nlp/gpt.mlir")[0]
    env = sizes.resolve(module, {}, {"B": 2, "T": 16})
    after = lower(module, "loss_grad", env, plan_from_options("f32", None))
    merged = [k for k in after.body.block.ops if isinstance(k, pk.KernelOp) and "neg+sum_3" in k.sym_name.data]
    assert merged
    for k in merged:
        kept = [op for op in k.body.block.ops if isinstance(op, pk.ScratchOp)]
        assert len(kept) >= 5
        assert all(op.folded_rows == (1, JAM_ROWS) for op in kept)  # one batch, one block of rows at a time


# ----------------------------------------------------------------------------- legality

def row_kernel(name: str, site: str, buffers: str, body: str) -> str:
    """A kernel whose parallel loop over the 4 rows (`%i`, the split loop) holds `body`; `%c0`, `%c1`, `%c3`
    are its index constants."""
    return f"""
  psk_kernel.kernel @{name}({buffers}) "{site}" {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {{{body}
    }} {{psk_kernel.parallel}}
  }}"""


def columns(body: str) -> str:
    """A parallel loop over a row's 3 columns (`%j`) holding `body`."""
    return f"""
      scf.for %j = %c0 to %c3 step %c1 {{{body}
      }} {{psk_kernel.parallel}}"""


THREE = "%0: memref<4x3xf32>, %1: memref<4x3xf32>, %2: memref<4x3xf32>"
KERNELS = "".join([
    row_kernel("twice", "f/%1", THREE, columns("""
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %y = arith.addf %x, %x : f32
        memref.store %y, %1[%i, %j] : memref<4x3xf32>""") + columns("""
        %t = memref.load %1[%i, %j] : memref<4x3xf32>
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %y = arith.mulf %t, %x : f32
        memref.store %y, %2[%i, %j] : memref<4x3xf32>""")),
    row_kernel("twice_reversed", "f/%2", THREE, """
      %k = arith.subi %c3, %i : index""" + columns("""
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %y = arith.addf %x, %x : f32
        memref.store %y, %1[%k, %j] : memref<4x3xf32>""") + columns("""
        %t = memref.load %1[%k, %j] : memref<4x3xf32>
        memref.store %t, %2[%i, %j] : memref<4x3xf32>""")),
    row_kernel("negate", "f/%3", "%0: memref<4x3xf32>, %1: memref<4x3xf32>", columns("""
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        %y = arith.negf %x : f32
        memref.store %y, %1[%i, %j] : memref<4x3xf32>""")),
    row_kernel("store_only", "f/%5", "%0: memref<4x3xf32>, %1: memref<3x4xf32>, %2: memref<4x3xf32>", columns("""
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        memref.store %x, %1[%j, %i] : memref<3x4xf32>
        %y = arith.negf %x : f32
        memref.store %y, %2[%i, %j] : memref<4x3xf32>""")),
    row_kernel("unused", "f/%4", THREE, columns("""
        %x = memref.load %0[%i, %j] : memref<4x3xf32>
        memref.store %x, %2[%i, %j] : memref<4x3xf32>""")),
])
ARGS = "%x: memref<4x3xf32>"
T = "memref<4x3xf32>"


def host(body: str, results: str = T) -> ModuleOp:
    return parse_host_module(KERNELS, body, ARGS, results)


def with_temporary(name: str, site: str, temporary: str = T) -> str:
    """A host body's launch of kernel `name` on `%x`, a fresh temporary `%t` and a fresh output `%o`."""
    return f"""
    %t = psk_kernel.alloc : {temporary}
    %o = psk_kernel.alloc : {T}
    psk_kernel.launch @{name}(%x, %t, %o) {{site = "{site}"}} : {T}, {temporary}, {T}"""


TWICE = with_temporary("twice", "f/%1")
RETURN_O = f"""
    psk_kernel.return %o : {T}"""


def test_a_temporary_only_its_kernel_sees_moves_into_it(native: NativeRunner) -> None:
    module = host(TWICE + RETURN_O)
    after = promoted(module)
    (scratch,) = scratches(after)
    assert scratch.folded_rows == (1,) and scratch.stored_shape == (1, 3)
    assert [len(l.buffers) for l in launches(after)] == [2] and allocations(after) == 1
    same_results(module, after, native)
    llvm = translate_kernel(kernel(after, "twice"))
    assert re.search(r"alloca float, i64 3, align 64", llvm)


def test_an_argument_the_kernel_never_touches_leaves_it(native: NativeRunner) -> None:
    module = host(with_temporary("unused", "f/%4") + RETURN_O)
    after = promoted(module)
    assert not scratches(after) and len(kernel(after, "unused").body.block.args) == 2
    same_results(module, after, native)


def test_a_buffer_written_and_never_read_goes_with_its_stores(native: NativeRunner) -> None:
    """Even where its stores are not sliced (the transpose): no iteration reads what another wrote."""
    module = host(with_temporary("store_only", "f/%5", "memref<3x4xf32>") + RETURN_O)
    after = promoted(module)
    stores = [op for op in kernel(after, "store_only").walk() if op.name == "memref.store"]
    assert not scratches(after) and len(stores) == 1 and allocations(after) == 1
    same_results(module, after, native)


SEEN_OUTSIDE = {
    "a result": TWICE + f"""
    psk_kernel.return %o, %t : {T}, {T}""",
    "another launch": TWICE + f"""
    %n = psk_kernel.alloc : {T}
    psk_kernel.launch @negate(%t, %n) {{site = "f/%3"}} : {T}, {T}
    psk_kernel.return %o, %n : {T}, {T}""",
    "a view": TWICE + f"""
    %v = psk_kernel.view %t : {T} to memref<12xf32>
    psk_kernel.return %o, %v : {T}, memref<12xf32>""",
    "the kernel's other launch, where it is a result": TWICE + f"""
    %t2 = psk_kernel.alloc : {T}
    %o2 = psk_kernel.alloc : {T}
    psk_kernel.launch @twice(%o, %t2, %o2) {{site = "f/%1"}} : {T}, {T}, {T}
    psk_kernel.return %o2, %t2 : {T}, {T}""",
    "an argument of the host": f"""
    %o = psk_kernel.alloc : {T}
    psk_kernel.launch @twice(%x, %x, %o) {{site = "f/%1"}} : {T}, {T}, {T}
    psk_kernel.return %o : {T}""",
}


@pytest.mark.parametrize("where", list(SEEN_OUTSIDE))
def test_a_buffer_seen_outside_its_kernel_stays(where: str) -> None:
    body = SEEN_OUTSIDE[where]
    results = re.search(r"psk_kernel.return .* : (.*)$", body.strip()).group(1)  # type: ignore[union-attr]
    after = promoted(host(body, results))
    assert not scratches(after)


def test_rows_another_iteration_wrote_keep_their_buffer() -> None:
    """Iteration i writes and reads row 3 - i: sliced by no loop, so a block of rows would not hold it."""
    after = promoted(host(with_temporary("twice_reversed", "f/%2") + RETURN_O))
    assert not scratches(after)


def test_blocks_beyond_the_budget_keep_their_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    body = TWICE + RETURN_O
    monkeypatch.setattr(promote_to_scratch, "SCRATCH_BYTES", 11)  # a block of one row is 12 bytes
    assert not scratches(promoted(host(body)))
    monkeypatch.setattr(promote_to_scratch, "SCRATCH_BYTES", 12)
    assert len(scratches(promoted(host(body)))) == 1
