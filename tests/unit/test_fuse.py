"""`psk-fuse` against the seed's definition of a fusion group, checked from the IR it prints.

The checker here is independent of the pass and of the `psk_realize.group`
verifier: it knows the primitives by their op names, reads each function
after the pass, and asserts

- the seed's three conditions on every group: every member is an
  elementwise primitive; every member has the group's result type; every
  interior member (every member but the root) is read only by members;
- the cap (at most `max-nodes`, 64 by default, members) and the pow rule
  (`pow n` with n > 2 joins no group: it is a group of its own);
- that the partition covers the function: no elementwise primitive or
  launching primitive is left outside a launch, every launching primitive is
  the single member of a `psk_realize.nest`, and the function, seen through
  its launches, is the same dataflow graph as before the pass (so every
  elementwise op is in exactly one group, and nothing was added, dropped or
  rewired);
- that each launch's site is `"<function>/%<root>"`, the root's binding as
  the unfused function prints it, and that sites are unique;
- maximality, where the seed implies it: a group below the cap could not
  take one more producer (of its type, groupable, read only by the group).

It runs on every function of every corpus file and on random programs
(elementwise chains and DAGs with fan-out, reductions, softmax, dots, `where`,
parameter-tree records, `pow` with n from 1 to 5, and chains longer than the
cap). Mutation tests at the end feed the checker partitions that break each
condition in turn, so it is known to fail when it should.
"""

from __future__ import annotations

import io
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.printer import Printer

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT, load_with_aliases

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.passes import fuse
from presk.passes.bind import BindSizes
from presk.passes.fuse import FuseElementwise

CORPUS_FILES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "corpus").rglob("*.mlir"))

CAP = 64
"""The seed: past sixty-four nodes the group stops growing."""

# -- the primitives, by name (the checker's own classification) ------------------

ELEMENTWISE = frozenset(
    f"psk_core.{n}"
    for n in ("add", "sub", "mul", "div", "max", "neg", "exp", "log", "sqrt", "tanh", "erf", "gelu", "pow", "where")
)
"""Elementwise primitives: the only ones a group may hold."""

LAUNCHING = frozenset(
    f"psk_core.{n}"
    for n in (
        "sum", "mean", "reduce_max", "dot", "ein", "softmax", "cross_entropy", "gather",
        "broadcast_like", "sum_to", "zeros_like", "arange", "causal_mask", "compare",
    )
)  # fmt: skip
"""Primitives that compute or move data outside a group: each is a nest of its own."""

STRUCTURAL = frozenset(
    f"psk_core.{n}"
    for n in (
        "split", "merge", "constant", "size", "record", "field", "set_field", "tuple", "proj", "fold", "const_dim",
        "grad", "value_and_grad",
    )
)  # fmt: skip
"""No data of their own (views, records, constants, sizes) or launching through a callee (fold; a gradient
request, which psk-autodiff replaces by calls before fusion)."""

GROUP, NEST, YIELD = "psk_realize.group", "psk_realize.nest", "psk_realize.yield"
SITES = (GROUP, NEST)


# -- the checker -------------------------------------------------------------------


@dataclass
class Launch:
    kind: str  # GROUP or NEST
    site: str
    members: list[Operation]
    root: SSAValue
    op: Operation


@dataclass
class Partition:
    """What the checker read from one fused function."""

    function: str
    launches: list[Launch] = field(default_factory=list)

    @property
    def groups(self) -> list[Launch]:
        return [launch for launch in self.launches if launch.kind == GROUP]

    @property
    def nests(self) -> list[Launch]:
        return [launch for launch in self.launches if launch.kind == NEST]


def _pow_exponent(op: Operation) -> int:
    return op.properties["exponent"].data  # type: ignore[attr-defined]


def _groupable(op: Operation) -> bool:
    return op.name in ELEMENTWISE and not (op.name == "psk_core.pow" and _pow_exponent(op) > 2)


def _site_of(value: SSAValue) -> Operation | None:
    owner = value.owner
    return owner if isinstance(owner, Operation) and owner.name in SITES else None


def _binding_table(func: FuncOp) -> dict[SSAValue, str]:
    """The names xDSL's printer gives the values of `func` (what `presk dump --stage core` prints)."""
    printer = Printer(stream=io.StringIO())
    printer.print_op(func)
    return dict(printer._ssa_values)


def dataflow(func: FuncOp, table: dict[Any, int]) -> tuple[Counter[int], dict[Operation, int]]:
    """The function as a hash-consed dataflow graph, seen through its launches.

    Each primitive is keyed by its name, properties, attributes, result types
    and the keys of its operands; a group or nest stands for the value it
    yields, so the key of a value does not depend on how the ops are wrapped.
    Keys are interned in `table`, which two functions must share to be compared.
    Returns the multiset of keys and each primitive's key.
    """
    ids: dict[SSAValue, int] = {}
    keys: Counter[int] = Counter()
    key_of: dict[Operation, int] = {}

    def intern(key: Any) -> int:
        return table.setdefault(key, len(table))

    for i, arg in enumerate(func.body.block.args):
        ids[arg] = intern(("arg", i, arg.type))

    def visit(block: Block) -> None:
        for op in block.ops:
            if op.name in SITES:
                (region,) = op.regions
                visit(region.block)
                terminator = region.block.last_op
                assert terminator is not None and terminator.name == YIELD, f"{op.name} does not end with a yield"
                ids[op.results[0]] = ids[terminator.operands[0]]
                continue
            if op.name == YIELD:
                continue
            assert not op.regions or op.name == "func.func", f"{op.name} has a region"
            for operand in op.operands:
                assert operand in ids, f"{op.name} reads a value not defined before it"
            key = intern(
                (
                    op.name,
                    tuple(sorted(op.properties.items())),
                    tuple(sorted(op.attributes.items())),
                    tuple(r.type for r in op.results),
                    tuple(ids[o] for o in op.operands),
                )
            )
            keys[key] += 1
            key_of[op] = key
            for j, result in enumerate(op.results):
                ids[result] = intern((key, j))

    visit(func.body.block)
    return keys, key_of


def check_function(original: FuncOp, fused: FuncOp, max_nodes: int = CAP, maximal: bool = True) -> Partition:
    """Assert the seed's conditions on `fused`, the result of psk-fuse on (a copy of) `original`."""
    fname = fused.sym_name.data
    assert original.sym_name.data == fname
    partition = Partition(fname)
    body = fused.body.block

    for op in body.ops:
        if op.name not in SITES:
            continue
        (region,) = op.regions
        assert len(region.blocks) == 1, f"@{fname}: a launch has one block"
        ops = list(region.block.ops)
        assert ops and ops[-1].name == YIELD and len(ops[-1].operands) == 1, f"@{fname}: a launch ends with a yield"
        members, root = ops[:-1], ops[-1].operands[0]
        site = op.properties["site"].data  # type: ignore[attr-defined]
        assert members, f"{site}: a launch has members"
        assert root.owner in members, f"{site}: the root is not a member"
        assert len(op.results) == 1 and op.results[0].type == root.type, f"{site}: the launch has its root's type"
        partition.launches.append(Launch(op.name, site, members, root, op))
        if op.name == NEST:
            assert len(members) == 1, f"{site}: a nest holds one primitive, not {[m.name for m in members]}"
            assert members[0].name in LAUNCHING, f"{site}: {members[0].name} is no launching primitive"
            continue
        group_type = op.results[0].type
        member_set = set(members)
        # Condition 1: every member is an elementwise primitive.
        for member in members:
            assert member.name in ELEMENTWISE, f"{site}: {member.name} is not elementwise"
        # Condition 2: every member has the group's result type.
        for member in members:
            assert len(member.results) == 1, f"{site}: {member.name} has one result"
            assert member.results[0].type == group_type, (
                f"{site}: {member.name} has type {member.results[0].type}, the group {group_type}"
            )
        # Condition 3: every interior member is read only by members; the root by the yield alone.
        for member in members:
            readers = [use.operation for use in member.results[0].uses]
            if member.results[0] is root:
                assert all(r.name == YIELD and r.parent_op() is op for r in readers), (
                    f"{site}: the root is read inside the group"
                )
            else:
                outside = [r.name for r in readers if r not in member_set]
                assert not outside, f"{site}: interior {member.name} is read outside the group by {outside}"
                assert readers, f"{site}: interior {member.name} has no reader"
        # The cap.
        assert len(members) <= max_nodes, f"{site}: {len(members)} members, more than {max_nodes}"
        # The pow rule: pow n with n > 2 is alone.
        big_pows = [m for m in members if m.name == "psk_core.pow" and _pow_exponent(m) > 2]
        assert not big_pows or len(members) == 1, f"{site}: pow {_pow_exponent(big_pows[0])} joined a group"

    # Every primitive that launches is in a launch directly under the function.
    for op in fused.walk():
        if op is fused:
            continue
        parent = op.parent_op()
        if op.name in ELEMENTWISE:
            assert parent is not None and parent.name == GROUP, f"@{fname}: {op.name} is not in a group"
            assert parent.parent_op() is fused, f"@{fname}: a group is nested in {parent.parent_op().name}"
        elif op.name in LAUNCHING:
            assert parent is not None and parent.name == NEST, f"@{fname}: {op.name} is not in a nest"
            assert parent.parent_op() is fused, f"@{fname}: a nest is nested in {parent.parent_op().name}"
        elif op.name in SITES:
            assert parent is fused, f"@{fname}: {op.name} is not directly in the function"

    # Sites: "<function>/%<binding of the root in the unfused function>", unique.
    table: dict[Any, int] = {}
    before, before_key_of = dataflow(original, table)
    after, after_key_of = dataflow(fused, table)
    assert after == before, f"@{fname}: the fused function is not the same dataflow graph as the original"
    names_by_key: dict[int, set[str]] = {}
    bindings = _binding_table(original)
    for op in original.walk():
        if op in before_key_of and op.results:
            names_by_key.setdefault(before_key_of[op], set()).add(bindings[op.results[0]])
    sites = [launch.site for launch in partition.launches]
    assert len(sites) == len(set(sites)), f"@{fname}: sites are not unique: {sites}"
    for launch in partition.launches:
        prefix, _, name = launch.site.partition("/%")
        assert prefix == fname, f"{launch.site}: not named after @{fname}"
        assert name in names_by_key[after_key_of[launch.root.owner]], (
            f"{launch.site}: the root is bound to {sorted(names_by_key[after_key_of[launch.root.owner]])}"
        )

    if maximal:
        check_maximal(partition, max_nodes)
    return partition


def check_maximal(partition: Partition, max_nodes: int) -> None:
    """A group below the cap cannot take one more producer: a groupable op of its type read only by it."""
    for group in partition.groups:
        if len(group.members) >= max_nodes or not all(_groupable(m) for m in group.members):
            continue
        member_set = set(group.members)
        group_type = group.root.type
        for member in group.members:
            for operand in member.operands:
                other = _site_of(operand)
                if other is None or other.name != GROUP or other is group.op:
                    continue
                yielded = other.regions[0].block.last_op.operands[0]
                producer = yielded.owner
                readers = [use.operation for use in operand.uses]
                if _groupable(producer) and operand.type == group_type and all(r in member_set for r in readers):
                    raise AssertionError(
                        f"{group.op.properties['site'].data}: not maximal, it could take {producer.name} "
                        f"({other.properties['site'].data}), read only by the group"
                    )


def functions(module: ModuleOp) -> dict[str, FuncOp]:
    return {op.sym_name.data: op for op in module.walk() if isinstance(op, FuncOp) and op.body.blocks}


def fused(module: ModuleOp, max_nodes: int = CAP) -> ModuleOp:
    out = module.clone()
    FuseElementwise(max_nodes=max_nodes).apply(presk_context(), out)
    return out


def check_module(module: ModuleOp, max_nodes: int = CAP, maximal: bool = True) -> dict[str, Partition]:
    """Fuse a copy of `module` and check every function; the module verifies too."""
    after = fused(module, max_nodes)
    before = functions(module)
    result = {name: check_function(before[name], f, max_nodes, maximal) for name, f in functions(after).items()}
    assert set(result) == set(before)
    after.verify()
    return result


def signature(partition: Partition) -> list[tuple[str, str, tuple[str, ...]]]:
    """The partition, independent of types: each launch's kind, site and member ops."""
    return [(launch.kind, launch.site, tuple(m.name for m in launch.members)) for launch in partition.launches]


def parse(text: str) -> ModuleOp:
    parsed = parse_module(presk_context(), text, "test.mlir")
    parsed.verify()
    return parsed.module


def printed(module: ModuleOp) -> str:
    out = io.StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()


# -- the classification is complete -----------------------------------------------------


def test_every_primitive_is_classified_once() -> None:
    """A new PSK-Core op must be classified here before the checker can vouch for the pass."""
    names = {op.name for op in core.PSKCore.operations}
    assert not (ELEMENTWISE & LAUNCHING) and not (ELEMENTWISE & STRUCTURAL) and not (LAUNCHING & STRUCTURAL)
    assert names == ELEMENTWISE | LAUNCHING | STRUCTURAL, names ^ (ELEMENTWISE | LAUNCHING | STRUCTURAL)


# -- the corpus ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_nodes", [CAP, 1, 3])
@pytest.mark.parametrize("path", CORPUS_FILES)
def test_corpus_partition(path: str, max_nodes: int) -> None:
    module, _ = load_with_aliases(path)
    partitions = check_module(module, max_nodes)
    elementwise = sum(1 for op in module.walk() if op.name in ELEMENTWISE)
    assert sum(len(g.members) for p in partitions.values() for g in p.groups) == elementwise
    assert sum(len(p.nests) for p in partitions.values()) == sum(1 for op in module.walk() if op.name in LAUNCHING)
    if max_nodes == 1:
        assert all(len(g.members) == 1 for p in partitions.values() for g in p.groups)


def _dims_variants(module: ModuleOp) -> list[dict[str, str]]:
    declared = {op.sym_name.data for op in module.walk() if isinstance(op, core.ConstDimOp)}
    variants = [{"dims": "B=2,T=4"}, {"dims": "B=1"}]
    if "D" in declared:
        variants.append({"dims": "B=2,T=5", "consts": "D=32"})
    return variants


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_corpus_partition_is_independent_of_shapes(path: str) -> None:
    """The partition is structural: binding sizes, before or after, changes no group."""
    module, _ = load_with_aliases(path)
    symbolic = {name: signature(p) for name, p in check_module(module).items()}
    for options in _dims_variants(module):
        bound = module.clone()
        BindSizes(**options).apply(presk_context(), bound)
        partitions = check_module(bound)
        assert {name: signature(p) for name, p in partitions.items()} == symbolic, options
        # psk-bind after psk-fuse prints exactly what psk-fuse after psk-bind prints.
        after = fused(module)
        BindSizes(**options).apply(presk_context(), after)
        assert printed(after) == printed(fused(bound)), options


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_fuse_is_idempotent(path: str) -> None:
    module, _ = load_with_aliases(path)
    once = fused(module)
    twice = fused(once)
    assert printed(twice) == printed(once)
    for max_nodes in (1, 7):
        assert printed(fused(once, max_nodes)) == printed(once)  # a fused function has nothing left to fuse


# -- the seed's examples ---------------------------------------------------------------------


def _by_root(partition: Partition) -> dict[str, Launch]:
    return {launch.site.split("/%")[1]: launch for launch in partition.launches}


def test_layer_norm_is_cut_at_each_mean_and_at_x_minus_mu() -> None:
    """(x − μ)² → mean → +ε → sqrt → divide: split at each mean, and x − μ has two readers."""
    module, _ = load_with_aliases("corpus/layernorm.mlir")
    partition = check_module(module)["LayerNorm.apply"]
    launches = _by_root(partition)
    members = {root: [m.name.split(".")[1] for m in launch.members] for root, launch in launches.items()}
    assert members == {
        "1": ["mean"],
        "2": ["sub"],  # x − μ: read by the square and by the division, so a root
        "3": ["pow"],  # (x − μ)²: its only reader is the mean
        "4": ["mean"],
        "6": ["add", "sqrt"],  # + ε, √
        "11": ["div", "mul", "add"],  # (x − μ) / σ · g + b
    }
    assert [launch.kind for launch in partition.launches] == [NEST, GROUP, GROUP, NEST, GROUP, GROUP]


@pytest.mark.parametrize("path", ["corpus/minigpt.mlir", "corpus/nlp/gpt.mlir"])
def test_adamw_fuses_into_three_tree_groups(path: str) -> None:
    """The optimizer: one chain over the parameter record, cut only at m' and v', which it returns."""
    module, _ = load_with_aliases(path)
    partition = check_module(module)["adamw.step"]
    params_type = functions(module)["adamw.step"].function_type.inputs.data[0]
    tree = [g for g in partition.groups if g.root.type == params_type]
    scalar = [g for g in partition.groups if isinstance(g.root.type, core.RealType)]
    assert len(tree) == 3 and len(scalar) == 4 and not partition.nests
    assert sorted(len(g.members) for g in tree) == [3, 4, 9]
    # The three roots are what the step returns: params', m', v'.
    (tup,) = [op for op in functions(module)["adamw.step"].walk() if isinstance(op, core.TupleOp)]
    assert len(tree) == len(tup.elements)
    # Every record-typed elementwise op is in one of those three groups.
    step = functions(module)["adamw.step"]
    records = sum(1 for op in step.walk() if op.name in ELEMENTWISE and op.results[0].type == params_type)
    assert sum(len(g.members) for g in tree) == records


# -- hand-built programs ---------------------------------------------------------------------

X = "!psk_core.tensor<[a: 2, b: 3]>"
V = "!psk_core.tensor<[b: 3]>"
R = "!psk_core.real"


def chain(k: int, *, outside_reader: int | None = None) -> str:
    """A chain of k elementwise ops of type X; inputs broadcast ([b] and a real). Optionally op i is returned too."""
    lines = []
    prev = "%x"
    steps = [
        lambda p: f"psk_core.add {p}, %v : {X}",
        lambda p: f"psk_core.mul %s, {p} : {X}",
        lambda p: f"psk_core.tanh {p} : {X}",
        lambda p: f"psk_core.pow {p}, 2 : {X}",
        lambda p: f"psk_core.sub {p}, %x : {X}",
        lambda p: f"psk_core.max {p}, %s : {X}",
        lambda p: f"psk_core.neg {p} : {X}",
    ]
    for i in range(k):
        lines.append(f"  %c{i} = {steps[i % len(steps)](prev)}")
        prev = f"%c{i}"
    results = [prev] + ([f"%c{outside_reader}"] if outside_reader is not None else [])
    types = ", ".join([X] * len(results))
    body = "\n".join(lines)
    return (
        f"func.func @f(%x: {X}, %v: {V}, %s: {R}) -> ({types}) {{\n{body}\n"
        f"  func.return {', '.join(results)} : {types}\n}}\n"
    )


def _sizes(text: str, max_nodes: int = CAP) -> list[int]:
    (partition,) = check_module(parse(text), max_nodes).values()
    return [len(g.members) for g in partition.groups]


@pytest.mark.parametrize("k", [1, 2, 7, 33, 63, 64])
def test_a_chain_within_the_cap_is_one_group(k: int) -> None:
    (partition,) = check_module(parse(chain(k))).values()
    (group,) = partition.groups
    assert len(group.members) == k and group.site == f"f/%c{k - 1}"


@pytest.mark.parametrize(("k", "sizes"), [(65, [1, 64]), (100, [36, 64]), (128, [64, 64]), (129, [1, 64, 64])])
def test_a_long_chain_is_split_at_the_cap(k: int, sizes: list[int]) -> None:
    """Past sixty-four nodes the group stops growing; the rest of the chain starts another."""
    got = _sizes(chain(k))
    assert got == sizes and sum(got) == k and len(got) == math.ceil(k / CAP)


@pytest.mark.parametrize("max_nodes", [1, 2, 5, 10])
def test_max_nodes_caps_a_chain(max_nodes: int) -> None:
    got = _sizes(chain(23), max_nodes)
    assert len(got) == math.ceil(23 / max_nodes) and max(got) == max_nodes and sum(got) == 23


def test_a_value_read_outside_is_a_root() -> None:
    """Returning an intermediate of the chain makes it a root: the chain splits there."""
    assert _sizes(chain(10, outside_reader=3)) == [4, 6]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_pow_joins_only_up_to_two(n: int) -> None:
    text = (
        f"func.func @f(%x: {X}) -> {X} {{\n"
        f"  %a = psk_core.exp %x : {X}\n"
        f"  %b = psk_core.pow %a, {n} : {X}\n"
        f"  %c = psk_core.neg %b : {X}\n"
        f"  func.return %c : {X}\n}}\n"
    )
    assert _sizes(text) == ([3] if n <= 2 else [1, 1, 1])


@pytest.mark.parametrize("max_nodes", [0, -1, CAP + 1])
def test_max_nodes_out_of_range_is_e3002(max_nodes: int) -> None:
    with pytest.raises(PreskError, match="E3002"):
        FuseElementwise(max_nodes=max_nodes).apply(presk_context(), parse(chain(3)))


def test_a_value_read_by_a_reduction_and_an_elementwise_op_is_a_root() -> None:
    text = (
        f"func.func @f(%x: {X}) -> {X} {{\n"
        f"  %a = psk_core.exp %x : {X}\n"
        f"  %b = psk_core.mul %a, %a : {X}\n"
        f"  %m = psk_core.mean %b [b] : !psk_core.tensor<[a: 2]>\n"
        f"  %c = psk_core.sub %b, %m : {X}\n"
        f"  %d = psk_core.tanh %c : {X}\n"
        f"  func.return %d : {X}\n}}\n"
    )
    (partition,) = check_module(parse(text)).values()
    assert signature(partition) == [
        (GROUP, "f/%b", ("psk_core.exp", "psk_core.mul")),
        (NEST, "f/%m", ("psk_core.mean",)),
        (GROUP, "f/%d", ("psk_core.sub", "psk_core.tanh")),
    ]


# -- random programs ---------------------------------------------------------------------------

AXES = {"a": 2, "b": 3, "c": 4, "d": 5}
"""Tensor types use these axes in this order, so a subset of a type's axes is a subsequence of them."""
REC_FIELDS = (("p", ("a", "b")), ("q", ("c",)))


def _size(name: str, symbolic: bool) -> str:
    return f"N{name.upper()}" if symbolic else str(AXES[name])


def type_text(t: Any, symbolic: bool) -> str:
    """A value type: a tuple of axis names (empty: a real) or "rec"."""
    if t == "rec":
        fields = ", ".join(f"{n}: {type_text(ax, symbolic)}" for n, ax in REC_FIELDS)
        return f"!psk_core.record<{fields}>"
    if not t:
        return "!psk_core.real"
    return "!psk_core.tensor<[" + ", ".join(f"{n}: {_size(n, symbolic)}" for n in t) + "]>"


ARGS: list[tuple[str, Any]] = [
    ("x", ("a", "b", "c")),
    ("y", ("b", "c")),
    ("s", ()),
    ("w", ("c", "d")),
    ("p", "rec"),
    ("q", "rec"),
]


@dataclass
class RandomProgram:
    """Lets over a pool of values; every let chosen among what the typing rules admit."""

    draw: Callable[[Any], Any]
    lines: list[tuple[str, str, Any]] = field(default_factory=list)
    values: list[tuple[str, Any]] = field(default_factory=lambda: list(ARGS))

    def let(self, text: str, t: Any) -> str:
        name = f"%v{len(self.lines)}"
        self.lines.append((name, text, t))
        self.values.append((name[1:], t))
        return name[1:]

    def pick(self, pred: Callable[[Any], bool] = lambda t: True) -> tuple[str, Any] | None:
        pool = [(n, t) for n, t in self.values if pred(t)]
        if not pool:
            return None
        recent = pool[-4:]
        return self.draw(st.sampled_from(recent)) if self.draw(st.booleans()) else self.draw(st.sampled_from(pool))

    def text(self, symbolic: bool, results: Sequence[tuple[str, Any]]) -> str:
        text = self._text(symbolic, results)
        note(text)
        return text

    def _text(self, symbolic: bool, results: Sequence[tuple[str, Any]]) -> str:
        args = ", ".join(f"%{n}: {type_text(t, symbolic)}" for n, t in ARGS)
        args += f", %m: !psk_core.index<[b: {_size('b', symbolic)}], 2>"
        body = "\n".join(f"  {name} = {text.replace('$T', type_text(t, symbolic))}" for name, text, t in self.lines)
        types = ", ".join(type_text(t, symbolic) for _, t in results)
        return (
            f"func.func @f({args}) -> ({types}) {{\n{body}\n"
            f"  func.return {', '.join('%' + n for n, _ in results)} : {types}\n}}\n"
        )


def _broadcast(t: Any, u: Any) -> Any | None:
    """The result type of an elementwise op on t and u, or None if the rules refuse it."""
    if t == "rec" or u == "rec":
        return "rec" if (t == u or t == () or u == ()) else None
    if set(t) <= set(u):
        return u
    if set(u) <= set(t):
        return t
    return None


UNARY = ["neg", "exp", "log", "sqrt", "tanh", "gelu"]
BINARY = ["add", "sub", "mul", "div", "max"]


def _one_let(prog: RandomProgram, draw: Callable[[Any], Any]) -> None:
    kinds = ["unary", "binary", "binary", "binary", "pow", "reduce", "softmax", "dot", "where", "field", "record"]
    kind = draw(st.sampled_from([*kinds, "const"]))
    if kind == "unary":
        name, t = prog.pick()
        prog.let(f"psk_core.{draw(st.sampled_from(UNARY))} %{name} : $T", t)
    elif kind == "binary":
        name, t = prog.pick()
        other, u = prog.pick(lambda u: _broadcast(t, u) is not None)
        a, b = draw(st.permutations([name, other]))
        prog.let(f"psk_core.{draw(st.sampled_from(BINARY))} %{a}, %{b} : $T", _broadcast(t, u))
    elif kind == "pow":
        name, t = prog.pick()
        prog.let(f"psk_core.pow %{name}, {draw(st.integers(1, 5))} : $T", t)
    elif kind == "reduce" and (picked := prog.pick(lambda t: t != "rec" and len(t) > 0)):
        name, t = picked
        over = draw(st.lists(st.sampled_from(t), min_size=1, unique=True))
        op = draw(st.sampled_from(["sum", "mean", "reduce_max"]))
        prog.let(f"psk_core.{op} %{name} [{', '.join(over)}] : $T", tuple(a for a in t if a not in over))
    elif kind == "softmax" and (picked := prog.pick(lambda t: t != "rec" and len(t) > 0)):
        name, t = picked
        prog.let(f"psk_core.softmax %{name} [{draw(st.sampled_from(t))}] : $T", t)
    elif kind == "dot" and (picked := prog.pick(lambda t: t != "rec" and t[-1:] == ("c",))):
        name, t = picked
        prog.let(f"psk_core.dot %{name}, %w : $T", t[:-1] + ("d",))
    elif kind == "where" and (picked := prog.pick(lambda t: t != "rec" and "b" in t)):
        name, t = picked
        other, u = prog.pick(lambda u: u != "rec" and set(u) <= set(t))
        a, b = draw(st.permutations([name, other]))
        prog.let(f"psk_core.where %m, %{a}, %{b} : $T", t)
    elif kind == "field":
        name, _ = prog.pick(lambda t: t == "rec")
        field_name, axes = draw(st.sampled_from(REC_FIELDS))
        prog.let(f'psk_core.field %{name}["{field_name}"] : $T', axes)
    elif kind == "record" and (p := prog.pick(lambda t: t == ("a", "b"))) and (q := prog.pick(lambda t: t == ("c",))):
        prog.let(f"psk_core.record p = %{p[0]}, q = %{q[0]} : $T", "rec")
    elif kind == "const":
        prog.let(f"psk_core.constant {draw(st.sampled_from(['0.5', '-2.0', '3.0']))} : $T", ())


def _long_chain(prog: RandomProgram, draw: Callable[[Any], Any], length: int) -> None:
    """A chain of `length` ops on one value, occasionally tapped by a later reader."""
    name, t = prog.pick()
    for _ in range(length):
        if draw(st.integers(0, 3)) == 0:
            prog.let(f"psk_core.mul %{name}, %s : $T", t)
        else:
            prog.let(f"psk_core.{draw(st.sampled_from(['neg', 'tanh', 'exp']))} %{name} : $T", t)
        name = prog.values[-1][0]


@st.composite
def programs(draw: st.DrawFn, long: bool | None = None) -> tuple[RandomProgram, list[tuple[str, Any]]]:
    prog = RandomProgram(draw)
    for _ in range(draw(st.integers(1, 25))):
        if (long is None and draw(st.integers(0, 39)) == 0) or (long and not prog.lines):
            _long_chain(prog, draw, draw(st.integers(CAP - 4, 2 * CAP + 12)))
        else:
            _one_let(prog, draw)
    if not prog.lines:
        prog.let("psk_core.neg %x : $T", ("a", "b", "c"))
    last = prog.values[-1]
    extra = [v for v in prog.values[len(ARGS) :] if v != last]
    results = [last] + draw(st.lists(st.sampled_from(extra), max_size=3, unique=True) if extra else st.just([]))
    return prog, results


RANDOM: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    # No shrinking: a failing program is printed as drawn (note), and shrinking
    # programs of a hundred lets takes minutes.
    "phases": [Phase.explicit, Phase.reuse, Phase.generate],
}


@settings(max_examples=45, **RANDOM)
@given(programs(), st.sampled_from([CAP, CAP, CAP, 1, 2, 5]))
def test_random_programs_satisfy_the_group_conditions(program: Any, max_nodes: int) -> None:
    prog, results = program
    check_module(parse(prog.text(False, results)), max_nodes)


@settings(max_examples=6, **RANDOM)
@given(programs(long=True))
def test_random_long_chains_respect_the_cap(program: Any) -> None:
    prog, results = program
    partitions = check_module(parse(prog.text(False, results)))
    assert max(len(g.members) for g in partitions["f"].groups) <= CAP


@settings(max_examples=15, **RANDOM)
@given(programs(long=False), st.sampled_from(["NA=2,NB=3,NC=4,ND=5", "NA=7,NB=1,NC=2,ND=3", "NB=4"]))
def test_random_partitions_are_independent_of_shapes(program: Any, dims: str) -> None:
    prog, results = program
    module = parse(prog.text(True, results))
    symbolic = signature(check_module(module)["f"])
    bound = module.clone()
    BindSizes(dims=dims).apply(presk_context(), bound)
    assert signature(check_module(bound)["f"]) == symbolic
    after = fused(module)
    BindSizes(dims=dims).apply(presk_context(), after)
    assert printed(after) == printed(fused(bound))
    assert printed(fused(fused(module))) == printed(fused(module))


@settings(max_examples=8, **RANDOM)
@given(programs())
def test_random_programs_with_max_nodes_one_are_singletons(program: Any) -> None:
    prog, results = program
    module = parse(prog.text(False, results))
    (partition,) = check_module(module, 1).values()
    assert all(len(g.members) == 1 for g in partition.groups)
    assert len(partition.groups) == sum(1 for op in module.walk() if op.name in ELEMENTWISE)


# -- the checker fails when it should ------------------------------------------------------------


MUTANT_PROGRAM = f"""
func.func @f(%x: {X}, %y: {V}) -> ({X}, {X}) {{
  %a = psk_core.exp %x : {X}
  %b = psk_core.neg %a : {X}
  %s = psk_core.sum %b [b] : !psk_core.tensor<[a: 2]>
  %e = psk_core.exp %y : {V}
  %c = psk_core.add %b, %e : {X}
  %d = psk_core.pow %c, 3 : {X}
  %f = psk_core.mul %d, %s : {X}
  %g = psk_core.tanh %f : {X}
  %h = psk_core.add %g, %a : {X}
  func.return %h, %c : {X}, {X}
}}
"""
# ops:  0 a   1 b   2 s   3 e   4 c   5 d   6 f   7 g   8 h   9 return
# The pass's partition: [a] (read by b and h), [b] (read by the sum and c), [e], [c] (returned),
# [d] (pow 3), [f, g, h]; the sum is a nest.


def _mutant(groups: list[list[int]]) -> Callable[[Block, int], list[list[Operation]]]:
    def partition(block: Block, max_nodes: int = CAP) -> list[list[Operation]]:
        ops = list(block.ops)
        return [[ops[i] for i in group] for group in groups]

    return partition


MUTANTS = {
    "the pass itself": ([[0], [1], [3], [4], [5], [6, 7, 8]], None),
    "a reduction in a group": ([[0], [1, 2], [3], [4], [5], [6, 7, 8]], "is not elementwise"),
    "two result types": ([[0], [1], [3, 4], [5], [6, 7, 8]], "has type"),
    "interior read outside": ([[0, 1], [3], [4], [5], [6, 7, 8]], "is read outside the group"),
    "pow 3 joined": ([[0], [1], [3], [4], [5, 6, 7, 8]], "pow 3 joined a group"),
    "an op left out": ([[0], [1], [3], [4], [5], [7, 8]], "is not in a group"),
    "not maximal": ([[0], [1], [3], [4], [5], [6], [7, 8]], "not maximal"),
    "over the cap": ([[0], [1], [3], [4], [5], [6, 7, 8]], "more than 2"),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_checker_catches_a_broken_partition(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    groups, message = MUTANTS[mutant]
    max_nodes = 2 if mutant == "over the cap" else CAP
    module = parse(MUTANT_PROGRAM)
    monkeypatch.setattr(fuse, "partition", _mutant(groups))
    after = module.clone()
    FuseElementwise(max_nodes=max_nodes).apply(presk_context(), after)
    check = lambda: check_function(functions(module)["f"], functions(after)["f"], max_nodes)
    if message is None:
        check()
        monkeypatch.undo()
        assert printed(fused(module)) == printed(after)  # the pass's own partition is the first one
    else:
        with pytest.raises(AssertionError, match=message):
            check()


def test_the_checker_catches_an_unwrapped_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse(MUTANT_PROGRAM)
    monkeypatch.setattr(fuse, "LAUNCHING_OPS", tuple(t for t in fuse.LAUNCHING_OPS if t is not core.SumOp))
    after = fused(module)
    with pytest.raises(AssertionError, match="psk_core.sum is not in a nest"):
        check_function(functions(module)["f"], functions(after)["f"])


def test_the_checker_catches_a_rewired_program() -> None:
    """The dataflow comparison: an operand changed by the pass is caught even where every group is well formed."""
    module = parse(MUTANT_PROGRAM)
    after = fused(module)
    f = functions(after)["f"]
    check_function(functions(module)["f"], f)
    (h,) = [op for op in f.walk() if op.name == "psk_core.add" and op.operands[0].owner.name == "psk_core.tanh"]
    (c,) = [op for op in f.walk() if op.name == "psk_core.add" and op is not h]
    b_launch = c.operands[0]  # %b's launch: a root already, read by the sum and by %c
    h.operands[1] = b_launch  # %h now adds %b where it added %a
    with pytest.raises(AssertionError, match="not the same dataflow graph"):
        check_function(functions(module)["f"], f)


def test_the_checker_catches_a_wrong_site_name(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse(MUTANT_PROGRAM)
    monkeypatch.setattr(fuse, "site_name", lambda func, name: f"{func.sym_name.data}/%{name}x")
    after = fused(module)
    with pytest.raises(AssertionError, match="the root is bound to"):
        check_function(functions(module)["f"], functions(after)["f"])


def test_mutant_program_ops_are_where_the_table_says() -> None:
    """The indices of MUTANTS refer to this order."""
    ops = list(functions(parse(MUTANT_PROGRAM))["f"].body.block.ops)
    assert [re.sub(r"^psk_core\.|^func\.", "", op.name) for op in ops] == [
        "exp", "neg", "sum", "exp", "add", "pow", "mul", "tanh", "add", "return",
    ]  # fmt: skip
