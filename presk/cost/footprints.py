"""Index expressions of a kernel's accesses, and the footprint of a set of accesses inside a loop.

The traffic terms of `presk.cost.quantities` ask one question many times:
how many bytes of buffer b do the accesses inside a loop (all of its
iterations, one iteration, or one execution of a body's own accesses)
touch? The answer is computed from each access's index expressions, kept
in the form the lowering emits them:

* `Affine`: a constant plus integer multiples of loop counters (`t` of a
  loop runs 0, 1, …, trip − 1; its induction variable is `lb + step·t`),
  built by `arith.addi`/`subi`/`muli` of induction variables and constants.
  A clamp against a constant (`arith.minsi %x, %c`, the last tile shifted
  back over the one before it) is read as its unclamped operand: the box
  it spans is then cut to the buffer's extent, which is where the clamp
  puts it.
* `Opaque`: anything else (a division, a remainder, a select, a gathered
  index loaded from a buffer). Conservatively, it may be any element of
  its axis in a scope where a loop it depends on runs, and it is one
  element, at a place not known (comparable only with itself), in a scope
  where those loops stay.

A footprint is a union of boxes. Each access spans, along each axis, an
interval (the range of its expression over the free loop counters, widened
by its lanes along the last axis) holding at most the product of their
trips distinct indices. Accesses whose expressions agree on the loops held
fixed are comparable (their intervals differ by constants) and are merged
axis by axis (equal intervals once); the box of a group is capped by the
sum of its accesses' boxes (so that two accesses on a diagonal count two
elements, not four),
groups that are not comparable add up, and a buffer's footprint never
exceeds the buffer. Under the rule `lines` the last axis counts the span
of each merged interval in bytes rounded up to whole lines, so that an
access whose loops do not walk that axis brings a line per element.

Accesses that differ only by constants (a register tile's `C[4i + r, 16j + c]`)
are kept as one `Family`, so a footprint costs in the number of families.

Under the rule `sets` a footprint also answers where its lines fall in a
cache's sets (`set_load`). Each interval keeps the step of its indices
(the gcd of the free loops' coefficients; merged intervals take the gcd of
their steps and of their offsets), so an outer axis of a box is a walk of
its distinct indices at a byte stride of step × the axis's row-major
stride, and the last axis is a run of whole lines, as under `lines` (its
span; several runs walk like one more axis). A box whose rows leave no gap
holds consecutive lines and needs ⌈lines / S⌉ of every set. Otherwise the
row starts' offsets modulo one way (S sets × the line) are enumerated when
there are at most `ENUMERATED_ROWS` of them, each axis counted up to its
period, or else counted by the bound min(Π rows, way / gcd(strides, way));
the sets used are the union of each row's c lines from its offset, and the
busiest set needs ⌈lines / sets used⌉, lines being the rows' lines (at most
the lines the box spans). This is exact for one walk of a stride a
multiple of the line (a column of a row-major matrix: rows 4 KiB apart in
an L1 of 4 KiB per way all need the same set) and an average otherwise;
the boxes are those of the byte count, before it is capped by its
accesses' own sizes (two accesses on a diagonal count their whole box).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import gcd, prod

__all__ = [
    "PAGE", "Access", "Affine", "Box", "Family", "Index", "Opaque", "SetGeometry", "families", "footprint_bytes",
    "page_bytes", "scattered_bytes", "set_load",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Affine:
    """`const + Σ coef·t_loop` over loop counters (loop ids into the analysis' trip table)."""

    const: int
    coefs: tuple[tuple[int, int], ...] = ()
    """(loop id, coefficient) pairs, sorted by loop id, no zero coefficient."""

    def plus(self, other: Affine, sign: int = 1) -> Affine:
        merged = dict(self.coefs)
        for loop, coef in other.coefs:
            merged[loop] = merged.get(loop, 0) + sign * coef
        coefs = tuple(sorted((loop, coef) for loop, coef in merged.items() if coef))
        return Affine(self.const + sign * other.const, coefs)

    def times(self, factor: int) -> Affine:
        if factor == 0:
            return Affine(0)
        return Affine(self.const * factor, tuple((loop, coef * factor) for loop, coef in self.coefs))

    def loops(self) -> frozenset[int]:
        return frozenset(loop for loop, _ in self.coefs)


@dataclass(frozen=True, slots=True)
class Opaque:
    """An index the analysis does not follow: the loops it depends on, and its identity."""

    deps: frozenset[int]
    key: int
    """Equal for the same SSA value, so that two accesses at one unknown index merge."""

    def loops(self) -> frozenset[int]:
        return self.deps


Index = Affine | Opaque


@dataclass(frozen=True, slots=True)
class Access:
    """One load or store: its buffer, index per axis, lanes along the last axis, and the loops around it."""

    buffer: int
    indices: tuple[Index, ...]
    lanes: int
    enclosing: tuple[int, ...]
    """Ids of the loops around the access, outermost first (a loop of no iterations hides it)."""


@dataclass(frozen=True, slots=True)
class Family:
    """Accesses of one buffer at one place of the nest whose indices differ only by constants.

    A register tile's loads and stores are such a family (`C[4i + r, 16j + c]`
    for every r and c): its box over any set of free loops is computed once
    and shifted by the offsets, which keeps a footprint's cost in the number
    of families, not of accesses.
    """

    buffer: int
    shape: tuple[Index, ...]
    """The indices with their constants at 0 (opaque indices as they are)."""
    offsets: tuple[tuple[int, ...], ...]
    """Per axis, the distinct constants of the members."""
    members: int
    lanes: int
    enclosing: tuple[int, ...]


def families(accesses: Iterable[Access]) -> list[Family]:
    """The accesses grouped into families (equal accesses counted once)."""
    found: dict[tuple[object, ...], set[tuple[int, ...]]] = {}
    for access in accesses:
        shape = tuple(Affine(0, ix.coefs) if type(ix) is Affine else ix for ix in access.indices)
        consts = tuple(ix.const if type(ix) is Affine else 0 for ix in access.indices)  # type: ignore[union-attr]
        found.setdefault((access.buffer, shape, access.lanes, access.enclosing), set()).add(consts)
    out: list[Family] = []
    for (buffer, shape, lanes, enclosing), members in found.items():
        offsets = tuple(tuple(sorted({m[axis] for m in members})) for axis in range(len(shape)))
        out.append(Family(buffer, shape, offsets, len(members), lanes, enclosing))  # type: ignore[arg-type]
    return out


_Interval = tuple[int, int, int, int]
"""(low, high, distinct indices, step) of one access along one axis: its indices lie on
low + step·m (step 0: one index; the lanes of the last axis widen it, not its step)."""


def _axis(index: Index, free: frozenset[int], trips: Sequence[int], dim: int, extra: int) -> tuple[object, _Interval]:
    """The comparability key and the interval of one index over the free loops."""
    if type(index) is Affine:
        low = high = index.const
        count = 1
        step = 0
        fixed: list[tuple[int, int]] = []
        for loop, coef in index.coefs:
            if loop in free:
                span = coef * (trips[loop] - 1)
                if span > 0:
                    high += span
                else:
                    low += span
                count *= trips[loop]
                if trips[loop] > 1:
                    step = gcd(step, coef)
            else:
                fixed.append((loop, coef))
        return tuple(fixed), (low, high + extra, count * (extra + 1), step)
    assert isinstance(index, Opaque)
    if index.deps & free:
        return "whole", (0, dim - 1, dim, 1)
    return ("opaque", index.key), (0, extra, extra + 1, 0)


def _round(nbytes: int, line: int) -> int:
    return -(-nbytes // line) * line


def _merged(intervals: set[_Interval], dim: int) -> list[tuple[int, int]]:
    """Merged intervals along one axis: (extent, distinct indices), each cut to the axis's extent."""
    ordered = sorted(intervals)
    out: list[tuple[int, int]] = []
    low, high, count, _ = ordered[0]
    for lo, hi, n, _ in ordered[1:]:
        if lo <= high + 1:
            high = max(high, hi)
            count += n
        else:
            out.append((high - low + 1, count))
            low, high, count = lo, hi, n
    out.append((high - low + 1, count))
    return [(min(extent, dim), min(extent, count, dim)) for extent, count in out]


def footprint_bytes(
    accesses: Sequence[Family],
    free: frozenset[int],
    trips: Sequence[int],
    shape: Sequence[int],
    element_bytes: int,
    line: int | None = None,
    boxes_out: list[Box] | None = None,
) -> int:
    """Bytes of one buffer the `accesses` touch while the loops of `free` run and every other loop stays.

    `line` (the rule `lines`): the last axis counts whole lines of that many
    bytes. A rank-0 buffer is one element (one line). `boxes_out` (the rule
    `sets`) receives the box of each group of comparable accesses, for
    `set_load`.
    """
    rank = len(shape)
    last = rank - 1
    groups: dict[tuple[object, ...], tuple[list[set[_Interval]], list[int]]] = {}
    for family in accesses:
        if any(trips[loop] == 0 for loop in family.enclosing):
            continue
        keys: list[object] = []
        boxes: list[_Interval] = []
        single = element_bytes
        for axis, index in enumerate(family.shape):
            dim = shape[axis]
            key, interval = _axis(index, free, trips, dim, family.lanes - 1 if axis == last else 0)
            low, high, count, _ = interval
            keys.append(key)
            boxes.append(interval)
            extent = min(high - low + 1, dim)
            if line and axis == last:
                single = single // element_bytes * _round(extent * element_bytes, line)
            else:
                single *= min(extent, count)
        if line and rank == 0:
            single = _round(element_bytes, line)
        group = groups.get(tuple(keys))
        if group is None:
            group = groups[tuple(keys)] = ([set() for _ in range(rank)], [])
        for axis, (low, high, count, step) in enumerate(boxes):
            group[0][axis].update((low + o, high + o, count, step) for o in family.offsets[axis])
        group[1].append(single * family.members)
    if not groups:
        return 0
    total = 0
    for per_axis, singles in groups.values():
        merged = [_merged(intervals, shape[axis]) for axis, intervals in enumerate(per_axis)]
        box = _union_bytes(merged, element_bytes, line)
        total += min(box, sum(singles))
        if boxes_out is not None:
            boxes_out.append(per_axis)
    whole = [[(dim, dim)] for dim in shape]
    return min(total, _union_bytes(whole, element_bytes, line))


def _union_bytes(merged: list[list[tuple[int, int]]], element_bytes: int, line: int | None) -> int:
    """Bytes of the product of the axes' merged intervals (the last axis in whole lines under `line`)."""
    if not merged:
        return _round(element_bytes, line) if line else element_bytes
    elements = 1
    for axis in merged[:-1]:
        elements *= sum(count for _, count in axis)
    if line:
        return elements * sum(_round(extent * element_bytes, line) for extent, _ in merged[-1])
    return elements * sum(count for _, count in merged[-1]) * element_bytes


# --------------------------------------------------------------------------- cache sets (the rule `sets`)


_Progression = tuple[int, int, int, int]
"""(low, extent, distinct indices, step) of a merged interval along one axis."""
Box = list[set[_Interval]]
"""One group's box: per axis, the intervals of its accesses (merged when `set_load` asks)."""

ENUMERATED_ROWS = 4096
"""Up to this many row starts (per axis, at most one period of the cache), their sets are
enumerated; beyond it the distinct set offsets are bounded by the gcd of the strides."""


@dataclass(frozen=True, slots=True)
class SetGeometry:
    """A cache level's sets as one worker sees them: `sets` sets of `line`-byte lines, `ways` each.

    `ways` is the level's associativity divided among the workers sharing it
    (a float): a worker of two on a shared L3 keeps half of each set.
    """

    sets: int
    line: int
    ways: float


def _progressions(intervals: set[_Interval], dim: int) -> tuple[_Progression, ...]:
    """Merged intervals along one axis with the step of their indices (the gcd of their steps and offsets)."""
    ordered = sorted(intervals)
    out: list[_Progression] = []
    low, high, count, step = ordered[0]
    for lo, hi, n, st in ordered[1:]:
        if lo <= high + 1:
            step = gcd(gcd(step, st), lo - low)
            high = max(high, hi)
            count += n
        else:
            out.append((low, high - low + 1, count, step))
            low, high, count, step = lo, hi, n, st
    out.append((low, high - low + 1, count, step))
    cut: list[_Progression] = []
    for low, extent, count, step in out:
        extent = min(extent, dim)
        low = max(0, min(low, dim - extent))
        cut.append((low, extent, min(extent, count), step))
    return tuple(cut)


def _positions(progressions: tuple[_Progression, ...]) -> tuple[int, int, int]:
    """(first index, distinct indices, step) of one axis's merged intervals taken as one progression."""
    first = progressions[0][0]
    step = 0
    n = 0
    for low, extent, count, st in progressions:
        if extent == 1:  # one index: only its place says anything of the step
            n += 1
            step = gcd(step, low - first)
            continue
        st = st or 1
        n += min(count, (extent - 1) // st + 1)
        step = gcd(gcd(step, st), low - first)
    return first, n, step or 1


@dataclass(frozen=True, slots=True)
class _Rows:
    """A box as rows of bytes: where the first starts, how many, how wide, the bytes from the first row's
    start to the last one's end, and the walks placing the rows (row starts along an axis, byte stride)."""

    start: int
    rows: int
    width: int
    hull: int
    walks: list[tuple[int, int]]


def _rows(intervals: Box, shape: Sequence[int], element_bytes: int) -> _Rows:
    """The runs along the last axis of a box (rank ≥ 1), placed by the outer axes (and by several runs)."""
    rank = len(shape)
    box = [_progressions(per_axis, shape[axis]) for axis, per_axis in enumerate(intervals)]
    stride = element_bytes
    strides = [0] * rank
    for axis in range(rank - 1, -1, -1):
        strides[axis] = stride
        stride *= shape[axis]
    start = 0
    rows = 1
    hull = 0
    walks: list[tuple[int, int]] = []
    for axis in range(rank - 1):
        first, n, step = _positions(box[axis])
        start += first * strides[axis]
        if n > 1:
            walks.append((n, step * strides[axis]))
            rows *= n
            hull += (n - 1) * step * strides[axis]
    runs = box[-1]
    width = max(extent for _, extent, _, _ in runs) * element_bytes
    start += runs[0][0] * element_bytes
    if len(runs) > 1:
        first, n, step = runs[0][0], len(runs), 0
        for low, _, _, _ in runs[1:]:
            step = gcd(step, low - first)
        walks.append((n, step * element_bytes))
        rows *= n
        hull += (runs[-1][0] - first) * element_bytes
    return _Rows(start, rows, width, hull + width, walks)


def _box_load(intervals: Box, shape: Sequence[int], element_bytes: int, geometry: SetGeometry) -> tuple[int, int]:
    """(lines the busiest set of the box needs, lines of the box) at `geometry`."""
    sets, line = geometry.sets, geometry.line
    if len(shape) == 0:
        return 1, 1
    box = _rows(intervals, shape, element_bytes)
    rows, width, hull, walks = box.rows, box.width, box.hull, box.walks
    phase = box.start % line
    hull_lines = -(-(phase + hull) // line)
    if rows * width >= hull:  # no gap: consecutive lines, spread evenly over the sets
        return -(-hull_lines // sets), hull_lines
    per_row = _lines_per_row(box, line)
    lines = min(rows * per_row, hull_lines)
    used = _sets_used(walks, phase, per_row, sets, line)
    return -(-lines // used), lines


def _lines_per_row(box: _Rows, line: int) -> int:
    """The cache lines each run of `box` spans: from its start's offset in a line when every run starts at
    that offset (the walks are whole lines), else at the worst offset the walks allow."""
    phase = box.start % line
    aligned = gcd(line, *(d for _, d in box.walks))
    if aligned == line:
        return -(-(phase + box.width) // line)
    return -(-(box.width + line - gcd(aligned, phase)) // line)


def _sets_used(walks: list[tuple[int, int]], phase: int, per_row: int, sets: int, line: int) -> int:
    """How many sets the rows' lines fall on: rows of `per_row` lines, starts the sums of the walks."""
    way = sets * line
    periods = [(min(n, way // gcd(d, way)), d) for n, d in walks]
    product = 1
    for n, _ in periods:
        product *= n
    if product <= ENUMERATED_ROWS:
        residues = {phase}
        for n, d in periods:
            residues = {(r + m * d) % way for r in residues for m in range(n)}
        starts = sorted({r // line for r in residues})
        if len(starts) == 1:
            return min(per_row, sets)
        used = 0
        for here, there in zip(starts, starts[1:] + [starts[0] + sets]):
            used += min(per_row, there - here)
        return min(used, sets)
    spacing = gcd(way, *(d for _, d in periods))
    offsets = min(product, way // spacing)
    if spacing >= line:
        return min(sets, offsets * min(per_row, spacing // line))
    return min(sets, max(per_row, -(-offsets * spacing // line)))


def combined_load(loads: Iterable[tuple[int, int]], sets: int) -> int:
    """Lines the busiest set needs for several footprints given as (busiest set, lines) each.

    Where each one's lines fall relative to the others' is not known (their
    buffers' addresses, or how two unrelated groups of accesses interleave):
    the busiest set of each is taken to receive, besides its own lines, the
    others' lines spread evenly over all the sets, and the worst of these is
    the load. A footprint concentrated on a few sets so stays concentrated,
    and many small ones do not add up to a conflict.
    """
    pairs = list(loads)
    if len(pairs) == 1:
        return pairs[0][0]
    total = sum(lines for _, lines in pairs)
    return max((load + -(-(total - lines) // sets) for load, lines in pairs), default=0)


def set_load(boxes: Sequence[Box], shape: Sequence[int], element_bytes: int, geometry: SetGeometry) -> tuple[int, int]:
    """(lines the busiest set needs, lines) of one buffer's footprint given as `boxes` (`footprint_bytes`)."""
    loads = [_box_load(box, shape, element_bytes, geometry) for box in boxes]
    if not loads:
        return 0, 0
    return combined_load(loads, geometry.sets), sum(lines for _, lines in loads)


# --------------------------------------------------------------------------- runs a page apart


PAGE = 4096
"""Bytes of the pages a buffer is mapped in (every x86-64 Linux). Of an address only the offset in its page is
the program's (the bits above come from the physical page the kernel gave), and the hardware prefetchers
follow a stream inside a page and stop at its end."""


def scattered_bytes(boxes: Sequence[Box], shape: Sequence[int], element_bytes: int, line: int) -> int:
    """Bytes of the cache lines of a footprint (the `boxes` of `footprint_bytes`) in runs a page or more apart.

    A box whose rows are each on pages of their own, with a gap after each
    (a register tile's column block of an operand read in place, its rows
    4 KiB or more apart), is a run per page that no prefetcher follows: its
    lines arrive at the latency of their level, not at its streaming rate.
    Each run costs its whole lines: a run of 32 bytes (four f64, a [1, 4]
    tile's row of operand 1) waits for a line of 64 as long as a run of 64
    does. Rows closer than a page share their pages, and whole rows read
    one after the other are one stream; neither counts.
    """
    if len(shape) == 0:
        return 0
    total = 0
    for box in boxes:
        rows = _rows(box, shape, element_bytes)
        if rows.rows < 2:
            continue
        stride = min(d for _, d in rows.walks)
        if stride >= PAGE and rows.width < stride:
            total += rows.rows * _lines_per_row(rows, line) * line
    return total


def page_bytes(boxes: Sequence[Box], shape: Sequence[int], element_bytes: int) -> int:
    """Bytes of the pages a footprint (the `boxes` of `footprint_bytes`) lies on, each page counted whole.

    Rows of a box closer than a page share their pages: the rows placed by
    walks shorter than a page are one stretch of memory, from the first's
    start to the last's end, and each walk of a page or more repeats that
    stretch on pages of its own (a register tile's column block of an
    operand read in place, its rows 4 KiB or more apart: a page a row).
    Every stretch is taken to start on a page boundary, so a footprint of
    a few bytes is one page; no box counts more pages than its hull spans,
    nor the footprint more than the buffer's.
    """
    if len(shape) == 0:
        return PAGE
    total = 0
    for box in boxes:
        rows = _rows(box, shape, element_bytes)
        stretch, copies = rows.width, 1
        for n, stride in rows.walks:
            if stride >= PAGE:
                copies *= n
            else:
                stretch += (n - 1) * stride
        total += min(copies * -(-stretch // PAGE), -(-rows.hull // PAGE)) * PAGE
    return min(total, -(-prod(shape) * element_bytes // PAGE) * PAGE)
