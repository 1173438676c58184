"""Tiles and k-blocks that do not divide their axes keep the default's bits.

A tile that does not divide I or J runs ⌈I/m_i⌉ (⌈J/n_j⌉) blocks, the last
one shifted back to end at the axis's end; the elements it shares with the
block before it are computed again by the same chains (zero, then one FMA
per k in increasing k) and stored again with the same bits. A k-block that
does not divide K cuts its last block short. So every such point computes
the default layout's bits, on the kernel interpreter and natively, in f64,
f32 and bf16, with lanes (the target's register widths, never a fixed one),
the blocked pack of operand 1 (whose last block holds the shifted columns),
a split (workers writing a shared element store the same bits), the
epilogue, and the running sums kept in the output between k-blocks (where
only the block loops outside the k-block loop may shift their last tile,
and such a loop is serial: its shifted tile reads back the shared sums
between blocks of K; an I block loop inside it clamps its last tile's rows
past the end to the last row, which each of them computes from the same
sum and stores with the same bits).

The shapes: J = 92 (the corpus GPT's vocabulary), I = 6 (a tile of four
rows, shifted by two), I = 20 (a tile of six rows, AVX2's, shifted or
clamped by four), K = 70 (k-blocks of 32, 32 and 6); natively only,
1000 × 100 × 1000 and GPT-2's vocabulary, J = 50 257.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as K
from presk.interp.kernel import KernelInterpreter
from presk.jit.executor import HostProgram
from presk.jit.native import NativeRunner
from presk.lowering.llvm import streaming_stores
from presk.target import Machine, target_machine
from test_layout_points import Nest, as_bytes, dot, inputs, lowered

TYPES = ("f64", "f32", "bf16")


@pytest.fixture(scope="module")
def native() -> Iterator[NativeRunner]:
    with NativeRunner() as runner:
        yield runner


def widest(machine: Machine, storage: str, columns: int) -> int:
    """The target's widest register width for `storage` that divides the tile's columns; 1 without lanes."""
    fitting = [w for w in machine.lane_widths(storage) if columns % w == 0]
    return max(fitting, default=1)


def default_bits(nest: Nest, storage: str, entry: str, runner: Any, machine: Machine) -> bytes:
    return as_bytes(HostProgram(lowered(nest, storage, entry, None, machine), runner)(inputs(nest, entry)))


def run_both(nest: Nest, storage: str, entry: str, layout: dict[str, Any], native: NativeRunner) -> None:
    """The point on the kernel interpreter and natively, each against the default layout's bits."""
    machine = target_machine()
    module = lowered(nest, storage, entry, layout, machine)
    text = str(module)
    assert "arith.minsi" in text, "a tile or k-block that does not divide its axis has a shifted or short last block"
    want = default_bits(nest, storage, entry, native, machine)
    args = inputs(nest, entry)
    interpreted = as_bytes(HostProgram(module, KernelInterpreter().runner)(args))
    compiled = as_bytes(HostProgram(module, native)(args))
    assert interpreted == want, f"interpreter, {nest.name} {storage} {layout}"
    assert compiled == want, f"native, {nest.name} {storage} {layout}"


VOCAB = dot("vocab", 8, 64, 92)
"""x[8, 64] · w[64, 92]: J = 92 in tiles of 16 (5 blocks and one shifted by 4) or 32 (shifted by 4)."""
SIX = dot("six", 6, 70, 92)
"""I = 6 in tiles of 4 rows (the last shifted by 2), K = 70 in k-blocks of 32 (32, 32, 6), J = 92."""
SIX_WIDE = dot("six_wide", 6, 70, 96)
"""I = 6 and K = 70, J = 96 divided by the tile: the k-block loop may enclose J, and I with clamped rows."""
TWENTY = dot("twenty", 20, 70, 96)
"""I = 20 in tiles of 6 rows (the last shifted, or clamped, by 4), K = 70, J = 96."""

CASES: list[tuple[Nest, dict[str, Any]]] = [
    (VOCAB, {"tile": [4, 16]}),
    (VOCAB, {"tile": [8, 32], "order": "JI"}),
    (VOCAB, {"tile": [8, 32], "pack": True}),
    (SIX, {"tile": [4, 16], "kblock": 32, "order": "JIK", "pack": True}),
    (SIX, {"tile": [4, 32], "kblock": 32, "order": "IJK"}),
    (SIX, {"tile": [4, 16], "split": "workers at depth 0"}),
    (SIX, {"tile": [4, 16], "order": "JI", "pack": True, "split": "workers at depth 0"}),
    (SIX, {"tile": [2, 8], "kblock": 32, "order": "JIK", "split": "workers at depth 1"}),
    (SIX_WIDE, {"tile": [4, 32], "kblock": 32, "order": "IKJ"}),
    (SIX_WIDE, {"tile": [2, 32], "kblock": 32, "order": "KJI"}),
    (SIX_WIDE, {"tile": [4, 32], "kblock": 32, "order": "KIJ"}),
    (SIX_WIDE, {"tile": [4, 16], "kblock": 32, "order": "JKI", "pack": True}),
    (SIX_WIDE, {"tile": [4, 32], "kblock": 32, "order": "KIJ", "split": "workers at depth 1"}),
    (TWENTY, {"tile": [6, 16], "order": "JI", "pack": True}),
    (TWENTY, {"tile": [6, 16], "kblock": 32, "order": "KJI", "pack": True}),
    (TWENTY, {"tile": [6, 8], "kblock": 32, "order": "JKI", "split": "workers at depth 0"}),
]


def resolved_point(layout: dict[str, Any], storage: str, machine: Machine, epilogue: bool) -> dict[str, Any]:
    """The case's layout as a plan states it: the tiled form, the target's widest lanes, the split's workers."""
    point: dict[str, Any] = {"form": "tiled", **layout, "epilogue": epilogue}
    point["lanes"] = widest(machine, storage, point["tile"][1])
    if isinstance(point.get("split"), str):
        point["split"] = {"depth": int(point["split"].rsplit(" ", 1)[1]), "workers": machine.workers()}
    return point


def case_id(case: tuple[Nest, dict[str, Any]]) -> str:
    nest, layout = case
    return f"{nest.name}-" + "-".join(f"{k}={v}".replace(" ", "") for k, v in layout.items())


@pytest.mark.parametrize("storage", TYPES)
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_a_tile_or_kblock_that_does_not_divide_gives_the_defaults_bits(
    case: tuple[Nest, dict[str, Any]], storage: str, native: NativeRunner
) -> None:
    nest, layout = case
    machine = target_machine()
    if machine.workers() < 2 and "split" in layout:
        pytest.skip("a split needs two workers")
    sums_in_output = "K" in layout.get("order", "IJ") and not layout["order"].endswith("K")
    for epilogue in (False, True):
        point = resolved_point(layout, storage, machine, epilogue)
        entry = "prod_add" if epilogue else "prod"
        if storage == "bf16" and sums_in_output:
            with pytest.raises(PreskError, match="condition 7"):
                lowered(nest, storage, entry, point, machine)
            continue
        run_both(nest, storage, entry, point, native)


@pytest.mark.parametrize("storage", ("f64", "f32"))
@pytest.mark.target
def test_every_register_width_of_the_target_runs_a_shifted_tile(storage: str, native: NativeRunner) -> None:
    """Each of the target's widths for the type loads and stores the shifted tile's columns from column 76."""
    machine = target_machine()
    for lanes in machine.lane_widths(storage):
        point = {"form": "tiled", "tile": [4, 32], "kblock": 32, "lanes": lanes, "pack": True}
        run_both(SIX, storage, "prod", point, native)
        if lanes > 1:
            module = lowered(SIX, storage, "prod", point, machine)
            assert any(op.name == "vector.fma" for op in module.walk()), f"{lanes} lanes are vector code"


def test_the_blocked_panel_holds_the_shifted_last_block() -> None:
    """⌈92/16⌉ = 6 blocks of 16 columns: the panel's last block is columns 76..91, as the tile reads them."""
    machine = target_machine()
    module = lowered(VOCAB, "f32", "prod", {"form": "tiled", "tile": [4, 16], "pack": True}, machine)
    kernels = {op.sym_name.data: op for op in module.walk() if isinstance(op, K.KernelOp)}
    assert [str(t) for t in kernels["pack"].body.block.arg_types] == ["memref<64x92xf32>", "memref<6x64x16xf32>"]
    assert "arith.minsi" in str(kernels["pack"])


@pytest.mark.parametrize(
    "layout, message",
    [
        ({"tile": [8, 16]}, "the tile's m_i = 8 exceeds I (i) = 6"),
        ({"tile": [2, 16], "kblock": 32, "order": "IKJ"}, "the tile's n_j = 16 does not divide J (j) = 92, and with the order \"IKJ\""),
        ({"tile": [2, 16], "kblock": 128}, "the k-block of 128 exceeds K (k) = 70"),
    ],
)  # fmt: skip
def test_what_cannot_be_lowered_exactly_is_refused(layout: dict[str, Any], message: str) -> None:
    """A tile larger than its axis, a shifted J tile whose sums wait in the output, a k-block larger than K."""
    with pytest.raises(PreskError, match="condition 3") as refused:
        lowered(SIX, "f64", "prod", {"form": "tiled", **layout}, target_machine())
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "nest, layout, letter",
    [
        (SIX, {"tile": [2, 16], "kblock": 32, "order": "JKI"}, "J"),
        (SIX_WIDE, {"tile": [4, 32], "kblock": 32, "order": "IKJ"}, "I"),
    ],
    ids=["J-shifted-by-4", "I-shifted-by-2"],
)
def test_a_shifted_block_loop_around_the_k_blocks_is_serial(nest: Nest, layout: dict[str, Any], letter: str) -> None:
    """Its last tile reads back the sums the tile before it shares, between blocks of K: never run at once.

    Split between two workers, the shifted tile read the other's partial
    sums and added a block of K twice (found by `presk autotune` on the
    course GPT's `[embed, vocab]` weight gradient, J = 92, order JKI). So
    the loop carries no `psk_kernel.parallel` (the executor splits only a
    parallel loop) and a split of it is refused by condition 8.
    """
    machine = target_machine()
    module = lowered(nest, "f32", "prod", {"form": "tiled", **layout}, machine)
    (kernel,) = [op for op in module.walk() if isinstance(op, K.KernelOp)]
    (top,) = [op for op in kernel.body.block.ops if op.name == "scf.for"]
    assert K.PARALLEL not in top.attributes, f"the {letter} block loop is the outermost and serial"
    split = {"depth": 0, "workers": machine.workers()}
    with pytest.raises(PreskError, match="condition 8") as refused:
        lowered(nest, "f32", "prod", {"form": "tiled", **layout, "split": split}, machine)
    assert f"the {letter} block loop" in str(refused.value) and "shifted back over the one before it" in str(refused.value)


# --------------------------------------------------------------------------
# Large shapes, natively only (the interpreter would take minutes).


LARGE: list[tuple[Nest, str, dict[str, Any]]] = [
    (dot("square", 1000, 100, 1000), "f32", {"tile": [8, 32], "kblock": 32, "order": "JIK", "pack": True}),
    (dot("square", 1000, 100, 1000), "f64", {"tile": [4, 16], "order": "JI", "split": "workers at depth 0"}),
    (dot("square", 1000, 100, 1000), "f32", {"tile": [6, 16], "kblock": 32, "order": "JKI", "pack": True}),
    (dot("gpt2_vocab", 4, 64, 50257), "f32", {"tile": [4, 32], "pack": True}),
    (dot("gpt2_vocab", 4, 64, 50257), "bf16", {"tile": [2, 16], "kblock": 32}),
]


@pytest.mark.parametrize("case", LARGE, ids=[f"{n.name}-{s}" for n, s, _ in LARGE])
def test_large_shapes_natively(case: tuple[Nest, str, dict[str, Any]], native: NativeRunner) -> None:
    """1000 × 100 × 1000 (J = 1000 in tiles of 32, the last shifted by 24) and GPT-2's 50 257 columns."""
    nest, storage, layout = case
    machine = target_machine()
    if machine.workers() < 2 and "split" in layout:
        pytest.skip("a split needs two workers")
    point = resolved_point(layout, storage, machine, epilogue=False)
    module = lowered(nest, storage, "prod", point, machine)
    got = as_bytes(HostProgram(module, native)(inputs(nest, "prod")))
    assert got == default_bits(nest, storage, "prod", native, machine)


def test_streaming_stores_of_a_shifted_tile_and_its_pack(native: NativeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-temporal stores (forced on every kernel) of a tile starting at an unaligned column, and of the
    blocked pack's shifted last block, keep the default's bits."""
    monkeypatch.setattr(streaming_stores, "STREAMING_BYTES", 0)
    machine = target_machine()
    for storage in ("f64", "f32"):
        run_both(VOCAB, storage, "prod", resolved_point({"tile": [8, 32], "pack": True}, storage, machine, False), native)
