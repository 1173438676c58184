"""The types of PSK-Core: reals, tensors with named axes, index tensors, records, tuples.

Axis sizes are symbolic until bound: an integer, or a name that is either a
compile-time constant (declared by `psk_core.const_dim`) or a run-time
dimension variable (bound by `--dim` or `psk-bind`). Two sizes are equal
when they are the same integer or the same name; anything else is decided
when the sizes are bound, by the interpreter or `psk-bind`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeAlias

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

Size: TypeAlias = int | str
"""An axis size: an integer, or the name of a constant or dimension variable."""

SizeAttr: TypeAlias = IntAttr | StringAttr


def size_attr(size: Size) -> SizeAttr:
    return IntAttr(size) if isinstance(size, int) else StringAttr(size)


def size_value(attr: Attribute) -> Size:
    if isinstance(attr, IntAttr):
        return attr.data
    if isinstance(attr, StringAttr):
        return attr.data
    raise VerifyException(f"an axis size is an integer or a name, not {attr}")


def _parse_size(parser: AttrParser) -> SizeAttr:
    if (value := parser.parse_optional_integer(allow_boolean=False)) is not None:
        return IntAttr(value)
    pos = parser.pos
    name = parser.parse_identifier(" (an axis size: integer or name)")
    if "." in name:
        parser.raise_error(f"size name '{name}': names of sizes are letters, digits and '_'", pos, parser.pos)
    return StringAttr(name)


def _print_size(printer: Printer, size: Attribute) -> None:
    printer.print_string(str(size_value(size)))


def _parse_axes(parser: AttrParser) -> tuple[list[StringAttr], list[SizeAttr]]:
    """Parse `[name: size, ...]`."""
    names: list[StringAttr] = []
    sizes: list[SizeAttr] = []

    def parse_axis() -> None:
        names.append(StringAttr(parser.parse_identifier(" (an axis name)")))
        parser.parse_punctuation(":", " after an axis name")
        sizes.append(_parse_size(parser))

    parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_axis)
    return names, sizes


def _print_axes(printer: Printer, names: Sequence[str], sizes: Sequence[Attribute]) -> None:
    printer.print_string("[")
    printer.print_list(
        zip(names, sizes, strict=True),
        lambda ax: (printer.print_string(f"{ax[0]}: "), _print_size(printer, ax[1])),
    )
    printer.print_string("]")


MAX_SIZE = 1 << 40
"""The largest axis size, written in a type or bound by `--dim`. An axis of 2^40 elements is 8 TiB in f64,
more than any machine presk targets holds, so a larger one is a typo; and a size past 2^63 could not even be
a kernel's 64-bit index constant (LLVM would be handed an integer its `i64` cannot hold)."""


def shown_size(value: int) -> str:
    """A size as a message shows it: whole up to 24 digits, else its first digits and its length (a literal of
    thousands of digits parses, and would fill the terminal)."""
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"


def _verify_axes(names: Sequence[str], sizes: Sequence[Attribute]) -> None:
    if len(names) == 0:
        raise VerifyException("a tensor has at least one axis; a value with none is !psk_core.real")
    if len(set(names)) != len(names):
        raise VerifyException(f"axis names must be distinct, got [{', '.join(names)}]")
    for name, size in zip(names, sizes, strict=True):
        value = size_value(size)
        if isinstance(value, int) and value <= 0:
            raise VerifyException(f"axis '{name}' has size {value}; sizes are positive")
        if isinstance(value, int) and value > MAX_SIZE:
            raise VerifyException(f"axis '{name}' has size {shown_size(value)}; sizes are at most 2^40 = {MAX_SIZE}")


@irdl_attr_definition
class RealType(ParametrizedAttribute, TypeAttribute):
    """A real scalar. Its machine type comes later, with the realization."""

    name = "psk_core.real"


class AxesMixin:
    """Shared queries of the two kinds of tensor type, which both carry named axes."""

    axis_names: ArrayAttr[StringAttr]
    axis_sizes: ArrayAttr[Attribute]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.data for a in self.axis_names)

    @property
    def sizes(self) -> tuple[Size, ...]:
        return tuple(size_value(s) for s in self.axis_sizes)

    @property
    def axes(self) -> tuple[tuple[str, Size], ...]:
        return tuple(zip(self.names, self.sizes, strict=True))

    @property
    def rank(self) -> int:
        return len(self.axis_names)

    def size_of(self, axis: str) -> Size:
        return dict(self.axes)[axis]


@irdl_attr_definition
class TensorType(AxesMixin, ParametrizedAttribute, TypeAttribute):
    """A tensor of reals: `!psk_core.tensor<[batch: B, seq: T, embed: 64]>`."""

    name = "psk_core.tensor"

    axis_names: ArrayAttr[StringAttr]
    axis_sizes: ArrayAttr[Attribute]

    def __init__(self, axes: Iterable[tuple[str, Size]]) -> None:
        axes = list(axes)
        super().__init__(
            ArrayAttr([StringAttr(n) for n, _ in axes]),
            ArrayAttr([size_attr(s) for _, s in axes]),
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            names, sizes = _parse_axes(parser)
        return (ArrayAttr(names), ArrayAttr(sizes))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_axes(printer, self.names, self.axis_sizes.data)

    def verify(self) -> None:
        _verify_axes(self.names, self.axis_sizes.data)


@irdl_attr_definition
class IndexTensorType(AxesMixin, ParametrizedAttribute, TypeAttribute):
    """A tensor of indices in `[0, range)`: token ids, targets, masks (range 2).

    `!psk_core.index<[batch: B, seq: T], V>`.
    """

    name = "psk_core.index"

    axis_names: ArrayAttr[StringAttr]
    axis_sizes: ArrayAttr[Attribute]
    bound: Attribute

    def __init__(self, axes: Iterable[tuple[str, Size]], bound: Size) -> None:
        axes = list(axes)
        super().__init__(
            ArrayAttr([StringAttr(n) for n, _ in axes]),
            ArrayAttr([size_attr(s) for _, s in axes]),
            size_attr(bound),
        )

    @property
    def range(self) -> Size:
        return size_value(self.bound)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            names, sizes = _parse_axes(parser)
            parser.parse_punctuation(",", " before the index range")
            bound = _parse_size(parser)
        return (ArrayAttr(names), ArrayAttr(sizes), bound)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            _print_axes(printer, self.names, self.axis_sizes.data)
            printer.print_string(", ")
            _print_size(printer, self.bound)

    def verify(self) -> None:
        _verify_axes(self.names, self.axis_sizes.data)
        bound = size_value(self.bound)
        if isinstance(bound, int) and bound <= 0:
            raise VerifyException(f"an index range is positive, got {bound}")


@irdl_attr_definition
class RecordType(ParametrizedAttribute, TypeAttribute):
    """A record of named fields: a parameter tree when its leaves are reals and tensors.

    `!psk_core.record<w: !psk_core.tensor<[in: D, out: F]>, b: !psk_core.tensor<[out: F]>>`.
    """

    name = "psk_core.record"

    field_names: ArrayAttr[StringAttr]
    field_types: ArrayAttr[Attribute]

    def __init__(self, fields: Iterable[tuple[str, Attribute]]) -> None:
        fields = list(fields)
        super().__init__(
            ArrayAttr([StringAttr(n) for n, _ in fields]),
            ArrayAttr([t for _, t in fields]),
        )

    @property
    def fields(self) -> tuple[tuple[str, Attribute], ...]:
        return tuple(zip((n.data for n in self.field_names), self.field_types.data, strict=True))

    def field_type(self, name: str) -> Attribute | None:
        return dict(self.fields).get(name)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        names: list[StringAttr] = []
        types: list[Attribute] = []

        def parse_field() -> None:
            names.append(StringAttr(parser.parse_identifier(" (a field name)")))
            parser.parse_punctuation(":", " after a field name")
            types.append(parser.parse_type())

        parser.parse_comma_separated_list(parser.Delimiter.ANGLE, parse_field)
        return (ArrayAttr(names), ArrayAttr(types))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_list(
                self.fields,
                lambda f: (printer.print_string(f"{f[0]}: "), printer.print_attribute(f[1])),
            )

    def verify(self) -> None:
        names = [n.data for n in self.field_names]
        if len(set(names)) != len(names):
            raise VerifyException(f"record field names must be distinct, got {names}")
        for t in self.field_types.data:
            if not isinstance(t, PSKType):
                raise VerifyException(f"a record field is a PSK-Core type, not {t}")


@irdl_attr_definition
class TupleType(ParametrizedAttribute, TypeAttribute):
    """An ordered tuple of values: `!psk_core.tuple<!psk_core.real, !psk_core.real>`."""

    name = "psk_core.tuple"

    element_types: ArrayAttr[Attribute]

    def __init__(self, types: Iterable[Attribute]) -> None:
        super().__init__(ArrayAttr(list(types)))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        types = parser.parse_comma_separated_list(parser.Delimiter.ANGLE, parser.parse_type)
        return (ArrayAttr(types),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_list(self.element_types.data, printer.print_attribute)

    def verify(self) -> None:
        for t in self.element_types.data:
            if not isinstance(t, PSKType):
                raise VerifyException(f"a tuple element is a PSK-Core type, not {t}")


PSKType = (RealType, TensorType, IndexTensorType, RecordType, TupleType)
"""Every PSK-Core value type (usable with isinstance)."""


def describe(t: Attribute) -> str:
    """A short human rendering of a type for diagnostics."""
    if isinstance(t, RealType):
        return "real"
    if isinstance(t, TensorType):
        return "tensor[" + ", ".join(f"{n}: {s}" for n, s in t.axes) + "]"
    if isinstance(t, IndexTensorType):
        return "index[" + ", ".join(f"{n}: {s}" for n, s in t.axes) + f"] < {t.range}"
    if isinstance(t, RecordType):
        return "record{" + ", ".join(f"{n}: {describe(ft)}" for n, ft in t.fields) + "}"
    if isinstance(t, TupleType):
        return "tuple(" + ", ".join(describe(e) for e in t.element_types.data) + ")"
    return str(t)


def leaves(t: Attribute) -> Iterable[tuple[tuple[str | int, ...], Attribute]]:
    """The leaves of a parameter tree with their paths (a leaf is not a record or tuple)."""
    if isinstance(t, RecordType):
        for name, ft in t.fields:
            for path, leaf in leaves(ft):
                yield (name, *path), leaf
    elif isinstance(t, TupleType):
        for i, et in enumerate(t.element_types.data):
            for path, leaf in leaves(et):
                yield (i, *path), leaf
    else:
        yield (), t


def map_type(t: Attribute, fn) -> Attribute:  # type: ignore[no-untyped-def]
    """Rebuild a type with `fn` applied to every size attribute (used by binding)."""
    if isinstance(t, TensorType):
        return TensorType((n, fn(s)) for n, s in t.axes)
    if isinstance(t, IndexTensorType):
        return IndexTensorType(((n, fn(s)) for n, s in t.axes), fn(t.range))
    if isinstance(t, RecordType):
        return RecordType((n, map_type(ft, fn)) for n, ft in t.fields)
    if isinstance(t, TupleType):
        return TupleType(map_type(e, fn) for e in t.element_types.data)
    return t
