"""PSK-Core's request for a derivative: `psk_core.grad` and `psk_core.value_and_grad`.

    %g  = psk_core.grad @loss(%params, %ids, %targets) wrt [0] : !Params
    %vg = psk_core.value_and_grad @loss(%params, %ids, %targets) wrt [0] : !psk_core.tuple<!psk_core.real, !Params>

Both name a function returning one real and the arguments to differentiate
it with respect to. They are PSK-Core ops of the `psk_core` dialect (the
dialect object in `psk_core.py` registers them), kept apart because they are
the one place where PSK-Core refers to a derivative: no executor runs them,
and `psk-autodiff` (`presk/passes/autodiff.py`) replaces each by calls to
functions it generates. The verifier is the typing rule: the callee exists,
takes the operands' types and returns one real; the `wrt` positions are
distinct, in range and not index tensors (an integer has no derivative);
the result is the type of the named argument, or the tuple of them when
several are named, paired with the value for `value_and_grad`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, SymbolRefAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, var_operand_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import VerifyException

from presk.dialects.psk_core_types import IndexTensorType, RealType, TupleType, describe, leaves

# `psk_core.py` imports this module to register its ops, so the assembly helpers it
# defines are imported where they are used (by then it is loaded), never at the top.


def gradient_type(arg_types: Sequence[Attribute], wrt: Sequence[int]) -> Attribute:
    """The type of the gradient with respect to the arguments at `wrt`: one type, or their tuple."""
    types = [arg_types[i] for i in wrt]
    return types[0] if len(types) == 1 else TupleType(types)


class GradientRequestOp(IRDLOperation):
    """`@callee(operands) wrt [i, ...]`: the shared operands, properties, syntax and typing rule."""

    callee = prop_def(SymbolRefAttr)
    wrt = prop_def(ArrayAttr[IntAttr])
    arguments = var_operand_def()
    result = result_def()

    def __init__(
        self, callee: str, arguments: Sequence[SSAValue], wrt: Sequence[int], result_type: Attribute | None = None
    ) -> None:
        if result_type is None:
            result_type = self.result_for(gradient_type([a.type for a in arguments], wrt))
        super().__init__(
            operands=[list(arguments)],
            properties={"callee": SymbolRefAttr(callee), "wrt": ArrayAttr([IntAttr(i) for i in wrt])},
            result_types=[result_type],
        )

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(i.data for i in self.wrt)

    @property
    def callee_name(self) -> str:
        return self.callee.string_value()

    @staticmethod
    def result_for(gradient: Attribute) -> Attribute:
        """The result type given the gradient's type: the gradient itself (`value_and_grad` pairs it)."""
        return gradient

    def verify_(self) -> None:
        expected = self.expected_type()
        if self.result.type != expected:
            raise VerifyException(
                f"result type is {describe(self.result.type)}, but the typing rule gives {describe(expected)}"
            )

    def expected_type(self) -> Attribute:
        op_name = self.name.removeprefix("psk_core.")
        types = [a.type for a in self.arguments]
        positions = self.positions
        if not positions:
            raise VerifyException(f"'{op_name}' needs at least one argument to differentiate with respect to")
        if len(set(positions)) != len(positions):
            raise VerifyException(f"'{op_name}' names an argument twice: wrt {list(positions)}")
        for i in positions:
            if not 0 <= i < len(types):
                raise VerifyException(f"'{op_name}' wrt {i}, but @{self.callee_name} is given {len(types)} arguments")
            if isinstance(types[i], IndexTensorType):
                raise VerifyException(f"'{op_name}' wrt {i}, an index tensor ({describe(types[i])}), which has no derivative")
            for path, leaf in leaves(types[i]):
                if isinstance(leaf, IndexTensorType):
                    raise VerifyException(
                        f"'{op_name}' wrt {i}, whose leaf {'.'.join(map(str, path))} is an index tensor, "
                        "which has no derivative"
                    )
        self._check_callee(op_name, types)
        return self.result_for(gradient_type(types, positions))

    def _check_callee(self, op_name: str, types: list[Attribute]) -> None:
        from xdsl.dialects.func import FuncOp

        func = SymbolTable.lookup_symbol(self, self.callee)
        if func is None:
            # Not yet inside a module (being parsed): the module's own verification checks the callee.
            if self.parent_op() is None or self.get_toplevel_object() is self:
                return
            raise VerifyException(f"'{op_name}' of @{self.callee_name}, which is not defined")
        if not isinstance(func, FuncOp):
            raise VerifyException(f"'{op_name}' of @{self.callee_name}, which is not a function")
        inputs, outputs = list(func.function_type.inputs.data), list(func.function_type.outputs.data)
        if inputs != types:
            raise VerifyException(
                f"'{op_name}' calls @{self.callee_name} with ({', '.join(describe(t) for t in types)}), "
                f"but it takes ({', '.join(describe(t) for t in inputs)})"
            )
        if outputs != [RealType()]:
            raise VerifyException(
                f"'{op_name}' differentiates a function returning one real; @{self.callee_name} returns "
                f"({', '.join(describe(t) for t in outputs)})"
            )

    @classmethod
    def parse(cls, parser: Parser) -> GradientRequestOp:
        from presk.dialects.psk_core import parse_tail, parse_values, with_attributes

        callee = parser.parse_symbol_name().data
        parser.parse_punctuation("(")
        arguments = [] if parser.parse_optional_punctuation(")") else parse_values(parser)
        if arguments:
            parser.parse_punctuation(")")
        parser.parse_keyword("wrt")
        wrt = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE,
            lambda: parser.parse_integer(allow_boolean=False, allow_negative=False, context_msg=" (an argument position)"),
        )
        attrs, t = parse_tail(parser)
        return with_attributes(cls(callee, arguments, wrt, t), attrs)

    def print(self, printer: Printer) -> None:
        from presk.dialects.psk_core import print_tail, print_values

        printer.print_string(" ")
        printer.print_symbol_name(self.callee_name)
        printer.print_string("(")
        print_values(printer, list(self.arguments))
        printer.print_string(f") wrt [{', '.join(str(i) for i in self.positions)}]")
        print_tail(printer, self)


@irdl_op_definition
class GradOp(GradientRequestOp):
    """The gradient of a real-valued function at the operands, with respect to the `wrt` arguments."""

    name = "psk_core.grad"


@irdl_op_definition
class ValueAndGradOp(GradientRequestOp):
    """The function's value and its gradient, as `tuple<real, gradient>`: one forward pass serves both."""

    name = "psk_core.value_and_grad"

    @staticmethod
    def result_for(gradient: Attribute) -> Attribute:
        return TupleType([RealType(), gradient])


AUTODIFF_OPS = (GradOp, ValueAndGradOp)
