"""Rows in blocks: consecutive rows of a reduction's innermost kept axis worked on together.

A row's reduction is a chain of dependent additions (or maxima); alone, its
latency sets the pace. A block of `jam_factor` rows shares the loops, one
running value per row, which native code advances together in the lanes of
one vector. Each row keeps its own order, so the bits are a row's alone.
Used by the row sums (`presk.lowering.nests`) and the softmax and
cross-entropy nests (`presk.lowering.softmax`); the second check reads the
same factor (`presk.passes.verify_layout`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager

from xdsl.ir import SSAValue

from presk.lowering.kernel_builder import KernelBuilder

__all__ = ["JAM_ROWS", "jam_factor", "row_blocks", "row_block_segments"]

JAM_ROWS = 8
"""Rows per block, at most: 8 running sums in one vector (a ymm of f32, a zmm of f64). Blocks of 16
f32 rows (a zmm of sums) ran softmax [24576, 256] 3–12% slower on two threads in five side-by-side
runs, and no faster on one (probably because 16 rows of 256 f32 and their exponentials, 32 KiB, fill
L1 by themselves)."""


def jam_factor(count: int) -> int:
    """Rows per block: the largest power of two up to `JAM_ROWS` that divides `count`."""
    factor = JAM_ROWS
    while factor > 1 and count % factor:
        factor //= 2
    return factor


@contextmanager
def row_blocks(
    kb: KernelBuilder, rows: Sequence[str], counts: Mapping[str, int]
) -> Iterator[list[dict[str, SSAValue]]]:
    """A parallel nest over the rows, its innermost axis in blocks: yields each row of a block, by axis name."""
    if not rows:
        yield [{}]
        return
    jam = jam_factor(counts[rows[-1]])
    with kb.nest([counts[n] for n in rows[:-1]] + [counts[rows[-1]] // jam]) as ivs:
        outer = dict(zip(rows[:-1], ivs[:-1]))
        yield [{**outer, rows[-1]: kb.offset(ivs[-1], jam, j)} for j in range(jam)]


@contextmanager
def row_block_segments(
    kb: KernelBuilder, rows: Sequence[str], counts: Mapping[str, int], segments: Sequence[tuple[int, int]]
) -> Iterator[Callable[[int], AbstractContextManager[list[dict[str, SSAValue]]]]]:
    """`row_blocks` with its loop over blocks cut into sibling loops, one per `(first block, end block)`.

    Yields a function that opens segment `s`'s loop and yields each row of its block, as `row_blocks`
    does; every segment's body is then built with bounds of its own (`presk.lowering.softmax`: a causal
    mask's rows need only the columns up to the segment's last row).
    """
    jam = jam_factor(counts[rows[-1]])
    with kb.nest([counts[n] for n in rows[:-1]]) as ivs:
        outer = dict(zip(rows[:-1], ivs))

        @contextmanager
        def segment(s: int) -> Iterator[list[dict[str, SSAValue]]]:
            first, end = segments[s]
            with kb.span(kb.index(first), kb.index(end), parallel=True) as blocks:
                yield [{**outer, rows[-1]: kb.offset(blocks.iv, jam, j)} for j in range(jam)]

        yield segment
