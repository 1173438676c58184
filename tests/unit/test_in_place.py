"""`psk-in-place` (presk/passes/in_place.py): results written over donated arguments, the same bits.

Exactness: AdamW (the benchmark's chain, and both GPTs' `adamw.step` over a
whole parameter tree) runs on the kernel interpreter and natively, in f64,
f32 and bf16, with p, m and v donated and without; every result is byte for
byte the same, and with donation the results *are* the arrays passed in.
Legality: hand-written host programs where writing over the argument would
change a result (read at another element, read after the write, read by a
later launch, the argument itself a result, another type) are refused with
E3003 and a reason, never half-rewritten; the executor refuses donated
inputs it would have to copy, or that share memory with another input
(E4003).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT, load_with_aliases
from host_programs import parse_host_module

from presk import sizes
from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as pk
from presk.interp.inputs import make_inputs
from presk.interp.kernel import KernelInterpreter
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.jit.executor import HostProgram, flatten_inputs
from presk.jit.native import NativeRunner
from presk.pipeline import lower
from presk.passes.in_place import InPlace, donate, donated_paths, select_paths
from presk.plans import plan_from_options
from presk.target import host_machine


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    with NativeRunner() as runner:
        yield runner


def lowered(path: str, entry: str, dims: dict[str, int], realize: str) -> ModuleOp:
    module = load_with_aliases(path)[0]
    env = sizes.resolve(module, {}, dims)
    return lower(module, entry, env, plan_from_options(realize, None))


def program_inputs(path: str, entry: str, dims: dict[str, int]) -> list[np.ndarray]:
    module = load_with_aliases(path)[0]
    env = sizes.resolve(module, {}, dims)
    return flatten_inputs(make_inputs(find_entry(module, entry), env, 3))


def as_bytes(arrays: list[np.ndarray]) -> list[bytes]:
    return [np.ascontiguousarray(a).tobytes() for a in arrays]


ADAMW = ("bench/programs/adamw.mlir", "adamw", {"N": 1000})
GPTS = [
    ("corpus/nlp/gpt.mlir", "adamw.step", {"B": 2, "T": 32}),
    ("corpus/minigpt.mlir", "adamw.step", {"B": 2, "T": 8}),
]


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", [ADAMW, *GPTS], ids=["adamw", "gpt", "minigpt"])
def test_same_bits_and_results_are_the_donated_arrays(native: NativeRunner, case: tuple, realize: str) -> None:
    path, entry, dims = case
    plain = lowered(path, entry, dims, realize)
    donated = plain.clone()
    report = donate(donated, "params,m,v")
    donated.verify()
    assert not report.refused
    # Every leaf of p, m and v takes its own result: p' over p, m' over m, v' over v.
    assert report.reused and all(path_.split(".", 1)[0] in ("params", "m", "v") for path_ in report.reused)
    for arg, result in report.reused.items():
        head, _, rest = arg.partition(".")
        assert result == f"{('params', 'm', 'v').index(head)}{'.' + rest if rest else ''}"
    assert sorted(donated_paths(donated)) == sorted(report.reused)
    launches = lambda m: sum(isinstance(op, pk.LaunchOp) for op in m.walk())
    allocs = lambda m: sum(isinstance(op, pk.AllocOp) for op in m.walk())
    assert launches(donated) == launches(plain)
    assert allocs(donated) == allocs(plain) - len(report.reused)

    reference_host = HostProgram(plain, KernelInterpreter().runner)
    leaves = reference_host.prepare_inputs(program_inputs(path, entry, dims))
    reference = as_bytes(reference_host(leaves))
    for runner in (KernelInterpreter().runner, native):
        host = HostProgram(donated, runner)
        assert host.donated_paths == [p for p in host.argument_paths if p in report.reused]
        own = [a.copy() for a in leaves]
        results = host(own)
        assert as_bytes(results) == reference, f"{runner}: donation changed bits"
        by_path = dict(zip(host.argument_paths, own))
        for arg, result in report.reused.items():
            assert results[host.result_paths.index(result)] is by_path[arg]  # written over the caller's array


def test_adamw_one_kernel_in_place() -> None:
    module = lowered(*ADAMW, "f32")
    donate(module, "params,m,v")
    kernels = {op.sym_name.data: op for op in module.walk() if isinstance(op, pk.KernelOp)}
    (name,) = [n for n in kernels if n.endswith(".in_place")]
    assert len(kernels[name].buffers) == 9  # 12 before: p', m', v' are p, m, v
    host = next(op for op in module.walk() if isinstance(op, pk.HostOp))
    block = host.body.block
    ret = block.last_op
    assert isinstance(ret, pk.ReturnOp)
    assert [v for v in ret.operands] == [block.args[0], block.args[2], block.args[3]]


def test_all_donates_what_it_can_and_the_pass_runs_from_its_class() -> None:
    module = lowered(*ADAMW, "f32")
    InPlace(donate="all").apply(presk_context(), module)
    module.verify()
    # grads is left alone: m', v' and p' are taken by m, v and p, which their stored values name first.
    assert sorted(donated_paths(module)) == ["m", "params", "v"]


def test_grads_may_take_a_result_when_its_state_is_not_donated(native: NativeRunner) -> None:
    plain = lowered(*ADAMW, "f32")
    module = plain.clone()
    report = donate(module, "params,grads")
    assert report.reused == {"params": "0", "grads": "2"}  # v' over grads: g is read before v' is stored
    leaves = HostProgram(plain, native).prepare_inputs(program_inputs(*ADAMW))
    reference = as_bytes(HostProgram(plain, native)(leaves))
    assert as_bytes(HostProgram(module, native)([a.copy() for a in leaves])) == reference


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("b1t", "argument 'b1t' cannot be donated: its last kernel writes no result of its own"),
        ("params,m,v,grads", "argument 'grads' cannot be donated: every result its last kernel writes is taken"),
        ("nosuch", "no argument 'nosuch' to donate (arguments: params, grads, m, v, b1t, b2t, lr)"),
    ],
)
def test_refusals_on_adamw(spec: str, message: str) -> None:
    module = lowered(*ADAMW, "f32")
    before = str(module)
    with pytest.raises(PreskError, match="E3003") as error:
        donate(module, spec)
    assert message in str(error.value)
    assert str(module) == before  # never half-rewritten


def test_select_paths() -> None:
    paths = ["params.a", "params.b", "m.a", "lr"]
    assert select_paths("params", paths) == ["params.a", "params.b"]
    assert select_paths("m.a, lr", paths) == ["m.a", "lr"]
    assert select_paths("all", paths) == paths


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
  psk_kernel.kernel @late(%0: memref<8xf32>, %1: memref<8xf32>, %2: memref<8xf32>) "f/%2" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %x = memref.load %0[%i] : memref<8xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %1[%i] : memref<8xf32>
      %z = memref.load %0[%i] : memref<8xf32>
      %w = arith.mulf %z, %y : f32
      memref.store %w, %2[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }

  psk_kernel.kernel @reverse(%0: memref<8xf32>, %1: memref<8xf32>) "f/%3" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %j = arith.subi %c7, %i : index
      %x = memref.load %0[%j] : memref<8xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %1[%i] : memref<8xf32>
    } {psk_kernel.parallel}
  }
  psk_kernel.kernel @widen(%0: memref<8xf32>, %1: memref<8xf64>) "f/%4" {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %x = memref.load %0[%i] : memref<8xf32>
      %y = arith.extf %x : f32 to f64
      memref.store %y, %1[%i] : memref<8xf64>
    } {psk_kernel.parallel}
  }
"""


def host_module(body: str, args: str = "%a: memref<8xf32>", results: str = "memref<8xf32>") -> ModuleOp:
    return parse_host_module(KERNELS, body, args, results)


def test_a_later_store_may_take_it(native: NativeRunner) -> None:
    # `late` reads a[i] again after storing b[i], but before storing c[i]: c may take a's place, b may not.
    module = host_module("""
    %b = psk_kernel.alloc : memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @late(%a, %b, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>, memref<8xf32>
    psk_kernel.return %b, %c : memref<8xf32>, memref<8xf32>""", results="memref<8xf32>, memref<8xf32>")
    after = module.clone()
    assert donate(after, "0").reused == {"0": "1"}
    x = np.arange(8, dtype=np.float32) * np.float32(0.37)
    want = as_bytes(HostProgram(module, native)([x.copy()]))
    for runner in (KernelInterpreter().runner, native):
        a = x.copy()
        results = HostProgram(after, runner)([a])
        assert results[1] is a and as_bytes(results) == want


def test_hand_written_donation_runs_in_place(native: NativeRunner) -> None:
    module = host_module("""
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b : memref<8xf32>""")
    after = module.clone()
    assert donate(after, "0").reused == {"0": "0"}
    x = np.arange(8, dtype=np.float32) * np.float32(0.37)
    for runner in (KernelInterpreter().runner, native):
        a = x.copy()
        (out,) = HostProgram(after, runner)([a])
        assert out is a and np.array_equal(a, x + x)


@pytest.mark.parametrize(
    ("body", "args", "results", "why"),
    [
        (  # the kernel reads a[i] again after storing b[i] (c, which it stores after, is not a result)
            """
    %b = psk_kernel.alloc : memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @late(%a, %b, %c) {site = "f/%2"} : memref<8xf32>, memref<8xf32>, memref<8xf32>
    psk_kernel.return %b : memref<8xf32>""",
            "%a: memref<8xf32>", "memref<8xf32>", "its kernel reads it after writing the result",
        ),
        (  # iteration i reads a[7 - i]
            """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @reverse(%a, %b) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b : memref<8xf32>""",
            "%a: memref<8xf32>", "memref<8xf32>", "reads it at another element than the one it writes",
        ),
        (  # a later launch reads a
            """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @reverse(%a, %c) {site = "f/%3"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b, %c : memref<8xf32>, memref<8xf32>""",
            "%a: memref<8xf32>", "memref<8xf32>, memref<8xf32>", "reads it at another element",
        ),
        (  # a is itself a result
            """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b, %a : memref<8xf32>, memref<8xf32>""",
            "%a: memref<8xf32>", "memref<8xf32>, memref<8xf32>", "it is itself a result",
        ),
        (  # the only result has another type
            """
    %b = psk_kernel.alloc : memref<8xf64>
    psk_kernel.launch @widen(%a, %b) {site = "f/%4"} : memref<8xf32>, memref<8xf64>
    psk_kernel.return %b : memref<8xf64>""",
            "%a: memref<8xf32>", "memref<8xf64>", "no result of its type is written over it",
        ),
        (  # the result is an intermediate, not returned
            """
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%a, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    %c = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%b, %c) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %c : memref<8xf32>""",
            "%a: memref<8xf32>", "memref<8xf32>", "writes no result of its own",
        ),
        (  # read through a view
            """
    %v = psk_kernel.view %a : memref<8xf32> to memref<8xf32>
    %b = psk_kernel.alloc : memref<8xf32>
    psk_kernel.launch @double(%v, %b) {site = "f/%1"} : memref<8xf32>, memref<8xf32>
    psk_kernel.return %b : memref<8xf32>""",
            "%a: memref<8xf32>", "memref<8xf32>", "through a view",
        ),
    ],
)
def test_unsafe_donations_are_refused(body: str, args: str, results: str, why: str) -> None:
    module = host_module(body, args, results)
    before = str(module)
    with pytest.raises(PreskError, match="E3003") as error:
        donate(module, "0")
    assert "argument '0' cannot be donated" in str(error.value) and why in str(error.value)
    assert str(module) == before
    donate(module, "all")  # best effort: nothing to do, nothing changed
    assert str(module) == before


# ----------------------------------------------------------------------------- the executor's checks


@pytest.fixture(scope="module")
def adamw_host(native: NativeRunner) -> HostProgram:
    module = lowered(*ADAMW, "f32")
    donate(module, "params,m,v")
    return HostProgram(module, native)


def adamw_leaves() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    p, g, m = (rng.standard_normal(1000, dtype=np.float32) for _ in range(3))
    v = np.abs(rng.standard_normal(1000, dtype=np.float32))
    return [p, g, m, v, np.array(0.9, np.float32), np.array(0.99, np.float32), np.array(1e-3, np.float32)]


def test_donated_input_must_be_the_callers_writable_array(adamw_host: HostProgram) -> None:
    leaves = adamw_leaves()
    leaves[0] = leaves[0].astype(np.float64)  # would be converted: the caller's array would not change
    with pytest.raises(PreskError, match="E4003: input 'params' is donated"):
        adamw_host(leaves)
    leaves = adamw_leaves()
    leaves[2].flags.writeable = False
    with pytest.raises(PreskError, match="input 'm' is donated.*read-only"):
        adamw_host(leaves)
    prepared = adamw_host.prepare_inputs(leaves)  # a writable copy, usable as it is
    assert prepared[2] is not leaves[2] and prepared[0] is leaves[0]
    adamw_host(prepared)


def off_the_line(array: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `array` whose data starts `offset` bytes after a cache line."""
    line = host_machine().cache_line
    raw = np.empty(array.nbytes + 2 * line, np.uint8)
    start = -raw.ctypes.data % line + offset
    placed = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    placed[...] = array
    return placed


def test_prepared_inputs_start_on_a_line_and_a_donated_one_stays_the_callers(adamw_host: HostProgram) -> None:
    """numpy leaves a large array 16 bytes into a page; prepared, an input that is read starts on a cache
    line (its values unchanged), while a donated one stays the caller's array, which the call overwrites."""
    line = host_machine().cache_line
    leaves = adamw_leaves()
    leaves[0], leaves[1] = off_the_line(leaves[0], 16), off_the_line(leaves[1], 16)
    prepared = adamw_host.prepare_inputs(leaves)
    assert prepared[0] is leaves[0]  # donated: kept where it is
    assert prepared[1] is not leaves[1] and prepared[1].ctypes.data % line == 0
    assert prepared[1].tobytes() == leaves[1].tobytes()
    on_a_line = [off_the_line(a, 0) if a.ndim else a for a in adamw_leaves()]
    kept = adamw_host.prepare_inputs(on_a_line)
    assert kept[1] is on_a_line[1]  # already on a line: not copied
    expected = [a.copy() for a in adamw_host([a.copy() for a in adamw_leaves()])]
    assert [a.tobytes() for a in adamw_host(prepared)] == [a.tobytes() for a in expected]


def test_donated_input_shares_no_memory(adamw_host: HostProgram) -> None:
    leaves = adamw_leaves()
    leaves[1] = leaves[0]  # grads is params
    with pytest.raises(PreskError, match="E4003: input '(params|grads)' shares memory with input '(params|grads)'"):
        adamw_host(leaves)
    # A first call with separate arrays, then a read-only input changed to overlap a donated one.
    leaves = adamw_leaves()
    adamw_host(leaves)
    big = np.zeros(3000, np.float32)
    leaves[0] = big[:1000]
    adamw_host(leaves)
    leaves[1] = big[500:1500]
    with pytest.raises(PreskError, match="input 'grads' shares memory with input 'params', which is donated"):
        adamw_host(leaves)
    leaves[1] = big[1000:2000]  # adjacent, not overlapping
    adamw_host(leaves)


def test_cli_donate(tmp_path: Path) -> None:
    def presk(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "presk.cli.main", *args], check=False, capture_output=True, text=True, cwd=ROOT)

    common = ["run", "bench/programs/adamw.mlir", "--entry", "adamw", "--realize", "f32", "--dim", "N=100"]
    plain = presk(*common, "--backend", "native", "--output", str(tmp_path / "a.npz"))
    donated = presk(*common, "--backend", "native", "--donate", "params,m,v", "--output", str(tmp_path / "b.npz"))
    assert plain.returncode == 0 and donated.returncode == 0, donated.stderr
    a, b = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert sorted(a) == sorted(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)
    refused = presk(*common, "--backend", "kernel", "--donate", "b1t")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "E3003: pass 'psk-in-place' failed: argument 'b1t' cannot be donated" in refused.stderr
    interp = presk(*common, "--donate", "m")
    assert interp.returncode != 0 and "E4001: --donate" in interp.stderr
