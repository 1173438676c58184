"""The epilogue: the add (or mul) that alone reads a product, folded into the product's kernel.

The seed (§"The bias as an epilogue"): stated on a contraction nest,
`"epilogue": true` gives the product's kernel the add. The product's let
launches nothing; the add's launches the product's kernel (named the
product's with `+add`, at the product's site, under its layout), which adds
the add's other operand to each output element once its sum is done. It is
exact: in f64 and f32 the operand is added in the register before the store;
in bf16 the sum is rounded to bf16, read back in f32, added to and stored
again, as the add's kernel would. Under a k-block whose loop encloses I or J
the addition belongs to the last block; in the row-wise form it is one more
sweep of the row.

Each case below is a function whose product one add alone reads: a bias
after a dot, the same bias before it (the add's operands swapped), a mask
after attention's scores ein, a residual after its values ein, an operand
constant along J (carrying I alone) and one carrying the outer axes and I.
Beyond the seed, a mul takes the add's place the same way (`<product>+mul`,
multiplying each finished sum): attention's scores times a real scale, a
real times a dot (the operands swapped), and a gain along J.
Each runs in f64, f32 and bf16, on the kernel interpreter and on native
code, at several layouts of the product, with and without the epilogue:
the outputs must be the same bytes as the two separate kernels' (the
product's, then the add's) at the default layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from presk.target import target_machine
from presk.dialects import psk_kernel as K
from presk.interp.kernel import KernelInterpreter
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.pipeline import lower
from presk.plans import parse_plan

PROGRAM = """
!X = !psk_core.tensor<[i: 8, k: 64]>
!W = !psk_core.tensor<[k: 64, j: 16]>
!O = !psk_core.tensor<[i: 8, j: 16]>
!B = !psk_core.tensor<[j: 16]>
!C = !psk_core.tensor<[i: 8]>
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 64]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 16, d: 64]>
!S = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 16]>
!M = !psk_core.tensor<[s: 8, t: 16]>
!P = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 64]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 64, d: 16]>
!A = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 16]>
!BHS = !psk_core.tensor<[b: 2, h: 2, s: 8]>

func.func @bias_after(%x: !X, %w: !W, %b: !B) -> !O {
  %0 = psk_core.dot %x, %w : !O
  %1 = psk_core.add %0, %b : !O
  func.return %1 : !O
}
func.func @bias_before(%x: !X, %w: !W, %b: !B) -> !O {
  %0 = psk_core.dot %x, %w : !O
  %1 = psk_core.add %b, %0 : !O
  func.return %1 : !O
}
func.func @mask_after_scores(%q: !Q, %k: !K, %m: !M) -> !S {
  %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !S
  %1 = psk_core.add %0, %m : !S
  func.return %1 : !S
}
func.func @residual_after_values(%p: !P, %v: !V, %r: !A) -> !A {
  %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !A
  %1 = psk_core.add %0, %r : !A
  func.return %1 : !A
}
func.func @constant_along_j(%x: !X, %w: !W, %c: !C) -> !O {
  %0 = psk_core.dot %x, %w : !O
  %1 = psk_core.add %c, %0 : !O
  func.return %1 : !O
}
func.func @outer_and_i(%p: !P, %v: !V, %o: !BHS) -> !A {
  %0 = psk_core.ein %p[b, h, s, t], %v[b, h, t, d] : !A
  %1 = psk_core.add %o, %0 : !A
  func.return %1 : !A
}
func.func @scaled_scores(%q: !Q, %k: !K, %c: !psk_core.real) -> !S {
  %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !S
  %1 = psk_core.mul %0, %c : !S
  func.return %1 : !S
}
func.func @scale_first(%x: !X, %w: !W, %c: !psk_core.real) -> !O {
  %0 = psk_core.dot %x, %w : !O
  %1 = psk_core.mul %c, %0 : !O
  func.return %1 : !O
}
func.func @gain_along_j(%x: !X, %w: !W, %g: !B) -> !O {
  %0 = psk_core.dot %x, %w : !O
  %1 = psk_core.mul %0, %g : !O
  func.return %1 : !O
}
"""

CASES = (
    "bias_after", "bias_before", "mask_after_scores", "residual_after_values", "constant_along_j", "outer_and_i",
    "scaled_scores", "scale_first", "gain_along_j",
)  # fmt: skip
MULS = {"scaled_scores", "scale_first", "gain_along_j"}
"""The cases whose product a mul reads: their folded kernel is `<product>+mul`."""
TYPES = ("f64", "f32", "bf16")
NT = {"mask_after_scores", "scaled_scores"}
"""The cases whose product is NT (the scores ein): lanes need the pack."""


def layouts(case: str, storage: str) -> Iterator[dict[str, Any]]:
    """The product's layouts each case runs at (the epilogue stated on top)."""
    wide = max(target_machine().lane_widths(storage), default=1)
    yield {}
    yield {"tile": [2, 8]}
    yield {"tile": [4, 16], "kblock": 32, "order": "JIK"}  # k-blocks, sums in registers
    yield {"tile": [1, 4], "split": {"depth": 0, "workers": target_machine().workers()}}
    if storage != "bf16":
        yield {"form": "row-wise"}  # the epilogue is one more sweep of the row
        yield {"tile": [2, 4], "kblock": 32, "order": "KIJ"}  # sums wait in the output; the add after the last block
        yield {"tile": [1, 8], "kblock": 32, "order": "IKJ", "lanes": min(wide, 8), **({"pack": True} if case in NT else {})}
    if case in NT:
        yield {"tile": [2, 16], "pack": True}


@cache
def program() -> ModuleOp:
    parsed = parse_module(presk_context(), PROGRAM, "epilogue.mlir")
    parsed.module.verify()
    return parsed.module


def kernels(module: ModuleOp) -> list[K.KernelOp]:
    return [op for op in module.body.block.ops if isinstance(op, K.KernelOp)]


def launches(module: ModuleOp) -> list[K.LaunchOp]:
    (host,) = [op for op in module.body.block.ops if isinstance(op, K.HostOp)]
    return [op for op in host.body.block.ops if isinstance(op, K.LaunchOp)]


def compile_case(case: str, storage: str, layout: dict[str, Any] | None) -> ModuleOp:
    stated = {f"{case}/%0": layout} if layout is not None else {}
    # Without psk-fuse-slices, which would run the separate product and add row by row in one kernel too.
    plan = parse_plan({"realization": storage, "layout": stated}, "epilogue")
    return lower(program(), case, {}, plan, fuse_slices=False)


def arguments(case: str) -> list[np.ndarray]:
    (fn,) = [f for f in program().walk() if getattr(f, "sym_name", None) is not None and f.sym_name.data == case]
    rng = np.random.default_rng(sum(map(ord, case)))
    # Sums and addends of comparable size, so that the add's rounding matters in every type.
    return [rng.standard_normal(tuple(getattr(t, "sizes", ()))) * (4.0 if i == 2 else 1.0)
            for i, t in enumerate(fn.function_type.inputs.data)]  # type: ignore[attr-defined]


def run(module: ModuleOp, args: list[np.ndarray], runner: Any) -> bytes:
    return b"".join(np.ascontiguousarray(o).tobytes() for o in HostProgram(module, runner)(args))


@pytest.fixture(scope="module")
def native() -> Iterator[NativeRunner]:
    with NativeRunner() as runner:
        yield runner


@pytest.mark.parametrize("storage", TYPES)
@pytest.mark.parametrize("case", CASES)
def test_epilogue_gives_the_two_kernels_bits(case: str, storage: str, native: NativeRunner) -> None:
    args = arguments(case)
    interpreter = KernelInterpreter().runner
    separate = compile_case(case, storage, None)
    op = "mul" if case in MULS else "add"
    assert [launch.kernel.string_value() for launch in launches(separate)][-1] == op
    want = run(separate, args, interpreter)
    assert run(separate, args, native) == want
    for layout in layouts(case, storage):
        for epilogue in (False, True):
            stated = {**layout, "epilogue": epilogue}
            module = compile_case(case, storage, stated)
            names = [op.kernel.string_value() for op in launches(module)]
            product = "ein" if case in NT or "values" in case or case == "outer_and_i" else "dot"
            if epilogue:
                assert names[-1] == f"{product}+{op}" and op not in names, names
                assert len(names) == len(launches(separate)) + (1 if layout.get("pack") else 0) - 1
                (fused,) = [k for k in kernels(module) if k.sym_name.data == f"{product}+{op}"]
                assert fused.site.data == f"{case}/%0"
                assert launches(module)[-1].attributes["site"].data == f"{case}/%0"  # type: ignore[attr-defined]
            else:
                assert names[-1] == op
            assert run(module, args, interpreter) == want, f"interpreter, {stated}"
            assert run(module, args, native) == want, f"native, {stated}"


def test_bf16_epilogue_rounds_the_sum_before_adding() -> None:
    """In bf16 the kernel rounds the finished sum to bf16 and widens it back before the add."""
    module = compile_case("bias_after", "bf16", {"epilogue": True})
    (fused,) = [k for k in kernels(module) if k.sym_name.data == "dot+add"]
    text = str(fused)
    truncs = text.count("arith.truncf")
    # Each of the tile's eight columns: the sum rounded (truncf) and read back (extf), then the
    # result rounded again for the store.
    assert truncs == 16, text
    f32 = compile_case("bias_after", "f32", {"epilogue": True})
    assert "arith.truncf" not in str(f32)


def test_k_block_enclosing_the_tile_adds_after_the_last_block() -> None:
    """With the sums in the output between blocks, the add is selected on the last block only."""
    module = compile_case("bias_after", "f32", {"tile": [2, 4], "kblock": 32, "order": "KIJ", "epilogue": True})
    (fused,) = [k for k in kernels(module) if k.sym_name.data == "dot+add"]
    text = str(fused)
    assert text.count("arith.cmpi eq") == 2  # the first block (starts from 0) and the last (adds)
    assert text.count("arith.addf") == 8 and text.count("arith.select") == 16


def test_row_wise_epilogue_is_one_more_sweep() -> None:
    module = compile_case("bias_after", "f64", {"form": "row-wise", "epilogue": True})
    (fused,) = [k for k in kernels(module) if k.sym_name.data == "dot+add"]
    loops = [op for op in fused.walk() if op.name == "scf.for"]
    assert len(loops) == 5  # I; zero the row; K; its columns; the epilogue's sweep
    assert str(fused).count("arith.addf") == 1


def test_an_added_operand_carrying_j_carries_it_innermost() -> None:
    """The epilogue's lanes condition (the operand runs along J innermost or not at all) always holds.

    PSK-Core broadcasts by name with the axes in order, so an operand that
    carries J, the output's last axis, carries it last: a mask [t, s] does
    not type-check against scores [b, h, s, t].
    """
    source = PROGRAM + """
func.func @transposed_mask(%q: !Q, %k: !K, %m: !psk_core.tensor<[t: 16, s: 8]>) -> !S {
  %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !S
  %1 = psk_core.add %0, %m : !S
  func.return %1 : !S
}
"""
    with pytest.raises(Exception, match="cannot broadcast"):
        parse_module(presk_context(), source, "transposed.mlir").module.verify()
