"""The layout decisions of a nest: their kinds, domains and defaults (the seed's table, and the J-block).

A layout is a record of decisions, each a JSON value exactly as a plan
writes it (`"tile": [4, 16]`, `"split": {"depth": 1, "workers": 2}`). This
module knows, for each decision, which nests have it and which values it
takes, independently of shapes; the shape-dependent conditions (a tile
divides its axes, lanes fit the register) are checked when a nest is
launched. It also gives the default of every decision at a nest, which is
what a nest not mentioned in a plan runs with.

Two defaults are the executor's and stay symbolic here: `lanes = "widest"`
(the register's width on the native backend where it divides the tile's
columns, one on the kernel interpreter) and `split = "executor"` (every
worker on the outermost loop above one million weighted operations). They
depend on the machine and the backend, and a printed program must not.

The seed's table has nine decisions; `jblock` is presk's tenth: a loop
over blocks of J's columns around a contraction's block loops, BLIS's
loop over n_c, so that a K-outer order keeps one block of operand 1's
k-block in L2 (`presk.lowering.contraction`). Its default, no J-block, is
what the nine decisions lower to, and a default layout leaves it out, so
that a program without one prints as it did before it existed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from itertools import permutations
from typing import Any

from presk.dialects.psk_core_types import Size
from presk.dialects.psk_realize_nests import Contraction, NestKind

DECISIONS: tuple[str, ...] = (
    "form", "tile", "kblock", "jblock", "order", "lanes", "split", "pack", "passes", "epilogue",
)  # fmt: skip
"""In the seed's order (the J-block beside the k-block), which is also the printing order."""

KIND_DECISIONS: dict[NestKind, tuple[str, ...]] = {
    "contraction": ("form", "tile", "kblock", "jblock", "order", "lanes", "split", "pack", "epilogue"),
    "softmax": ("passes", "split"),
    "other": ("split",),
}

KIND_PHRASE: dict[NestKind, str] = {
    "contraction": "a contraction",
    "softmax": "a softmax",
    "other": "neither a contraction nor a softmax, so its only decision is the split",
}

FORMS = ("tiled", "row-wise")
TILE_ROWS = (1, 2, 4, 6, 8)
TILE_COLS = (4, 8, 16, 32)
"""The tile shapes keep both FMA units busy without spilling on either register file. An FMA has 4
cycles of latency and 2 units, so a tile needs m_i·n_j/L ≥ 8 independent accumulators.
- 32 registers (AVX-512): up to two registers of 16 f32 per row, so n_j = 32; up to 8 rows, because
  each load of operand 1's row of the tile feeds m_i FMAs, and at m_i = 4 those loads (from L2 once a
  k-block of 128 rows outgrows L1) held f32 GEMM at 1024 to 0.6–0.85× of OpenBLAS. [8, 32] keeps 16
  accumulators, 2 loaded vectors and a broadcast in 19 of the 32 registers.
- 16 registers (AVX2): 6 rows of two registers of 8 f32, [6, 16], BLIS's Zen micro-kernel: 12
  accumulators, 2 loaded vectors and a broadcast in 15 of the 16; [8, 16] would need 19 and spill."""
KBLOCKS = ("none", 32, 128)
JBLOCKS = ("none", 256, 512, 1024)
"""Columns per block of J. A K-outer order reads one k-block of operand 1 per block: 128 × 512 f64
is 512 KiB, a share of a 2 MiB L2 (docs/performance.md, "A loop over blocks of J")."""
ORDERS_WITHOUT_KBLOCK = ("IJ", "JI")
ORDERS_WITH_KBLOCK = tuple("".join(p) for p in permutations("IJK"))
LANES = (1, 2, 4, 8, 16)
"""Every width some register has; whether this machine's register has it is checked at launch."""
FULL_LANES = "full"
"""A plan's `"lanes": "full"`: the register's width on the machine that realizes the plan (`psk-realize`
replaces it with that number), so that one plan runs on AVX2 and on AVX-512."""
MAX_SPLIT_DEPTH = 2
PASSES = (2, 3)
BOTH_PACKS = "both"
"""A plan's `"pack": "both"`: operand 1's panel, as `true` copies it, and operand 0 copied to the blocked
panel of the tile's m_i rows, [outer..., ⌈I/m_i⌉, K, m_i] (`presk.passes.pack`). An NN operand 0's rows
are a whole row of K apart: at K = 2048 in f32, 8 KiB, so a tile's m_i rows share one set of L1."""

Json = Any


def tile_registers(tile: Sequence[int], lanes: int) -> int:
    """The vector registers a tile vectorized at `lanes` keeps live per k (`psk-vectorize`'s code): m·n/L
    accumulators, n/L loaded vectors of operand 1 and one broadcast of operand 0. Past the target's
    `vector_registers` the accumulators spill to the stack on every k."""
    rows, cols = tile
    groups = cols // lanes
    return rows * groups + groups + 1


def _is_int(value: Json) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_form(value: Json) -> str | None:
    return None if value in FORMS else f"the form is \"tiled\" or \"row-wise\", not {_show(value)}"


def _check_tile(value: Json) -> str | None:
    if not (isinstance(value, list) and len(value) == 2 and all(_is_int(v) for v in value)):
        return f"a tile is [m_i, n_j], two integers, not {_show(value)}"
    if value == [1, 1] or (value[0] in TILE_ROWS and value[1] in TILE_COLS):
        return None
    return f"a tile is [1, 1], or m_i in {_listed(TILE_ROWS)} and n_j in {_listed(TILE_COLS)}; not {_show(value)}"


def _check_kblock(value: Json) -> str | None:
    if value == "none" or (_is_int(value) and value in KBLOCKS):
        return None
    return f"a k-block is \"none\", 32 or 128, not {_show(value)}"


def _check_jblock(value: Json) -> str | None:
    if value == "none" or (_is_int(value) and value in JBLOCKS):
        return None
    return f"a J-block is \"none\", 256, 512 or 1024 columns, not {_show(value)}"


def _check_order(value: Json) -> str | None:
    if value in ORDERS_WITHOUT_KBLOCK or value in ORDERS_WITH_KBLOCK:
        return None
    return f"an order is \"IJ\", \"JI\", or with a k-block a permutation of \"IJK\"; not {_show(value)}"


def _check_lanes(value: Json) -> str | None:
    if (_is_int(value) and value in LANES) or value == FULL_LANES:
        return None
    return f"lanes are 1, a register's width (2, 4, 8, 16) or full, not {_show(value)}"


def _check_pack(value: Json) -> str | None:
    if isinstance(value, bool) or value == BOTH_PACKS:
        return None
    return f"a pack is true, false or \"both\", not {_show(value)}"


def packs_operand_1(pack: Json) -> bool:
    """Whether a pack decision copies operand 1 to its panel: `true` and `"both"` do."""
    return pack is True or pack == BOTH_PACKS


def _check_split(value: Json) -> str | None:
    if value == "none":
        return None
    if not isinstance(value, dict) or set(value) != {"depth", "workers"}:
        return f"a split is \"none\" or {{\"depth\": d, \"workers\": p}}, not {_show(value)}"
    depth, workers = value["depth"], value["workers"]
    if not _is_int(depth) or not 0 <= depth <= MAX_SPLIT_DEPTH:
        return f"a split's depth is 0, 1 or 2 (the loop, outermost first), not {_show(depth)}"
    if not _is_int(workers) or workers < 1:
        return f"a split's workers are a positive integer, not {_show(workers)}"
    return None


def _check_bool(what: str) -> Callable[[Json], str | None]:
    def check(value: Json) -> str | None:
        return None if isinstance(value, bool) else f"{what} is true or false, not {_show(value)}"

    return check


def _check_passes(value: Json) -> str | None:
    return None if _is_int(value) and value in PASSES else f"a softmax takes 2 or 3 passes, not {_show(value)}"


DOMAIN_CHECKS: dict[str, Callable[[Json], str | None]] = {
    "form": _check_form,
    "tile": _check_tile,
    "kblock": _check_kblock,
    "jblock": _check_jblock,
    "order": _check_order,
    "lanes": _check_lanes,
    "split": _check_split,
    "pack": _check_pack,
    "passes": _check_passes,
    "epilogue": _check_bool("an epilogue"),
}


def _show(value: Json) -> str:
    return json.dumps(value)


def _listed(values: tuple[int, ...]) -> str:
    return ", ".join(map(str, values))


def domain_violation(decisions: Mapping[str, Json]) -> tuple[str, str] | None:
    """The first (decision, reason) whose value is outside its domain, shapes aside.

    Includes the one cross-decision rule that needs no shape: the block
    loops' order names K exactly when there is a k-block.
    """
    for name, value in decisions.items():
        if name not in DOMAIN_CHECKS:
            return name, _no_such_decision(name)
        if (reason := DOMAIN_CHECKS[name](value)) is not None:
            return name, reason
    order, kblock = decisions.get("order"), decisions.get("kblock", "none")
    if order is not None:
        if kblock == "none" and order not in ORDERS_WITHOUT_KBLOCK:
            return "order", f"order {_show(order)} names K, but there is no k-block: without one the order is \"IJ\" or \"JI\""
        if kblock != "none" and order not in ORDERS_WITH_KBLOCK:
            return "order", f"with a k-block of {kblock} the order is a permutation of \"IJK\", not {_show(order)}"
    return None


def _no_such_decision(name: str) -> str:
    return f"there is no decision \"{name}\"; the decisions are {', '.join(DECISIONS)}"


def layout_violation(kind: NestKind, decisions: Mapping[str, Json]) -> tuple[str, str] | None:
    """The first violation of the plan's first check that a layout alone shows.

    Unknown names, then decisions the nest's kind lacks, then values outside
    their domains (the epilogue's conditions need the program around the nest).
    """
    return kind_violation(kind, decisions) or domain_violation(decisions)


def kind_violation(kind: NestKind, decisions: Mapping[str, Json]) -> tuple[str, str] | None:
    """The first decision stated on a nest whose kind does not have it.

    A name that is no decision at all is reported as such first, so that a
    typo (`"tiles"`) is not explained by the nest's kind.
    """
    for name in decisions:
        if name not in DOMAIN_CHECKS:
            return name, _no_such_decision(name)
    for name in decisions:
        if name not in KIND_DECISIONS[kind]:
            return name, f"\"{name}\" is not a decision of this nest, which is {KIND_PHRASE[kind]}"
    return None


def default_layout(
    kind: NestKind, shape: Contraction | None, storage: str, stated: Mapping[str, Json] | None = None
) -> dict[str, Json]:
    """The default of every decision of a nest's kind (the kernel 0.6.0 lowered), given what is stated.

    `storage` is the nest's storage type name (`f64`, `f32`, `bf16`); a dot's
    form and tile depend on whether J is a multiple of eight, which is
    `"at launch"` while J is an unbound dimension. A default depends on the
    stated decisions where the table says so: with a stated k-block the
    order is "IJK", and the lanes follow the (stated) tile and pack.
    """
    stated = stated or {}
    if kind == "softmax":
        return {"passes": 3, "split": "executor"}
    if kind == "other" or shape is None:
        return {"split": "executor"}
    eight = _multiple_of_eight(shape.j_size) if shape.is_dot else False
    if eight is None and "form" not in stated:
        return {"form": "at launch", "tile": "at launch", "kblock": "none", "order": "IJ", "lanes": "widest",
                "split": "executor", "pack": False, "epilogue": False}  # fmt: skip
    row_wise_default = shape.is_dot and eight is False and storage != "bf16"
    form = stated.get("form", "row-wise" if row_wise_default else "tiled")
    if form == "row-wise":
        return {"form": "row-wise", "split": "executor", "epilogue": False}
    tile = stated.get("tile", [1, 8] if eight else [1, 1])
    kblock = stated.get("kblock", "none")
    packed = packs_operand_1(stated.get("pack", False))
    # Lanes run along J: on an NT contraction J is contiguous only in the pack's panel.
    contiguous = not shape.nt or packed
    lanes: Json = "widest" if _tile_columns(tile) > 1 and contiguous and storage != "bf16" else 1
    return {"form": "tiled", "tile": [1, 8] if eight else [1, 1], "kblock": "none",
            "order": "IJ" if kblock == "none" else "IJK", "lanes": lanes,
            "split": "executor", "pack": False, "epilogue": False}  # fmt: skip


def _tile_columns(tile: Json) -> int:
    return tile[1] if isinstance(tile, list) and len(tile) == 2 and isinstance(tile[1], int) else 1


def _multiple_of_eight(size: Size) -> bool | None:
    return size % 8 == 0 if isinstance(size, int) else None
