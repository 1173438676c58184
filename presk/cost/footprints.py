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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Access", "Affine", "Family", "Index", "Opaque", "families", "footprint_bytes"]


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


_Interval = tuple[int, int, int]
"""(low, high, distinct indices) of one access along one axis."""


def _axis(index: Index, free: frozenset[int], trips: Sequence[int], dim: int, extra: int) -> tuple[object, _Interval]:
    """The comparability key and the interval of one index over the free loops."""
    if type(index) is Affine:
        low = high = index.const
        count = 1
        fixed: list[tuple[int, int]] = []
        for loop, coef in index.coefs:
            if loop in free:
                span = coef * (trips[loop] - 1)
                if span > 0:
                    high += span
                else:
                    low += span
                count *= trips[loop]
            else:
                fixed.append((loop, coef))
        return tuple(fixed), (low, high + extra, count * (extra + 1))
    assert isinstance(index, Opaque)
    if index.deps & free:
        return "whole", (0, dim - 1, dim)
    return ("opaque", index.key), (0, extra, extra + 1)


def _round(nbytes: int, line: int) -> int:
    return -(-nbytes // line) * line


def _merged(intervals: set[_Interval], dim: int) -> list[tuple[int, int]]:
    """Merged intervals along one axis: (extent, distinct indices), each cut to the axis's extent."""
    ordered = sorted(intervals)
    out: list[tuple[int, int]] = []
    low, high, count = ordered[0]
    for lo, hi, n in ordered[1:]:
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
) -> int:
    """Bytes of one buffer the `accesses` touch while the loops of `free` run and every other loop stays.

    `line` (the rule `lines`): the last axis counts whole lines of that many
    bytes. A rank-0 buffer is one element (one line).
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
            key, (low, high, count) = _axis(index, free, trips, dim, family.lanes - 1 if axis == last else 0)
            keys.append(key)
            boxes.append((low, high, count))
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
        for axis, (low, high, count) in enumerate(boxes):
            group[0][axis].update((low + o, high + o, count) for o in family.offsets[axis])
        group[1].append(single * family.members)
    if not groups:
        return 0
    total = 0
    for per_axis, singles in groups.values():
        merged = [_merged(intervals, shape[axis]) for axis, intervals in enumerate(per_axis)]
        box = _union_bytes(merged, element_bytes, line)
        total += min(box, sum(singles))
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
