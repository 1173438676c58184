"""`psk-fuse-launches`: merge launches of pure parallel nests over one iteration space (PSK-Kernel).

psk-fuse groups an elementwise chain until a value must reach memory: a
value that is also a result, or is read twice, ends a group. AdamW is the
example: m' and v' are results, so the chain becomes three groups (m', v',
p'), three kernels, three launches, and p' reads back the m' and v' that
the two launches before it have just written; 10 arrays cross memory where
7 suffice (p, g, m, v in, p', m', v' out). This pass merges such launches
after the kernels exist, where both the iteration space and the buffers
are explicit:

- A *pure parallel nest* is a kernel whose loops are all parallel, nested
  perfectly, with constant bounds and no running values, and whose memory
  accesses all sit in the innermost body (a kernel without loops is the
  nest of one point).
- Two launches L1 before L2 merge when their kernels are pure parallel
  nests over the same iteration space (bounds and loop attributes equal at
  every depth), they are related (L2 reads a buffer L1 writes, or both read
  one buffer), L2 writes nothing L1 reads or writes, every read of L2 from
  a buffer L1 writes is a read of the very buffer L1 stores, at the
  iteration's own index (`%b[%i, %j]` where the store is), and L1 can move
  down to L2 (no launch in between reads what L1 writes or writes what L1
  reads or writes; views are followed to the buffer they show) or, where L2
  reads what L1 writes, L2 up to L1 (the same of L2); the merged launch
  stands at L2's place, or at L1's when only L2 can move.
- The merged kernel runs, per iteration, L1's body then L2's. Every store
  stays (the buffers L1 writes are still written: results, or read by a
  later launch); each load of L2 from a buffer L1 has just written at the
  same index is replaced by the value L1 stored, which is already in the
  buffer's type: L1 rounds it there (`arith.truncf`, round to nearest even)
  before its store and L2 widens it (`arith.extf`) after its load, so the
  replacement is exactly the memory round trip and the bits are those of
  the separate launches in every realization (f64, f32, bf16 stores).
- The merged kernel is named `k1+k2` with site `s1+s2`; the same pair of
  kernels on the same pattern of buffers (the layers of a fold) shares one
  merged kernel. Kernels no launch uses any more are removed.

It applies until no two launches merge, so chains of any length collapse
pairwise. Counts of launches at the PSK-Realize level (`presk launches`)
are not affected: this pass runs below them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Attribute, Block, SSAValue
from xdsl.passes import ModulePass

from presk.analysis import constant_int
from presk.dialects import psk_kernel as pk
from presk.dialects.psk_kernel import PARALLEL
from presk.passes.host_launches import (
    Launched,
    MergeLaunchPairs,
    erase_unlaunched,
    may_merge,
    root,
)

__all__ = ["FuseLaunches", "MergeLaunches", "PureNest", "pure_nest"]

SCAN_WINDOW = 256
"""How far back (in launches) a launch looks for a partner."""


@dataclass(frozen=True)
class PureNest:
    """A kernel that is a pure parallel nest (see the module docstring)."""

    kernel: pk.KernelOp
    loops: tuple[scf.ForOp, ...]
    """Outermost first."""
    space: tuple[tuple[int, int, int, tuple[tuple[str, Attribute], ...]], ...]
    """Per depth: lower bound, upper bound, step, the loop's attributes."""
    levels: tuple[Block, ...]
    """The kernel body, then each loop's body: `levels[-1]` is the innermost."""
    loads: tuple[memref.LoadOp, ...]
    stores: tuple[memref.StoreOp, ...]

    @property
    def ivs(self) -> list[SSAValue]:
        return [loop.body.block.args[0] for loop in self.loops]

    def at_iteration(self, indices: Sequence[SSAValue], buffer: SSAValue) -> bool:
        """Whether `buffer[indices]` is the iteration's own element (indices = the ivs, shape = the space)."""
        t = buffer.type
        if not isinstance(t, MemRefType) or list(indices) != self.ivs:
            return False
        return list(t.get_shape()) == [ub for lb, ub, step, _ in self.space] and all(
            lb == 0 and step == 1 for lb, _, step, _ in self.space
        )

    def argument_index(self, value: SSAValue) -> int | None:
        args = list(self.kernel.body.block.args)
        return args.index(value) if value in args else None

    def written(self) -> set[int]:
        return {i for s in self.stores if (i := self.argument_index(s.memref)) is not None}

    def read(self) -> set[int]:
        return {i for l in self.loads if (i := self.argument_index(l.memref)) is not None}


_STRAIGHT_LINE = ("arith.", "math.")


def pure_nest(kernel: pk.KernelOp) -> PureNest | None:
    """The kernel as a pure parallel nest, or None if it is not one."""
    block = kernel.body.block
    loops: list[scf.ForOp] = []
    levels: list[Block] = [block]
    while True:
        fors = [op for op in block.ops if isinstance(op, scf.ForOp)]
        if len(fors) > 1:
            return None
        if not fors:
            break
        for op in block.ops:
            if op is fors[0] or isinstance(op, scf.YieldOp):
                continue
            if op.regions or not op.name.startswith(_STRAIGHT_LINE):
                return None  # memory accesses only in the innermost body
        loop = fors[0]
        if PARALLEL not in loop.attributes or loop.iter_args:
            return None
        bounds = [constant_int(v) for v in (loop.lb, loop.ub, loop.step)]
        if any(b is None for b in bounds) or bounds[2] <= 0:  # type: ignore[operator]
            return None
        loops.append(loop)
        block = loop.body.block
        levels.append(block)
    loads: list[memref.LoadOp] = []
    stores: list[memref.StoreOp] = []
    for op in block.ops:
        if op.regions:
            return None
        if isinstance(op, memref.LoadOp):
            loads.append(op)
        elif isinstance(op, memref.StoreOp):
            stores.append(op)
        elif not (op.name.startswith(_STRAIGHT_LINE) or isinstance(op, scf.YieldOp)):
            return None
    args = set(kernel.body.block.args)
    if any(a.memref not in args for a in (*loads, *stores)):
        return None
    space = tuple(
        (
            constant_int(loop.lb),
            constant_int(loop.ub),
            constant_int(loop.step),
            tuple(sorted((k, v) for k, v in loop.attributes.items())),
        )
        for loop in loops
    )
    return PureNest(kernel, tuple(loops), space, tuple(levels), tuple(loads), tuple(stores))  # type: ignore[arg-type]


@dataclass
class MergeLaunches(MergeLaunchPairs[PureNest, dict[int, int]]):
    """Merge pairs of launches of pure nests over one space in a host program, until none merges."""

    def analyse(self, kernel: pk.KernelOp) -> PureNest | None:
        return pure_nest(kernel)

    def reads(self, kernel: pk.KernelOp, analysis: PureNest | None) -> frozenset[int]:
        """The buffers a pure nest loads; all of them for any other kernel."""
        return super().reads(kernel, analysis) if analysis is None else frozenset(analysis.read())

    def tag(self, plan: dict[int, int]) -> tuple[object, ...]:
        return tuple(sorted(plan.items()))

    def build(
        self, first: PureNest, second: PureNest, plan: dict[int, int], positions: list[int], types: list[Attribute],
        take: tuple[bool, bool],
    ) -> pk.KernelOp:  # fmt: skip
        return _merged_kernel(first, second, positions, plan, types)

    # -- legality ------------------------------------------------------------

    def plan(
        self, first: Launched[PureNest], second: Launched[PureNest], between: Sequence[Launched[PureNest]]
    ) -> dict[int, int] | None:
        """For each of L2's loads to replace, the index of L1's store whose value it takes; None: no merge."""
        n1, n2 = first.analysis, second.analysis
        if n1 is None or n2 is None or n1.space != n2.space:
            return None
        if not may_merge(first, second, between):
            return None
        b1, b2 = list(first.op.buffers), list(second.op.buffers)
        written = {b1[i] for i in n1.written()}
        if len({root(v) for v in written}) != len(written):
            return None  # two views of one buffer written: a stored value need not be what memory holds
        stores: dict[SSAValue, list[memref.StoreOp]] = {}
        for s in n1.stores:
            stores.setdefault(b1[n1.argument_index(s.memref)], []).append(s)  # type: ignore[index]
        replaced: dict[int, int] = {}
        for position, load in enumerate(n2.loads):
            host = b2[n2.argument_index(load.memref)]  # type: ignore[index]
            if root(host) not in first.writes:
                continue
            written = stores.get(host)
            if written is None or len(written) != 1:
                return None  # a view of, or a buffer written twice by, L1
            (store,) = written
            if not n1.at_iteration(store.indices, store.memref) or not n2.at_iteration(load.indices, load.memref):
                return None
            replaced[position] = n1.stores.index(store)
        return replaced

    # -- the merged kernel ---------------------------------------------------


def _merged_kernel(
    n1: PureNest, n2: PureNest, positions: Sequence[int], replaced: dict[int, int], types: Sequence[Attribute]
) -> pk.KernelOp:
    """L1's nest with L2's body after L1's at every depth; L2's replaced loads read L1's stored values."""
    k1, k2 = n1.kernel, n2.kernel
    merged = pk.KernelOp(k1.sym_name.data, f"{k1.site.data}+{k2.site.data}", list(types))  # type: ignore[arg-type]
    args = merged.body.block.args
    first: dict[SSAValue, SSAValue] = dict(zip(k1.body.block.args, args))
    for op in k1.body.block.ops:
        merged.body.block.add_op(op.clone(value_mapper=first))
    target = pure_nest(merged)
    assert target is not None
    second: dict[SSAValue, SSAValue] = {a: args[p] for a, p in zip(k2.body.block.args, positions)}
    for iv2, iv in zip(n2.ivs, target.ivs):
        second[iv2] = iv
    skipped = {n2.loads[i]: n1.stores[s] for i, s in replaced.items()}
    for depth, (level, into) in enumerate(zip(n2.levels, target.levels)):
        innermost = depth == len(n2.levels) - 1
        anchor = into.last_op if innermost else target.loops[depth]
        for op in level.ops:
            if isinstance(op, scf.ForOp | scf.YieldOp):
                continue
            if op in skipped:
                second[op.results[0]] = first[skipped[op].value]
                continue
            clone = op.clone(value_mapper=second)
            if anchor is not None and (not innermost or isinstance(anchor, scf.YieldOp)):
                into.insert_op_before(clone, anchor)
            else:
                into.add_op(clone)
    return merged


@dataclass(frozen=True)
class FuseLaunches(ModulePass):
    """Merge consecutive launches of pure parallel nests over one iteration space (see the module)."""

    name = "psk-fuse-launches"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        MergeLaunches(scan_window=SCAN_WINDOW).apply_to(op)
        erase_unlaunched(op)
