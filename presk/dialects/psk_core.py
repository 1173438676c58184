"""PSK-Core: a typed functional tensor language in SSA form.

Every op's verifier is its typing rule (`psk_core_rules`), applied to the
operand types and compared with the declared result type, so an op that
verifies is well typed. Functions, calls and returns are the `func`
dialect's. Syntax, one op per line, result type after the colon:

    %y = psk_core.add %x, %b : !psk_core.tensor<[batch: B, embed: D]>
    %m = psk_core.mean %x [embed] : !psk_core.tensor<[batch: B]>
    %s = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    Float64Type,
    FloatAttr,
    IntAttr,
    StringAttr,
    SymbolRefAttr,
    f64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import Pure, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from presk.dialects import psk_core_rules as rules
from presk.dialects.psk_core_sizes import parse_size_expr
from presk.dialects.psk_core_types import (
    MAX_SIZE,
    IndexTensorType,
    RealType,
    RecordType,
    Size,
    TensorType,
    TupleType,
    describe,
    shown_size,
    size_value,
)

__all__ = [
    "IndexTensorType",
    "RealType",
    "RecordType",
    "TensorType",
    "TupleType",
    "PSKCore",
]

OperationT = TypeVar("OperationT", bound=Operation)

# --------------------------------------------------------------------------
# Assembly helpers shared by every op.


def parse_value(parser: Parser) -> SSAValue:
    """Parse a use of an SSA value that is already defined (PSK-Core is in dominance order)."""
    unresolved: UnresolvedOperand = parser.parse_unresolved_operand()
    values = parser.ssa_values.get(unresolved.operand_name)
    if values is None or unresolved.index >= len(values):
        parser.raise_error(f"use of undefined value %{unresolved.operand_name}", unresolved.span)
    return values[unresolved.index]


def parse_values(parser: Parser) -> list[SSAValue]:
    values = [parse_value(parser)]
    while parser.parse_optional_punctuation(","):
        values.append(parse_value(parser))
    return values


def parse_result_type(parser: Parser) -> Attribute:
    parser.parse_punctuation(":", " before the result type")
    return parser.parse_type()


def parse_names(parser: Parser) -> list[str]:
    """Parse `[a, b, c]`."""
    return parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parser.parse_identifier(" (an axis name)")
    )


def print_names(printer: Printer, names: Sequence[str]) -> None:
    printer.print_string("[" + ", ".join(names) + "]")


def print_values(printer: Printer, values: Sequence[SSAValue]) -> None:
    printer.print_list(values, printer.print_ssa_value)


def print_tail(printer: Printer, op: Operation) -> None:
    """Extra attributes, then ` : result-type`."""
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_attribute(op.results[0].type)


def parse_tail(parser: Parser) -> tuple[dict[str, Attribute], Attribute]:
    attrs = parser.parse_optional_attr_dict()
    return attrs, parse_result_type(parser)


def with_attributes(op: OperationT, attrs: dict[str, Attribute]) -> OperationT:
    """The op with the extra attributes its custom syntax parsed (`{...}` before the colon)."""
    op.attributes.update(attrs)
    return op


def check_result(op: Operation, expected: Attribute) -> None:
    got = op.results[0].type
    if got != expected:
        raise VerifyException(f"result type is {describe(got)}, but the typing rule gives {describe(expected)}")


def format_float(value: float) -> str:
    """Shortest text that reads back to the same double, always with a '.' (MLIR's float syntax)."""
    text = repr(value)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


class PSKCoreOp(IRDLOperation):
    """Common shape: some operands, one result whose type the typing rule must give."""

    def expected_type(self) -> Attribute:
        raise NotImplementedError  # each concrete op defines its rule

    def verify_(self) -> None:
        check_result(self, self.expected_type())


# --------------------------------------------------------------------------
# Elementwise primitives.


class ElementwiseUnaryOp(PSKCoreOp):
    operand = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(operands=[operand], result_types=[result_type or operand.type])

    def expected_type(self) -> Attribute:
        return rules.elementwise([self.operand.type], self.name)

    @classmethod
    def parse(cls, parser: Parser) -> ElementwiseUnaryOp:
        operand = parse_value(parser)
        attrs, t = parse_tail(parser)
        return with_attributes(cls(operand, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        print_tail(printer, self)


class ElementwiseBinaryOp(PSKCoreOp):
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None) -> None:
        if result_type is None:
            result_type = rules.elementwise([lhs.type, rhs.type], self.name)
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def expected_type(self) -> Attribute:
        return rules.elementwise([self.lhs.type, self.rhs.type], self.name)

    @classmethod
    def parse(cls, parser: Parser) -> ElementwiseBinaryOp:
        lhs = parse_value(parser)
        parser.parse_punctuation(",")
        rhs = parse_value(parser)
        attrs, t = parse_tail(parser)
        return with_attributes(cls(lhs, rhs, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_values(printer, [self.lhs, self.rhs])
        print_tail(printer, self)


@irdl_op_definition
class AddOp(ElementwiseBinaryOp):
    name = "psk_core.add"


@irdl_op_definition
class SubOp(ElementwiseBinaryOp):
    name = "psk_core.sub"


@irdl_op_definition
class MulOp(ElementwiseBinaryOp):
    name = "psk_core.mul"


@irdl_op_definition
class DivOp(ElementwiseBinaryOp):
    name = "psk_core.div"


@irdl_op_definition
class MaxOp(ElementwiseBinaryOp):
    """Elementwise maximum (`reduce_max` is the reduction)."""

    name = "psk_core.max"


@irdl_op_definition
class NegOp(ElementwiseUnaryOp):
    name = "psk_core.neg"


@irdl_op_definition
class ExpOp(ElementwiseUnaryOp):
    name = "psk_core.exp"


@irdl_op_definition
class LogOp(ElementwiseUnaryOp):
    name = "psk_core.log"


@irdl_op_definition
class SqrtOp(ElementwiseUnaryOp):
    name = "psk_core.sqrt"


@irdl_op_definition
class TanhOp(ElementwiseUnaryOp):
    name = "psk_core.tanh"


@irdl_op_definition
class ErfOp(ElementwiseUnaryOp):
    """The error function: gelu's Φ(x) = ½(1 + erf(x/√2)), and so gelu's derivative, exact at 0."""

    name = "psk_core.erf"


@irdl_op_definition
class GeluOp(ElementwiseUnaryOp):
    """The exact GELU, x·Φ(x) = x·(1 + erf(x/√2))/2."""

    name = "psk_core.gelu"


@irdl_op_definition
class PowOp(PSKCoreOp):
    """`pow n x` for an integer n ≥ 1: `%y = psk_core.pow %x, 2 : T`."""

    name = "psk_core.pow"
    operand = operand_def()
    exponent = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, n: int, result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[operand], properties={"exponent": IntAttr(n)}, result_types=[result_type or operand.type]
        )

    @property
    def n(self) -> int:
        return self.exponent.data

    def expected_type(self) -> Attribute:
        if self.n < 1:
            raise VerifyException(f"'pow' takes an exponent of at least 1, got {self.n}")
        return rules.elementwise([self.operand.type], "pow")

    @classmethod
    def parse(cls, parser: Parser) -> PowOp:
        operand = parse_value(parser)
        parser.parse_punctuation(",")
        n = parser.parse_integer(allow_boolean=False, context_msg=" (the exponent)")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(operand, n, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_string(f", {self.n}")
        print_tail(printer, self)


@irdl_op_definition
class WhereOp(PSKCoreOp):
    """`where c, a, b`: a where the mask c is 1, b where it is 0."""

    name = "psk_core.where"
    cond = operand_def(IndexTensorType)
    on_true = operand_def()
    on_false = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[cond, a, b], result_types=[result_type or rules.where(cond.type, a.type, b.type)]
        )

    def expected_type(self) -> Attribute:
        return rules.where(self.cond.type, self.on_true.type, self.on_false.type)

    @classmethod
    def parse(cls, parser: Parser) -> WhereOp:
        c, a, b = _parse_n_values(parser, 3, "where")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(c, a, b, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_values(printer, [self.cond, self.on_true, self.on_false])
        print_tail(printer, self)


COMPARISONS: tuple[str, ...] = ("eq", "ne", "lt", "le", "gt", "ge")
"""The predicates of `compare`, IEEE's: every one but `ne` is false where an operand is NaN."""


@irdl_op_definition
class CompareOp(PSKCoreOp):
    """`compare gt %a, %b`: 1 where the predicate holds of a and b, else 0; a mask for `where`.

    Both operands are tensors of one type: `broadcast_like` widens one
    first. It gives the derivatives of `max` and `reduce_max` their
    routes, and it has none of its own (an index tensor carries no
    cotangent).
    """

    name = "psk_core.compare"
    predicate = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(IndexTensorType)
    traits = traits_def(Pure())

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": StringAttr(predicate)},
            result_types=[result_type or rules.compare(lhs.type, rhs.type)],
        )

    def expected_type(self) -> Attribute:
        if self.predicate.data not in COMPARISONS:
            raise VerifyException(f"'compare' predicate '{self.predicate.data}' is none of {', '.join(COMPARISONS)}")
        return rules.compare(self.lhs.type, self.rhs.type)

    @classmethod
    def parse(cls, parser: Parser) -> CompareOp:
        pos = parser.pos
        predicate = parser.parse_identifier(" (a predicate: " + ", ".join(COMPARISONS) + ")")
        if predicate not in COMPARISONS:
            parser.raise_error(f"'compare' predicate '{predicate}' is none of {', '.join(COMPARISONS)}", pos, parser.pos)
        a, b = _parse_n_values(parser, 2, "compare")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(predicate, a, b, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.predicate.data} ")
        print_values(printer, [self.lhs, self.rhs])
        print_tail(printer, self)


def _parse_n_values(parser: Parser, n: int, op: str) -> list[SSAValue]:
    pos = parser.pos
    values = parse_values(parser)
    if len(values) != n:
        parser.raise_error(f"'{op}' takes {n} operands, got {len(values)}", pos, parser.pos)
    return values


ELEMENTWISE_OPS: tuple[type[IRDLOperation], ...] = (
    AddOp, SubOp, MulOp, DivOp, MaxOp, NegOp, ExpOp, LogOp, SqrtOp, TanhOp, ErfOp, GeluOp, PowOp, WhereOp,
)  # fmt: skip


# --------------------------------------------------------------------------
# Reductions.


class ReductionOp(PSKCoreOp):
    operand = operand_def(TensorType)
    reduced = prop_def(ArrayAttr[StringAttr])
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, axes: Sequence[str], result_type: Attribute | None = None) -> None:
        result_type = result_type or rules.reduce(operand.type, axes, self.name)
        super().__init__(
            operands=[operand],
            properties={"reduced": ArrayAttr([StringAttr(a) for a in axes])},
            result_types=[result_type],
        )

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(a.data for a in self.reduced)

    def expected_type(self) -> Attribute:
        return rules.reduce(self.operand.type, self.axes, self.name)

    @classmethod
    def parse(cls, parser: Parser) -> ReductionOp:
        operand = parse_value(parser)
        axes = parse_names(parser)
        attrs, t = parse_tail(parser)
        return with_attributes(cls(operand, axes, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_string(" ")
        print_names(printer, self.axes)
        print_tail(printer, self)


@irdl_op_definition
class SumOp(ReductionOp):
    name = "psk_core.sum"


@irdl_op_definition
class MeanOp(ReductionOp):
    name = "psk_core.mean"


@irdl_op_definition
class ReduceMaxOp(ReductionOp):
    name = "psk_core.reduce_max"


# --------------------------------------------------------------------------
# Contractions.


@irdl_op_definition
class DotOp(PSKCoreOp):
    """Contract the last axis of the left operand with the first of the right."""

    name = "psk_core.dot"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(operands=[lhs, rhs], result_types=[result_type or rules.dot(lhs.type, rhs.type)])

    def expected_type(self) -> Attribute:
        return rules.dot(self.lhs.type, self.rhs.type)

    parse = classmethod(ElementwiseBinaryOp.parse.__func__)  # type: ignore[attr-defined]
    print = ElementwiseBinaryOp.print


@irdl_op_definition
class EinOp(PSKCoreOp):
    """Einsum over named axes: each operand's axes are labelled, the result's names are the output labels.

    `%s = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !psk_core.tensor<[b: B, h: H, s: T, t: T]>`
    sums over `d`. One operand relabels or transposes.
    """

    name = "psk_core.ein"
    inputs = var_operand_def(TensorType)
    labels = prop_def(ArrayAttr[ArrayAttr[StringAttr]])
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(
        self, inputs: Sequence[SSAValue], labels: Sequence[Sequence[str]], result_type: Attribute
    ) -> None:
        super().__init__(
            operands=[list(inputs)],
            properties={"labels": ArrayAttr([ArrayAttr([StringAttr(n) for n in ls]) for ls in labels])},
            result_types=[result_type],
        )

    @property
    def operand_labels(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(n.data for n in ls) for ls in self.labels)

    @property
    def summed(self) -> tuple[str, ...]:
        """The labels that are not output axes, in first-appearance order."""
        out = set(self.result.type.names)
        seen: list[str] = []
        for ls in self.operand_labels:
            seen += [n for n in ls if n not in out and n not in seen]
        return tuple(seen)

    def expected_type(self) -> Attribute:
        t = self.result.type
        if not isinstance(t, TensorType):
            raise VerifyException("'ein' gives a tensor")
        axes = rules.ein([v.type for v in self.inputs], self.operand_labels, t.names)
        return TensorType(axes)

    @classmethod
    def parse(cls, parser: Parser) -> EinOp:
        inputs: list[SSAValue] = []
        labels: list[list[str]] = []
        while True:
            inputs.append(parse_value(parser))
            labels.append(parse_names(parser))
            if not parser.parse_optional_punctuation(","):
                break
        attrs, t = parse_tail(parser)
        return with_attributes(cls(inputs, labels, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(
            zip(self.inputs, self.operand_labels),
            lambda p: (printer.print_ssa_value(p[0]), print_names(printer, p[1])),
        )
        print_tail(printer, self)


@irdl_op_definition
class SoftmaxOp(PSKCoreOp):
    """Softmax along one axis; with a mask, refused positions (0) get weight 0.

    `%p = psk_core.softmax %s [t] mask %m : T`
    """

    name = "psk_core.softmax"
    operand = operand_def(TensorType)
    mask = opt_operand_def(IndexTensorType)
    axis = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue, axis: str, mask: SSAValue | None = None, result_type: Attribute | None = None
    ) -> None:
        super().__init__(
            operands=[operand, [mask] if mask is not None else []],
            properties={"axis": StringAttr(axis)},
            result_types=[result_type or operand.type],
        )

    def expected_type(self) -> Attribute:
        return rules.softmax(self.operand.type, self.axis.data, self.mask.type if self.mask else None)

    @classmethod
    def parse(cls, parser: Parser) -> SoftmaxOp:
        operand = parse_value(parser)
        (axis,) = _parse_one_name(parser, "softmax")
        mask = parse_value(parser) if parser.parse_optional_keyword("mask") else None
        attrs, t = parse_tail(parser)
        return with_attributes(cls(operand, axis, mask, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        printer.print_string(f" [{self.axis.data}]")
        if self.mask is not None:
            printer.print_string(" mask ")
            printer.print_ssa_value(self.mask)
        print_tail(printer, self)


def _parse_one_name(parser: Parser, op: str) -> list[str]:
    pos = parser.pos
    names = parse_names(parser)
    if len(names) != 1:
        parser.raise_error(f"'{op}' takes exactly one axis", pos, parser.pos)
    return names


@irdl_op_definition
class CrossEntropyOp(PSKCoreOp):
    """Mean cross-entropy of logits against index targets: `cross_entropy %l, %t [vocab] : !psk_core.real`."""

    name = "psk_core.cross_entropy"
    logits = operand_def(TensorType)
    targets = operand_def(IndexTensorType)
    axis = prop_def(StringAttr)
    result = result_def(RealType)
    traits = traits_def(Pure())

    def __init__(self, logits: SSAValue, targets: SSAValue, axis: str, result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[logits, targets], properties={"axis": StringAttr(axis)}, result_types=[result_type or RealType()]
        )

    def expected_type(self) -> Attribute:
        return rules.cross_entropy(self.logits.type, self.targets.type, self.axis.data)

    @classmethod
    def parse(cls, parser: Parser) -> CrossEntropyOp:
        logits, targets = _parse_n_values(parser, 2, "cross_entropy")
        (axis,) = _parse_one_name(parser, "cross_entropy")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(logits, targets, axis, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_values(printer, [self.logits, self.targets])
        printer.print_string(f" [{self.axis.data}]")
        print_tail(printer, self)


@irdl_op_definition
class GatherOp(PSKCoreOp):
    """Embedding lookup: `%e = psk_core.gather %table, %ids : T`."""

    name = "psk_core.gather"
    table = operand_def(TensorType)
    ids = operand_def(IndexTensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, table: SSAValue, ids: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(operands=[table, ids], result_types=[result_type or rules.gather(table.type, ids.type)])

    def expected_type(self) -> Attribute:
        return rules.gather(self.table.type, self.ids.type)

    parse = classmethod(ElementwiseBinaryOp.parse.__func__)  # type: ignore[attr-defined]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_values(printer, [self.table, self.ids])
        print_tail(printer, self)


# --------------------------------------------------------------------------
# Structural primitives: shapes, broadcasting, trees.


class LikeOp(PSKCoreOp):
    """`op %x, %template : T` where T is the template's type."""

    operand = operand_def()
    template = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, template: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(operands=[operand, template], result_types=[result_type or template.type])

    @classmethod
    def parse(cls, parser: Parser) -> LikeOp:
        x, t = _parse_n_values(parser, 2, cls.name)
        attrs, rt = parse_tail(parser)
        return with_attributes(cls(x, t, rt), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        print_values(printer, [self.operand, self.template])
        print_tail(printer, self)


@irdl_op_definition
class BroadcastLikeOp(LikeOp):
    """Broadcast `x` to the type of the template."""

    name = "psk_core.broadcast_like"

    def expected_type(self) -> Attribute:
        if not rules.broadcasts_into(self.operand.type, self.template.type):
            raise VerifyException(
                f"'broadcast_like': {describe(self.operand.type)} does not broadcast into "
                f"{describe(self.template.type)}"
            )
        return self.template.type


@irdl_op_definition
class SumToOp(LikeOp):
    """Sum `x` down to the type of the template (the adjoint of broadcasting)."""

    name = "psk_core.sum_to"

    def expected_type(self) -> Attribute:
        if not rules.broadcasts_into(self.template.type, self.operand.type):
            raise VerifyException(
                f"'sum_to': {describe(self.template.type)} does not broadcast into "
                f"{describe(self.operand.type)}, so there is nothing to sum it down to"
            )
        return self.template.type


@irdl_op_definition
class ZerosLikeOp(PSKCoreOp):
    """Zeros of the type of the template, a tensor, a real or a whole parameter tree."""

    name = "psk_core.zeros_like"
    template = operand_def()
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, template: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(operands=[template], result_types=[result_type or template.type])

    def expected_type(self) -> Attribute:
        if isinstance(self.template.type, IndexTensorType):
            raise VerifyException("'zeros_like' of an index tensor is not defined")
        return self.template.type

    parse = classmethod(ElementwiseUnaryOp.parse.__func__)  # type: ignore[attr-defined]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.template)
        print_tail(printer, self)


@irdl_op_definition
class SplitOp(PSKCoreOp):
    """Split one axis into two: `%y = psk_core.split %x [embed -> heads, hd] : T`."""

    name = "psk_core.split"
    operand = operand_def(TensorType)
    axis = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, axis: str, result_type: Attribute) -> None:
        super().__init__(operands=[operand], properties={"axis": StringAttr(axis)}, result_types=[result_type])

    def parts(self) -> tuple[tuple[str, Size], ...]:
        t, x = self.result.type, self.operand.type
        i = x.names.index(self.axis.data) if self.axis.data in x.names else 0
        return t.axes[i : i + 2] if isinstance(t, TensorType) else ()

    def expected_type(self) -> Attribute:
        parts = self.parts()
        if len(parts) != 2:
            raise VerifyException("'split' gives one axis more than its operand")
        return rules.split(self.operand.type, self.axis.data, parts)

    @classmethod
    def parse(cls, parser: Parser) -> SplitOp:
        operand = parse_value(parser)
        start = parser.pos
        parser.parse_punctuation("[")
        axis = parser.parse_identifier(" (the axis to split)")
        parser.parse_punctuation("->")
        first = parser.parse_identifier()
        parser.parse_punctuation(",")
        second = parser.parse_identifier()
        parser.parse_punctuation("]")
        end = parser.pos
        attrs, t = parse_tail(parser)
        op = cls(operand, axis, t)
        op.attributes.update(attrs)
        parts = op.parts()
        if [n for n, _ in parts] != [first, second]:
            parser.raise_error(
                f"'split' names [{first}, {second}] but the result type has {[n for n, _ in parts]}", start, end
            )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        (a, _), (b, _) = self.parts()
        printer.print_string(f" [{self.axis.data} -> {a}, {b}]")
        print_tail(printer, self)


@irdl_op_definition
class MergeOp(PSKCoreOp):
    """Merge two adjacent axes into one: `%y = psk_core.merge %x [heads, hd -> embed] : T`."""

    name = "psk_core.merge"
    operand = operand_def(TensorType)
    merged = prop_def(ArrayAttr[StringAttr])
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, first: str, second: str, result_type: Attribute) -> None:
        super().__init__(
            operands=[operand],
            properties={"merged": ArrayAttr([StringAttr(first), StringAttr(second)])},
            result_types=[result_type],
        )

    def names(self) -> tuple[str, str]:
        names = tuple(a.data for a in self.merged.data)
        if len(names) != 2:
            raise VerifyException(f"'merge' merges exactly two axes, got [{', '.join(names)}]")
        return names  # type: ignore[return-value]

    def into(self) -> tuple[str, Size]:
        t, x = self.result.type, self.operand.type
        first = self.names()[0]
        i = x.names.index(first) if first in x.names else 0
        return t.axes[i] if isinstance(t, TensorType) and i < t.rank else ("?", 0)

    def expected_type(self) -> Attribute:
        first, second = self.names()
        return rules.merge(self.operand.type, first, second, self.into())

    @classmethod
    def parse(cls, parser: Parser) -> MergeOp:
        operand = parse_value(parser)
        start = parser.pos
        parser.parse_punctuation("[")
        first = parser.parse_identifier()
        parser.parse_punctuation(",")
        second = parser.parse_identifier()
        parser.parse_punctuation("->")
        into = parser.parse_identifier()
        parser.parse_punctuation("]")
        end = parser.pos
        attrs, t = parse_tail(parser)
        op = cls(operand, first, second, t)
        op.attributes.update(attrs)
        if op.into()[0] != into:
            parser.raise_error(f"'merge' into '{into}' but the result type has '{op.into()[0]}' there", start, end)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.operand)
        first, second = self.names()
        printer.print_string(f" [{first}, {second} -> {self.into()[0]}]")
        print_tail(printer, self)


@irdl_op_definition
class ArangeOp(PSKCoreOp):
    """The indices 0, 1, … along one axis: `%p = psk_core.arange : !psk_core.index<[seq: T], C>`.

    The range must cover the axis; that is checked when the sizes are bound.
    """

    name = "psk_core.arange"
    result = result_def(IndexTensorType)
    traits = traits_def(Pure())

    def __init__(self, result_type: Attribute) -> None:
        super().__init__(result_types=[result_type])

    def expected_type(self) -> Attribute:
        t = self.result.type
        if not isinstance(t, IndexTensorType) or t.rank != 1:
            raise VerifyException("'arange' gives an index tensor of one axis")
        size, bound = t.sizes[0], t.range
        if isinstance(size, int) and isinstance(bound, int) and size > bound:
            raise VerifyException(f"'arange' of {size} indices does not fit the range {bound}")
        return t

    @classmethod
    def parse(cls, parser: Parser) -> ArangeOp:
        attrs, t = parse_tail(parser)
        return with_attributes(cls(t), attrs)

    def print(self, printer: Printer) -> None:
        print_tail(printer, self)


@irdl_op_definition
class CausalMaskOp(PSKCoreOp):
    """The lower-triangular mask: 1 where the second axis' index ≤ the first's.

    `%m = psk_core.causal_mask : !psk_core.index<[seq: T, seq2: T], 2>`
    """

    name = "psk_core.causal_mask"
    result = result_def(IndexTensorType)
    traits = traits_def(Pure())

    def __init__(self, result_type: Attribute) -> None:
        super().__init__(result_types=[result_type])

    def expected_type(self) -> Attribute:
        t = self.result.type
        if not isinstance(t, IndexTensorType) or t.rank != 2 or t.range != 2 or t.sizes[0] != t.sizes[1]:
            raise VerifyException("'causal_mask' gives a square index tensor of two axes with range 2")
        return t

    parse = classmethod(ArangeOp.parse.__func__)  # type: ignore[attr-defined]
    print = ArangeOp.print


@irdl_op_definition
class ConstantOp(PSKCoreOp):
    """A real constant: `%c = psk_core.constant 0.5 : !psk_core.real`."""

    name = "psk_core.constant"
    value = prop_def(FloatAttr[Float64Type])
    result = result_def(RealType)
    traits = traits_def(Pure())

    def __init__(self, value: float, result_type: Attribute | None = None) -> None:
        super().__init__(properties={"value": FloatAttr(value, f64)}, result_types=[result_type or RealType()])

    @property
    def number(self) -> float:
        return self.value.value.data

    def expected_type(self) -> Attribute:
        if not math.isfinite(self.number):
            raise VerifyException(f"a constant is finite, got {self.number}")
        return RealType()

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = float(parser.parse_number(context_msg=" (the constant's value)"))
        pos = parser.pos
        if (word := parser.parse_optional_identifier()) is not None:
            parser.raise_error(
                f"'{word}' after a number: a float has a '.' before its exponent, e.g. {format_float(value)}{word}",
                pos,
                parser.pos,
            )
        attrs, t = parse_tail(parser)
        return with_attributes(cls(value, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" " + format_float(self.number))
        print_tail(printer, self)


@irdl_op_definition
class SizeOp(PSKCoreOp):
    """The bound value of a size, as a real: `%hd = psk_core.size HD : !psk_core.real`.

    What makes a scale like 1/√hd follow `--const D=...` instead of being a
    literal that goes stale when the sizes change.
    """

    name = "psk_core.size"
    size = prop_def(StringAttr)
    result = result_def(RealType)
    traits = traits_def(Pure())

    def __init__(self, size: str, result_type: Attribute | None = None) -> None:
        super().__init__(properties={"size": StringAttr(size)}, result_types=[result_type or RealType()])

    def expected_type(self) -> Attribute:
        return RealType()

    @classmethod
    def parse(cls, parser: Parser) -> SizeOp:
        size = parser.parse_identifier(" (a size name)")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(size, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.size.data}")
        print_tail(printer, self)


@irdl_op_definition
class RecordOp(PSKCoreOp):
    """Build a record: `%p = psk_core.record w = %w, b = %b : T`."""

    name = "psk_core.record"
    fields = var_operand_def()
    result = result_def(RecordType)
    traits = traits_def(Pure())

    def __init__(self, fields: Sequence[SSAValue], result_type: Attribute) -> None:
        super().__init__(operands=[list(fields)], result_types=[result_type])

    def expected_type(self) -> Attribute:
        t = self.result.type
        if not isinstance(t, RecordType):
            raise VerifyException("'record' gives a record type")
        if len(t.fields) != len(self.fields):
            raise VerifyException(f"'record' of {describe(t)} needs {len(t.fields)} fields, got {len(self.fields)}")
        return RecordType((n, v.type) for (n, _), v in zip(t.fields, self.fields))

    @classmethod
    def parse(cls, parser: Parser) -> RecordOp:
        names: list[str] = []
        values: list[SSAValue] = []

        def parse_field() -> None:
            names.append(parser.parse_identifier(" (a field name)"))
            parser.parse_punctuation("=")
            values.append(parse_value(parser))

        start = parser.pos
        if not _at_tail(parser):
            parse_field()
            while parser.parse_optional_punctuation(","):
                parse_field()
        attrs, t = parse_tail(parser)
        op = cls(values, t)
        op.attributes.update(attrs)
        if isinstance(t, RecordType) and [n for n, _ in t.fields] != names:
            parser.raise_error(f"'record' names fields {names} but its type has {[n for n, _ in t.fields]}", start)
        return op

    def print(self, printer: Printer) -> None:
        t = self.result.type
        names = [n for n, _ in t.fields] if isinstance(t, RecordType) else []
        if self.fields:
            printer.print_string(" ")
            printer.print_list(
                zip(names, self.fields),
                lambda f: (printer.print_string(f"{f[0]} = "), printer.print_ssa_value(f[1])),
            )
        print_tail(printer, self)


def _at_tail(parser: Parser) -> bool:
    """True before `{attrs} : type` or `: type`: an op with no operands written."""
    from xdsl.utils.mlir_lexer import MLIRTokenKind

    return parser._current_token.kind in (MLIRTokenKind.COLON, MLIRTokenKind.L_BRACE)


def _parse_key(parser: Parser) -> str:
    parser.parse_punctuation("[")
    key = parser.parse_str_literal(" (a field name)")
    parser.parse_punctuation("]")
    return key


@irdl_op_definition
class FieldOp(PSKCoreOp):
    """Read a field: `%w = psk_core.field %p["w"] : T`."""

    name = "psk_core.field"
    record = operand_def(RecordType)
    field_name = prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, record: SSAValue, field: str, result_type: Attribute | None = None) -> None:
        if result_type is None and isinstance(record.type, RecordType):
            result_type = record.type.field_type(field)
        super().__init__(
            operands=[record], properties={"field_name": StringAttr(field)}, result_types=[result_type or RealType()]
        )

    def expected_type(self) -> Attribute:
        t = self.record.type
        ft = t.field_type(self.field_name.data) if isinstance(t, RecordType) else None
        if ft is None:
            raise VerifyException(f"'field' \"{self.field_name.data}\" of {describe(t)}, which has no such field")
        return ft

    @classmethod
    def parse(cls, parser: Parser) -> FieldOp:
        record = parse_value(parser)
        key = _parse_key(parser)
        attrs, t = parse_tail(parser)
        return with_attributes(cls(record, key, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.record)
        printer.print_string("[")
        printer.print_string_literal(self.field_name.data)
        printer.print_string("]")
        print_tail(printer, self)


@irdl_op_definition
class SetFieldOp(PSKCoreOp):
    """A record with one field replaced: `%q = psk_core.set_field %p["w"], %v : T`."""

    name = "psk_core.set_field"
    record = operand_def(RecordType)
    value = operand_def()
    field_name = prop_def(StringAttr)
    result = result_def(RecordType)
    traits = traits_def(Pure())

    def __init__(self, record: SSAValue, field: str, value: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[record, value],
            properties={"field_name": StringAttr(field)},
            result_types=[result_type or record.type],
        )

    def expected_type(self) -> Attribute:
        t = self.record.type
        ft = t.field_type(self.field_name.data) if isinstance(t, RecordType) else None
        if ft is None:
            raise VerifyException(f"'set_field' \"{self.field_name.data}\" of {describe(t)}, which has no such field")
        if ft != self.value.type:
            raise VerifyException(
                f"'set_field' \"{self.field_name.data}\" is {describe(ft)}, the value is {describe(self.value.type)}"
            )
        return t

    @classmethod
    def parse(cls, parser: Parser) -> SetFieldOp:
        record = parse_value(parser)
        key = _parse_key(parser)
        parser.parse_punctuation(",")
        value = parse_value(parser)
        attrs, t = parse_tail(parser)
        return with_attributes(cls(record, key, value, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.record)
        printer.print_string("[")
        printer.print_string_literal(self.field_name.data)
        printer.print_string("], ")
        printer.print_ssa_value(self.value)
        print_tail(printer, self)


@irdl_op_definition
class TupleOp(PSKCoreOp):
    """`%t = psk_core.tuple %a, %b : T`."""

    name = "psk_core.tuple"
    elements = var_operand_def()
    result = result_def(TupleType)
    traits = traits_def(Pure())

    def __init__(self, elements: Sequence[SSAValue], result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[list(elements)], result_types=[result_type or TupleType(e.type for e in elements)]
        )

    def expected_type(self) -> Attribute:
        return TupleType(e.type for e in self.elements)

    @classmethod
    def parse(cls, parser: Parser) -> TupleOp:
        values = [] if _at_tail(parser) else parse_values(parser)
        attrs, t = parse_tail(parser)
        return with_attributes(cls(values, t), attrs)

    def print(self, printer: Printer) -> None:
        if self.elements:
            printer.print_string(" ")
            print_values(printer, self.elements)
        print_tail(printer, self)


@irdl_op_definition
class ProjOp(PSKCoreOp):
    """`%a = psk_core.proj %t[0] : T`."""

    name = "psk_core.proj"
    tuple = operand_def(TupleType)
    index = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, tup: SSAValue, index: int, result_type: Attribute | None = None) -> None:
        if result_type is None and isinstance(tup.type, TupleType):
            result_type = tup.type.element_types.data[index]
        super().__init__(operands=[tup], properties={"index": IntAttr(index)}, result_types=[result_type or RealType()])

    def expected_type(self) -> Attribute:
        t, i = self.tuple.type, self.index.data
        if not isinstance(t, TupleType) or not 0 <= i < len(t.element_types):
            raise VerifyException(f"'proj' {i} of {describe(t)} is out of range")
        return t.element_types.data[i]

    @classmethod
    def parse(cls, parser: Parser) -> ProjOp:
        tup = parse_value(parser)
        parser.parse_punctuation("[")
        index = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation("]")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(tup, index, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.tuple)
        printer.print_string(f"[{self.index.data}]")
        print_tail(printer, self)


@irdl_op_definition
class FoldOp(PSKCoreOp):
    """Apply a function once per layer of a stacked parameter tree, threading a state.

    `%y = psk_core.fold @Block.apply(%blocks, %x) : T`: every leaf of
    `%blocks` carries a leading layer axis; step l calls
    `@Block.apply(blocks[l], state)`. This keeps the number of layers a
    constant (`L`) rather than a copy of the code per layer.
    """

    name = "psk_core.fold"
    callee = prop_def(SymbolRefAttr)
    stacked = operand_def(RecordType)
    init = operand_def()
    result = result_def()

    def __init__(self, callee: str, stacked: SSAValue, init: SSAValue, result_type: Attribute | None = None) -> None:
        super().__init__(
            operands=[stacked, init],
            properties={"callee": SymbolRefAttr(callee)},
            result_types=[result_type or init.type],
        )

    def layer_count(self) -> Size:
        counts = {leaf.sizes[0] for _, leaf in _tensor_leaves(self.stacked.type)}
        if len(counts) != 1:
            raise VerifyException(f"'fold' needs every leaf of the stacked tree to share its first axis, got {counts}")
        return counts.pop()

    def expected_type(self) -> Attribute:
        self.layer_count()
        if self.init.type != self.results[0].type:
            raise VerifyException("'fold' gives a value of its initial state's type")
        from xdsl.dialects.func import FuncOp

        func = SymbolTable.lookup_symbol(self, self.callee)
        if func is None:
            if self.get_toplevel_object() is self or self.parent_op() is None:
                return self.init.type
            raise VerifyException(f"'fold' calls @{self.callee.string_value()}, which is not defined")
        if not isinstance(func, FuncOp):
            raise VerifyException(f"'fold' calls @{self.callee.string_value()}, which is not a function")
        inputs = func.function_type.inputs.data
        outputs = func.function_type.outputs.data
        unstacked = unstack(self.stacked.type)
        if list(inputs) != [unstacked, self.init.type] or list(outputs) != [self.init.type]:
            raise VerifyException(
                f"'fold' calls @{self.callee.string_value()} with ({describe(unstacked)}, {describe(self.init.type)}) "
                f"-> {describe(self.init.type)}, but its type is "
                f"({', '.join(describe(t) for t in inputs)}) -> ({', '.join(describe(t) for t in outputs)})"
            )
        return self.init.type

    @classmethod
    def parse(cls, parser: Parser) -> FoldOp:
        callee = parser.parse_symbol_name().data
        parser.parse_punctuation("(")
        stacked = parse_value(parser)
        parser.parse_punctuation(",")
        init = parse_value(parser)
        parser.parse_punctuation(")")
        attrs, t = parse_tail(parser)
        return with_attributes(cls(callee, stacked, init, t), attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.callee.string_value())
        printer.print_string("(")
        print_values(printer, [self.stacked, self.init])
        printer.print_string(")")
        print_tail(printer, self)


def _tensor_leaves(t: Attribute):  # type: ignore[no-untyped-def]
    from presk.dialects.psk_core_types import leaves

    for path, leaf in leaves(t):
        if not isinstance(leaf, TensorType):
            raise VerifyException(f"a stacked tree's leaves are tensors; {'.'.join(map(str, path))} is {describe(leaf)}")
        yield path, leaf


def unstack(t: Attribute) -> Attribute:
    """The type of one layer of a stacked tree: every leaf without its first axis."""
    if isinstance(t, RecordType):
        return RecordType((n, unstack(ft)) for n, ft in t.fields)
    if isinstance(t, TupleType):
        return TupleType(unstack(e) for e in t.element_types.data)
    if isinstance(t, TensorType):
        return TensorType(t.axes[1:]) if t.rank > 1 else RealType()
    raise VerifyException(f"a stacked tree's leaves are tensors, not {describe(t)}")


@irdl_op_definition
class ConstDimOp(IRDLOperation):
    """A compile-time constant size: `psk_core.const_dim @D = 64`, or a product/quotient of others.

    `psk_core.const_dim @HD = "D / H"` divides exactly or is refused when bound.
    `--const D=16` or `psk-bind{consts="D=16"}` overrides the declared value.
    """

    name = "psk_core.const_dim"
    sym_name = prop_def(StringAttr)
    value = prop_def()
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, value: int | str) -> None:
        v: Attribute = IntAttr(value) if isinstance(value, int) else StringAttr(value)
        super().__init__(properties={"sym_name": StringAttr(name), "value": v})

    @property
    def size(self) -> int | str:
        return size_value(self.value)

    def verify_(self) -> None:
        if not isinstance(self.value, IntAttr | StringAttr):
            raise VerifyException("a constant size is an integer or an expression string")
        if isinstance(self.value, IntAttr) and self.value.data <= 0:
            raise VerifyException(f"constant size @{self.sym_name.data} is {self.value.data}; sizes are positive")
        if isinstance(self.value, IntAttr) and self.value.data > MAX_SIZE:
            raise VerifyException(f"constant size @{self.sym_name.data} is {shown_size(self.value.data)}; sizes are "
                                  f"at most 2^40 = {MAX_SIZE}")  # fmt: skip
        if isinstance(self.value, StringAttr):
            try:
                parse_size_expr(self.value.data)
            except ValueError as e:
                raise VerifyException(str(e)) from None

    @classmethod
    def parse(cls, parser: Parser) -> ConstDimOp:
        pos = parser.pos
        name = parser.parse_symbol_name().data
        if "." in name:
            parser.raise_error(f"size name '{name}': names of sizes are letters, digits and '_'", pos, parser.pos)
        parser.parse_punctuation("=")
        text = parser.parse_optional_str_literal()
        value: int | str = text if text is not None else parser.parse_integer(allow_boolean=False)
        op = cls(name, value)
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" = ")
        if isinstance(self.value, IntAttr):
            printer.print_string(str(self.value.data))
        else:
            printer.print_string_literal(self.size)  # type: ignore[arg-type]
        printer.print_op_attributes(self.attributes)


# The derivative requests (`grad`, `value_and_grad`) live in their own module.
from presk.dialects.psk_core_autodiff import GradOp, ValueAndGradOp  # noqa: E402

PSKCore = Dialect(
    "psk_core",
    [
        *ELEMENTWISE_OPS,
        SumOp, MeanOp, ReduceMaxOp,
        DotOp, EinOp, SoftmaxOp, CrossEntropyOp, GatherOp,
        BroadcastLikeOp, SumToOp, ZerosLikeOp, SplitOp, MergeOp, ArangeOp, CausalMaskOp, CompareOp,
        ConstantOp, SizeOp, RecordOp, FieldOp, SetFieldOp, TupleOp, ProjOp, FoldOp, ConstDimOp,
        GradOp, ValueAndGradOp,
    ],  # fmt: skip
    [RealType, TensorType, IndexTensorType, RecordType, TupleType],
)
