"""psk-vectorize: the register tile of a contraction as vector ops, bit for bit the scalar tile.

What the pass rewrites (and what it leaves alone), and that the vector code
gives every output bit of the scalar code of the same layout and of the
default layout, on the native backend and on the kernel interpreter (each
vector fma is the scalar fma per lane), in f64, f32 and bf16 (which has no
lanes and stays scalar), with and without the epilogue, with and without a
k-block, with the running sums in registers and in the output.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from presk import sizes
from presk.target import target_named
from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import KernelOp
from presk.dialects.psk_realize_layout import tile_registers
from presk.interp.kernel import KernelInterpreter
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.lowering.kernel_to_llvm import translate_kernel
from presk.lowering.llvm.loops import TILE_UNROLL
from presk.pipeline import lower
from presk.passes import vectorize
from presk.plans import parse_plan
from targets import WIDEST, lowering_for

pytestmark = pytest.mark.target

SOURCE = """
!A = !psk_core.tensor<[i: I, k: K]>
!B = !psk_core.tensor<[k2: K, j: J]>
!C = !psk_core.tensor<[i: I, j: J]>
!Bias = !psk_core.tensor<[j: J]>
!Row = !psk_core.tensor<[i: I]>
func.func @prod(%a: !A, %b: !B) -> !C {
  %0 = psk_core.dot %a, %b : !C
  func.return %0 : !C
}
func.func @prod_add(%a: !A, %b: !B, %c: !Bias) -> !C {
  %0 = psk_core.dot %a, %b : !C
  %1 = psk_core.add %0, %c : !C
  func.return %1 : !C
}
func.func @add_prod(%a: !A, %b: !B, %r: !C) -> !C {
  %0 = psk_core.dot %a, %b : !C
  %1 = psk_core.add %r, %0 : !C
  func.return %1 : !C
}
"""
DIMS = {"I": 8, "K": 64, "J": 32}
LANES = {dtype: target_named(WIDEST).lane_widths(dtype) for dtype in ("f64", "f32")}
"""Every width of the layout domain: the tests lower for the level that has them all (`targets.WIDEST`)."""


def _lower(entry: str, realization: str, layout: dict[str, Any] | None, vectorized: bool = True) -> ModuleOp:
    parsed = parse_module(presk_context(), SOURCE, "vectorize.mlir")
    env = sizes.resolve(parsed.module, {}, DIMS)
    plan: dict[str, Any] = {"realization": realization}
    if layout is not None:
        plan["layout"] = {f"{entry}/%0": layout}
    with lowering_for(WIDEST):
        if vectorized:
            return lower(parsed.module, entry, env, parse_plan(plan, "test"))
        original = vectorize.VectorizeContractions.apply
        try:
            vectorize.VectorizeContractions.apply = lambda self, ctx, op: None  # type: ignore[method-assign]
            return lower(parsed.module, entry, env, parse_plan(plan, "test"))
        finally:
            vectorize.VectorizeContractions.apply = original  # type: ignore[method-assign]


@cache
def _inputs(entry: str) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(len(entry))
    a, b = rng.standard_normal((DIMS["I"], DIMS["K"])), rng.standard_normal((DIMS["K"], DIMS["J"]))
    extra = {"prod": (), "prod_add": (rng.standard_normal(DIMS["J"]),),
             "add_prod": (rng.standard_normal((DIMS["I"], DIMS["J"])),)}[entry]  # fmt: skip
    return (a, b, *extra)


def _run(module: ModuleOp, backend: str, entry: str) -> bytes:
    runner = NativeRunner() if backend == "native" else KernelInterpreter().runner
    (out,) = HostProgram(module, runner)(list(_inputs(entry)))
    return out.tobytes()


def _ops(module: ModuleOp) -> list[str]:
    return [op.name for k in module.body.block.ops if isinstance(k, KernelOp) for op in k.walk()]


# --------------------------------------------------------------------------- what it rewrites


def test_rewrites_the_tile_into_vectors() -> None:
    module = _lower("prod", "f32", {"tile": [4, 16], "kblock": 32, "order": "JIK", "lanes": 16})
    names = _ops(module)
    assert "math.fma" not in names and "memref.store" not in names
    assert names.count("vector.fma") == 4  # m * n / L, once in the k loop
    assert names.count("vector.load") == 1  # n / L per k
    assert names.count("vector.store") == 4
    # per k: 4 broadcasts of operand 0, and the zero of the running sums
    assert names.count("vector.broadcast") == 5
    assert names.count("memref.load") == 4
    loops = [op for k in module.body.block.ops if isinstance(k, KernelOp) for op in k.walk() if op.name == "scf.for"]
    carried = [loop for loop in loops if loop.iter_args]
    assert len(carried) == 2  # the k-block loop and the k loop, each threading 4 vectors
    assert all(str(v.type) == "vector<16xf32>" for loop in carried for v in loop.iter_args)


@pytest.mark.parametrize("lanes,count", [(8, 8), (16, 4)])
def test_vector_count_follows_the_lanes(lanes: int, count: int) -> None:
    names = _ops(_lower("prod", "f32", {"tile": [4, 16], "lanes": lanes}))
    assert names.count("vector.fma") == count
    assert names.count("vector.store") == count


def test_leaves_scalar_what_states_no_lanes() -> None:
    for realization, layout in (("f32", {"tile": [4, 16]}), ("f32", None), ("bf16", {"tile": [4, 16], "lanes": 1})):
        names = _ops(_lower("prod", realization, layout))  # type: ignore[arg-type]
        assert not any(n.startswith("vector.") for n in names), (realization, layout)
        assert "math.fma" in names


def test_only_the_register_tiles_k_loop_is_unrolled() -> None:
    """The tile's k loop carries a loop ID (its first operand itself) asking LLVM for TILE_UNROLL copies;
    the k-block loop around it, the block loops and the row-wise form's loops carry none."""
    module = _lower("prod", "f32", {"tile": [4, 16], "kblock": 32, "order": "JIK", "lanes": 16})
    (kernel,) = [k for k in module.body.block.ops if isinstance(k, KernelOp)]
    ir = translate_kernel(kernel, target_named(WIDEST))
    backedges = [line for line in ir.splitlines() if "!llvm.loop" in line]
    assert len(backedges) == 1 and backedges[0].lstrip().startswith("br i1")
    loop_id = backedges[0].rsplit("!llvm.loop ", 1)[1]
    (definition,) = [line for line in ir.splitlines() if line.startswith(f"{loop_id} = ")]
    count = definition.split("{ ", 1)[1].split(", ")[1].rstrip(" }")
    assert definition.startswith(f"{loop_id} = !{{ {loop_id}, ")
    assert f'{count} = !{{ !"llvm.loop.unroll.count", i32 {TILE_UNROLL} }}' in ir
    row_wise = _lower("prod", "f32", {"form": "row-wise"})
    assert all("!llvm.loop" not in translate_kernel(k, target_named(WIDEST))
               for k in row_wise.body.block.ops if isinstance(k, KernelOp))  # fmt: skip


@pytest.mark.parametrize(
    "tile, lanes, registers",
    [((8, 32), 16, 19), ((6, 16), 8, 15), ((8, 16), 8, 19), ((4, 32), 8, 21), ((1, 4), 4, 3)],
)  # fmt: skip
def test_tile_registers_counts_accumulators_loads_and_the_broadcast(tile: tuple[int, int], lanes: int, registers: int) -> None:
    """m·n/L accumulators, n/L vectors of operand 1, one broadcast: [6, 16] at 8 lanes fills 15 of AVX2's 16."""
    assert tile_registers(tile, lanes) == registers


def test_is_idempotent() -> None:
    module = _lower("prod_add", "f64", {"tile": [2, 8], "lanes": 4, "epilogue": True})
    before = str(module)
    vectorize.VectorizeContractions().apply(presk_context(), module)
    assert str(module) == before


def test_register_width_comes_from_the_machine() -> None:
    """On a machine without AVX-512, 16 lanes of f32 are refused (the pass reads `Machine.lane_widths`)."""
    module = _lower("prod", "f32", {"tile": [4, 16], "lanes": 16}, vectorized=False)
    avx2 = target_named("x86-64-v3")
    with pytest.raises(PreskError, match=r"lanes = 16 is not a register width of this machine for f32: lanes are 1, 8"):
        vectorize.VectorizeContractions(machine=avx2).apply(presk_context(), module)
    module = _lower("prod", "f32", {"tile": [4, 16], "lanes": 8}, vectorized=False)
    vectorize.VectorizeContractions(machine=avx2).apply(presk_context(), module)
    assert "vector.fma" in _ops(module)


# --------------------------------------------------------------------------- the bits


def _points() -> list[tuple[str, str, dict[str, Any]]]:
    """(realization, entry, layout): tiles, lanes, k-blocks and orders, with and without the epilogue.

    The orders: no k-block (IJ), a k-block in registers (JIK), a k-block
    loop enclosing both block loops (KJI: the sums wait in the output).
    """
    out = []
    for realization, widths in LANES.items():
        for lanes in widths:
            for tile in ([2, 16], [4, 8]):
                if tile[1] % lanes:
                    continue
                for kblock, order in (("none", "IJ"), (32, "JIK"), (32, "KJI")):
                    layout = {"tile": tile, "kblock": kblock, "order": order, "lanes": lanes}
                    out.append((realization, "prod", layout))
                    out.append((realization, "prod_add", {**layout, "epilogue": True}))
                    out.append((realization, "add_prod", {**layout, "epilogue": True}))
    return out


@pytest.mark.parametrize("realization,entry,layout", _points(), ids=lambda v: str(v).replace(" ", ""))
def test_vector_code_gives_the_scalar_bits(realization: str, entry: str, layout: dict[str, Any]) -> None:
    vector = _lower(entry, realization, layout)
    assert "vector.fma" in _ops(vector)
    scalar = _lower(entry, realization, layout, vectorized=False)
    assert "vector.fma" not in _ops(scalar)
    default = _run(_lower(entry, realization, None), "kernel", entry)
    results = {
        "vector native": _run(vector, "native", entry),
        "vector interpreter": _run(vector, "kernel", entry),
        "scalar native": _run(scalar, "native", entry),
    }
    for name, bits in results.items():
        assert bits == default, f"{name} differs from the default layout's bits"


def test_bf16_keeps_its_scalar_tile_and_bits() -> None:
    layout = {"tile": [4, 16], "kblock": 32, "order": "JIK", "lanes": 1, "epilogue": True}
    module = _lower("prod_add", "bf16", layout)
    assert not any(n.startswith("vector.") for n in _ops(module))
    default = _run(_lower("prod_add", "bf16", None), "kernel", "prod_add")
    assert _run(module, "native", "prod_add") == default
    assert _run(module, "kernel", "prod_add") == default


def test_vector_fma_is_the_scalar_fma_per_lane_on_hard_cases() -> None:
    """Operands where a separate multiply and add would round twice: both executors give the fma's bits."""
    rng = np.random.default_rng(7)
    a = (1 + rng.integers(1, 2**20, size=(DIMS["I"], DIMS["K"])) * 2.0**-23).astype(np.float64)
    b = (1 - rng.integers(1, 2**20, size=(DIMS["K"], DIMS["J"])) * 2.0**-23).astype(np.float64)
    layout = {"tile": [4, 16], "lanes": 16}
    vector, scalar = _lower("prod", "f32", layout), _lower("prod", "f32", layout, vectorized=False)
    outs = [
        HostProgram(m, r)([a, b])[0].tobytes()
        for m in (vector, scalar)
        for r in (NativeRunner(), KernelInterpreter().runner)
    ]
    assert len(set(outs)) == 1


# --------------------------------------------------------------------------- the widest tile


@pytest.mark.parametrize(
    "layout",
    [{"tile": [4, 32]}, {"tile": [4, 32], "kblock": 32, "order": "JKI"}],
    ids=["no-kblock", "kblock-32-JKI"],
)
@pytest.mark.parametrize("realization,lanes", [("f32", 16), ("f64", 8)])
def test_the_widest_tile_gives_the_default_bits(realization: str, lanes: int, layout: dict[str, Any]) -> None:
    """[4, 32]: two registers per row in f32 at 16 lanes, four in f64 at 8, on both executors.

    An AVX-512 f32 FMA has 4 cycles of latency and 2 units, so a register
    tile needs m_i·n_j/L ≥ 8 independent accumulators to keep both busy:
    with L = 16 and m_i ≤ 4 that is n_j = 32. The k-block 32 in the order
    JKI keeps the running sums in the output between blocks.
    """
    stated = {**layout, "lanes": lanes}
    groups = 32 // lanes
    for entry, extra in (("prod", {}), ("prod_add", {"epilogue": True})):
        module = _lower(entry, realization, {**stated, **extra})
        names = _ops(module)
        assert "math.fma" not in names
        assert names.count("vector.fma") == 4 * groups  # one per (row, group), once in the k loop
        assert names.count("vector.store") == 4 * groups
        default = _run(_lower(entry, realization, None), "kernel", entry)
        assert _run(module, "native", entry) == default, f"{entry}: native differs from the default layout's bits"
        assert _run(module, "kernel", entry) == default, f"{entry}: interpreter differs from the default layout's bits"
