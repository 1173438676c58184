"""Printing a module with the type and attribute aliases its file defined.

xDSL resolves `!t = ...` aliases while parsing and never prints them again
(its alias support via OpAsmDialectInterface is not implemented), so a
PSK-Core file full of `!psk_core.tensor<[batch: B, embed: D]>` would come
back from `presk-opt` with every alias expanded. `print_module` prints the
definitions the module uses, then the module with each aliased value printed
by name. Re-parsing that output gives the same module and the same used
aliases, so `presk-opt f.mlir | presk-opt -` is a fixed point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from io import StringIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Dialect, TypeAttribute
from xdsl.printer import Printer


@dataclass(eq=False, repr=False)
class AliasPrinter(Printer):
    """A `Printer` that prints any attribute equal to an alias's value as the alias.

    `aliases` maps values to names (`!t`, `#map`); `used` collects the names
    actually printed, so only those definitions need to be emitted.
    """

    aliases: Mapping[Attribute, str] = field(default_factory=dict[Attribute, str])
    used: set[str] = field(default_factory=set[str])

    def print_attribute(self, attribute: Attribute) -> None:
        if not self.printing_location and (name := _lookup(self.aliases, attribute)) is not None:
            self.used.add(name)
            self.print_string(name)
            return
        super().print_attribute(attribute)


def _lookup(aliases: Mapping[Attribute, str], attribute: Attribute) -> str | None:
    try:
        return aliases.get(attribute)
    except TypeError:  # unhashable data: it cannot equal a (hashable) aliased value
        return None


def _alias_table(definitions: Iterable[tuple[str, Attribute]]) -> dict[Attribute, str]:
    """Value -> name for the definitions that can stand for their value.

    A `!` alias stands for a type and a `#` alias for a non-type attribute,
    exactly where the parser accepts them. When two aliases share a value the
    first one wins, so the choice is stable across round trips.
    """
    table: dict[Attribute, str] = {}
    for name, value in definitions:
        if name.startswith("!") != isinstance(value, TypeAttribute):
            continue
        try:
            table.setdefault(value, name)
        except TypeError:  # unhashable values are never aliased
            continue
    return table


def print_module(
    module: ModuleOp,
    aliases: Mapping[str, Attribute],
    *,
    print_generic_format: bool = False,
    print_properties_as_attributes: bool = False,
    print_debuginfo: bool = False,
    dialects: Iterable[Dialect] = (),
) -> str:
    """`module` as text: used alias definitions, a blank line, the module, a newline.

    `aliases` is name -> value in definition order (as `ParsedModule.aliases`).
    `dialects` are the loaded dialects, needed only to print dialect resources.
    """
    options = dict(
        print_generic_format=print_generic_format,
        print_properties_as_attributes=print_properties_as_attributes,
        print_debuginfo=print_debuginfo,
    )
    ordered = list(aliases.items())
    body = StringIO()
    printer = AliasPrinter(stream=body, aliases=_alias_table(ordered), **options)
    printer.print_op(module)
    printer.print_metadata(dialects)
    used = printer.used

    # A definition may only use aliases defined before it; walking backwards
    # therefore finds every alias a used definition needs in one pass.
    definitions: list[str] = []
    for index in range(len(ordered) - 1, -1, -1):
        name, value = ordered[index]
        if name not in used:
            continue
        text = StringIO()
        definition_printer = AliasPrinter(stream=text, aliases=_alias_table(ordered[:index]), **options)
        definition_printer.print_attribute(value)
        used |= definition_printer.used
        definitions.append(f"{name} = {text.getvalue()}\n")
    definitions.reverse()

    header = "".join(definitions) + "\n" if definitions else ""
    return header + body.getvalue() + "\n"
