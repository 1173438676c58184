"""The typing rules of PSK-Core, as functions from operand types to a result type.

Each op's verifier calls its rule and compares the result with the declared
result type; passes call the same rules to type what they build. A rule
raises `VerifyException` with a message that names the violated condition.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

from presk.dialects.psk_core_types import (
    IndexTensorType,
    RealType,
    RecordType,
    Size,
    TensorType,
    TupleType,
    describe,
)

Axes = tuple[tuple[str, Size], ...]


def is_subsequence(small: Axes, big: Axes) -> bool:
    """True when `small`'s axes occur in `big` in the same order (names and sizes)."""
    it = iter(big)
    return all(any(ax == b for b in it) for ax in small)


def broadcast_axes(a: Axes, b: Axes) -> Axes:
    """Broadcast two axis lists: one must be a subsequence of the other, by name.

    Matching by name (not position) is what named axes buy: a bias `[embed]`
    and a mean `[batch, seq]` both broadcast into `[batch, seq, embed]`.
    """
    if is_subsequence(b, a):
        return a
    if is_subsequence(a, b):
        return b
    raise VerifyException(
        f"cannot broadcast [{_axes_str(a)}] with [{_axes_str(b)}]: "
        "the axes of one operand must appear, in order and with equal sizes, in the other's"
    )


def _axes_str(axes: Axes) -> str:
    return ", ".join(f"{n}: {s}" for n, s in axes)


def elementwise(types: Sequence[Attribute], op: str) -> Attribute:
    """Result type of an elementwise primitive, applied leaf by leaf to parameter trees."""
    records = [t for t in types if isinstance(t, RecordType | TupleType)]
    if records:
        return _elementwise_tree(types, op)
    axes: Axes = ()
    for t in types:
        if isinstance(t, RealType):
            continue
        if not isinstance(t, TensorType):
            raise VerifyException(f"'{op}' takes reals, tensors of reals or parameter trees, not {describe(t)}")
        axes = broadcast_axes(axes, t.axes) if axes else t.axes
    return TensorType(axes) if axes else RealType()


def _elementwise_tree(types: Sequence[Attribute], op: str) -> Attribute:
    """Trees combine with trees of the same structure and with scalars, leaf by leaf."""
    shape = next(t for t in types if isinstance(t, RecordType | TupleType))
    for t in types:
        if isinstance(t, RealType):
            continue
        if type(t) is not type(shape):
            raise VerifyException(
                f"'{op}' on a parameter tree takes trees of the same structure or reals, "
                f"got {describe(shape)} and {describe(t)}"
            )
    if isinstance(shape, RecordType):
        names = [n for n, _ in shape.fields]
        for t in types:
            if isinstance(t, RecordType) and [n for n, _ in t.fields] != names:
                raise VerifyException(
                    f"'{op}' on records needs the same fields in the same order, "
                    f"got {describe(shape)} and {describe(t)}"
                )
        return RecordType(
            (n, elementwise([_child(t, i) for t in types], op)) for i, n in enumerate(names)
        )
    assert isinstance(shape, TupleType)
    n = len(shape.element_types)
    for t in types:
        if isinstance(t, TupleType) and len(t.element_types) != n:
            raise VerifyException(f"'{op}' on tuples needs equal lengths, got {describe(shape)} and {describe(t)}")
    return TupleType(elementwise([_child(t, i) for t in types], op) for i in range(n))


def _child(t: Attribute, i: int) -> Attribute:
    if isinstance(t, RecordType):
        return t.field_types.data[i]
    if isinstance(t, TupleType):
        return t.element_types.data[i]
    return t


def reduce(x: Attribute, axes: Sequence[str], op: str) -> Attribute:
    """`sum`, `mean`, `reduce_max` remove the named axes; none left gives a real."""
    if not isinstance(x, TensorType):
        raise VerifyException(f"'{op}' reduces a tensor of reals, not {describe(x)}")
    if not axes:
        raise VerifyException(f"'{op}' needs at least one axis to reduce over")
    if len(set(axes)) != len(axes):
        raise VerifyException(f"'{op}' names an axis twice: [{', '.join(axes)}]")
    for a in axes:
        if a not in x.names:
            raise VerifyException(f"'{op}' over axis '{a}', which {describe(x)} does not have")
    kept = tuple(ax for ax in x.axes if ax[0] not in axes)
    return TensorType(kept) if kept else RealType()


def dot(x: Attribute, w: Attribute) -> Attribute:
    """Contract the last axis of `x` with the first of `w`."""
    if not isinstance(x, TensorType) or not isinstance(w, TensorType):
        raise VerifyException(f"'dot' takes two tensors, got {describe(x)} and {describe(w)}")
    (kn, ks), (wn, ws) = x.axes[-1], w.axes[0]
    if ks != ws:
        raise VerifyException(
            f"'dot' contracts the last axis of the left operand ({kn}: {ks}) with the first "
            f"of the right ({wn}: {ws}); their sizes differ"
        )
    out = x.axes[:-1] + w.axes[1:]
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise VerifyException(f"'dot' would give an axis name twice: [{', '.join(names)}]")
    return TensorType(out) if out else RealType()


def ein(operands: Sequence[Attribute], labels: Sequence[Sequence[str]], out_names: Sequence[str]) -> Axes:
    """Einsum over named axes: the output axes are `out_names`, every other label is summed.

    Returns the output axes with their sizes (the caller builds the type).
    """
    if len(operands) != len(labels):
        raise VerifyException("'ein' needs one label list per operand")
    sizes: dict[str, Size] = {}
    for t, ls in zip(operands, labels, strict=True):
        if not isinstance(t, TensorType):
            raise VerifyException(f"'ein' takes tensors, not {describe(t)}")
        if len(ls) != t.rank:
            raise VerifyException(f"'ein' labels [{', '.join(ls)}] do not match the {t.rank} axes of {describe(t)}")
        if len(set(ls)) != len(ls):
            raise VerifyException(f"'ein' labels an operand's two axes alike: [{', '.join(ls)}]")
        for label, size in zip(ls, t.sizes, strict=True):
            if sizes.setdefault(label, size) != size:
                raise VerifyException(f"'ein' label '{label}' has sizes {sizes[label]} and {size}")
    if len(set(out_names)) != len(out_names):
        raise VerifyException(f"'ein' output names an axis twice: [{', '.join(out_names)}]")
    for n in out_names:
        if n not in sizes:
            raise VerifyException(f"'ein' output axis '{n}' is no operand's label")
    return tuple((n, sizes[n]) for n in out_names)


def softmax(x: Attribute, axis: str, mask: Attribute | None) -> Attribute:
    if not isinstance(x, TensorType):
        raise VerifyException(f"'softmax' takes a tensor of reals, not {describe(x)}")
    if axis not in x.names:
        raise VerifyException(f"'softmax' over axis '{axis}', which {describe(x)} does not have")
    if mask is not None:
        _check_mask(mask, x.axes, "softmax")
    return x


def _check_mask(mask: Attribute, into: Axes, op: str) -> None:
    if not isinstance(mask, IndexTensorType) or mask.range != 2:
        raise VerifyException(f"'{op}' takes a mask of indices in [0, 2), not {describe(mask)}")
    if not is_subsequence(mask.axes, into):
        raise VerifyException(f"'{op}' mask axes [{_axes_str(mask.axes)}] do not broadcast into [{_axes_str(into)}]")


def where(cond: Attribute, a: Attribute, b: Attribute) -> Attribute:
    result = elementwise([a, b], "where")
    if not isinstance(result, TensorType | RealType):
        raise VerifyException("'where' selects between reals or tensors, not parameter trees")
    _check_mask(cond, result.axes if isinstance(result, TensorType) else (), "where")
    return result


def compare(a: Attribute, b: Attribute) -> Attribute:
    """A mask of the operands' axes; both are tensors of one type (an index tensor has at least one axis)."""
    if a != b or not isinstance(a, TensorType):
        raise VerifyException(
            f"'compare' takes two tensors of one type, got {describe(a)} and {describe(b)} (broadcast_like widens one)"
        )
    return IndexTensorType(a.axes, 2)


def cross_entropy(logits: Attribute, targets: Attribute, axis: str) -> Attribute:
    """Mean over every target position of −log softmax(logits)[target] along `axis`."""
    if not isinstance(logits, TensorType) or not isinstance(targets, IndexTensorType):
        raise VerifyException(
            f"'cross_entropy' takes logits (a tensor) and targets (indices), "
            f"got {describe(logits)} and {describe(targets)}"
        )
    if axis not in logits.names:
        raise VerifyException(f"'cross_entropy' over class axis '{axis}', which the logits do not have")
    rest = tuple(ax for ax in logits.axes if ax[0] != axis)
    if rest != targets.axes:
        raise VerifyException(
            f"'cross_entropy' targets have axes [{_axes_str(targets.axes)}], the logits without "
            f"'{axis}' have [{_axes_str(rest)}]"
        )
    if targets.range != logits.size_of(axis):
        raise VerifyException(
            f"'cross_entropy' targets range over {targets.range}, the class axis '{axis}' has {logits.size_of(axis)}"
        )
    return RealType()


def gather(table: Attribute, ids: Attribute) -> Attribute:
    """Embedding lookup: rows of `table` (its first axis) indexed by `ids`."""
    if not isinstance(table, TensorType) or not isinstance(ids, IndexTensorType):
        raise VerifyException(f"'gather' takes a table and indices, got {describe(table)} and {describe(ids)}")
    if table.sizes[0] != ids.range:
        raise VerifyException(
            f"'gather' indices range over {ids.range}, the table's first axis '{table.names[0]}' has {table.sizes[0]}"
        )
    out = ids.axes + table.axes[1:]
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise VerifyException(f"'gather' would give an axis name twice: [{', '.join(names)}]")
    return TensorType(out)


def broadcasts_into(small: Attribute, big: Attribute) -> bool:
    """True when `small` broadcasts into `big` without widening it."""
    try:
        return elementwise([small, big], "broadcast") == big
    except VerifyException:
        return False


def split(x: Attribute, axis: str, parts: Axes) -> Attribute:
    if not isinstance(x, TensorType):
        raise VerifyException(f"'split' takes a tensor, not {describe(x)}")
    if axis not in x.names:
        raise VerifyException(f"'split' of axis '{axis}', which {describe(x)} does not have")
    _check_product(x.size_of(axis), [s for _, s in parts], "split", axis)
    i = x.names.index(axis)
    return TensorType(x.axes[:i] + parts + x.axes[i + 1 :])


def merge(x: Attribute, first: str, second: str, into: tuple[str, Size]) -> Attribute:
    if not isinstance(x, TensorType):
        raise VerifyException(f"'merge' takes a tensor, not {describe(x)}")
    names = x.names
    if first not in names or second not in names or names.index(second) != names.index(first) + 1:
        raise VerifyException(f"'merge' needs adjacent axes '{first}', '{second}' of {describe(x)}")
    _check_product(into[1], [x.size_of(first), x.size_of(second)], "merge", into[0])
    i = names.index(first)
    return TensorType(x.axes[:i] + (into,) + x.axes[i + 2 :])


def _check_product(whole: Size, parts: Sequence[Size], op: str, axis: str) -> None:
    """Sizes are checked here when all are integers, else when they are bound."""
    if isinstance(whole, int) and all(isinstance(p, int) for p in parts):
        product = 1
        for p in parts:
            product *= p  # type: ignore[operator]
        if product != whole:
            raise VerifyException(f"'{op}' of axis '{axis}': {' * '.join(map(str, parts))} != {whole}")
