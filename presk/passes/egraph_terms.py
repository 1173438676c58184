"""PSK-Core ⇄ egglog terms for `psk-egraph-opt`: one function body into an e-graph, and back.

Into the e-graph (`FunctionGraph`): each let becomes a node whose children are
its operands' classes, so identical definitions merge as they enter; the
function's parameters are leaves `T(i)`; the primitives the rules mention get
their own constructor (`egraph_rules`), with the attributes a rule must see
(a pow exponent, a reduction's axes, a field's index in its record type, a
projection index, an `ein`'s labels) as `i64` leaf children that index tables
kept here. Every other operation (calls, folds, softmax, gathers, sizes, ...)
is an `Opaque` node: its header (name, properties, attributes and result
types) interned, its operands a cons list, so that two equal calls still
merge. An operation of several results is one node whose results are `Res`
nodes. The type of every value is set on its class (`ty`).

Out of it (`extract` and `write_back`): the serialized e-graph is read back,
the cheapest term of the result classes chosen by a DAG-aware greedy
extractor (a subterm used twice is paid once), and written back as fresh lets
before the function's `func.return`, each with the type of its class, the
name hint and location of the original definition the class still holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from egglog import EGraph, set_, union
from xdsl.dialects import func
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, RealType, RecordType, TupleType
from presk.passes import egraph_rules as R
from presk.passes.egraph_prices import KINDS, NodeFacts, Prices, UnboundSize

MULTI = 1
"""The type id of an operation node with several results (not itself a value)."""


class Unsupported(Exception):
    """A function body the pass leaves as it is (said in the report)."""


# -- the tables the terms index -------------------------------------------------------


@dataclass
class TypeTable:
    """The PSK-Core types of one function, by id (0 real, 1 several results)."""

    types: list[Attribute | None] = field(default_factory=lambda: [RealType(), None])
    ids: dict[Attribute, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ids[RealType()] = R.REAL

    def id(self, t: Attribute) -> int:
        if t in self.ids:
            return self.ids[t]
        self.ids[t] = len(self.types)
        self.types.append(t)
        if isinstance(t, RecordType):
            for _, ft in t.fields:
                self.id(ft)
        elif isinstance(t, TupleType):
            for et in t.element_types.data:
                self.id(et)
        return self.ids[t]

    def arithmetic(self, tid: int) -> bool:
        """A type elementwise arithmetic takes: real, tensor of reals, or a tree of them."""
        t = self.types[tid]
        if t is None or isinstance(t, IndexTensorType):
            return False
        if isinstance(t, RecordType):
            return all(self.arithmetic(self.ids[ft]) for _, ft in t.fields)
        if isinstance(t, TupleType):
            return all(self.arithmetic(self.ids[et]) for et in t.element_types.data)
        return True


class Interner:
    """Keys to dense ids, with the first object seen for each key."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.items: list[Any] = []

    def id(self, key: Any, item: Any) -> int:
        if key not in self.ids:
            self.ids[key] = len(self.items)
            self.items.append(item)
        return self.ids[key]


def _header_key(op: Operation) -> tuple:
    return (
        op.name,
        tuple(sorted((k, str(v)) for k, v in op.properties.items())),
        tuple(sorted((k, str(v)) for k, v in op.attributes.items())),
        tuple(str(r.type) for r in op.results),
    )


def _cons(items: Sequence[R.T]) -> R.T:
    out: R.T = R.Nil()
    for item in reversed(items):
        out = R.Cons(item, out)
    return out


# -- a function body as an e-graph ----------------------------------------------------


@dataclass
class Original:
    """An original let: its value, its op (for name and location) and the kind of node it became."""

    value: SSAValue
    op: Operation
    kind: str


class FunctionGraph:
    """The e-graph of one function body, with the tables its terms index."""

    def __init__(self, fn: func.FuncOp, prices: Prices | None = None) -> None:
        self.fn = fn
        self.prices = prices or Prices()
        block = fn.body.block
        self.ret = block.last_op
        if not isinstance(self.ret, func.ReturnOp):
            raise Unsupported("the body does not end in func.return")
        self.types = TypeTable()
        self.constants: list[float] = []
        self.axes = Interner()
        self.eins = Interner()
        self.headers = Interner()
        self.egraph = EGraph()
        self.terms: dict[SSAValue, R.T] = {}
        self.originals: list[Original] = []
        self.lets = 0
        self.cost_before = 0.0
        actions: list[Any] = []
        zero_records: set[int] = set()
        for idx, arg in enumerate(block.args):
            self.terms[arg] = R.T(idx)
            actions.append(set_(R.ty(self.terms[arg])).to(self.types.id(arg.type)))
        for op in block.ops:
            if op is self.ret:
                break
            self.lets += 1
            if op.regions or op.successors:
                raise Unsupported(f"'{op.name}' holds a region")
            if not op.results:
                raise Unsupported(f"'{op.name}' has no result")
            term, kind = self._term(op, actions)
            self.cost_before += self.price(_facts_of_op(op, kind))
            if isinstance(op, core.ZerosLikeOp) and isinstance(op.template.type, RecordType):
                zero_records.add(self.types.id(op.template.type))
            if len(op.results) == 1:
                self._bind(op.results[0], term, actions)
                self.originals.append(Original(op.results[0], op, kind))
            else:
                actions.append(set_(R.ty(term)).to(MULTI))
                for n, result in enumerate(op.results):
                    self._bind(result, R.Res(n, term), actions)
                    self.originals.append(Original(result, op, "Res"))
        self.roots = [self.terms[v] for v in self.ret.operands]
        self._tables(actions)
        # every value marked, so that its class is found in the serialization
        self.marks: dict[SSAValue, int] = {}
        for value, term in self.terms.items():
            self.marks[value] = len(self.marks)
            actions.append(union(R.Mark(self.marks[value])).with_(term))
        self.root_marks = [self.marks[v] for v in self.ret.operands]
        self.egraph.register(*actions)
        self.extra_rules = [r for tid in sorted(zero_records) for r in R.zeros_record_rule(tid, len(self.types.types[tid].fields))]  # type: ignore[union-attr]

    def price(self, facts: NodeFacts) -> float:
        try:
            return self.prices(facts)
        except UnboundSize as why:
            raise Unsupported(str(why)) from None

    def _bind(self, value: SSAValue, term: R.T, actions: list[Any]) -> None:
        self.terms[value] = term
        actions.append(set_(R.ty(term)).to(self.types.id(value.type)))

    def _term(self, op: Operation, actions: list[Any]) -> tuple[R.T, str]:
        """The node of `op` and its kind (a constructor's name)."""
        t = self.terms
        binary = {core.AddOp: (R.Add, "Add"), core.SubOp: (R.Sub, "Sub"), core.MulOp: (R.Mul, "Mul"), core.DivOp: (R.Div, "Div")}
        unary = {core.NegOp: (R.Neg, "Neg"), core.ExpOp: (R.Exp, "Exp"), core.LogOp: (R.Log, "Log"), core.SqrtOp: (R.Sqrt, "Sqrt")}
        if type(op) in binary:
            ctor, kind = binary[type(op)]
            return ctor(t[op.lhs], t[op.rhs]), kind  # type: ignore[attr-defined]
        if type(op) in unary:
            ctor, kind = unary[type(op)]
            return ctor(t[op.operand]), kind  # type: ignore[attr-defined]
        if isinstance(op, core.PowOp):
            return R.Pow(t[op.operand], op.n), "Pow"
        if isinstance(op, core.SumOp | core.MeanOp):
            ax = self.axes.id(op.axes, op.axes)
            actions.append(set_(R.red(self.types.id(op.operand.type), ax)).to(self.types.id(op.result.type)))
            if isinstance(op, core.SumOp):
                return R.Sum(t[op.operand], ax), "Sum"
            return R.Mean(t[op.operand], ax), "Mean"
        if isinstance(op, core.DotOp):
            actions.append(
                set_(R.dty(self.types.id(op.lhs.type), self.types.id(op.rhs.type))).to(self.types.id(op.result.type))
            )
            return R.Dot(t[op.lhs], t[op.rhs]), "Dot"
        if isinstance(op, core.EinOp) and len(op.inputs) == 2:
            h = self.eins.id((op.operand_labels, op.result.type), (op.operand_labels, op.result.type))
            actions.append(set_(R.ety(h)).to(self.types.id(op.result.type)))
            return R.Ein(h, t[op.inputs[0]], t[op.inputs[1]]), "Ein"
        if isinstance(op, core.SumToOp):
            return R.SumTo(t[op.operand], t[op.template]), "SumTo"
        if isinstance(op, core.BroadcastLikeOp):
            return R.BroadcastLike(t[op.operand], t[op.template]), "BroadcastLike"
        if isinstance(op, core.ZerosLikeOp):
            return R.ZerosLike(t[op.template]), "ZerosLike"
        if isinstance(op, core.FieldOp):
            return R.Field(t[op.record], self._field_index(op.record.type, op.field_name.data)), "Field"
        if isinstance(op, core.SetFieldOp):
            idx = self._field_index(op.record.type, op.field_name.data)
            return R.SetField(t[op.record], idx, t[op.value]), "SetField"
        if isinstance(op, core.RecordOp):
            return R.Record(self.types.id(op.result.type), _cons([t[v] for v in op.fields])), "Record"
        if isinstance(op, core.TupleOp):
            return R.Tuple(self.types.id(op.result.type), _cons([t[v] for v in op.elements])), "Tuple"
        if isinstance(op, core.ProjOp):
            return R.Proj(t[op.tuple], op.index.data), "Proj"
        if isinstance(op, core.ConstantOp):
            value = op.value.value.data
            self.constants.append(value)
            term = R.Const(len(self.constants) - 1)
            if value == 0.0:
                actions.append(R.is_zero(term))
            elif value == 1.0:
                actions.append(R.is_one(term))
            return term, "Const"
        h = self.headers.id(_header_key(op), op)
        return R.Opaque(h, _cons([t[v] for v in op.operands])), "Opaque"

    def _field_index(self, t: Attribute, name: str) -> int:
        assert isinstance(t, RecordType)
        return [n for n, _ in t.fields].index(name)

    def _tables(self, actions: list[Any]) -> None:
        """`bc` on every pair of the function's types that broadcasts trivially; `fty` on every tree."""
        for tid, t in enumerate(self.types.types):
            if t is None:
                continue
            if self.types.arithmetic(tid):
                actions.append(set_(R.bc(tid, tid)).to(tid))
                if tid != R.REAL:
                    actions.append(set_(R.bc(R.REAL, tid)).to(tid))
                    actions.append(set_(R.bc(tid, R.REAL)).to(tid))
            if isinstance(t, RecordType):
                for n, (_, ft) in enumerate(t.fields):
                    actions.append(set_(R.fty(tid, n)).to(self.types.ids[ft]))
            elif isinstance(t, TupleType):
                for n, et in enumerate(t.element_types.data):
                    actions.append(set_(R.fty(tid, n)).to(self.types.ids[et]))

    def node_count(self) -> int:
        names = {_callable_name(c) for c in R.CONSTRUCTORS} - {"Mark"}
        return sum(size for fn, size in self.egraph.all_function_sizes() if _callable_name(fn) in names)


def _callable_name(fn: Any) -> str:
    text = str(fn)
    return text.rsplit(".", 1)[-1]


# -- the serialized e-graph and extraction ----------------------------------------------

_PRIMITIVE = re.compile(r"(?:^|-)i64-(\d+)$")


@dataclass
class Node:
    op: str
    eclass: str
    children: list[tuple[str, Any]]
    """('c', class) for a value child, ('p', int) for an i64 leaf."""


@dataclass
class Extracted:
    """The chosen node of every class a root needs, and the term's DAG cost."""

    choice: dict[str, Node]
    cost: float


class Serialized:
    """The e-graph as its JSON serialization gives it: T-classes, their nodes, their types."""

    def __init__(self, graph: FunctionGraph) -> None:
        data = json.loads(graph.egraph._serialize().to_json())
        raw = data["nodes"]
        class_data = data["class_data"]
        t_sort = {c for c, d in class_data.items() if d.get("type", "").endswith(".T")}
        self.mark_class: dict[int, str] = {}
        self.types: dict[str, int] = {}
        self.classes: dict[str, list[Node]] = {}
        for node in raw.values():
            if node["op"] == "ty" and node["children"]:
                owner = raw[node["children"][0]]["eclass"]
                match = _PRIMITIVE.search(node["eclass"])
                if match:
                    self.types[owner] = int(match.group(1))
            # a subsumed node stays a candidate: subsumption is keyed on the node, and after merges
            # the node a simplification retired can be the only one left of another class
            if node["eclass"] not in t_sort:
                continue
            children: list[tuple[str, Any]] = []
            for child in node["children"]:
                c = raw[child]
                if c["eclass"] in t_sort:
                    children.append(("c", c["eclass"]))
                else:
                    children.append(("p", int(c["op"])))
            op = _callable_name(node["op"])
            if op == "Mark":
                self.mark_class[children[0][1]] = node["eclass"]
            self.classes.setdefault(node["eclass"], []).append(Node(op, node["eclass"], children))
        self.lists = {c for c, nodes in self.classes.items() if any(n.op in ("Nil", "Cons") for n in nodes)}
        self.prices: dict[int, float] = {}

    def list_items(self, eclass: str) -> list[str]:
        """The classes of a cons list's items, in order."""
        items: list[str] = []
        while True:
            cell = next((n for n in self.classes.get(eclass, []) if n.op == "Cons"), None)
            if cell is None:
                return items
            items.append(cell.children[0][1])
            eclass = cell.children[1][1]

    def valid(self, eclass: str) -> bool:
        return eclass in self.types or eclass in self.lists


def _facts_of_op(op: Operation, kind: str) -> NodeFacts:
    return NodeFacts(
        kind, type(op) if kind == "Opaque" else KINDS.get(kind), op.results[0].type if len(op.results) == 1 else None,
        [v.type for v in op.operands], op.n if isinstance(op, core.PowOp) else None,
        op.operand_labels if isinstance(op, core.EinOp) else None, op.name,
    )  # fmt: skip


def node_cost(graph: FunctionGraph, ser: Serialized, node: Node) -> float:
    """The price of one node at the types of its class and its operands' classes (memoized on the node)."""
    known = ser.prices.get(id(node))
    if known is not None:
        return known

    def type_of(eclass: str) -> Attribute | None:
        tid = ser.types.get(eclass)
        return None if tid is None else graph.types.types[tid]

    values = [c for kind, c in node.children if kind == "c"]
    exponent = labels = None
    name = ""
    op = KINDS.get(node.op)
    if node.op == "Opaque":
        original = graph.headers.items[node.children[0][1]]
        op, name, values = type(original), original.name, ser.list_items(node.children[1][1])
    elif node.op == "Pow":
        exponent = node.children[1][1]
    elif node.op == "Ein":
        labels = graph.eins.items[node.children[0][1]][0]
    facts = NodeFacts(node.op, op, type_of(node.eclass), [type_of(c) for c in values], exponent, labels, name)
    price = ser.prices[id(node)] = graph.price(facts)
    return price


def extract(graph: FunctionGraph, ser: Serialized, roots: Sequence[str], mode: str = "dag") -> Extracted:
    """Greedy DAG extraction (extraction-gym's `greedy_dag`): a class's cost is the set of classes its
    best term uses, each counted once, so a subterm shared by two operands is paid once. With
    `mode="tree"`, the seed's tree extraction: a term costs its node plus its children's terms, a
    shared subterm paid at each use (kept to measure what DAG extraction gains). Nodes whose classes
    have no known type, and the list helpers, are never chosen. The cost returned is the DAG cost of
    the chosen program in either mode, each let once."""
    if mode not in ("dag", "tree"):
        raise Unsupported(f"no extraction '{mode}' (dag or tree)")
    parents: dict[str, list[Node]] = {}
    candidates: list[Node] = []
    for eclass, nodes in ser.classes.items():
        if not ser.valid(eclass):
            continue
        for node in nodes:
            if node.op in R.HELPERS:
                continue
            kids = [c for kind, c in node.children if kind == "c"]
            if not all(ser.valid(k) for k in kids):
                continue
            candidates.append(node)
            for k in set(kids):
                parents.setdefault(k, []).append(node)
    best: dict[str, tuple[float, dict[str, float], Node]] = {}
    pending = [n for n in candidates if not any(kind == "c" for kind, _ in n.children)]
    queued = {id(n) for n in pending}
    while pending:
        node = pending.pop()
        queued.discard(id(node))
        kids = [c for kind, c in node.children if kind == "c"]
        if any(k not in best for k in kids):
            continue
        own = node_cost(graph, ser, node)
        old = best.get(node.eclass)
        if mode == "tree":
            total = own + sum(best[k][0] for k in kids)
            if old is not None and total >= old[0] - 1e-12:
                continue
            best[node.eclass] = (total, {}, node)
            for parent in parents.get(node.eclass, []):
                if id(parent) not in queued:
                    queued.add(id(parent))
                    pending.append(parent)
            continue
        # a term costs at least its own node plus its dearest child: skip the merge when that cannot win
        if old is not None and own + max((best[k][0] for k in kids), default=0.0) >= old[0] - 1e-12:
            continue
        merged: dict[str, float] = {}
        for k in kids:
            merged.update(best[k][1])
        if node.eclass in merged:
            continue
        merged[node.eclass] = own
        total = sum(merged.values())
        if old is not None and total >= old[0] - 1e-12:
            continue
        best[node.eclass] = (total, merged, node)
        for parent in parents.get(node.eclass, []):
            if id(parent) not in queued:
                queued.add(id(parent))
                pending.append(parent)
    missing = [r for r in roots if r not in best]
    if missing:
        raise Unsupported("no typed term for a result")
    choice = {c: entry[2] for c, entry in best.items()}
    if mode == "tree":
        cost = dag_cost(graph, ser, choice, roots)
        assert cost is not None
        return Extracted(choice, cost)
    by_class: dict[str, list[Node]] = {}
    for node in candidates:
        by_class.setdefault(node.eclass, []).append(node)
    return Extracted(choice, improve(graph, ser, choice, roots, by_class))


def improve(graph: FunctionGraph, ser: Serialized, choice: dict[str, Node], roots: Sequence[str], by_class: dict[str, list[Node]],
            rounds: int = 3) -> float:  # fmt: skip
    """Local search on the whole program: greedy DAG extraction chooses each class for itself, so it
    cannot see that a subterm another result needs anyway is free. Each class the program uses tries
    its other nodes, and a node is kept when the program's DAG cost goes down. Returns the cost."""
    cost = dag_cost(graph, ser, choice, roots)
    assert cost is not None
    for _ in range(rounds):
        improved = False
        for eclass in reachable(choice, roots):
            current = choice[eclass]
            for node in by_class.get(eclass, []):
                if node is current or any(kind == "c" and c not in choice for kind, c in node.children):
                    continue
                choice[eclass] = node
                trial = dag_cost(graph, ser, choice, roots)
                if trial is not None and trial < cost - 1e-12:
                    cost, current, improved = trial, node, True
                else:
                    choice[eclass] = current
        if not improved:
            break
    return cost


def reachable(choice: dict[str, Node], roots: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    stack = list(roots)
    while stack:
        eclass = stack.pop()
        if eclass in seen:
            continue
        seen[eclass] = None
        stack.extend(c for kind, c in choice[eclass].children if kind == "c")
    return list(seen)


def dag_cost(graph: FunctionGraph, ser: Serialized, choice: dict[str, Node], roots: Sequence[str]) -> float | None:
    """The cost of the program the choice writes back, every class it reaches once; None if the
    choice is cyclic."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    total = 0.0
    for root in roots:
        stack: list[tuple[str, bool]] = [(root, False)]
        while stack:
            eclass, leaving = stack.pop()
            if leaving:
                state[eclass] = 2
                continue
            mark = state.get(eclass)
            if mark == 2:
                continue
            if mark == 1:
                return None
            state[eclass] = 1
            node = choice[eclass]
            total += node_cost(graph, ser, node)
            stack.append((eclass, True))
            stack.extend((c, False) for kind, c in node.children if kind == "c")
    return total


# -- writing back -----------------------------------------------------------------------


def write_back(graph: FunctionGraph, ser: Serialized, extracted: Extracted, roots: Sequence[str]) -> int:
    """Replace the body of `graph.fn` by the extracted term: fresh lets before `func.return`, the old
    ones erased. Returns the number of lets written."""
    rewriter = Rewriter()
    block = graph.fn.body.block
    ret = graph.ret
    origin: dict[str, Original] = {}
    for orig in graph.originals:
        origin.setdefault(ser.mark_class[graph.marks[orig.value]], orig)
    built: dict[str, SSAValue | tuple[SSAValue, ...] | list[SSAValue]] = {}
    ops_built: dict[str, Operation] = {}
    new_ops: list[Operation] = []

    def type_of(eclass: str) -> Attribute:
        t = graph.types.types[ser.types[eclass]]
        assert t is not None
        return t

    def build(root: str) -> None:
        stack: list[tuple[str, bool]] = [(root, False)]
        on_path: set[str] = set()
        while stack:
            eclass, ready = stack.pop()
            if eclass in built:
                continue
            node = extracted.choice[eclass]
            kids = [c for kind, c in node.children if kind == "c"]
            if not ready:
                if eclass in on_path:
                    raise Unsupported("the extracted term has a cycle")
                on_path.add(eclass)
                stack.append((eclass, True))
                stack.extend((k, False) for k in reversed(kids) if k not in built)
                continue
            on_path.discard(eclass)
            built[eclass] = make(eclass, node)

    def make(eclass: str, node: Node) -> Any:
        args = [built[c] if kind == "c" else c for kind, c in node.children]
        if node.op == "T":
            return block.args[args[0]]
        if node.op == "Nil":
            return []
        if node.op == "Cons":
            return [args[0], *args[1]]
        if node.op == "Res":
            return args[1][args[0]]
        op = construct(node.op, args, eclass)
        orig = origin.get(eclass)
        if orig is not None:
            for old, new in zip(orig.op.results if node.op == "Opaque" else [orig.value], op.results):
                new.name_hint = old.name_hint
            op.location = orig.op.location
        new_ops.append(op)
        ops_built[eclass] = op
        return op.results[0] if len(op.results) == 1 else tuple(op.results)

    def construct(kind: str, args: list[Any], eclass: str) -> Operation:
        binary = {"Add": core.AddOp, "Sub": core.SubOp, "Mul": core.MulOp, "Div": core.DivOp}
        unary = {"Neg": core.NegOp, "Exp": core.ExpOp, "Log": core.LogOp, "Sqrt": core.SqrtOp}
        if kind in binary:
            return binary[kind](args[0], args[1], type_of(eclass))
        if kind in unary:
            return unary[kind](args[0], type_of(eclass))
        if kind == "Pow":
            return core.PowOp(args[0], args[1], type_of(eclass))
        if kind == "Sum":
            return core.SumOp(args[0], graph.axes.items[args[1]], type_of(eclass))
        if kind == "Mean":
            return core.MeanOp(args[0], graph.axes.items[args[1]], type_of(eclass))
        if kind == "Dot":
            return core.DotOp(args[0], args[1], type_of(eclass))
        if kind == "Ein":
            labels, _ = graph.eins.items[args[0]]
            return core.EinOp([args[1], args[2]], labels, type_of(eclass))
        if kind == "SumTo":
            return core.SumToOp(args[0], args[1], type_of(eclass))
        if kind == "BroadcastLike":
            return core.BroadcastLikeOp(args[0], args[1], type_of(eclass))
        if kind == "ZerosLike":
            return core.ZerosLikeOp(args[0], type_of(eclass))
        if kind == "Field":
            return core.FieldOp(args[0], _field_name(args[0].type, args[1]), type_of(eclass))
        if kind == "SetField":
            return core.SetFieldOp(args[0], _field_name(args[0].type, args[1]), args[2], type_of(eclass))
        if kind == "Record":
            return core.RecordOp(args[1], graph.types.types[args[0]])  # type: ignore[arg-type]
        if kind == "Tuple":
            return core.TupleOp(args[1], graph.types.types[args[0]])
        if kind == "Proj":
            return core.ProjOp(args[0], args[1], type_of(eclass))
        if kind == "Const":
            return core.ConstantOp(graph.constants[args[0]], type_of(eclass))
        if kind == "Opaque":
            template: Operation = graph.headers.items[args[0]]
            op = template.clone()
            op.operands = list(args[1])
            return op
        raise Unsupported(f"no way to write back a '{kind}' node")

    for r in roots:
        build(r)
    results = [built[r] for r in roots]
    for op in new_ops:
        rewriter.insert_op(op, InsertPoint.before(ret))
    ret.operands = results  # type: ignore[assignment]
    fresh = {id(op) for op in new_ops}
    old = [op for op in block.ops if op is not ret and id(op) not in fresh]
    for op in reversed(old):
        rewriter.erase_op(op)
    return len(new_ops)


def _field_name(t: Attribute, index: int) -> str:
    assert isinstance(t, RecordType)
    return t.fields[index][0]
