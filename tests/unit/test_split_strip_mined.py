"""A split under a serial loop strip-mines its loop: one block of its iterations per worker, outermost.

In the orders with K before I (`KIJ`), the k-block loop encloses the I
block loop. `psk-split` at the I loop's depth adds a loop of `workers`
blocks around the k-block loop and runs the I loop over its block,
`[b·B, min(b·B + B, I))`: each worker runs every block of K over its own
rows. The kernel interpreter runs that loop block by block (the blocks'
bounds differ), the runner hands its iterations to the workers, and the
cost model counts a block's iterations: one worker's share of the work.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from xdsl.dialects import scf

from presk.analysis import block_trip_count, loop_trips, sets_inner_bounds, split_loop, trip_count
from presk.cost.kernel_cost import weighted_operations
from presk.cost.quantities import kernel_terms
from presk.dialects import psk_kernel as K
from presk.jit.native import NativeRunner
from presk.target import target_machine
from test_cost_quantities import desc, gemm
from test_layout_points import dot, lowered
from test_tile_remainders import run_both

THIRTY = dot("thirty", 30, 70, 96)
"""I = 30 in tiles of 6 rows: 5 tiles, so two workers get blocks of 3 and 2; K = 70 in k-blocks of 32."""


@pytest.fixture(scope="module")
def native() -> Iterator[NativeRunner]:
    with NativeRunner() as runner:
        yield runner


def workers() -> int:
    count = target_machine().workers()
    if count < 2:
        pytest.skip("a split needs two workers")
    return count


def kij(split_depth: int | None, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {"form": "tiled", "tile": [6, 8], "lanes": 1, "kblock": 32, "order": "KIJ", **extra}
    if split_depth is not None:
        layout["split"] = {"depth": split_depth, "workers": workers()}
    return layout


def only_kernel(module: Any) -> K.KernelOp:
    (kernel,) = [op for op in module.walk() if isinstance(op, K.KernelOp)]
    return kernel


def test_the_loop_of_blocks_encloses_the_k_blocks_and_the_rows_run_over_their_block() -> None:
    p = workers()
    kernel = only_kernel(lowered(THIRTY, "f64", "prod", kij(1), target_machine()))
    top = split_loop(kernel)
    assert top is not None and trip_count(top) == min(p, 5)
    assert top.attributes[K.WORKERS].value.data == p  # type: ignore[attr-defined]
    assert sets_inner_bounds(top), "the loop of blocks gives the row loop its bounds"
    (kblocks,) = [op for op in top.body.block.ops if isinstance(op, scf.ForOp)]
    assert trip_count(kblocks) == 3 and K.PARALLEL not in kblocks.attributes, "the k-block loop, serial, inside"
    (rows,) = [op for op in kblocks.body.block.ops if isinstance(op, scf.ForOp)]
    assert trip_count(rows) is None, "the row loop's bounds follow the block"
    assert block_trip_count(rows) == loop_trips(rows) == -(-5 // min(p, 5)), "a block's tiles"


def test_with_every_loop_above_parallel_the_loop_moves_to_the_top_as_before() -> None:
    """`IJK`: depth 1 is the J block loop under the parallel I block loop; hoisting it needs no blocks."""
    kernel = only_kernel(lowered(THIRTY, "f64", "prod", {**kij(1), "order": "IJK"}, target_machine()))
    top = split_loop(kernel)
    assert top is not None and trip_count(top) == 12, "the J block loop, 96 / 8 iterations, at the top"
    assert not sets_inner_bounds(top)


@pytest.mark.parametrize("storage", ("f64", "f32"))
@pytest.mark.parametrize("pack", (False, True))
def test_the_strip_mined_split_gives_the_defaults_bits(storage: str, pack: bool, native: NativeRunner) -> None:
    """Blocks of 3 and 2 tiles, the last tile's rows clamped, on the kernel interpreter and natively."""
    for epilogue in (False, True):
        point = {**kij(1, pack=pack), "epilogue": epilogue}
        run_both(THIRTY, storage, "prod_add" if epilogue else "prod", point, native)


def test_one_worker_is_priced_at_its_block() -> None:
    """N = 96 in tiles of 4 rows: 24 tiles, two blocks of 12. One worker's W and N_ld are half the kernel's."""
    p = workers()
    if p != 2:
        pytest.skip(f"the counts below are two workers'; this machine has {p}")
    split = gemm(96, "f64", {"tile": [4, 8], "lanes": 1, "kblock": 32, "order": "KIJ",
                             "split": {"depth": 1, "workers": p}})  # fmt: skip
    whole = gemm(96, "f64", {"tile": [4, 8], "lanes": 1, "kblock": 32, "order": "KIJ", "split": "none"})
    # The blocks cover the rows once; each block adds its bounds' four index operations.
    assert 0 <= weighted_operations(split) - weighted_operations(whole) <= 4 * p
    one, all_ = kernel_terms(split, desc(), workers=p), kernel_terms(whole, desc())
    assert one.work * p == all_.work and one.loads * p == all_.loads
    # Q follows the block's start through its affine index: one worker reads its half of x, all of w, and
    # writes its half of the output, 2/3 of the kernel's bytes.
    assert one.bytes * 3 == all_.bytes * 2
