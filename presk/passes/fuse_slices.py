"""`psk-fuse-slices`: launches over the same rows run row by row in one kernel, so that a row stays in cache.

LayerNorm is the example. Its forward pass is four kernels (the mean over
the embedding, the centred values and their squares, the variance, the
normalised and scaled result) and its backward pass nine, each reading and
writing whole `[B, T, D]` buffers: the course GPT's are 3 MiB, so each
kernel brings its operands back from L3 or memory, and the thirteen
LayerNorms of a training step spent 61 ms there where PyTorch's fused
kernels spend 20. `psk-fuse-launches` cannot merge them: a reduction has a
running value, and its output has fewer axes than the nests around it.
What they share is their outermost loop, over B: iteration `b` of each
reads and writes only row `b` of the buffers the others read and write,
and inside it, iteration `t` of a block of rows only that block.

- A *sliced kernel* has *leading loops*: its split loop
  (`presk.analysis.split_loop`), then each loop nested alone in the one
  before, beside nothing but index arithmetic; each runs from 0 by 1 to a
  constant, is parallel, and carries no other attribute (the top one may
  state its workers). An argument is sliced by the first `p` of them when
  every use of it is a load or store whose index along axis `j < p` is
  `s_j·t_j + e`, `t_j` the loop's counter and `e` in `[0, s_j)` (a constant,
  or the counter of a loop inside over the block's rows): iteration `t_j`
  covers rows `s_j·t_j` to `s_j·t_j + s_j − 1` of that axis, a block of
  `s_j` rows (8 for a mean's rows summed side by side, 1 for an
  elementwise kernel).
- Two launches L1 before L2 merge at depth `d` when their first `d` leading
  loops cover the same rows (the same trip counts and blocks above the
  last, and at the last the same rows, in blocks of equal size or one of
  them 1), their top loops carry the same attributes, they are related (L2
  reads what L1 writes, or both read one buffer), L2 writes nothing L1
  reads or writes, every buffer L1 writes and L2 reads is passed to both
  as itself (not a view) and sliced by `d` loops in both kernels, and L1
  can move down to L2 (no launch in between reads what L1 writes or writes
  what L1 reads or writes; views are followed to the buffer they show) or,
  where L2 reads what L1 writes, L2 up to L1 (the same of L2); the merged
  launch stands at L2's place, or at L1's when only L2 can move.
  Iteration `t` of L2 then reads only rows iteration `t` of L1 wrote, which
  no other iteration of L1 writes. The deepest such `d` is taken, but never
  the level where both kernels' innermost bodies would meet (that is
  `psk-fuse-launches`' merge).
- The merged kernel keeps the loops of the kernel with the larger block at
  depth `d`; in its loop at depth `d` L1's body runs, then L2's, the one of
  block 1 in a loop over the block's rows. Every load and store stays: the
  same operations on the same values in the same order per element, so the
  bits are those of the separate launches; only the time between a row's
  store and its load shrinks. The split loop stays parallel: rows are
  independent in both kernels.
- A merge happens only while one iteration's data fits the private cache
  (`Machine.private_cache`, L2 on x86-64; 256 KiB where the OS describes
  none): a sliced argument counts its block of rows, any other its whole
  size, since every iteration may read all of it. Beyond that a row would
  leave the cache before the next body reads it, and merging gains nothing.
- The merged kernel is named `k1+k2` with site `s1+s2`, built once per pair
  of kernels, pattern of buffers and depth (the layers of a fold share it).

It runs after `psk-fuse-launches` (which merges whole nests and forwards
values between them) and applies until no two launches merge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from presk.analysis import STORE_OPS, affine_index, constant_int, split_loop, trip_count
from presk.dialects import psk_kernel as pk
from presk.dialects.psk_kernel import PARALLEL, WORKERS
from presk.lowering.llvm.irtypes import buffer_bytes
from presk.passes.host_launches import (
    Launched,
    MergeLaunchPairs,
    erase_unlaunched,
    may_merge,
    root,
)
from presk.target import Machine, target_machine

__all__ = ["FuseSlices", "MergeSlices", "SlicedKernel", "sliced_kernel"]

SCAN_WINDOW = 64
"""How far back (in launches) a launch looks for a partner."""

UNKNOWN_PRIVATE_CACHE = 256 * 1024
"""The budget where the OS describes no cache private to a core (a container without `/sys`'s cache
files): the smallest L2 of the x86-64 cores in use, so that rows any of them would keep still merge."""

_ACCESS_OPS = ("memref.load", "vector.load", *STORE_OPS)


@dataclass(frozen=True)
class SlicedKernel:
    """A kernel read as blocks of rows over its leading loops (see the module docstring)."""

    kernel: pk.KernelOp
    loops: tuple[scf.ForOp, ...]
    """The leading loops, outermost first: the split loop, then each loop alone in the one before."""
    trips: tuple[int, ...]
    steps: tuple[int, ...]
    """Per leading loop, the rows of its axis one iteration covers (`s` in the index `s·t + c`)."""
    prefixes: tuple[int, ...]
    """Per argument, how many leading loops it is sliced by: every access's index along axis `j < prefix`
    is `steps[j]·t_j + c` with `0 <= c < steps[j]`."""
    unused: frozenset[int]
    """Arguments the kernel never accesses (a merged kernel's buffer whose loads were forwarded)."""
    innermost: bool
    """Whether the last leading loop holds no loop (its body is the nest's innermost)."""

    def rows(self, depth: int) -> int:
        return self.trips[depth] * self.steps[depth]

    def innermost_at(self, depth: int) -> bool:
        """Whether merging at `depth` would put this kernel's innermost body beside the other's."""
        return self.innermost and depth == len(self.loops)


def _is_row_loop(op: scf.ForOp, top: bool) -> bool:
    """A parallel loop from 0 by 1 to a constant; the top one may state its workers (`psk-split`)."""
    allowed = {PARALLEL, WORKERS} if top else {PARALLEL}
    return (
        PARALLEL in op.attributes and set(op.attributes) <= allowed and not op.iter_args
        and constant_int(op.lb) == 0 and constant_int(op.step) == 1 and trip_count(op) is not None
    )  # fmt: skip


def _leading_loops(kernel: pk.KernelOp) -> list[scf.ForOp]:
    """The split loop and the loops nested alone below it, beside nothing but index arithmetic."""
    loop = split_loop(kernel)
    if loop is None or not _is_row_loop(loop, top=True):
        return []
    if any(op is not loop and not _is_arith(op) for op in kernel.body.block.ops):
        return []
    loops = [loop]
    while True:
        body = [op for op in loops[-1].body.block.ops if not isinstance(op, scf.YieldOp)]
        inner = [op for op in body if isinstance(op, scf.ForOp)]
        if len(inner) != 1 or not _is_row_loop(inner[0], top=False) or any(op is not inner[0] and not _is_arith(op) for op in body):
            return loops
        loops.append(inner[0])


def _is_arith(op: Operation) -> bool:
    return op.name.startswith("arith.") and not op.regions


def _access_steps(
    use_op: Operation, arg: SSAValue, ivs: Sequence[SSAValue], memos: dict[tuple[SSAValue, ...], dict[SSAValue, Any]],
    ranges: dict[scf.ForOp, tuple[int, int] | None],
) -> list[int] | None:
    """Per leading axis (as far as it goes), the `s` of the access's index `s·t_j + e`, `e` in `[0, s)`.

    `e` is a constant, or an affine form of the counters of loops inside the
    leading ones (a merged kernel's loop over the rows of a block) whose
    range lies in `[0, s)`. None: `use_op` is not a load or store of `arg`.
    """
    if use_op.name not in _ACCESS_OPS:
        return None
    position = 1 if use_op.name in STORE_OPS else 0
    operands = use_op.operands
    if operands[position] is not arg or arg in operands[:position] or arg in operands[position + 1 :]:
        return None
    inner: list[tuple[SSAValue, int, int]] = []  # counters of loops inside the leading ones: (counter, first, last)
    parent = use_op.parent_op()
    while isinstance(parent, scf.ForOp) and parent.body.block.args[0] not in ivs:
        if parent not in ranges:
            lb, step, trips = constant_int(parent.lb), constant_int(parent.step), trip_count(parent)
            ranges[parent] = None if lb is None or step is None or not trips else (lb, lb + (trips - 1) * step)
        span = ranges[parent]
        if span is None:
            break
        inner.append((parent.body.block.args[0], *span))
        parent = parent.parent_op()
    counters = (*ivs, *(counter for counter, _, _ in inner))
    memo = memos.setdefault(counters, {})
    found: list[int] = []
    for depth, index in enumerate(operands[position + 1 : position + 1 + len(ivs)]):
        form = affine_index(index, counters, memo)
        if form is None:
            break
        coefs, const = form
        s = coefs[depth]
        low = const + sum(min(a * first, a * last) for a, (_, first, last) in zip(coefs[len(ivs) :], inner))
        high = const + sum(max(a * first, a * last) for a, (_, first, last) in zip(coefs[len(ivs) :], inner))
        if s < 1 or any(c for j, c in enumerate(coefs[: len(ivs)]) if j != depth) or low < 0 or high >= s:
            break
        found.append(s)
    return found


def sliced_kernel(kernel: pk.KernelOp) -> SlicedKernel | None:
    """`kernel` read as blocks of rows, or None if it has no split loop to slice by."""
    loops = _leading_loops(kernel)
    if not loops:
        return None
    ivs = [loop.body.block.args[0] for loop in loops]
    per_arg: list[list[int]] = []
    unused: set[int] = set()
    memos: dict[tuple[SSAValue, ...], dict[SSAValue, Any]] = {}  # the index forms found, per set of counters
    ranges: dict[scf.ForOp, tuple[int, int] | None] = {}  # each inner loop's first and last counter value
    for arg in kernel.body.block.args:
        steps: list[int] | None = None
        for use in arg.uses:
            found = _access_steps(use.operation, arg, ivs, memos, ranges)
            if found is None:
                steps = []
                break
            steps = found if steps is None else steps[: _common(steps, found)]
        per_arg.append(steps if steps is not None else [])
        if steps is None:  # never accessed: sliced as deep as the loops go
            unused.add(len(per_arg) - 1)
    kernel_steps: list[int] = []
    for depth in range(len(loops)):  # the kernel's step: the largest its arguments use; the others stop here
        candidates = [steps[depth] for steps in per_arg if len(steps) > depth]
        kernel_steps.append(max(candidates, default=1))
    prefixes = []
    for i, steps in enumerate(per_arg):
        n = len(loops) if i in unused else 0
        while n < len(steps) and steps[n] == kernel_steps[n]:
            n += 1
        prefixes.append(n)
    innermost = not any(isinstance(op, scf.ForOp) for op in loops[-1].body.block.ops)
    trips = tuple(trip_count(loop) or 0 for loop in loops)
    return SlicedKernel(
        kernel, tuple(loops), trips, tuple(kernel_steps), tuple(prefixes), frozenset(unused), innermost,
    )


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the common prefix of `a` and `b`."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@dataclass
class MergeSlices(MergeLaunchPairs[SlicedKernel, int]):
    """Merge pairs of launches of sliced kernels in a host program, until no pair merges; the plan is the depth."""

    budget: int = 0
    """Bytes one iteration of a merged kernel may touch (the private cache)."""

    def analyse(self, kernel: pk.KernelOp) -> SlicedKernel | None:
        return sliced_kernel(kernel)

    def plan(
        self, first: Launched[SlicedKernel], second: Launched[SlicedKernel], between: Sequence[Launched[SlicedKernel]]
    ) -> int | None:
        """The deepest level L1 and L2 merge at within the budget, or None."""
        s1, s2 = first.analysis, second.analysis
        if s1 is None or s2 is None or not may_merge(first, second, between):
            return None
        flowing = second.reads & first.writes
        for depth in range(min(len(s1.loops), len(s2.loops)), 0, -1):
            if s1.innermost_at(depth) and s2.innermost_at(depth):
                continue  # two innermost bodies: psk-fuse-launches' merge, which forwards the values
            if self._aligned(first, second, flowing, depth) and self._row_bytes(first, second, depth) <= self.budget:
                return depth
        return None

    def tag(self, plan: int) -> tuple[object, ...]:
        return (plan,)

    takes_ops = True

    def build(
        self, first: SlicedKernel, second: SlicedKernel, plan: int, positions: list[int], types: list[Attribute],
        take: tuple[bool, bool],
    ) -> pk.KernelOp:  # fmt: skip
        return _merged_kernel(first, second, positions, types, plan, take)  # type: ignore[arg-type]

    @staticmethod
    def _aligned(first: Launched[SlicedKernel], second: Launched[SlicedKernel], flowing: set[SSAValue], depth: int) -> bool:
        """Whether one iteration of the merged loops at `depth` covers the same rows in both kernels, and every
        buffer L1 writes and L2 reads is sliced down to it in both, so that L2 reads what the same iteration wrote."""
        s1, s2 = first.analysis, second.analysis
        assert s1 is not None and s2 is not None
        if s1.loops[0].attributes != s2.loops[0].attributes:
            return False  # workers stated by one layout and not the other, or other workers
        for j in range(depth - 1):
            if s1.trips[j] != s2.trips[j] or s1.steps[j] != s2.steps[j]:
                return False
        last = depth - 1
        if s1.rows(last) != s2.rows(last) or (s1.steps[last] != s2.steps[last] and min(s1.steps[last], s2.steps[last]) != 1):
            return False
        for launch, slices in ((first, s1), (second, s2)):
            for i, value in enumerate(launch.op.buffers):
                if root(value) in flowing and (value is not root(value) or slices.prefixes[i] < depth):
                    return False
        return True

    @staticmethod
    def _row_bytes(first: Launched[SlicedKernel], second: Launched[SlicedKernel], depth: int) -> int:
        """What one iteration of the merged loops touches: each buffer once, at its larger footprint."""
        bytes_of: dict[SSAValue, int] = {}
        for launch in (first, second):
            slices = launch.analysis
            assert slices is not None
            for i, value in enumerate(launch.op.buffers):
                t = value.type
                assert isinstance(t, MemRefType)
                share = 0 if i in slices.unused else buffer_bytes(t)
                for j in range(min(depth, slices.prefixes[i])):
                    rows = slices.rows(j)
                    block = max(first.analysis.steps[j], second.analysis.steps[j])  # type: ignore[union-attr]
                    share = share * block // rows
                bytes_of[value] = max(bytes_of.get(value, 0), share)
        return sum(bytes_of.values())


class _Ops:
    """How one kernel's ops reach the merged kernel: copied with their values mapped, or, for a kernel taken
    (`MergeLaunchPairs.taken`), the ops themselves, their uses of the old values pointed at the new ones."""

    def __init__(self, take: bool) -> None:
        self.take = take
        self.mapping: dict[SSAValue, SSAValue] = {}

    def map(self, old: SSAValue, new: SSAValue) -> None:
        if self.take:
            old.replace_all_uses_with(new)
        else:
            self.mapping[old] = new

    def put(self, op: Operation) -> Operation:
        if self.take:
            op.detach()
            return op
        return op.clone(value_mapper=self.mapping)


def _merged_kernel(
    s1: SlicedKernel, s2: SlicedKernel, positions: Sequence[int], types: Sequence[MemRefType], depth: int,
    take: tuple[bool, bool] = (False, False),
) -> pk.KernelOp:  # fmt: skip
    """The kernel of larger step at the merge level keeps its loops; the other's ops join them there.

    The other's index arithmetic beside its outer loops goes before the kept
    loops at the same level; its body at the merge level goes first (it is
    L1) or last (it is L2) in the kept loop's body, inside a loop over the
    rows of the block when its step there is 1 and the kept one's larger.
    `take` (L1's, L2's): move that kernel's ops rather than copy them.
    """
    last = depth - 1
    base_is_first = s1.steps[last] >= s2.steps[last]
    base, other = (s1, s2) if base_is_first else (s2, s1)
    base_ops, other_ops = (_Ops(take[0]), _Ops(take[1])) if base_is_first else (_Ops(take[1]), _Ops(take[0]))
    base_positions = list(range(len(s1.kernel.body.block.args))) if base_is_first else list(positions)
    other_positions = list(positions) if base_is_first else list(range(len(s1.kernel.body.block.args)))
    merged = pk.KernelOp("merged", f"{s1.kernel.site.data}+{s2.kernel.site.data}", list(types))
    args = merged.body.block.args
    for a, p in zip(base.kernel.body.block.args, base_positions):
        base_ops.map(a, args[p])
    for op in list(base.kernel.body.block.ops):
        merged.body.block.add_op(base_ops.put(op))
    loops = _leading_loops(merged)
    for a, p in zip(other.kernel.body.block.args, other_positions):
        other_ops.map(a, args[p])
    levels = [other.kernel.body.block, *(loop.body.block for loop in other.loops[:last])]
    targets = [merged.body.block, *(loop.body.block for loop in loops[:last])]
    for j, (level, into) in enumerate(zip(levels, targets)):
        if j > 0:
            other_ops.map(other.loops[j - 1].body.block.args[0], loops[j - 1].body.block.args[0])
        for op in list(level.ops):
            if op is not other.loops[j] and not isinstance(op, scf.YieldOp):
                into.insert_op_before(other_ops.put(op), loops[j])
    if depth > 1:
        other_ops.map(other.loops[last - 1].body.block.args[0], loops[last - 1].body.block.args[0])
    body = loops[last].body.block
    anchor = body.first_op if not base_is_first else body.last_op
    assert anchor is not None
    counter = loops[last].body.block.args[0]
    strip = base.steps[last] // other.steps[last]
    if strip > 1:  # rows strip·t .. strip·t + strip - 1, one at a time
        width = arith.ConstantOp.from_int_and_width(strip, IndexType())
        zero = arith.ConstantOp.from_int_and_width(0, IndexType())
        one = arith.ConstantOp.from_int_and_width(1, IndexType())
        inner = Block(arg_types=[IndexType()])
        row_loop = scf.ForOp(zero, width, one, [], Region(inner))
        row_loop.attributes[PARALLEL] = other.loops[last].attributes[PARALLEL]
        for op in (width, zero, one, row_loop):
            body.insert_op_before(op, anchor)
        start = arith.MuliOp(counter, width)
        row = arith.AddiOp(start, inner.args[0])
        inner.add_ops([start, row])
        other_ops.map(other.loops[last].body.block.args[0], row.result)
        into, before = inner, None
    else:
        other_ops.map(other.loops[last].body.block.args[0], counter)
        into, before = body, anchor
    for op in list(other.loops[last].body.block.ops):
        if isinstance(op, scf.YieldOp):
            continue
        clone = other_ops.put(op)
        if before is None:
            into.add_op(clone)
        else:
            into.insert_op_before(clone, before)
    if strip > 1:
        inner.add_op(scf.YieldOp())
    return merged


@dataclass(frozen=True)
class FuseSlices(ModulePass):
    """Merge launches of kernels over the same rows into one kernel that runs them row by row (see the module)."""

    name = "psk-fuse-slices"

    budget: int | None = None
    """Bytes an iteration may touch; default: the target's private cache."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        budget = self.budget if self.budget is not None else _private_cache_bytes(target_machine())
        MergeSlices(budget=budget, scan_window=SCAN_WINDOW).apply_to(op)
        erase_unlaunched(op)


def _private_cache_bytes(machine: Machine) -> int:
    cache = machine.private_cache
    return cache.size if cache is not None else UNKNOWN_PRIVATE_CACHE
