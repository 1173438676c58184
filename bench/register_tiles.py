"""The (tile, lanes) pairs a sweep tries: every one of the domain, or the ones the registers hold.

A tile vectorized at L lanes keeps m·n/L accumulators live, with n/L loaded
vectors of operand 1 and a broadcast of operand 0
(`presk.dialects.psk_realize_layout.tile_registers`). Past the target's vector
registers the accumulators spill on every k, so a quick sweep tries only
the (tile, lanes) pairs that fit: the widest lanes first (each FMA does L
multiply-adds), then the most accumulators (an FMA has 4 cycles of latency
and 2 units, so 8 independent accumulators keep both busy; fewer than 4
leave most of the units idle and are not tried). On AVX-512's 32 registers
that puts [8, 32] at 16 f32 lanes first; on AVX2's 16, [6, 16] at 8
(BLIS's Zen micro-kernel).
"""

from __future__ import annotations

from presk.dialects.psk_realize_layout import TILE_COLS, TILE_ROWS
from presk.dialects.psk_realize_layout import tile_registers
from presk.target import Machine

QUICK_TILES = 10
"""How many (tile, lanes) pairs a quick sweep tries."""
MIN_ACCUMULATORS = 4


def register_tiles(machine: Machine, dtype: str, count: int = QUICK_TILES) -> list[tuple[list[int], int]]:
    """The first `count` (tile, lanes) pairs of the domain that fit the registers, in the order above.

    Lanes are the target's widths for `dtype` that divide the tile's
    columns; ties keep the domain's order."""
    pairs = [
        ([rows, cols], lanes)
        for rows in TILE_ROWS
        for cols in TILE_COLS
        for lanes in sorted(machine.lane_widths(dtype), reverse=True)
        if cols % lanes == 0
        and rows * cols // lanes >= MIN_ACCUMULATORS
        and tile_registers((rows, cols), lanes) <= machine.vector_registers
    ]
    pairs.sort(key=lambda pair: (-pair[1], -(pair[0][0] * pair[0][1] // pair[1])))
    return pairs[:count]


def domain_tiles(machine: Machine, dtype: str) -> list[tuple[list[int], int]]:
    """Every (tile, lanes) pair of the domain the target can run: [1, 1] scalar, and each tile at one
    lane and at each of the target's widths for `dtype` that divides its columns."""
    widths = machine.lane_widths(dtype)
    return [([1, 1], 1)] + [
        ([rows, cols], lanes)
        for rows in TILE_ROWS
        for cols in TILE_COLS
        for lanes in (1, *widths)
        if cols % lanes == 0
    ]
