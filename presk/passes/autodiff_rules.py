"""The adjoint of every PSK-Core primitive, as data: one entry per op, one line per rule where it fits.

`RULES[op class] = Rule(positions, adjoint)`: `positions` are the operands a
cotangent can flow to (a mask, a template whose values are not read or an
index tensor is never one of them), and `adjoint(b, op, ct)` returns, for
each of those positions, the cotangent contribution of that operand (or
None). `b` is an `Emit`: it builds ops into the function being generated
(the backward function, or the second half of a recomputing `.vjp`), and
`b.p(v)` is the primal value `v` as that function sees it (a residual the
forward function saved, or the forward value computed just before).

Each contribution has the operand's type exactly: where an operand was
broadcast (by name, section 3 of docs/reference.md), `b.unbroadcast` sums
the cotangent over the axes it lacks, over every leaf for a real that met a
parameter tree. Cotangents of records and tuples are kept as sparse trees
(`SparseCt`) until something needs them whole, so reading two fields of a
parameter record gives one `record` of two cotangents, not two
`set_field`s on zeros added together.

Primitives with no entry (`max`, `reduce_max`, `fold`, ...) are refused
with `E3004` where they occur; `docs/training.md` lists why, rule by rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from xdsl.builder import Builder
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, RealType, RecordType, Size, TensorType, TupleType, describe
from presk.dialects.psk_realize_nests import contraction


@dataclass
class SparseCt:
    """The cotangent of a record or tuple, known only at some fields (elements); the rest are zero.

    `template()` is the primal value of this type, read only when a missing
    part has to be written as zeros.
    """

    type: Attribute
    parts: dict[str | int, Ct]
    template: Callable[[], SSAValue]


Ct: TypeAlias = SSAValue | SparseCt
"""A cotangent: one value of the primal's type, or a sparse tree of them."""

Shaped: TypeAlias = Callable[[Attribute, "SSAValue | Callable[[], SSAValue]"], SSAValue]


def _keys(t: Attribute) -> list[str | int]:
    if isinstance(t, RecordType):
        return [n for n, _ in t.fields]
    assert isinstance(t, TupleType)
    return list(range(len(t.element_types)))


def _child_type(t: Attribute, key: str | int) -> Attribute:
    if isinstance(t, RecordType):
        ft = t.field_type(key)  # type: ignore[arg-type]
        assert ft is not None
        return ft
    assert isinstance(t, TupleType)
    return t.element_types.data[key]  # type: ignore[index]


def _leaves(t: Attribute, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], Attribute]]:
    if isinstance(t, RecordType | TupleType):
        return [leaf for k in _keys(t) for leaf in _leaves(_child_type(t, k), (*path, k))]
    return [(path, t)]


def fresh(base: str, taken: set[str]) -> str:
    """`base`, or `base_1`, `base_2`, ... : the first name not in `taken`, which it joins."""
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


@dataclass
class Emit:
    """Builds adjoint code at the end of one block.

    `primal(v)` maps a value of the function being differentiated to the
    value the generated code reads for it; the generator supplies it.
    """

    builder: Builder
    primal: Callable[[SSAValue], SSAValue]
    shaped: Shaped | None = None
    """(type, fallback): a value of that type the generated function has, else the fallback's.

    The fallback is a primal value (read through `primal`) or a function
    building one. None: always the fallback.
    """
    emitted: list[Operation] = field(default_factory=list)

    @staticmethod
    def at_end(block: Any, primal: Callable[[SSAValue], SSAValue], shaped: Shaped | None = None) -> Emit:
        return Emit(Builder(InsertPoint.at_end(block)), primal, shaped)

    def _shaped(self, t: Attribute, fallback: SSAValue | Callable[[], SSAValue]) -> SSAValue:
        if self.shaped is not None:
            return self.shaped(t, fallback)
        return self.p(fallback) if isinstance(fallback, SSAValue) else fallback()

    def p(self, v: SSAValue) -> SSAValue:
        return self.primal(v)

    def like(self, v: SSAValue) -> SSAValue:
        """A value of `v`'s type, for an op that reads only its template's type (`broadcast_like`, `zeros_like`).

        The generator may give any value of that type it already has, so a
        forward value is not saved for its shape alone.
        """
        return self._shaped(v.type, v)

    def op(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        self.emitted.append(op)
        return op.results[0]

    # -- arithmetic ---------------------------------------------------------------
    def const(self, x: float) -> SSAValue:
        return self.op(core.ConstantOp(x, RealType()))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(core.AddOp(a, b))

    def sub(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.op(core.SubOp(self._v(a), self._v(b)))

    def mul(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.op(core.MulOp(self._v(a), self._v(b)))

    def div(self, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.op(core.DivOp(self._v(a), self._v(b)))

    def neg(self, a: SSAValue) -> SSAValue:
        return self.op(core.NegOp(a))

    def exp(self, a: SSAValue) -> SSAValue:
        return self.op(core.ExpOp(a))

    def pow(self, a: SSAValue, n: int) -> SSAValue:
        return a if n == 1 else self.op(core.PowOp(a, n))

    def _v(self, x: SSAValue | float) -> SSAValue:
        return x if isinstance(x, SSAValue) else self.const(float(x))

    def size(self, s: Size) -> SSAValue:
        """A size as a real: a constant, or `psk_core.size` of its name (bound later)."""
        return self.const(float(s)) if isinstance(s, int) else self.op(core.SizeOp(s, RealType()))

    def count(self, sizes: Sequence[Size]) -> SSAValue:
        """The product of sizes, as a real (integers multiplied here, names at run time)."""
        known = 1
        names: list[str] = []
        for s in sizes:
            if isinstance(s, int):
                known *= s
            else:
                names.append(s)
        total = self.const(float(known)) if known != 1 or not names else None
        for n in names:
            total = self.size(n) if total is None else self.mul(total, self.size(n))
        assert total is not None
        return total

    # -- shapes -------------------------------------------------------------------
    def sum(self, x: SSAValue, axes: Sequence[str]) -> SSAValue:
        return self.op(core.SumOp(x, list(axes))) if axes else x

    def broadcast_like(self, x: SSAValue, template: SSAValue) -> SSAValue:
        return x if x.type == template.type else self.op(core.BroadcastLikeOp(x, template))

    def ein(self, inputs: Sequence[SSAValue], labels: Sequence[Sequence[str]], result: Attribute) -> SSAValue:
        """An `ein`; of two operands, in the order that makes it a contraction nest where one order does.

        The product of two terms is the same in either order (IEEE
        multiplication commutes), so the order is free, and a contraction
        nest gets the tiles, lanes and packs of its layout space: attention's
        derivative by its values, Σ_s ct[b, h, s, d] · p[b, h, s, t], is TN
        with p first.
        """
        op = core.EinOp(inputs, labels, result)
        if len(inputs) == 2 and contraction(op) is None:
            swapped = core.EinOp(inputs[::-1], labels[::-1], result)
            unused, op = (op, swapped) if contraction(swapped) is not None else (swapped, op)
            unused.erase()  # drops its uses of the inputs
        return self.op(op)

    def where(self, mask: SSAValue, a: SSAValue | float, b: SSAValue | float) -> SSAValue:
        return self.op(core.WhereOp(mask, self._v(a), self._v(b)))

    def unbroadcast(self, ct: SSAValue, target: Attribute) -> SSAValue:
        """`ct` summed down to `target`, the type of an operand that was broadcast into ct's type.

        Tensor axes the operand lacks are summed (`sum` over them: the same as
        `sum_to` without keeping the operand alive for its type); a real that
        met a parameter tree gets the sum over every leaf.
        """
        t = ct.type
        if t == target:
            return ct
        if isinstance(t, RecordType | TupleType):
            if isinstance(target, RealType):
                total: SSAValue | None = None
                for key in _keys(t):
                    leaf = self.unbroadcast(self.part_of(ct, key), target)
                    total = leaf if total is None else self.add(total, leaf)
                return total if total is not None else self.const(0.0)
            parts = [self.unbroadcast(self.part_of(ct, k), _child_type(target, k)) for k in _keys(t)]
            return self.build(target, parts)
        assert isinstance(t, TensorType)
        keep = target.names if isinstance(target, TensorType) else ()
        return self.sum(ct, [n for n in t.names if n not in keep])

    # -- trees --------------------------------------------------------------------
    def part_of(self, value: SSAValue, key: str | int) -> SSAValue:
        if isinstance(value.type, RecordType):
            return self.op(core.FieldOp(value, key))  # type: ignore[arg-type]
        return self.op(core.ProjOp(value, key))  # type: ignore[arg-type]

    def build(self, t: Attribute, parts: Sequence[SSAValue]) -> SSAValue:
        if isinstance(t, RecordType):
            return self.op(core.RecordOp(parts, t))
        return self.op(core.TupleOp(parts, t))

    def part(self, ct: Ct, key: str | int) -> Ct | None:
        """The cotangent of one field (element) of a tree's cotangent; None where it is zero."""
        if isinstance(ct, SparseCt):
            return ct.parts.get(key)
        return self.part_of(ct, key)

    def dense(self, ct: Ct) -> SSAValue:
        """`ct` as one value: a sparse tree becomes a `record`/`tuple`, zeros where it has no part."""
        if isinstance(ct, SSAValue):
            return ct
        parts: list[SSAValue] = []
        for key in _keys(ct.type):
            part = ct.parts.get(key)
            if part is None:
                template = ct.template
                like = self._shaped(_child_type(ct.type, key), lambda: self.part_of(template(), key))
                part = self.op(core.ZerosLikeOp(like))
            parts.append(self.dense(part))
        return self.build(ct.type, parts)

    def plus(self, a: Ct, b: Ct) -> Ct:
        """The sum of two cotangents of one value (sparse trees add part by part)."""
        if isinstance(a, SparseCt) and isinstance(b, SparseCt):
            parts = dict(a.parts)
            for key, part in b.parts.items():
                parts[key] = part if key not in parts else self.plus(parts[key], part)
            return SparseCt(a.type, parts, a.template)
        return self.add(self.dense(a), self.dense(b))

    def sparse(self, t: Attribute, parts: dict[str | int, Ct], template: SSAValue) -> SparseCt:
        """A sparse cotangent of the primal `template` (a value of the function being differentiated)."""
        return SparseCt(t, parts, lambda: self.p(template))

    # -- one-hot rows, for the adjoints of gather and cross_entropy -----------------
    def one_hot(self, ids: SSAValue, ones_from: SSAValue, axis: str, taken: set[str]) -> tuple[SSAValue, str]:
        """`onehot[ids..., c] = 1 if ids[...] == c else 0`, exactly, and the name `c` of its last axis.

        PSK-Core has no comparison, so the identity matrix is built from the
        causal mask: `L + Lᵀ − 1` with `L[r, c] = (c ≤ r)`. Its rows are
        gathered at `ids`. `ones_from` is a primal tensor with `axis` of the
        ids' range; only its type is used (its zeros, plus one).
        """
        t = ones_from.type
        assert isinstance(t, TensorType) and isinstance(ids.type, IndexTensorType)
        size = t.size_of(axis)
        ones = self.add(self.op(core.ZerosLikeOp(self.like(ones_from))), self.const(1.0))
        others = [n for n in t.names if n != axis]
        if others:
            ones = self.op(core.MeanOp(ones, others))  # a mean of ones is exactly 1
        r, c = fresh("r", taken), fresh("c", taken)
        square = TensorType([(r, size), (c, size)])
        outer = self.ein([ones, ones], [[r], [c]], square)
        mask = self.op(core.CausalMaskOp(IndexTensorType([(r, size), (c, size)], 2)))
        lower = self.where(mask, outer, 0.0)
        upper = self.ein([lower], [[c, r]], square)
        identity = self.sub(self.add(lower, upper), 1.0)
        return self.op(core.GatherOp(identity, ids)), c


    # -- layers of a stacked tree, for folds ---------------------------------------
    def layer_one_hots(self, stacked: SSAValue, layers: int) -> list[SSAValue]:
        """`e_l[r] = (r = l)` for every layer l, exactly, from a stacked tree's type (its first leaf's zeros).

        The positions `p[r] = Σ_c (c ≤ r) − 1` are integers, and `1 + max(−|p − l|, −1)`
        is 1 where p = l and 0 elsewhere: no comparison is needed.
        """
        path, leaf_t = next((path, t) for path, t in _leaves(stacked.type))
        leaf = stacked
        for key in path:
            leaf = self.part_of(leaf, key)
        assert isinstance(leaf_t, TensorType)
        ones = self.add(self.op(core.ZerosLikeOp(leaf)), self.const(1.0))
        if leaf_t.rank > 1:
            ones = self.op(core.MeanOp(ones, list(leaf_t.names[1:])))  # a mean of ones is exactly 1
        taken: set[str] = set()
        r, c = fresh("r", taken), fresh("c", taken)
        square = TensorType([(r, layers), (c, layers)])
        outer = self.ein([ones, ones], [[r], [c]], square)
        lower = self.where(self.op(core.CausalMaskOp(IndexTensorType([(r, layers), (c, layers)], 2))), outer, 0.0)
        positions = self.sub(self.sum(lower, [c]), 1.0)
        hots = []
        for layer in range(layers):
            distance = self.op(core.MaxOp(self.sub(positions, float(layer)), self.sub(float(layer), positions)))
            hots.append(self.add(self.const(1.0), self.op(core.MaxOp(self.neg(distance), self.const(-1.0)))))
        return hots

    def select_layer(self, hot: SSAValue, stacked: SSAValue, t: Attribute) -> SSAValue:
        """Layer l of a stacked tree: each leaf contracted with the one-hot `e_l` (exact: one term is not 0)."""
        if isinstance(t, RecordType | TupleType):
            keys = _keys(t)
            parts = [self.select_layer(hot, self.part_of(stacked, k), _child_type(t, k)) for k in keys]
            return self.build(core.unstack(t), parts)
        assert isinstance(t, TensorType)
        if t.rank == 1:  # a product and a sum (the kernel lowering has no dot of two vectors)
            return self.sum(self.mul(self.ein([hot], [[t.names[0]]], t), stacked), [t.names[0]])
        rest = list(t.names[1:])
        label = fresh("layer", set(rest))
        return self.ein([hot, stacked], [[label], [label, *rest]], TensorType(t.axes[1:]))

    def stack_layer(self, hot: SSAValue, value: SSAValue, t: Attribute) -> SSAValue:
        """A value of one layer placed at layer l of the stacked type `t`, zeros at the others."""
        if isinstance(t, RecordType | TupleType):
            parts = [self.stack_layer(hot, self.part_of(value, k), _child_type(t, k)) for k in _keys(t)]
            return self.build(t, parts)
        assert isinstance(t, TensorType)
        first = t.names[0]
        if t.rank == 1:
            return self.mul(self.ein([hot], [[first]], t), value)
        return self.ein([hot, value], [[first], list(t.names[1:])], t)


# --------------------------------------------------------------------------------------
# The rules that take more than a line.


def _dot(b: Emit, op: core.DotOp, ct: SSAValue) -> tuple[SSAValue, SSAValue]:
    """`r[i…, j…] = Σ_k x[i…, k] w[k, j…]`: ct_x = ct · wᵀ, ct_w = xᵀ · ct, as `ein`s over fresh labels."""
    xt, wt = op.lhs.type, op.rhs.type
    assert isinstance(xt, TensorType) and isinstance(wt, TensorType)
    x, w = b.p(op.lhs), b.p(op.rhs)
    # ct_x: labels named as x's axes (its output); w's other axes get fresh labels.
    taken = set(xt.names)
    wo = [fresh(n, taken) for n in wt.names[1:]]
    if isinstance(ct.type, RealType):  # two vectors: ct · w, relabelled as x
        ct_x = b.mul(ct, b.ein([w], [[xt.names[-1]]], xt))
    else:
        ct_x = b.ein([ct, w], [list(xt.names[:-1]) + wo, [xt.names[-1], *wo]], xt)
    taken = set(wt.names)
    xo = [fresh(n, taken) for n in xt.names[:-1]]
    if isinstance(ct.type, RealType):
        ct_w = b.mul(ct, b.ein([x], [[wt.names[0]]], wt))
    else:
        ct_w = b.ein([x, ct], [[*xo, wt.names[0]], xo + list(wt.names[1:])], wt)
    return ct_x, ct_w


def _ein(b: Emit, op: core.EinOp, ct: SSAValue) -> list[SSAValue]:
    """The cotangent of operand i is the ein of the result's cotangent with every other operand.

    Its labels are renamed so that operand i's labels read as its own axis
    names (the output of an `ein` is named by its labels); a label only
    operand i carries is summed away in the primal, so its cotangent is
    broadcast back along it.
    """
    out_labels = list(op.result.type.names)
    labels = [list(ls) for ls in op.operand_labels]
    contributions: list[SSAValue] = []
    for i, operand in enumerate(op.inputs):
        t = operand.type
        assert isinstance(t, TensorType)
        rename = dict(zip(labels[i], t.names))
        taken = set(t.names)
        for ls in [out_labels, *labels]:
            for label in ls:
                if label not in rename:
                    rename[label] = fresh(label, taken)
        elsewhere = set(out_labels).union(*(set(ls) for j, ls in enumerate(labels) if j != i))
        kept = [(rename[label], size) for label, size in zip(labels[i], t.sizes) if label in elsewhere]
        inputs = [ct] + [b.p(v) for j, v in enumerate(op.inputs) if j != i]
        in_labels = [[rename[label] for label in out_labels]] + [
            [rename[label] for label in ls] for j, ls in enumerate(labels) if j != i
        ]
        if kept:
            partial = b.ein(inputs, in_labels, TensorType(kept))
        else:  # operand i shares no label: the cotangent is the total of the product, everywhere
            everything = sorted({name for ls in in_labels for name in ls})
            sizes = {rename[label]: s for ls, v in zip(labels, op.inputs) for label, s in zip(ls, v.type.sizes)}
            partial = b.sum(b.ein(inputs, in_labels, TensorType([(n, sizes[n]) for n in everything])), everything)
        contributions.append(b.broadcast_like(partial, b.like(operand)) if partial.type != t else partial)
    return contributions


def _softmax(b: Emit, op: core.SoftmaxOp, ct: SSAValue) -> SSAValue:
    """ct_x = y · (ct − Σ_axis ct · y): zero at refused positions, where y is 0."""
    y = b.p(op.result)
    return b.mul(y, b.sub(ct, b.sum(b.mul(ct, y), [op.axis.data])))


def _cross_entropy(b: Emit, op: core.CrossEntropyOp, ct: SSAValue) -> SSAValue:
    """ct_logits = (softmax(logits) − onehot(targets)) · ct / N, N the number of target positions."""
    lt, tt = op.logits.type, op.targets.type
    assert isinstance(lt, TensorType) and isinstance(tt, IndexTensorType)
    axis = op.axis.data
    logits = b.p(op.logits)
    hot, _ = b.one_hot(b.p(op.targets), op.logits, axis, set(lt.names))
    hot = b.ein([hot], [[*tt.names, axis]], lt)  # the class axis back in its place
    y = b.op(core.SoftmaxOp(logits, axis))
    return b.mul(b.sub(y, hot), b.div(ct, b.count(tt.sizes)))


def _gather(b: Emit, op: core.GatherOp, ct: SSAValue) -> SSAValue:
    """A scatter-add as a contraction: ct_table[v, e…] = Σ_p onehot(ids)[p, v] · ct[p, e…]."""
    table_t, ids_t = op.table.type, op.ids.type
    assert isinstance(table_t, TensorType) and isinstance(ids_t, IndexTensorType)
    taken = set(table_t.names) | set(ids_t.names)
    hot, _ = b.one_hot(b.p(op.ids), op.table, table_t.names[0], taken)
    taken = set(table_t.names)
    positions = [fresh(n, taken) for n in ids_t.names]
    return b.ein([hot, ct], [[*positions, table_t.names[0]], [*positions, *table_t.names[1:]]], table_t)


def _max(b: Emit, op: core.MaxOp, ct: SSAValue) -> tuple[SSAValue, SSAValue]:
    """The larger operand takes the cotangent; at a tie each takes half, as JAX and PyTorch split it.

    With both operands widened to the result's type (`ct`'s),
    ct_a = where(a > b, ct, where(a = b, ct · ½, 0)) and ct_b = ct − ct_a:
    each is exactly ct, 0 or half of ct, and they sum to ct (ct − ct·½ is
    exact). Where an operand is NaN (so is the maximum) the other takes
    it. Each is then summed back to its operand's axes.
    """
    a, c = b.broadcast_like(b.p(op.lhs), ct), b.broadcast_like(b.p(op.rhs), ct)
    tie = b.where(b.op(core.CompareOp("eq", a, c)), b.mul(ct, 0.5), 0.0)
    ct_a = b.where(b.op(core.CompareOp("gt", a, c)), ct, tie)
    return _u(b, ct_a, op.lhs), _u(b, b.sub(ct, ct_a), op.rhs)


def _reduce_max(b: Emit, op: core.ReduceMaxOp, ct: SSAValue) -> SSAValue:
    """The maximal elements share the cotangent equally (JAX's convention): ct_x = where(x = y, ct / n, 0).

    n counts the elements equal to their maximum y; one maximum takes ct
    itself (ct / 1). A NaN in the reduced elements makes y NaN, equal to
    none, and every element's cotangent 0 (the quotient by n = 0 is never
    selected).
    """
    x = b.p(op.operand)
    hit = b.op(core.CompareOp("eq", x, b.broadcast_like(b.p(op.result), x)))
    ones = b.add(b.op(core.ZerosLikeOp(b.like(op.operand))), b.const(1.0))
    count = b.sum(b.where(hit, ones, 0.0), list(op.axes))
    return b.where(hit, b.div(b.broadcast_like(ct, x), b.broadcast_like(count, x)), 0.0)


def _pow(b: Emit, op: core.PowOp, ct: SSAValue) -> SSAValue:
    n = op.n
    return ct if n == 1 else b.mul(ct, b.mul(float(n), b.pow(b.p(op.operand), n - 1)))


def _gelu(b: Emit, op: core.GeluOp, ct: SSAValue) -> SSAValue:
    """gelu'(x) = Φ(x) + x·φ(x), Φ(x) = ½·(1 + erf(x·(1/√2))) and φ(x) = exp(−x²/2)/√(2π): finite everywhere, 0 included."""
    x = b.p(op.operand)
    cdf = b.mul(0.5, b.add(b.const(1.0), b.op(core.ErfOp(b.mul(x, 0.7071067811865475)))))  # 1/√2
    density = b.div(b.exp(b.mul(-0.5, b.mul(x, x))), 2.5066282746310002)  # √(2π)
    return b.mul(ct, b.add(cdf, b.mul(x, density)))


def _erf(b: Emit, op: core.ErfOp, ct: SSAValue) -> SSAValue:
    """erf'(x) = (2/√π)·exp(−x²)."""
    x = b.p(op.operand)
    return b.mul(ct, b.mul(1.1283791670955126, b.exp(b.neg(b.mul(x, x)))))


def _mean(b: Emit, op: core.MeanOp, ct: SSAValue) -> SSAValue:
    t = op.operand.type
    assert isinstance(t, TensorType)
    count = b.count([t.size_of(a) for a in op.axes])
    return b.div(b.broadcast_like(ct, b.like(op.operand)), count)


def _split_back(b: Emit, op: core.SplitOp, ct: SSAValue) -> SSAValue:
    (first, _), (second, _) = op.parts()
    return b.op(core.MergeOp(ct, first, second, op.operand.type))


def _merge_back(b: Emit, op: core.MergeOp, ct: SSAValue) -> SSAValue:
    return b.op(core.SplitOp(ct, op.into()[0], op.operand.type))


def _set_field(b: Emit, op: core.SetFieldOp, ct: Ct) -> tuple[Ct | None, Ct | None]:
    """The record's cotangent is ct without the replaced field; the value's is that field of ct."""
    name = op.field_name.data
    t = op.record.type
    rest = {n: part for n in _keys(t) if n != name and (part := b.part(ct, n)) is not None}
    return b.sparse(t, rest, op.record), b.part(ct, name)


# --------------------------------------------------------------------------------------
# The table.

Adjoint: TypeAlias = Callable[[Emit, Any, Any], Sequence["Ct | None"]]


@dataclass(frozen=True)
class Rule:
    positions: tuple[int, ...]
    """The operands a cotangent flows to."""
    adjoint: Adjoint
    """(b, op, ct) -> one contribution (or None) per position."""
    sparse: bool = False
    """True when the rule takes the cotangent as it is (a sparse tree); else it is made whole first."""


def _u(b: Emit, ct: SSAValue, operand: SSAValue) -> SSAValue:
    return b.unbroadcast(ct, operand.type)


RULES: dict[type[Operation], Rule] = {
    core.AddOp: Rule((0, 1), lambda b, op, ct: (_u(b, ct, op.lhs), _u(b, ct, op.rhs))),
    core.SubOp: Rule((0, 1), lambda b, op, ct: (_u(b, ct, op.lhs), _u(b, b.neg(ct), op.rhs))),
    core.MulOp: Rule((0, 1), lambda b, op, ct: (_u(b, b.mul(ct, b.p(op.rhs)), op.lhs), _u(b, b.mul(ct, b.p(op.lhs)), op.rhs))),
    core.DivOp: Rule((0, 1), lambda b, op, ct: (_u(b, b.div(ct, b.p(op.rhs)), op.lhs),
                                                _u(b, b.neg(b.div(b.mul(ct, b.p(op.result)), b.p(op.rhs))), op.rhs))),
    core.NegOp: Rule((0,), lambda b, op, ct: (b.neg(ct),)),
    core.ExpOp: Rule((0,), lambda b, op, ct: (b.mul(ct, b.p(op.result)),)),
    core.LogOp: Rule((0,), lambda b, op, ct: (b.div(ct, b.p(op.operand)),)),
    core.SqrtOp: Rule((0,), lambda b, op, ct: (b.div(b.mul(ct, 0.5), b.p(op.result)),)),
    core.TanhOp: Rule((0,), lambda b, op, ct: (b.mul(ct, b.sub(1.0, b.mul(b.p(op.result), b.p(op.result)))),)),
    core.ErfOp: Rule((0,), lambda b, op, ct: (_erf(b, op, ct),)),
    core.GeluOp: Rule((0,), lambda b, op, ct: (_gelu(b, op, ct),)),
    core.PowOp: Rule((0,), lambda b, op, ct: (_pow(b, op, ct),)),
    core.MaxOp: Rule((0, 1), _max),
    core.WhereOp: Rule((1, 2), lambda b, op, ct: (_u(b, b.where(b.p(op.cond), ct, 0.0), op.on_true),
                                                  _u(b, b.where(b.p(op.cond), 0.0, ct), op.on_false))),
    core.SumOp: Rule((0,), lambda b, op, ct: (b.broadcast_like(ct, b.like(op.operand)),)),
    core.MeanOp: Rule((0,), lambda b, op, ct: (_mean(b, op, ct),)),
    core.ReduceMaxOp: Rule((0,), lambda b, op, ct: (_reduce_max(b, op, ct),)),
    core.DotOp: Rule((0, 1), _dot),
    core.EinOp: Rule((), _ein),  # every operand: positions are taken from the op (variadic)
    core.SoftmaxOp: Rule((0,), lambda b, op, ct: (_softmax(b, op, ct),)),
    core.CrossEntropyOp: Rule((0,), lambda b, op, ct: (_cross_entropy(b, op, ct),)),
    core.GatherOp: Rule((0,), lambda b, op, ct: (_gather(b, op, ct),)),
    core.BroadcastLikeOp: Rule((0,), lambda b, op, ct: (_u(b, ct, op.operand),)),
    core.SumToOp: Rule((0,), lambda b, op, ct: (b.broadcast_like(ct, b.like(op.operand)),)),
    core.ZerosLikeOp: Rule((), lambda b, op, ct: ()),
    core.SplitOp: Rule((0,), lambda b, op, ct: (_split_back(b, op, ct),)),
    core.MergeOp: Rule((0,), lambda b, op, ct: (_merge_back(b, op, ct),)),
    core.RecordOp: Rule((), lambda b, op, ct: [b.part(ct, n) for n, _ in op.result.type.fields], sparse=True),
    core.FieldOp: Rule((0,), lambda b, op, ct: (b.sparse(op.record.type, {op.field_name.data: ct}, op.record),), sparse=True),
    core.SetFieldOp: Rule((0, 1), _set_field, sparse=True),
    core.TupleOp: Rule((), lambda b, op, ct: [b.part(ct, i) for i in range(len(op.elements))], sparse=True),
    core.ProjOp: Rule((0,), lambda b, op, ct: (b.sparse(op.tuple.type, {op.index.data: ct}, op.tuple),), sparse=True),
    core.ConstantOp: Rule((), lambda b, op, ct: ()),
    core.SizeOp: Rule((), lambda b, op, ct: ()),
    core.ArangeOp: Rule((), lambda b, op, ct: ()),
    core.CausalMaskOp: Rule((), lambda b, op, ct: ()),
    core.CompareOp: Rule((), lambda b, op, ct: ()),  # a mask: piecewise constant, nothing flows back
}  # fmt: skip
"""The adjoint of each primitive. Variadic ops (`ein`, `record`, `tuple`) list `()` and flow to every operand."""

VARIADIC: frozenset[type[Operation]] = frozenset({core.EinOp, core.RecordOp, core.TupleOp})

def why_not(op: Operation) -> str | None:
    """Why `op` gets no derivative (E3004's reason; "" for an op no rule knows, a plugin's), or None."""
    if type(op) not in RULES:
        return ""
    if isinstance(op, core.MaxOp) and not isinstance(op.result.type, TensorType):
        return (f"max gives {describe(op.result.type)}, not a tensor, and its cotangent is routed by "
                "psk_core.compare, whose masks are tensors")  # fmt: skip
    return None

BY_CALLEE: frozenset[type[Operation]] = frozenset({core.FoldOp})
"""Differentiated through its callee's generated functions (as `func.call` is), not by a rule of this table."""


def positions_of(rule: Rule, op: Operation) -> tuple[int, ...]:
    """The operand positions a cotangent flows to through `op`."""
    return tuple(range(len(op.operands))) if type(op) in VARIADIC else rule.positions
