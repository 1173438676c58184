"""What the passes that rewrite a host program's launches share (`psk-share-launches`, `psk-fuse-launches`,
`psk-fuse-slices`): the buffer a host value shows, the search for pairs of launches to merge, and one launch
of a merged kernel in place of two."""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from presk.analysis import written_buffers
from presk.dialects import psk_kernel as pk
from presk.passes.kernel_layout import unique_name

__all__ = [
    "Launched", "MergeLaunchPairs", "add_merged_kernel", "elements", "erase_unlaunched", "kernels_beside",
    "launch_in_place_of", "may_merge", "merged_buffers", "moves_past", "rewrite_host_programs", "root",
]  # fmt: skip

Analysis = TypeVar("Analysis")
Plan = TypeVar("Plan")


def root(value: SSAValue) -> SSAValue:
    """The buffer a host value shows (views followed to their source)."""
    while isinstance(value.owner, pk.ViewOp):
        value = value.owner.source
    return value


def elements(value: SSAValue) -> int:
    """Elements of a buffer (1 for a rank-0 one)."""
    count = 1
    for size in value.type.get_shape():  # type: ignore[attr-defined]
        count *= size
    return count


def kernels_beside(host: pk.HostOp) -> dict[str, pk.KernelOp]:
    """The kernels of the module that holds `host`, by name."""
    module = host.parent_op()
    if not isinstance(module, ModuleOp):
        return {}
    return {k.sym_name.data: k for k in module.body.block.ops if isinstance(k, pk.KernelOp)}


def merged_buffers(first: pk.LaunchOp, second: pk.LaunchOp) -> tuple[list[SSAValue], list[int]]:
    """The merged launch's buffers (L1's, then those of L2 that L1 does not pass), and the place of each of L2's."""
    values = list(first.buffers)
    positions: list[int] = []
    for v in second.buffers:
        if v not in values:
            values.append(v)
        positions.append(values.index(v))
    return values, positions


def add_merged_kernel(
    merged: pk.KernelOp, first: str, second: str, kernels: dict[str, pk.KernelOp], host: pk.HostOp,
    rewriter: PatternRewriter,
) -> str:  # fmt: skip
    """`merged` named `first+second` (made unique), placed before the host program; its name."""
    name = unique_name(f"{first}+{second}", kernels)
    merged.sym_name = StringAttr(name)
    rewriter.insert(merged, InsertPoint.before(host))
    kernels[name] = merged
    return name


def launch_in_place_of(
    first: pk.LaunchOp, second: pk.LaunchOp, name: str, values: list[SSAValue], rewriter: PatternRewriter,
    at_second: bool = True,
) -> pk.LaunchOp:
    """One launch of `name` on `values` where L2 was (else where L1 was), at the site `s1+s2`; L1 and L2 erased.

    In L1's place, the allocations and views of L2's buffers that come after L1 move up before it (an
    allocation is a fresh buffer wherever it stands)."""
    site = f"{first.attributes['site'].data}+{second.attributes['site'].data}"  # type: ignore[attr-defined]
    if not at_second:
        _define_before(first, second, values, rewriter)
    launch = pk.LaunchOp(name, values, site)
    rewriter.insert(launch, InsertPoint.before(second if at_second else first))
    rewriter.erase(second)
    rewriter.erase(first)
    return launch


def _define_before(first: pk.LaunchOp, second: pk.LaunchOp, values: list[SSAValue], rewriter: PatternRewriter) -> None:
    """Move the allocations and views of `values` that stand between L1 and L2 before L1, in their order.

    The ops move themselves, so their values stay the same objects: the other launches' read and write sets,
    kept by the search, still name them."""
    block = first.parent_block()
    assert block is not None
    between: list[Operation] = []
    inside = False
    for op in block.ops:
        if op is second:
            break
        if inside:
            between.append(op)
        inside = inside or op is first
    needed: set[Operation] = set()

    def needs(value: SSAValue) -> None:
        owner = value.owner
        if isinstance(owner, Operation) and owner in between and owner not in needed:
            assert isinstance(owner, pk.AllocOp | pk.ViewOp)
            needed.add(owner)
            for operand in owner.operands:
                needs(operand)

    for value in values:
        needs(value)
    for op in between:
        if op in needed:
            block.detach_op(op)
            rewriter.insert(op, InsertPoint.before(first))


def rewrite_host_programs(module: ModuleOp, pattern: RewritePattern) -> None:
    """Apply `pattern` to each host program of the module, once (its match makes every change it can).

    Through a rewriter on the host program itself rather than a walker: a
    walker would try the pattern on every op of every kernel too, tens of
    thousands in a training step, for nothing.
    """
    for host in [op for op in module.body.block.ops if isinstance(op, pk.HostOp)]:
        pattern.match_and_rewrite(host, PatternRewriter(host))


def erase_unlaunched(module: ModuleOp) -> None:
    """Remove the kernels no launch of the module uses any more."""
    launched = {l.kernel.string_value() for l in module.walk() if isinstance(l, pk.LaunchOp)}
    for k in [k for k in module.body.block.ops if isinstance(k, pk.KernelOp)]:
        if k.sym_name.data not in launched:
            k.detach()
            k.erase()


@dataclass
class Launched(Generic[Analysis]):
    """One launch of a host program, with its kernel's analysis and the buffers (roots) it reads and writes."""

    op: pk.LaunchOp
    kernel: pk.KernelOp
    analysis: Analysis | None
    reads: set[SSAValue]
    writes: set[SSAValue]


@dataclass
class MergeLaunchPairs(RewritePattern, Generic[Analysis, Plan]):
    """Merge pairs of launches of a host program, the first pair first, until no pair merges.

    A subclass says what it knows of a kernel (`analyse`), which buffers a
    launch reads (`reads`), whether and how L1 merges into L2 across the
    launches between them (`plan`), and builds the merged kernel (`build`).
    All merges happen in one match (`rewrite_host_programs` applies it once
    to each host program): a merge changes only the host program, and a
    walker asked to apply the pattern again would walk every kernel of the
    module after each one (the training step's 125 merges took 20 s that
    way). The merged launch takes L2's place, or L1's where L1 may not move
    down past the launches between them but L2 may move up (`may_merge`).
    A merge of L1 (position a) with L2 leaves the pairs whose second launch
    comes before a as they were, and they had no partner, so the search
    resumes at a: the pairs found, and their order, are those of a search
    from the start.

    A chain of merges (L1 with L2, that with L3, ...) would copy each merged
    kernel into the next, so the copies grow with the square of the chain:
    in the course GPT's gradient nine tenths of the ops `psk-fuse-slices`
    copied were those of its own merged kernels. Where a subclass's `build`
    can take a kernel's ops instead of copying them (`takes_ops`), a merged
    kernel this pattern built and that only the launch being merged runs
    gives its ops to the next one (`taken`). It is built again from its
    recipe where a later merge or launch needs it (`_materialized`; the
    layers of a fold reuse the kernels of the first), so the kernels the
    pattern leaves are those copying would have left, op for op.
    """

    takes_ops: ClassVar[bool] = False
    """Whether `build` honours `take`: it moves the ops of the kernels it is told to take."""

    merged: dict[tuple[object, ...], str] = field(default_factory=dict)
    """(kernel names, buffer pattern, plan) → the merged kernel already built for it."""
    analyses: dict[pk.KernelOp, tuple[Analysis | None, frozenset[int], frozenset[int]]] = field(default_factory=dict)
    """Each kernel's analysis and the arguments it reads and writes (kernels do not change; merged ones are new
    ops)."""
    scan_window: int = 256
    """How far back (in launches) a launch looks for a partner."""
    recipes: dict[str, tuple[str, str, Plan, list[int], list[Attribute]]] = field(default_factory=dict)
    """Each merged kernel built, by name: the kernels it merges, the plan, L2's buffer positions, the buffer types."""
    taken: set[str] = field(default_factory=set)
    """Merged kernels whose ops a later merge took: their op is an empty shell until `_materialized`."""

    @abstractmethod
    def analyse(self, kernel: pk.KernelOp) -> Analysis | None:
        """What the subclass knows of a kernel; None: its launches never merge as L2."""

    def reads(self, kernel: pk.KernelOp, analysis: Analysis | None) -> frozenset[int]:
        """The arguments the kernel reads: all of them, unless a subclass knows better."""
        return frozenset(range(len(kernel.body.block.args)))

    @abstractmethod
    def plan(self, first: Launched[Analysis], second: Launched[Analysis], between: Sequence[Launched[Analysis]]) -> Plan | None:
        """How L1 merges into L2 across the launches `between` them; None: it does not."""

    @abstractmethod
    def tag(self, plan: Plan) -> tuple[object, ...]:
        """What of a merge's plan, besides the kernels and buffers, tells its merged kernel apart from others'."""

    @abstractmethod
    def build(self, first: Analysis, second: Analysis, plan: Plan, positions: list[int], types: list[Attribute],
              take: tuple[bool, bool]) -> pk.KernelOp:  # fmt: skip
        """The merged kernel of L1's and L2's (built once per kernels, buffer pattern and `tag`); where `take`
        says so and `takes_ops` is set, with the kernel's own ops rather than copies."""

    def apply_to(self, module: ModuleOp) -> None:
        """Merge in each host program of `module`, then build again the taken kernels a launch still runs."""
        rewrite_host_programs(module, self)
        kernels = {k.sym_name.data: k for k in module.body.block.ops if isinstance(k, pk.KernelOp)}
        launched = {l.kernel.string_value() for l in module.walk() if isinstance(l, pk.LaunchOp)}
        for name in sorted(launched & self.taken):
            self._materialized(name, kernels)

    def _analysed(self, k: pk.KernelOp) -> tuple[Analysis | None, frozenset[int], frozenset[int]]:
        if k not in self.analyses:
            analysis = self.analyse(k)
            self.analyses[k] = (analysis, self.reads(k, analysis), written_buffers(k))
        return self.analyses[k]

    def _materialized(self, name: str, kernels: dict[str, pk.KernelOp]) -> pk.KernelOp:
        """The kernel `name` with its ops: a taken one is built again from its recipe, in its shell's place.

        The kernels it merges that were taken too are built again only for it, so it takes their ops again: a
        chain is built once more, not once per link."""
        if name not in self.taken:
            return kernels[name]
        n1, n2, plan, positions, types = self.recipes[name]
        take = tuple(n in self.taken and n1 != n2 for n in (n1, n2))
        first, second = (self._analysed(self._materialized(n, kernels))[0] for n in (n1, n2))
        kernel = self.build(first, second, plan, positions, types, take)  # type: ignore[arg-type]
        self.taken.update(n for n, took in zip((n1, n2), take) if took)
        kernel.sym_name = StringAttr(name)
        shell = kernels[name]
        block = shell.parent_block()
        assert block is not None
        block.insert_op_before(kernel, shell)
        shell.detach()
        shell.erase(safe_erase=False)
        self.analyses.pop(shell, None)
        self.taken.discard(name)
        kernels[name] = kernel
        return kernel

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: pk.HostOp, rewriter: PatternRewriter) -> None:
        kernels = kernels_beside(op)

        def launched(l: pk.LaunchOp) -> Launched[Analysis]:
            k = kernels[l.kernel.string_value()]
            analysis, reads, writes = self._analysed(k)
            buffers = list(l.buffers)
            return Launched(l, k, analysis, {root(buffers[i]) for i in reads}, {root(buffers[i]) for i in writes})

        launches = [
            launched(l) for l in op.body.block.ops if isinstance(l, pk.LaunchOp) and l.kernel.string_value() in kernels
        ]
        uses = Counter(l.op.kernel.string_value() for l in launches)  # launches of each kernel in this host program
        start = 0
        while (pair := self._first_pair(launches, start)) is not None:
            a, b, plan = pair
            first, second = launches[a], launches[b]
            values, positions = merged_buffers(first.op, second.op)
            k1, k2 = first.op.kernel.string_value(), second.op.kernel.string_value()
            key = (k1, k2, tuple(positions), len(values), self.tag(plan))
            name = self.merged.get(key)
            if name is None:
                take = tuple(self.takes_ops and k in self.recipes and uses[k] == 1 and k1 != k2 for k in (k1, k2))
                shells = k1 in self.taken or k2 in self.taken  # then `_materialized` builds kernels again
                analyses = [self._analysed(self._materialized(k, kernels))[0] for k in (k1, k2)]
                types = [v.type for v in values]
                merged = self.build(*analyses, plan, positions, types, take)  # type: ignore[arg-type]
                name = self.merged[key] = add_merged_kernel(merged, k1, k2, kernels, op, rewriter)
                self.recipes[name] = (k1, k2, plan, positions, types)
                self.taken.update(k for k, took in zip((k1, k2), take) if took)
                if shells:  # a launch whose kernel was built again reads the new one
                    for i, l in enumerate(launches):
                        if kernels[l.op.kernel.string_value()] is not l.kernel:
                            launches[i] = launched(l.op)
                    first, second = launches[a], launches[b]
            uses[k1] -= 1
            uses[k2] -= 1
            uses[name] += 1
            down = moves_past(first, launches[a + 1 : b])  # else L2 moves up (`may_merge`)
            merged_launch = launched(launch_in_place_of(first.op, second.op, name, values, rewriter, at_second=down))
            launches[b if down else a] = merged_launch
            del launches[a if down else b]
            start = a

    def _first_pair(self, launches: Sequence[Launched[Analysis]], start: int) -> tuple[int, int, Plan] | None:
        """The first launch from `start` on with a partner before it (the nearest), and the merge's plan."""
        for b in range(start, len(launches)):
            if launches[b].analysis is None:
                continue
            for a in range(b - 1, max(-1, b - 1 - self.scan_window), -1):
                plan = self.plan(launches[a], launches[b], launches[a + 1 : b])
                if plan is not None:
                    return a, b, plan
        return None


def moves_past(launch: Launched[Any], between: Sequence[Launched[Any]]) -> bool:
    """Whether `launch` may run on the other side of the launches `between`: none of them writes what it reads
    or writes, or reads what it writes."""
    return not any(other.writes & (launch.reads | launch.writes) or other.reads & launch.writes for other in between)


def may_merge(first: Launched[Any], second: Launched[Any], between: Sequence[Launched[Any]]) -> bool:
    """Whether L1 and L2 may run as one launch: they are related (L2 reads what L1 writes, or both read a buffer
    of more than one element; else nothing is saved), L2 writes nothing L1 reads or writes, and L1 may run in
    L2's place, just before it, or L2 in L1's place, just after it (`moves_past` the launches between).

    L2 moves up only to read what L1 writes. Two launches that merely read one buffer would gain one read of it,
    and L2's results would be made that much earlier and held until their readers: a recomputed LayerNorm x̂ of
    the backward pass (`psk-autodiff`) moved up into the forward pass's kernel is a whole buffer kept across
    the step, which is what recomputing it was for not to keep."""
    flows = bool(second.reads & first.writes)
    shared = {r for r in second.reads & first.reads if elements(r) > 1}
    if not (flows or shared) or second.writes & (first.reads | first.writes):
        return False
    return moves_past(first, between) or (flows and moves_past(second, between))
