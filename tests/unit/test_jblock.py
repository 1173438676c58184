"""A J-block: a loop over blocks of J's columns around a contraction's block loops.

With `"jblock": 256` the block loops run inside a loop over blocks of 256
columns, and the J block loop steps over the tiles of one block (the last
block cut short where it does not divide J's tiles: [b·P, min(b·P + P, T))
for P tiles a block and T in all). It only reorders the tiles, so every
point keeps the default's bits, on the kernel interpreter and natively,
with the running sums in registers or waiting in the output between blocks
of K, the pack, the epilogue and a split of the loop over blocks, of a
block's tiles (hoisted above it) or of the rows (strip-mined). The
verifier counts the new loop among those a split's depth indexes, and the
cost model prices the J block loop at one block's tiles.

The shapes: J = 512 (two blocks of 16 tiles of 16 columns), J = 300 (19
tiles, the last shifted back by 4, in blocks of 16 and 3), I = 10 (tiles of
6 rows, shifted or clamped), K = 36 (k-blocks of 32 and 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from xdsl.dialects import scf

from presk.analysis import block_trip_count, loop_trips, sets_inner_bounds, split_loop, trip_count
from presk.cost.quantities import kernel_terms
from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as K
from presk.jit.native import NativeRunner
from presk.target import target_machine
from test_cost_quantities import desc
from test_layout_points import dot, lowered
from test_tile_remainders import run_both, widest

EVEN = dot("even", 10, 36, 512)
"""J = 512: two blocks of 256 columns, 16 tiles of 16 each."""
ODD = dot("odd", 10, 36, 300)
"""J = 300: 19 tiles of 16 (the last shifted back by 4), in blocks of 16 and 3."""


@pytest.fixture(scope="module")
def native() -> Iterator[NativeRunner]:
    with NativeRunner() as runner:
        yield runner


def point(storage: str, order: str, **extra: Any) -> dict[str, Any]:
    lanes = widest(target_machine(), storage, 16)
    return {"form": "tiled", "tile": [6, 16], "lanes": lanes, "kblock": 32, "jblock": 256, "order": order, **extra}


def loops_in(op: Any) -> list[scf.ForOp]:
    return [child for child in op.body.block.ops if isinstance(child, scf.ForOp)]


def only_kernel(module: Any) -> K.KernelOp:
    (kernel,) = [op for op in module.walk() if isinstance(op, K.KernelOp)]
    return kernel


def test_the_loop_over_blocks_of_j_encloses_the_k_blocks_and_a_blocks_tiles() -> None:
    """KIJ: blocks of J (parallel), the k-block loop (serial), the I block loop, a block's 16 tiles."""
    (blocks,) = loops_in(only_kernel(lowered(EVEN, "f32", "prod", point("f32", "KIJ"), target_machine())))
    assert trip_count(blocks) == 2 and K.PARALLEL in blocks.attributes
    (kblocks,) = loops_in(blocks)
    assert trip_count(kblocks) == 2 and K.PARALLEL not in kblocks.attributes
    (rows,) = loops_in(kblocks)
    assert trip_count(rows) == 2
    (tiles,) = loops_in(rows)
    assert trip_count(tiles) == 16, "one block's tiles"


def test_a_last_block_of_fewer_tiles_is_cut_short() -> None:
    """J = 300, JIK: 19 tiles in blocks of 16; the J block loop runs [16·b, min(16·b + 16, 19))."""
    (blocks,) = loops_in(only_kernel(lowered(ODD, "f32", "prod", point("f32", "JIK"), target_machine())))
    assert trip_count(blocks) == 2 and sets_inner_bounds(blocks)
    (tiles,) = loops_in(blocks)
    assert trip_count(tiles) is None and block_trip_count(tiles) == loop_trips(tiles) == 16


CASES = [
    (EVEN, "KIJ", {}),  # sums wait in the output; the I block loop clamps its last tile's rows
    (EVEN, "KJI", {"pack": True}),
    (EVEN, "IKJ", {"split": "workers at depth 0"}),
    (ODD, "JIK", {"pack": True}),  # sums in registers; the last block of J cut short, its last tile shifted
    (ODD, "IJK", {}),
    (ODD, "JKI", {}),  # the k-block loop encloses I only: the loop over blocks of J is serial (J shifted)
    (EVEN, "KIJ", {"split": "workers at depth 0", "pack": True}),
    (EVEN, "KIJ", {"split": "workers at depth 2"}),  # the I block loop, strip-mined under the k-blocks
    (EVEN, "IJK", {"split": "workers at depth 2"}),  # a block's tiles, hoisted above the blocks of J
]


# bf16 stores what f32 sums, so its sums cannot wait in the output (condition 7): only K-innermost orders.
TYPED_CASES = [(s, *case) for case in CASES for s in ("f64", "f32", "bf16") if s != "bf16" or case[1][-1] == "K"]


@pytest.mark.parametrize(
    "storage, nest, order, extra", TYPED_CASES, ids=[f"{s}-{n.name}-{o}-{'-'.join(e)}" for s, n, o, e in TYPED_CASES]
)
def test_a_jblock_gives_the_defaults_bits(
    storage: str, nest: Any, order: str, extra: dict[str, Any], native: NativeRunner
) -> None:  # fmt: skip
    """With and without the epilogue, on the kernel interpreter and natively."""
    layout = point(storage, order, **extra)
    if "split" in extra:
        layout["split"] = {"depth": int(extra["split"][-1]), "workers": target_machine().workers()}
    for epilogue in (False, True):
        run_both(nest, storage, "prod_add" if epilogue else "prod", {**layout, "epilogue": epilogue}, native)


def test_a_split_divides_the_blocks_of_j() -> None:
    workers = target_machine().workers()
    layout = {**point("f32", "KIJ"), "split": {"depth": 0, "workers": workers}}
    top = split_loop(only_kernel(lowered(EVEN, "f32", "prod", layout, target_machine())))
    assert top is not None and trip_count(top) == 2 and K.PARALLEL in top.attributes


@pytest.mark.parametrize(
    "nest, layout, condition, message",
    [
        (ODD, {"jblock": 512}, 3, "the J-block of 512 exceeds J (j) = 300"),
        (EVEN, {"form": "row-wise", "jblock": 256}, 3, "has no tile, k-block, J-block, order or pack, but the J-block is 256"),
        (dot("narrow", 10, 36, 256), {"split": "depth 0"}, 8, "the loop over blocks of J (j in blocks of 256 columns)"),
        (ODD, {"order": "JKI", "split": "depth 0"}, 8, "shifted back over the one before it"),
        (ODD, {"order": "JIK", "split": "depth 1"}, 8, "whose bounds follow the block of J (the last block is cut short)"),
    ],
    ids=["exceeds-J", "row-wise", "one-block", "serial", "cut-short"],
)  # fmt: skip
def test_what_a_jblock_cannot_do_is_refused(nest: Any, layout: dict[str, Any], condition: int, message: str) -> None:
    stated = {**point("f32", "KIJ"), **layout}
    if stated.get("form") == "row-wise":
        stated = {"form": "row-wise", "jblock": layout["jblock"]}
    if isinstance(split := stated.get("split"), str):
        stated["split"] = {"depth": int(split[-1]), "workers": target_machine().workers()}
    with pytest.raises(PreskError, match=f"E7002.*condition {condition}") as refused:
        lowered(nest, "f32", "prod", stated, target_machine())
    assert message in str(refused.value)


def test_the_work_and_loads_are_the_kernels_without_it() -> None:
    """The model prices the J block loop at one block's 16 tiles: the same FMAs and loads as one loop of 32."""
    machine = target_machine()
    with_blocks = only_kernel(lowered(EVEN, "f32", "prod", point("f32", "KIJ"), machine))
    without = only_kernel(lowered(EVEN, "f32", "prod", {**point("f32", "KIJ"), "jblock": "none"}, machine))
    priced, plain = kernel_terms(with_blocks, desc()), kernel_terms(without, desc())
    assert priced.work == plain.work and priced.loads == plain.loads
