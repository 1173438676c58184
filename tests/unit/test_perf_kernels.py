"""The fast kernels of docs/performance.md compute the same bits (correctness only: no timings here).

- Softmax and row sums (mean) in blocks of rows (`presk.lowering.softmax`,
  `presk.lowering.nests`): the blocked IR gives the bits of one row at a
  time (blocks of one row), on the kernel interpreter and natively.
- Running sums in vectors (`kernel_to_llvm.ordered_sums`): applied where
  expected, and native equals the interpreter on odd shapes (rows not a
  multiple of the block, rows shorter than a vector, remainders).
- Streaming stores (`kernel_to_llvm.streaming`, normally above 32 MiB):
  forced on small kernels, with odd lengths and split chunks whose starts
  are not aligned, native equals the interpreter.
- The executor's fast path and aligned allocations.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT  # noqa: E402

from presk import sizes  # noqa: E402
from presk.target import target_machine  # noqa: E402
from presk.dialects import psk_kernel as pk  # noqa: E402
from presk.interp.inputs import make_inputs  # noqa: E402
from presk.interp.kernel import KernelInterpreter  # noqa: E402
from presk.ir.calls import find_entry  # noqa: E402
from presk.ir.context import presk_context  # noqa: E402
from presk.ir.parse import parse_module  # noqa: E402
from presk.jit.executor import Alloc, HostProgram, flatten_inputs  # noqa: E402
from presk.jit.native import NativeRunner  # noqa: E402
from presk.lowering import kernel_to_llvm, row_blocks  # noqa: E402
from presk.lowering.llvm import streaming_stores  # noqa: E402
from presk.lowering.llvm.irtypes import buffer_bytes  # noqa: E402
from presk.pipeline import lower  # noqa: E402
from presk.plans import plan_from_options  # noqa: E402

SOFTMAX_ROWS = """
!X = !psk_core.tensor<[a: A, b: B, c: C]>
func.func @last(%x: !X) -> !X {
  %0 = psk_core.softmax %x [c] : !X
  func.return %0 : !X
}
func.func @middle(%x: !X) -> !X {
  %0 = psk_core.softmax %x [b] : !X
  func.return %0 : !X
}
func.func @mean_last(%x: !X) -> !psk_core.tensor<[a: A, b: B]> {
  %0 = psk_core.mean %x [c] : !psk_core.tensor<[a: A, b: B]>
  func.return %0 : !psk_core.tensor<[a: A, b: B]>
}
func.func @sum_last_two(%x: !X) -> !psk_core.tensor<[a: A]> {
  %0 = psk_core.sum %x [b, c] : !psk_core.tensor<[a: A]>
  func.return %0 : !psk_core.tensor<[a: A]>
}
"""


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    with NativeRunner() as runner:
        yield runner


def parsed(text: str) -> ModuleOp:
    module = parse_module(presk_context(), text, "<test>").module
    module.verify()
    return module


def program(path: str) -> ModuleOp:
    module = parse_module(presk_context(), (ROOT / path).read_text(), path).module
    module.verify()
    return module


def run(module: ModuleOp, entry: str, dims: dict[str, int], realize: str, runner, **kw) -> list[bytes]:  # type: ignore[no-untyped-def]
    env = sizes.resolve(module, {}, dims)
    kernels = lower(module, entry, env, plan_from_options(realize, None), **kw)
    leaves = flatten_inputs(make_inputs(find_entry(module, entry), env, 3))
    host = HostProgram(kernels, runner)
    return [np.ascontiguousarray(a).tobytes() for a in host(leaves)]


def both(module: ModuleOp, entry: str, dims: dict[str, int], realize: str, native: NativeRunner) -> list[bytes]:
    interp = run(module, entry, dims, realize, KernelInterpreter().runner)
    assert run(module, entry, dims, realize, native) == interp
    return interp


SHAPES = [
    {"A": 2, "B": 16, "C": 64},  # whole blocks, whole vectors
    {"A": 3, "B": 24, "C": 37},  # blocks of 8, a vector remainder
    {"A": 1, "B": 5, "C": 3},  # odd rows (blocks of 1), rows shorter than a vector
    {"A": 2, "B": 32, "C": 17},
]


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("dims", SHAPES, ids=lambda d: "x".join(map(str, d.values())))
@pytest.mark.parametrize("entry", ["last", "middle", "mean_last", "sum_last_two"])
def test_blocked_rows_same_bits_as_single_rows(
    native: NativeRunner, monkeypatch: pytest.MonkeyPatch, entry: str, dims: dict[str, int], realize: str
) -> None:
    module = parsed(SOFTMAX_ROWS)
    blocked = both(module, entry, dims, realize, native)
    monkeypatch.setattr(row_blocks, "JAM_ROWS", 1)  # blocks of one row: the plain three-pass nest
    assert row_blocks.jam_factor(16) == 1
    assert both(module, entry, dims, realize, native) == blocked


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(
    ("path", "entry", "dims"),
    [
        ("corpus/attention.mlir", "SelfAttention.apply", {"B": 2, "T": 5}),  # masked softmax
        ("corpus/attention.mlir", "SelfAttention.apply", {"B": 2, "T": 32}),
        ("bench/programs/softmax.mlir", "softmax", {"R": 48, "C": 300}),
        ("bench/programs/layernorm.mlir", "layernorm", {"R": 40, "E": 100}),
    ],
)
def test_programs_native_equals_interpreter(
    native: NativeRunner, path: str, entry: str, dims: dict[str, int], realize: str
) -> None:
    """Programs whose rows the blocked kernels cut at shapes of their own. Every corpus entry (the GPT's
    cross-entropy and layer norms among them) runs on both executors in test_backends_exact.py."""
    both(program(path), entry, dims, realize, native)


COLUMN_SUMS = """
!X = !psk_core.tensor<[a: A, b: B, c: C]>
func.func @sum_first_two(%x: !X) -> !psk_core.tensor<[c: C]> {
  %0 = psk_core.sum %x [a, b] : !psk_core.tensor<[c: C]>
  func.return %0 : !psk_core.tensor<[c: C]>
}
func.func @mean_first(%x: !X) -> !psk_core.tensor<[b: B, c: C]> {
  %0 = psk_core.mean %x [a] : !psk_core.tensor<[b: B, c: C]>
  func.return %0 : !psk_core.tensor<[b: B, c: C]>
}
"""


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(
    "dims",
    [{"A": 3, "B": 7, "C": 256}, {"A": 2, "B": 5, "C": 37}, {"A": 4, "B": 3, "C": 1}],
    ids=["two-chunks", "one-chunk", "one-column"],
)
@pytest.mark.parametrize("entry", ["sum_first_two", "mean_first"])
def test_column_sums_are_each_columns_sum_in_order(
    native: NativeRunner, entry: str, dims: dict[str, int], realize: str
) -> None:
    """Sums over leading axes run in the output's row (whole rows read in order, in chunks of columns):
    native equals the kernel interpreter, and each column is the running sum 0 + x₀ + x₁ + ... in the
    realization's type (numpy's cumsum is that chain), divided once for a mean; bf16 keeps its sums in
    f32 registers and rounds once."""
    module = parsed(COLUMN_SUMS)
    got = both(module, entry, dims, realize, native)
    env = sizes.resolve(module, {}, dims)
    (x,) = flatten_inputs(make_inputs(find_entry(module, entry), env, 3))
    reduced = 2 if entry == "sum_first_two" else 1
    work = np.float64 if realize == "f64" else np.float32
    rows = np.asarray(x, dtype=np.float64).astype(work)
    if realize == "bf16":
        rows = np.asarray(x, dtype=np.float64).astype(ml_dtypes.bfloat16).astype(np.float32)
    rows = rows.reshape(-1, *rows.shape[reduced:])
    want = np.cumsum(rows, axis=0, dtype=work)[-1]
    if entry == "mean_first":
        want = want / work(rows.shape[0])
    if realize == "bf16":
        want = want.astype(ml_dtypes.bfloat16)
    assert got == [np.ascontiguousarray(want).tobytes()]
    kernel = next(iter(kernels_of(lower(module, entry, env, plan_from_options(realize, None))).values()))
    loops = [op for op in kernel.walk() if isinstance(op, scf.ForOp)]
    if realize != "bf16":
        # No running value in registers: the innermost loop, around every read of x, is over the columns.
        source = kernel.body.block.args[0]
        reads = [op for op in kernel.walk() if op.name == "memref.load" and op.operands[0] is source]
        assert not any(loop.iter_args for loop in loops)
        assert reads and all(pk.PARALLEL in read.parent_op().attributes for read in reads)
        assert any(pk.PARALLEL not in loop.attributes for loop in loops)  # the rows, in order
    else:
        assert any(loop.iter_args for loop in loops)  # bf16: the sums in registers, rounded once


def kernels_of(module: ModuleOp) -> dict[str, pk.KernelOp]:
    return {op.sym_name.data: op for op in module.walk() if isinstance(op, pk.KernelOp)}


def serial_loops(kernel: pk.KernelOp) -> list[scf.ForOp]:
    return [op for op in kernel.walk() if isinstance(op, scf.ForOp) and op.iter_args]


@pytest.mark.target
def test_running_sums_vectorised_where_expected() -> None:
    machine = target_machine()
    if machine.vector_bits < 256:
        pytest.skip("no vector registers")
    module = program("bench/programs/softmax.mlir")
    env = sizes.resolve(module, {}, {"R": 64, "C": 256})
    kernels = kernels_of(lower(module, "softmax", env, plan_from_options("f32", None)))
    loops = serial_loops(kernels["softmax"])
    plans = [kernel_to_llvm.ordered_sums(loop, machine.vector_bits) for loop in loops]
    maxima, sums = plans[:-1], plans[-1]
    assert all(p is None for p in maxima)  # one running maximum per row: `running_maximum`'s, not running sums
    assert sums is not None and len(sums.terms) == row_blocks.jam_factor(64)
    ir = kernel_to_llvm.translate_kernel(kernels["softmax"], machine)
    assert ".sums.body" in ir and "shufflevector" in ir and "llvm.prefetch" in ir
    import re

    callees = set(re.findall(r'call [^@]*@"?([\w.]+)', ir))
    defined = set(re.findall(r'define [^@]*@"?([\w.]+)', ir))
    # no libm: exp is inline; the only calls are intrinsics and functions of the module (the exact division)
    assert callees and all(c.startswith("llvm.") or c in defined for c in callees), callees
    # Overlapping buffers: the variant without alias scopes keeps the loops as written.
    plain = kernel_to_llvm.translate_kernel(kernels["softmax"], machine, assume_disjoint=False)
    assert ".sums.body" not in plain


@pytest.mark.target
def test_mean_rows_vectorised() -> None:
    machine = target_machine()
    module = program("bench/programs/layernorm.mlir")
    env = sizes.resolve(module, {}, {"R": 64, "E": 768})
    kernels = kernels_of(lower(module, "layernorm", env, plan_from_options("f32", None), fuse_slices=False))
    (loop,) = serial_loops(kernels["mean"])
    plan = kernel_to_llvm.ordered_sums(loop, machine.vector_bits)
    if machine.vector_bits >= 256:
        # One running sum per row of a block (row_blocks.JAM_ROWS rows); the terms in vectors of as many f32.
        assert plan is not None and plan.group == row_blocks.JAM_ROWS and plan.lanes == row_blocks.JAM_ROWS


@pytest.mark.parametrize("realize", ["f64", "f32"])
@pytest.mark.parametrize("n", [1, 15, 1003, 70001])
def test_streaming_stores_same_bits(
    native: NativeRunner, monkeypatch: pytest.MonkeyPatch, n: int, realize: str
) -> None:
    if target_machine().vector_bits < 512:
        pytest.skip("streaming stores need AVX-512")
    module = program("bench/programs/adamw.mlir")
    env = sizes.resolve(module, {}, {"N": n})
    kernels = lower(module, "adamw", env, plan_from_options(realize, None))
    chain = next(k for k in kernels_of(kernels).values() if "+" in k.sym_name.data)
    # Within the cores' private caches the stores stay in them; beyond, they go around (L2 sizes differ by CPU).
    small = not streaming_stores.streams_around_caches(sum(buffer_bytes(t) for t in chain.buffers), target_machine())
    assert ("nontemporal" not in kernel_to_llvm.translate_kernel(chain)) == small
    monkeypatch.setattr(streaming_stores, "STREAMING_BYTES", 0)  # read where it is defined
    ir = kernel_to_llvm.translate_kernel(chain)
    assert "!nontemporal" in ir and "fence seq_cst" in ir
    interp = run(module, "adamw", {"N": n}, realize, KernelInterpreter().runner)
    with NativeRunner() as fresh:  # compiled with the streaming stores
        assert run(module, "adamw", {"N": n}, realize, fresh) == interp
        host = HostProgram(kernels, fresh)
        leaves = flatten_inputs(make_inputs(find_entry(module, "adamw"), env, 3))
        split = [np.ascontiguousarray(a).tobytes() for a in _split_run(host, leaves, chain.sym_name.data)]
        assert split == interp


def _split_run(host: HostProgram, leaves: list[np.ndarray], name: str) -> list[np.ndarray]:
    """Run with every launch of `name` split over two workers (chunks start at unaligned elements)."""
    for step in host.steps:
        if getattr(step, "name", None) == name:
            step.call.declared_workers = 2  # type: ignore[attr-defined]
    return host(leaves)


# ----------------------------------------------------------------------------- the executor's hot loop


class CountingRunner:
    """A native runner whose kernels count how many bindings they build."""

    def __init__(self, native: NativeRunner) -> None:
        self.native = native
        self.binds = 0

    def __call__(self, kernel):  # type: ignore[no-untyped-def]
        inner = self.native(kernel)
        outer = self

        class Counted:
            def bind(self, arrays, previous=None):  # type: ignore[no-untyped-def]
                outer.binds += 1
                return inner.bind(arrays, previous)

            def launch(self, binding):  # type: ignore[no-untyped-def]
                inner.launch(binding)

            def __call__(self, arrays):  # type: ignore[no-untyped-def]
                inner(arrays)

        return Counted()


def gpt_host(runner, entry: str = "loss"):  # type: ignore[no-untyped-def]
    module = program("corpus/minigpt.mlir")
    env = sizes.resolve(module, {}, {"B": 2, "T": 8})
    host = HostProgram(lower(module, entry, env, plan_from_options("f32", None)), runner)
    leaves = flatten_inputs(make_inputs(find_entry(module, entry), env, 5))
    # In the buffers' own types, as a training loop passes them: converted copies would be new arrays.
    return module, env, host, [np.require(np.asarray(a, dtype), requirements="C") for a, (_, dtype) in zip(leaves, host.inputs)]


def test_bindings_built_once(native: NativeRunner) -> None:
    counting = CountingRunner(native)
    _, _, host, leaves = gpt_host(counting, "MiniGPT.apply")
    first = [a.copy() for a in host(leaves)]
    assert counting.binds > 0
    for _ in range(3):  # the result held during the next call moves the buffers a few launches are given
        again = host(leaves)
        assert [a.tobytes() for a in again] == [a.tobytes() for a in first]
    built = counting.binds
    for _ in range(4):  # from then on the two assignments alternate, and every launch has a binding for each
        again = host(leaves)
        assert [a.tobytes() for a in again] == [a.tobytes() for a in first]
    assert counting.binds == built


def test_a_buffer_is_reused_within_a_call_once_its_last_reader_ran(native: NativeRunner) -> None:
    """The arena holds fewer buffers than the program allocates: dead ones serve later allocations."""
    module, env, host, leaves = gpt_host(native, "loss")
    unreleased = HostProgram(lower(module, "loss", env, plan_from_options("f32", None)), native)
    unreleased._plan = [entry[:5] + ((),) if entry[0] == "launch" else entry for entry in unreleased._plan]
    expected = [a.copy() for a in unreleased(leaves)]
    for _ in range(2):
        assert [a.tobytes() for a in host(leaves)] == [a.tobytes() for a in expected]
    allocations = sum(isinstance(step, Alloc) for step in host.steps)
    assert sum(len(pool) for pool in unreleased._arena.values()) == allocations
    assert sum(len(pool) for pool in host._arena.values()) < allocations


def test_held_results_are_not_overwritten(native: NativeRunner) -> None:
    module, env, host, leaves = gpt_host(native, "adamw.step")
    other = flatten_inputs(make_inputs(find_entry(module, "adamw.step"), env, 6))
    kept = host(leaves)
    snapshot = [a.copy() for a in kept]
    second = host(other)
    assert [a.tobytes() for a in kept] == [a.tobytes() for a in snapshot]
    fresh = HostProgram(lower(module, "adamw.step", env, plan_from_options("f32", None)), native)
    assert [a.tobytes() for a in second] == [a.tobytes() for a in fresh(other)]
    assert all(not np.shares_memory(a, b) for a in kept for b in second)


def test_same_inputs_in_place_change_seen(native: NativeRunner) -> None:
    """Bindings are keyed by array identity; new values in the same arrays are read at the next call."""
    _, _, host, leaves = gpt_host(native, "MiniGPT.apply")
    leaves = [np.array(a) for a in leaves]
    host(leaves)
    for a in leaves:
        if a.dtype.kind == "f":
            a *= 0.5
    changed = [a.tobytes() for a in host(leaves)]
    fresh = HostProgram(host.host.parent_op(), KernelInterpreter().runner)  # type: ignore[arg-type]
    assert changed == [a.tobytes() for a in fresh(leaves)]
