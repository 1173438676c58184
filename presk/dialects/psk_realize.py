"""PSK-Realize: fusion groups, and each launch's realization and layout.

Every kernel launch of a function is one op of this dialect: a
`psk_realize.group` holds the elementwise members of one fusion group and
yields its root; a `psk_realize.nest` holds one other primitive that
computes or moves data (a reduction, a contraction, a softmax, ...). Both
carry their site name (`"<function>/%<n>"`, the root's binding as
`presk dump --stage core` prints it), and, once `psk-realize` has run, the
site's realization (storage and arithmetic type) and its layout:

    %11 = psk_realize.group "LayerNorm.apply/%11" realize <bf16, f32> layout <default(split = "executor")> : !H {
      %7 = psk_core.div %2, %6 : !H
      %10 = psk_core.mul %7, %8 : !H
      %11 = psk_core.add %10, %9 : !H
      psk_realize.yield %11 : !H
    }

The verifiers are the seed's conditions: a group's members are elementwise,
of the group's result type, and every member but the root is read only by
members; a layout states only decisions of its nest's kind (E7002).
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects.builtin import BFloat16Type, Float32Type, Float64Type, StringAttr
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import leaves
from presk.dialects.psk_realize_layout import DECISIONS, default_layout, layout_violation
from presk.dialects.psk_realize_nests import LAUNCHING_OPS, NestKind, contraction, is_elementwise, nest_kind

MAX_GROUP_NODES = 64
"""Past this many members a group stops growing: a value read twice is computed twice."""

REALIZATIONS: dict[str, tuple[str, str]] = {"f64": ("f64", "f64"), "f32": ("f32", "f32"), "bf16": ("bf16", "f32")}
"""Each uniform realization's (storage, arithmetic) types: bf16 stores in bf16 and computes in f32."""

DEFAULT_ATTRIBUTE = "psk_realize.default"
"""Module attribute naming the realization of the program's arguments (its default storage type)."""

STORAGE_BYTES: dict[str, int] = {"f64": 8, "f32": 4, "bf16": 2}
"""Bytes of one real in each realization's storage type."""

_FLOAT_TYPES: dict[str, Attribute] = {"f64": Float64Type(), "f32": Float32Type(), "bf16": BFloat16Type()}


def _type_name(t: Attribute) -> str:
    for name, ft in _FLOAT_TYPES.items():
        if t == ft:
            return name
    raise VerifyException(f"a realization's types are f64, f32 or bf16, not {t}")


# --------------------------------------------------------------------------
# Attributes.


@irdl_attr_definition
class RealizationAttr(ParametrizedAttribute):
    """The machine types of one site: `#psk_realize.realization<bf16, f32>` (storage, arithmetic)."""

    name = "psk_realize.realization"

    storage: Attribute
    arith: Attribute

    def __init__(self, storage: str, arith: str | None = None) -> None:
        arith = arith or REALIZATIONS[storage][1]
        super().__init__(_FLOAT_TYPES[storage], _FLOAT_TYPES[arith])

    @staticmethod
    def uniform(name: str) -> RealizationAttr:
        return RealizationAttr(*REALIZATIONS[name])

    @property
    def storage_name(self) -> str:
        return _type_name(self.storage)

    @property
    def arith_name(self) -> str:
        return _type_name(self.arith)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        storage = parser.parse_type()
        parser.parse_punctuation(",")
        arith = parser.parse_type()
        parser.parse_punctuation(">")
        return (storage, arith)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.storage_name}, {self.arith_name}>")

    def verify(self) -> None:
        pair = (_type_name(self.storage), _type_name(self.arith))
        if pair not in REALIZATIONS.values():
            allowed = ", ".join(f"<{s}, {a}>" for s, a in REALIZATIONS.values())
            raise VerifyException(f"E7001: a realization is one of {allowed}, not <{pair[0]}, {pair[1]}>")


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """The layout of one nest: the decisions a plan states, and the defaults of the others.

    `#psk_realize.layout<tile = [4, 16], lanes = 4, default(form = "tiled", ...)>`.
    Values are written as in a plan's JSON; both parts are kept as canonical
    JSON so that two layouts are equal exactly when they state the same.
    """

    name = "psk_realize.layout"

    stated_json: StringAttr
    defaults_json: StringAttr

    def __init__(self, stated: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> None:
        defaults = {k: v for k, v in (defaults or {}).items() if k not in stated}
        super().__init__(StringAttr(_canonical(stated)), StringAttr(_canonical(defaults)))

    @property
    def stated(self) -> dict[str, Any]:
        """A fresh dict each time: callers may change it without changing the attribute."""
        return _decisions(self.stated_json.data)

    @property
    def defaults(self) -> dict[str, Any]:
        return _decisions(self.defaults_json.data)

    def decision(self, name: str) -> Any:
        """The stated value, else the default, else None (the nest has no such decision)."""
        return self.stated.get(name, self.defaults.get(name))

    def with_defaults(self, defaults: Mapping[str, Any]) -> LayoutAttr:
        stated = self.stated
        kept = {k: v for k, v in defaults.items() if k not in stated}
        return LayoutAttr.new((self.stated_json, StringAttr(_canonical(kept))))  # the stated part is canonical already

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        stated: dict[str, Any] = {}
        defaults: dict[str, Any] = {}
        parser.parse_punctuation("<")
        if parser.parse_optional_punctuation(">") is None:
            while True:
                if parser.parse_optional_keyword("default") is not None:
                    parser.parse_punctuation("(")
                    _parse_entries(parser, defaults, ")")
                else:
                    _parse_entry(parser, stated)
                if parser.parse_optional_punctuation(">") is not None:
                    break
                parser.parse_punctuation(",")
        return (StringAttr(_canonical(stated)), StringAttr(_canonical(defaults)))

    def print_parameters(self, printer: Printer) -> None:
        parts = [f"{k} = {_show_value(v)}" for k, v in self.stated.items()]
        if defaults := self.defaults:
            parts.append("default(" + ", ".join(f"{k} = {_show_value(v)}" for k, v in defaults.items()) + ")")
        printer.print_string("<" + ", ".join(parts) + ">")

    def verify(self) -> None:
        # The decisions' domains are checked by the nest that carries the
        # layout (`SiteOp._verify_layout`): an E7002 names the nest, which an
        # attribute does not know, and one checked here would fire while the
        # text is parsed, before any nest exists.
        for part in (self.stated_json, self.defaults_json):
            if not _is_json_object(part.data):
                raise VerifyException(f"a layout's decisions are a JSON object, not {part.data!r}")


def _is_json_object(text: str) -> bool:
    """Read through `_decoded`'s one decoding per text: a plan's search builds the same few layouts thousands
    of times, each verified."""
    try:
        return isinstance(_decoded(text)[0], dict)
    except json.JSONDecodeError:
        return False


def _decisions(text: str) -> dict[str, Any]:
    """The decisions of a layout's JSON, a fresh dict the caller may change.

    Copied from one decoding kept per text, down to the values' own lists and
    objects when those hold numbers and strings alone (a tile, a split): a
    third to a half of what decoding again costs (0.6 against 1.8 µs for one
    decision, 2.7 against 4.5 for eight), and the layout checks read a nest's
    decisions several times at every point of its space. Deeper values (only
    a layout the verifier refuses has them) are decoded again.
    """
    decisions, flat = _decoded(text)
    if not flat:
        return json.loads(text)
    return {name: value.copy() if isinstance(value, list | dict) else value for name, value in decisions.items()}


@functools.lru_cache(maxsize=4096)
def _decoded(text: str) -> tuple[dict[str, Any], bool]:
    """The decoded object, never handed out, and whether every value is one level deep at most."""
    decisions = json.loads(text)
    flat = isinstance(decisions, dict) and all(
        not isinstance(inner, list | dict)
        for value in decisions.values()
        if isinstance(value, list | dict)
        for inner in (value.values() if isinstance(value, dict) else value)
    )
    return decisions, flat


_DECISION_ORDER = {name: i for i, name in enumerate(DECISIONS)}


def _canonical(decisions: Mapping[str, Any]) -> str:
    """JSON of the decisions in the seed's order (unknown names last, for the verifier to name)."""
    items = sorted(decisions.items(), key=lambda kv: (_DECISION_ORDER.get(kv[0], len(_DECISION_ORDER)), kv[0]))
    return json.dumps(dict(items), separators=(",", ":"))


def _show_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_show_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_show_value(v) for v in value) + "]"
    return json.dumps(value)


def _parse_entries(parser: AttrParser, into: dict[str, Any], close: str) -> None:
    if parser.parse_optional_punctuation(close) is not None:
        return
    while True:
        _parse_entry(parser, into)
        if parser.parse_optional_punctuation(close) is not None:
            return
        parser.parse_punctuation(",")


def _parse_entry(parser: AttrParser, into: dict[str, Any]) -> None:
    pos = parser.pos
    key = parser.parse_identifier(" (a layout decision)")
    if key in into:
        parser.raise_error(f"decision '{key}' is given twice", pos, parser.pos)
    parser.parse_punctuation("=")
    into[key] = _parse_value(parser)


def _parse_value(parser: AttrParser) -> Any:
    if (text := parser.parse_optional_str_literal()) is not None:
        return text
    if (flag := parser.parse_optional_boolean()) is not None:
        return flag
    if (number := parser.parse_optional_integer(allow_boolean=False)) is not None:
        return number
    if parser.parse_optional_punctuation("[") is not None:
        items: list[Any] = []
        if parser.parse_optional_punctuation("]") is None:
            while True:
                items.append(_parse_value(parser))
                if parser.parse_optional_punctuation("]") is not None:
                    break
                parser.parse_punctuation(",")
        return items
    if parser.parse_optional_punctuation("{") is not None:
        record: dict[str, Any] = {}
        _parse_entries(parser, record, "}")
        return record
    parser.raise_error("a decision's value is a string, an integer, true/false, [..] or {..}")


# --------------------------------------------------------------------------
# Ops.


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The value a group or nest launches: its root."""

    name = "psk_realize.yield"
    value = operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GroupOp, NestOp)))

    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value])


class SiteOp(IRDLOperation):
    """A launch: one loop nest at one site, with its realization and layout."""

    site = prop_def(StringAttr)
    realization = opt_prop_def(RealizationAttr)
    layout = opt_prop_def(LayoutAttr)
    result = result_def()
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(
        self,
        site: str,
        ops: Sequence[Operation],
        root: SSAValue,
        realization: RealizationAttr | None = None,
        layout: LayoutAttr | None = None,
    ) -> None:
        block = Block([*ops, YieldOp(root)])
        properties: dict[str, Attribute] = {"site": StringAttr(site)}
        if realization is not None:
            properties["realization"] = realization
        if layout is not None:
            properties["layout"] = layout
        super().__init__(properties=properties, regions=[Region(block)], result_types=[root.type])

    @property
    def site_name(self) -> str:
        return self.site.data

    @property
    def members(self) -> list[Operation]:
        """The primitives of the nest, in program order (without the yield)."""
        return [op for op in self.body.block.ops if not isinstance(op, YieldOp)]

    @property
    def root(self) -> SSAValue:
        terminator = self.body.block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException(f"{self.name} ends with psk_realize.yield of its root")
        return terminator.value

    def launch_count(self) -> int:
        """One launch per leaf: a group over a parameter tree runs once per leaf."""
        return sum(1 for _ in leaves(self.result.type))

    def _verify_root(self) -> None:
        root = self.root
        if root.owner not in self.members:
            raise VerifyException(f"{self.name} yields {root.name_hint and '%' + root.name_hint or 'a value'} it does not define")
        if root.type != self.result.type:
            raise VerifyException(f"{self.name} gives the type of its root")

    def _verify_layout(self) -> None:
        if self.layout is None:
            return
        stated = self.layout.stated
        kind: NestKind = self.kind  # type: ignore[attr-defined]  # each concrete op knows its kind
        if (violation := layout_violation(kind, stated)) is not None:
            raise VerifyException(layout_error(self.site_name, *violation))

    # -- assembly ------------------------------------------------------------

    @classmethod
    def parse(cls, parser: Parser) -> SiteOp:
        site = parser.parse_str_literal(" (the site name)")
        realization = layout = None
        if parser.parse_optional_keyword("realize") is not None:
            realization = RealizationAttr.new(RealizationAttr.parse_parameters(parser))
        if parser.parse_optional_keyword("layout") is not None:
            layout = LayoutAttr.new(LayoutAttr.parse_parameters(parser))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        region = parser.parse_region()
        properties: dict[str, Attribute] = {"site": StringAttr(site)}
        if realization is not None:
            properties["realization"] = realization
        if layout is not None:
            properties["layout"] = layout
        op = cls.create(properties=properties, attributes=attrs, regions=[region], result_types=[result_type])
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.site_name)
        if self.realization is not None:
            printer.print_string(" realize ")
            self.realization.print_parameters(printer)
        if self.layout is not None:
            printer.print_string(" layout ")
            self.layout.print_parameters(printer)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        _name_root_like_result(printer, self)
        printer.print_region(self.body, print_entry_block_args=False)


def _name_root_like_result(printer: Printer, op: SiteOp) -> None:
    """Print the root's binding with the group's own name, as in the source (`%11` twice).

    The region is a scope of its own, so the repeated name reads back to the
    same values; xDSL's printer would otherwise rename the inner one `%11_1`.
    """
    outer = printer._ssa_values.get(op.result)  # noqa: SLF001 (xDSL has no public hook for this)
    terminator = op.body.block.last_op
    if outer is not None and isinstance(terminator, YieldOp) and terminator.value not in printer._ssa_values:  # noqa: SLF001
        printer._ssa_values[terminator.value] = outer  # noqa: SLF001


def layout_error(site: str, decision: str, reason: str) -> str:
    """The message of every E7002: the nest, the decision, the reason."""
    return f"E7002: nest \"{site}\", decision \"{decision}\": {reason}"


@irdl_op_definition
class GroupOp(SiteOp):
    """A fusion group: elementwise members sharing one loop nest; only the root reaches memory."""

    name = "psk_realize.group"

    @property
    def kind(self) -> NestKind:
        return "other"

    def verify_(self) -> None:
        members = self.members
        if not members:
            raise VerifyException("a group has at least one member")
        for op in members:
            if not is_elementwise(op):
                raise VerifyException(f"a group holds elementwise primitives only, not {op.name}")
            if op.results[0].type != self.result.type:
                raise VerifyException(f"every member of a group has the group's result type; {op.name} does not")
        self._verify_root()
        root = self.root
        for op in members:
            value = op.results[0]
            for use in value.uses:
                inside = use.operation.parent_block() is self.body.block
                if value is root and not isinstance(use.operation, YieldOp):
                    raise VerifyException(f"the root of group \"{self.site_name}\" is read by a member")
                if value is not root and not inside:
                    raise VerifyException(
                        f"an interior member of group \"{self.site_name}\" ({op.name}) is read outside the group"
                    )
        if len(members) > MAX_GROUP_NODES:
            raise VerifyException(f"group \"{self.site_name}\" has {len(members)} members; a group has at most {MAX_GROUP_NODES}")
        if len(members) > 1 and any(isinstance(op, core.PowOp) and op.n > 2 for op in members):
            raise VerifyException(f"pow with n > 2 joins no group (group \"{self.site_name}\")")
        self._verify_layout()


@irdl_op_definition
class NestOp(SiteOp):
    """One primitive launched by itself: a reduction, a contraction, a softmax, a gather, ..."""

    name = "psk_realize.nest"

    @property
    def primitive(self) -> Operation:
        """The nest's one primitive, the first op of its body."""
        first = self.body.block.first_op  # not `members`: the layout checks ask for it at every point of a space
        if first is None or isinstance(first, YieldOp):
            raise VerifyException(f"{self.name} holds no primitive")
        return first

    @property
    def kind(self) -> NestKind:
        return nest_kind(self.primitive)

    def verify_(self) -> None:
        members = self.members
        if len(members) != 1 or not isinstance(members[0], LAUNCHING_OPS):
            names = ", ".join(op.name for op in members) or "nothing"
            raise VerifyException(f"a nest holds one reduction, contraction, softmax or data move, not {names}")
        self._verify_root()
        self._verify_layout()
        if self.layout is not None and self.layout.stated.get("epilogue") is True:
            if (reason := epilogue_violation(self)) is not None:
                raise VerifyException(layout_error(self.site_name, "epilogue", reason))


def epilogue_violation(nest: NestOp) -> str | None:
    """Why `nest` cannot take the add (or mul) that reads it into its kernel, or None when it can.

    The seed's structural conditions: the product's value is not the
    function's result and is read by one `add` alone, which is no member of
    a larger group (so it launches by itself), adds another tensor that
    broadcasts into the product's output without widening it, and is
    realized in the product's storage type. Beyond the seed, a `mul` may
    take the add's place, under the same conditions but that its other
    operand may be a real too: attention's scores times their scale, which
    the product's kernel then multiplies into each finished sum instead of
    a launch of its own reading and writing the whole score tensor again.
    And the add's other operand is no product stating an epilogue too: one
    kernel takes the add, and the first fold would leave the second product
    read by a product's kernel, not by an add (a gradient's tied weights sum
    two products so).
    """
    uses = list(nest.result.uses)
    if any(isinstance(use.operation, ReturnOp) for use in uses):
        return "the product's value is the function's result, which its own kernel must store; an epilogue needs one add or mul alone to read it"
    if len(uses) != 1:
        return f"the product's value has {len(uses)} readers; an epilogue needs one add or mul alone to read it"
    reader = uses[0].operation
    group = reader.parent_op()
    if not isinstance(reader, core.AddOp | core.MulOp) or not isinstance(group, GroupOp):
        return f"the product's value is read by {reader.name}, not by an add or a mul"
    what = "add" if isinstance(reader, core.AddOp) else "mul"
    if len(group.members) != 1:
        return f"the {what} that reads the product is fused into group \"{group.site_name}\" of {len(group.members)} members, so it does not launch by itself"
    other = reader.operands[1 - uses[0].index]
    if what == "add" and not isinstance(other.type, core.TensorType):
        return "the add's other operand is a real, not a tensor"
    partner = other.owner
    if isinstance(partner, NestOp) and partner.layout is not None and partner.layout.stated.get("epilogue") is True:
        return (
            f"the {what}'s other operand is the product of nest \"{partner.site_name}\", which states the epilogue too; "
            f"one product's kernel can take the {what}"
        )
    if reader.results[0].type != nest.result.type:
        return f"the {what}'s other operand widens the product's output (its result type is not the product's)"
    if nest.realization is not None and group.realization is not None:
        if nest.realization.storage_name != group.realization.storage_name:
            return (
                f"the {what}'s site \"{group.site_name}\" is realized in {group.realization.storage_name}, "
                f"the product in {nest.realization.storage_name}; one kernel computes both"
            )
    return None


def resolved_defaults(op: SiteOp, env: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The defaults of every decision of `op`'s kind, at its types (sizes bound through `env`)."""
    storage = op.realization.storage_name if op.realization is not None else "f64"
    shape = contraction(op.primitive) if isinstance(op, NestOp) else None
    if shape is not None and isinstance(shape.j_size, str) and env and shape.j_size in env:
        shape = replace(shape, j_size=env[shape.j_size])
    stated = op.layout.stated if op.layout is not None else {}
    # A contraction pattern is what makes a nest's kind "contraction": no need to look for it again.
    kind: NestKind = "contraction" if shape is not None else op.kind  # type: ignore[attr-defined]
    return default_layout(kind, shape, storage, stated)


def is_real_valued(t: Attribute) -> bool:
    """Whether a launch's value is made of reals, so a realization types it (index tensors are not)."""
    return all(isinstance(leaf, core.TensorType | core.RealType) for _, leaf in leaves(t))


PSKRealize = Dialect(
    "psk_realize",
    [GroupOp, NestOp, YieldOp],
    [RealizationAttr, LayoutAttr],
)
