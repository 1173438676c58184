"""What launches, and what kind of nest it is: the seed's classification, as pure functions.

A nest is one loop nest launched as one kernel. In PSK-Realize every launch is
either a fusion group (elementwise members) or a single PSK-Core primitive
wrapped in a `psk_realize.nest`. A nest is a *contraction* (a `dot` whose
right operand has rank two, or an `ein` whose output is the outer axes, then
I, then J, summed over one axis K), a *softmax*, or *other*; the kind decides
which layout decisions it has.

Kept apart from the dialect module so the fusion pass, the plan check, the
launch counter and the kernel lowering share one definition.
"""

from __future__ import annotations

import operator
import weakref
from dataclasses import dataclass
from typing import Any, Literal

from xdsl.ir import Operation

from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import Size, TensorType

NestKind = Literal["contraction", "softmax", "other"]

LAUNCHING_OPS: tuple[type[Operation], ...] = (
    core.SumOp, core.MeanOp, core.ReduceMaxOp,
    core.DotOp, core.EinOp, core.SoftmaxOp, core.CrossEntropyOp, core.GatherOp,
    core.BroadcastLikeOp, core.SumToOp, core.ZerosLikeOp, core.ArangeOp, core.CausalMaskOp, core.CompareOp,
)  # fmt: skip
"""Non-elementwise primitives that compute or move data, so each is a kernel of its own.

Not here: `split` and `merge` (a row-major buffer reshaped is a view),
records, fields, tuples, constants, sizes (no data of their own), calls and
folds (their callee's nests launch)."""


def is_elementwise(op: Operation) -> bool:
    return isinstance(op, core.ELEMENTWISE_OPS)


def launches(op: Operation) -> bool:
    """Whether `op`, as a PSK-Core primitive, is a kernel launch of its own or a group member."""
    return is_elementwise(op) or isinstance(op, LAUNCHING_OPS)


@dataclass(frozen=True)
class Contraction:
    """The axes of a contraction nest: out[outer..., I, J] = Σ_K a[outer..., I, K] · b[..., K, J].

    `nt` is true when operand 1 carries K innermost (`b[..., J, K]`): J is
    then not contiguous, which is what the pack decision changes. `tn` is
    true when both operands carry the summed axes before I and J
    (`a[outer..., K..., I]`, `b[..., K..., J]`): a dot's right derivative,
    xᵀ · ct, and attention's derivatives by their keys and values. There K
    may be several axes (a dot's derivative sums over every leading axis,
    batch and seq): `k_outer` are the summed axes before the innermost one,
    outermost first, iterated as one loop each in the order of their flat
    index, and `k`, `k_size` the innermost, which a k-block divides.
    """

    outer: tuple[str, ...]
    i: str
    j: str
    k: str
    j_size: Size
    k_size: Size
    nt: bool
    is_dot: bool
    tn: bool = False
    k_outer: tuple[str, ...] = ()

    @property
    def summed(self) -> tuple[str, ...]:
        """Every summed axis, outermost first (K last)."""
        return (*self.k_outer, self.k)


def contraction(op: Operation) -> Contraction | None:
    """The contraction pattern of `op`, or None when it is not a contraction nest.

    Kept per op while its operand types, result type and properties are the
    same objects: the layout checks ask it of the same nest for every point
    of its space (`presk plan` prices thousands), and reading a pattern from
    its types costs some 9 µs, comparing the objects under 1. A conversion
    that retypes an operand in place makes a new type object, so the pattern
    is read again.
    """
    if not isinstance(op, core.DotOp | core.EinOp):
        return None
    inputs = [v.type for v in op.operands]
    inputs.append(op.results[0].type)
    inputs.extend(op.properties.values())
    kept = _CONTRACTIONS.get(op)
    if kept is not None and len(kept[0]) == len(inputs) and all(map(operator.is_, kept[0], inputs)):
        return kept[1]
    found = _dot_contraction(op) if isinstance(op, core.DotOp) else _ein_contraction(op)
    _CONTRACTIONS[op] = (tuple(inputs), found)
    return found


_CONTRACTIONS: weakref.WeakKeyDictionary[Operation, tuple[tuple[Any, ...], Contraction | None]] = (
    weakref.WeakKeyDictionary()
)


def _dot_contraction(op: core.DotOp) -> Contraction | None:
    x, w = op.operands[0].type, op.operands[1].type
    if not isinstance(x, TensorType) or not isinstance(w, TensorType) or w.rank != 2 or x.rank < 2:
        return None
    (i, _), (k, k_size) = x.axes[-2], x.axes[-1]
    j, j_size = w.axes[1]
    return Contraction(tuple(x.names[:-2]), i, j, k, j_size, k_size, nt=False, is_dot=True)


def _ein_contraction(op: core.EinOp) -> Contraction | None:
    if len(op.inputs) != 2 or not op.summed:
        return None
    out = op.result.type
    if not isinstance(out, TensorType) or out.rank < 2:
        return None
    a, b = op.operand_labels
    *outer, i, j = out.names
    outer_t = tuple(outer)
    if len(op.summed) > 1 or a[-1] == i:
        return _transposed_contraction(op, outer_t, i, j)
    (k,) = op.summed
    if a != (*outer_t, i, k):
        return None
    b_outer, b_inner = b[:-2], b[-2:]
    if b_inner not in ((k, j), (j, k)) or not _is_subsequence(b_outer, outer_t):
        return None
    j_size = out.size_of(j)
    k_size = op.inputs[0].type.sizes[a.index(k)]
    return Contraction(outer_t, i, j, k, j_size, k_size, nt=b_inner == (j, k), is_dot=False)


def _transposed_contraction(op: core.EinOp, outer: tuple[str, ...], i: str, j: str) -> Contraction | None:
    """The TN pattern: out[outer..., I, J] = Σ_K a[outer..., K..., I] · b[..., K..., J], K one axis or several."""
    a, b = op.operand_labels
    summed = a[len(outer) : -1]
    if a[: len(outer)] != outer or a[-1] != i or set(summed) != set(op.summed) or len(summed) != len(op.summed):
        return None
    b_outer = b[: len(b) - len(summed) - 1]
    if b[len(b_outer) :] != (*summed, j) or not _is_subsequence(b_outer, outer):
        return None
    k = summed[-1]
    k_size = op.inputs[0].type.sizes[a.index(k)]
    return Contraction(
        outer, i, j, k, op.result.type.size_of(j), k_size, nt=False, is_dot=False, tn=True, k_outer=tuple(summed[:-1])
    )


def _is_subsequence(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    it = iter(whole)
    return all(name in it for name in part)


def nest_kind(op: Operation) -> NestKind:
    """The kind of the nest whose primitive is `op` (a group's members are 'other')."""
    if contraction(op) is not None:
        return "contraction"
    if isinstance(op, core.SoftmaxOp):
        return "softmax"
    return "other"
