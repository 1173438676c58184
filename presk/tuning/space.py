"""The layout space of one nest: every point `presk plan` may choose, in the order ties are broken.

A point is a layout as a plan states it (`{"tile": [4, 16], "kblock": 32,
...}`), complete for its form, so that the plan says what was priced and no
default of the executor (`"widest"`, `"executor"`) is left to decide at run
time: the cost model priced one kernel, and the plan must name that kernel.

The order is simplest first (the scalar tile, no k-block, one lane, no pack,
no split), so that among points the model prices alike the plan keeps the
plainer one.

Why `quick` filters (tile, lanes) by registers: a tile whose running sums,
loaded vectors and broadcast exceed the vector registers spills on every k
(`presk.dialects.psk_realize_layout.tile_registers`); the model prices the spill, but
such points are never the fastest and they are most of the space. The
scalar `[1, 1]` tile is kept whatever the registers, as the point every
nest has. A split of one worker is no split (`"none"` states it), so the
space has splits over more than one worker only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from presk.dialects import psk_core as core
from presk.dialects.psk_realize import STORAGE_BYTES, NestOp, resolved_defaults
from presk.dialects.psk_realize_layout import (
    BOTH_PACKS,
    JBLOCKS,
    KBLOCKS,
    MAX_SPLIT_DEPTH,
    ORDERS_WITH_KBLOCK,
    ORDERS_WITHOUT_KBLOCK,
    PASSES,
    TILE_COLS,
    TILE_ROWS,
    tile_registers,
)
from presk.dialects.psk_realize_nests import Contraction, contraction
from presk.passes.verify_layout import Loop, bound, contraction_loops, site_loops, site_types
from presk.target import Machine

__all__ = [
    "SPACES", "Point", "contraction_points", "jblocks_of", "nest_space", "point_key", "softmax_points", "split_choices",
    "tiles",
]  # fmt: skip

Point = dict[str, Any]
"""A layout as plan JSON."""

SPACES: tuple[str, ...] = ("quick", "full")


def point_key(point: Mapping[str, Any]) -> str:
    """A point as a cache key (JSON, keys sorted)."""
    return json.dumps(point, sort_keys=True)


def tiles() -> list[list[int]]:
    """The domain's tiles: [1, 1], then m_i × n_j, smallest first."""
    return [[1, 1]] + [[m, n] for m in TILE_ROWS for n in TILE_COLS]


def kblock_orders() -> list[tuple[Any, str]]:
    """Every (k-block, order) pair the domain has: no k-block with IJ/JI, each k-block with the permutations of IJK."""
    pairs: list[tuple[Any, str]] = []
    for kblock in KBLOCKS:
        orders = ORDERS_WITHOUT_KBLOCK if kblock == "none" else ORDERS_WITH_KBLOCK
        pairs += [(kblock, order) for order in orders]
    return pairs


LARGEST_KBLOCK = max(k for k in KBLOCKS if k != "none")


def jblocks_of(
    kblock: Any, order: str, j_size: int | None, space: str, element_bytes: int, machine: Machine
) -> list[Any]:  # fmt: skip
    """The J-blocks a (k-block, order) pair takes: `"none"`, and with K outermost those no larger than J.

    A loop over blocks of J pays where a block of K reads operand 1's
    k-block once per row of tiles (K the outermost block loop) and that
    k-block crowds the core's private cache: f64 at J = 2048 and k-block
    128 is 2 MiB, all of a 2 MiB L2 (`docs/performance.md`, "A loop over
    blocks of J"). `quick` offers J-blocks of 256 and 512 at the k-block of
    128 only where the k-block takes half the private cache or more, since
    the cost model prices a J-block as it prices the point without one (it
    does not see the k-block's reuse in L2), and elsewhere would choose one
    by a split alone: the MLP's [2048, 384] · [384, 1536] in f32 on two
    threads took 38.8–39.4 ms under the plan's J-block of 256 against 36.9
    without. `full` offers every J-block up to J.
    """
    if kblock == "none" or not order.startswith("K") or j_size is None:
        return ["none"]
    sizes = [jb for jb in JBLOCKS if jb != "none" and jb <= j_size]
    if space == "quick":
        private = machine.private_cache
        crowded = private is not None and 2 * kblock * j_size * element_bytes >= private.size
        if kblock != LARGEST_KBLOCK or not crowded:
            return ["none"]
        sizes = [jb for jb in sizes if jb <= 512]
    return ["none", *sizes]


def split_choices(loops: list[Loop], machine: Machine) -> list[Any]:
    """`"none"`, then every parallel loop within the split's depths over each worker count above one."""
    workers = [p for p in machine.allowed_workers() if p > 1]
    choices: list[Any] = ["none"]
    for depth, loop in enumerate(loops[: MAX_SPLIT_DEPTH + 1]):
        if loop.parallel:
            choices += [{"depth": depth, "workers": p} for p in workers]
    return choices


def _lanes_for(tile: list[int], storage: str, machine: Machine) -> list[int]:
    widths = machine.lane_widths(storage) if storage != "bf16" else ()
    return [1, *(w for w in widths if tile[1] % w == 0 and w > 1)]


def _fits(tile: list[int], lanes: int, machine: Machine) -> bool:
    return tile == [1, 1] or tile_registers(tile, lanes) <= machine.vector_registers


def _packs(shape: Contraction, tile: list[int], space: str) -> tuple[Any, ...]:
    """No pack, the pack; in `full`, `"both"` on an NN or NT tile of more than one row.

    A TN contraction's `true` already packs operand 0, and a tile of one row
    has no panel of rows. `quick` leaves `"both"` out: it would add half
    again to the points priced, for a copy that took the f32 GEMM at
    N = 2048 on one thread from 181 to 176 ms (`docs/performance.md`).
    """
    if space == "full" and not shape.tn and tile[0] > 1:
        return (False, True, BOTH_PACKS)
    return (False, True)


def contraction_points(
    site: NestOp, shape: Contraction, env: Mapping[str, int], machine: Machine, space: str = "quick"
) -> list[Point]:
    """The tiled points (tile × k-block/order × J-block × lanes × pack × split), then the row-wise ones (a dot's).

    A tiled point states `"form": "tiled"` only where the nest's default form
    is row-wise (a dot whose J is not a multiple of eight): elsewhere it is
    the default, and the plan stays as short as the layout allows.
    """
    storage, _ = site_types(site)
    row_wise_default = resolved_defaults(site, env).get("form") == "row-wise"
    j_size = bound(shape.j_size, env)
    points: list[Point] = []
    for tile in tiles():
        for lanes in _lanes_for(tile, storage, machine):
            if space == "quick" and not _fits(tile, lanes, machine):
                continue
            for kblock, order in kblock_orders():
                for jblock in jblocks_of(kblock, order, j_size, space, STORAGE_BYTES[storage], machine):
                    shape_layout = {"form": "tiled", "tile": tile, "kblock": kblock, "jblock": jblock, "order": order}
                    splits = split_choices(contraction_loops(site, shape, shape_layout, env), machine)
                    for pack in _packs(shape, tile, space):
                        for split in splits:
                            point: Point = {"form": "tiled"} if row_wise_default else {}
                            point.update(tile=list(tile), kblock=kblock, order=order, lanes=lanes, pack=pack, split=split)
                            if jblock != "none":  # a point without one states what it stated before J-blocks
                                point["jblock"] = jblock
                            points.append(point)
    if shape.is_dot:
        loops = contraction_loops(site, shape, {"form": "row-wise"}, env)
        points += [{"form": "row-wise", "split": split} for split in split_choices(loops, machine)]
    return points


def softmax_points(site: NestOp, env: Mapping[str, int], machine: Machine) -> list[Point]:
    """Three passes, then two, each with its split left to the executor first, then every split of its loops.

    The executor's comes first so that it wins a tie: a softmax split by
    the executor can merge with the elementwise launches beside it, whose
    splits are the executor's too (`psk-fuse-slices` merges only launches
    whose top loops carry the same attributes), and the model, pricing the
    nest alone, cannot see that merge. In the course GPT the scaling of the
    scores then runs inside the softmax's launch instead of in one of its own.
    """
    points: list[Point] = []
    for passes in sorted(PASSES, reverse=True):
        loops = site_loops(site, {"passes": passes}, env, site.result.type)
        points.append({"passes": passes})  # the split left to the executor
        points += [{"passes": passes, "split": split} for split in split_choices(loops, machine)]
    return points


def nest_space(site: NestOp, env: Mapping[str, int], machine: Machine, space: str = "quick") -> list[Point]:
    """Every point of a contraction's or a softmax's space, unchecked (`presk.tuning.plan` checks them)."""
    shape = contraction(site.primitive)
    if shape is not None:
        j, k = bound(shape.j_size, env), bound(shape.k_size, env)
        bound_shape = replace(shape, j_size=shape.j_size if j is None else j, k_size=shape.k_size if k is None else k)
        return contraction_points(site, bound_shape, env, machine, space)
    if isinstance(site.primitive, core.SoftmaxOp):
        return softmax_points(site, env, machine)
    return []
