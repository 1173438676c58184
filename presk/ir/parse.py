"""Parsing IR text into a located module, with every failure as a `PreskError`.

xDSL's parser leaves operations without a location and reports errors as
`ParseError`s whose text is free prose. presk needs both pinned down: a
verifier failure must point at the line of the failing operation, and a
parse failure must carry a stable error code. `PreskParser` stamps each
operation with the `FileLineColLoc` of its first token, and `parse_module`
classifies xDSL's messages into the E1xxx codes.

Locations are only printed with `--print-debuginfo`, so they never change
the printed IR.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import DiagnosticException, MultipleSpansParseError, ParseError
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from presk.diagnostics import PreskError, SourceLocation
from presk.ir.verify import coded_message, verify_module

__all__ = ["ParsedModule", "PreskParser", "classify_parse_message", "parse_module", "verify_module"]

_CODE_BY_MESSAGE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), code)
    for pattern, code in (
        # Searched in order; the texts are xDSL 0.74's own (xdsl/parser/*.py),
        # plus presk's "use of undefined value" (PreskParser, psk_core parsers).
        (r"^Operation \S+ is not registered", "E1002"),
        (r"is not registered", "E1003"),  # "'foo.t' is not registered", "dialect foo is not registered"
        (r"undefined symbol alias|re-declaration of alias", "E1004"),
        (r"use of undefined value|values used but not defined|SSA value used before assignment", "E1004"),
        (r"SSA value %\S+ is already defined|SSA value tuple index out of bounds", "E1004"),
        (r"is referenced with an index larger than its size|missing block declarations", "E1004"),
        # A value used at a type other than its own: a typing error, not syntax.
        (r"operand is used with type|is defined with type .*, but used with type", "E2001"),
    )
)


def classify_parse_message(message: str) -> str:
    """The error code for one of xDSL's parse-error messages (E1001 by default)."""
    for pattern, code in _CODE_BY_MESSAGE:
        if pattern.search(message):
            return code
    return "E1001"


class _LineIndex:
    """Maps a character offset to a 1-based (line, column) in O(log lines).

    `Span.get_location` counts newlines from the start of the input on every
    call, which is quadratic when every operation is located.
    """

    def __init__(self, text: str) -> None:
        self._starts = [0]
        pos = text.find("\n")
        while pos != -1:
            self._starts.append(pos + 1)
            pos = text.find("\n", pos + 1)

    def line_col(self, pos: int) -> tuple[int, int]:
        line = bisect_right(self._starts, pos)
        return line, pos - self._starts[line - 1] + 1


class PreskParser(Parser):
    """An xDSL parser that records where every operation and SSA use is.

    `text` must already be in file coordinates (see `parse_module`), so that
    the locations it stamps are the user's line numbers.
    """

    def __init__(self, ctx: Context, text: str, filename: str) -> None:
        super().__init__(ctx, text, filename)
        self.filename = filename
        self._lines = _LineIndex(text)
        self._file_attr = StringAttr(filename)
        self._first_uses: dict[str, Span] = {}
        """Where each not-yet-defined SSA name was first used, for E1004."""
        self.op_starts: list[int] = []
        """Start offsets of the operations being parsed, innermost last.

        Left as it is when parsing fails, so the top is the operation whose
        parsing raised: the place to report errors that carry no span.
        """

    def line_col(self, pos: int) -> tuple[int, int]:
        return self._lines.line_col(pos)

    def parse_operation(self) -> Operation:
        start = self.pos
        self.op_starts.append(start)
        op = super().parse_operation()
        self.op_starts.pop()
        if isinstance(op.location, UnknownLoc):
            line, col = self._lines.line_col(start)
            op.location = FileLineColLoc(self._file_attr, IntAttr(line), IntAttr(col))
        return op

    def _at_end_of_input(self) -> bool:
        return self._current_token.kind == MLIRTokenKind.EOF and not self.op_starts

    def resolve_operand(self, operand: UnresolvedOperand, type: Attribute) -> SSAValue:
        if operand.operand_name not in self.ssa_values:
            self._first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def _register_ssa_definition(self, name: str, values: Sequence[SSAValue], span: Span) -> None:
        super()._register_ssa_definition(name, values, span)
        self._first_uses.pop(name, None)

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        """xDSL's, but an input with no operation (empty, or comments and aliases only) is an empty module, as
        mlir-opt reads it, rather than "Could not parse entire input!" at its end."""
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as error:
            if allow_implicit_module and error.msg == "Could not parse entire input!" and self._at_end_of_input():
                return ModuleOp([])
            if not error.msg.startswith("values used but not defined"):
                raise
            undefined = [self._first_uses[n] for n in self.forward_ssa_references if n in self._first_uses]
            if not undefined:
                raise
            first = min(undefined, key=lambda span: span.start)
            raise ParseError(first, f"use of undefined value {first.text}") from None


@dataclass
class ParsedModule:
    """A parsed module with what printing and diagnostics need to go with it."""

    module: ModuleOp
    aliases: dict[str, Attribute]
    """The file's alias definitions (`!t` / `#a` -> value), in definition order."""
    text: str
    """The text that was parsed (one chunk of a split file)."""
    filename: str
    line_offset: int = 0
    """File line of the text's first line, minus one."""

    def verify(self) -> None:
        """Verify the module, raising a located E2001/E2002 `PreskError`."""
        verify_module(self.module, self.filename, self.text, self.line_offset)


def parse_module(
    ctx: Context,
    text: str,
    filename: str,
    line_offset: int = 0,
    *,
    allow_implicit_module: bool = True,
) -> ParsedModule:
    """Parse `text` (which starts at file line `line_offset + 1`) into a located module.

    Raises `PreskError` (E1xxx, or E2001 for an attribute that fails its own
    verifier while being built), never an xDSL exception.
    """
    # Padding with newlines puts every span, location and error in file
    # coordinates without any arithmetic later on.
    padded = "\n" * line_offset + text
    try:
        parser = PreskParser(ctx, padded, filename)  # lexes the first token
    except ParseError as error:
        raise _from_parse_error(error, filename, padded) from None
    try:
        module = parser.parse_module(allow_implicit_module)
    except ParseError as error:
        raise _from_parse_error(error, filename, padded) from None
    except DiagnosticException as error:
        raise _at_parser(parser, padded, *coded_message(str(error).strip(), "E2001")) from None
    except ImportError as error:
        raise _at_parser(parser, padded, "E1003", f"a dialect could not be loaded: {error}") from None
    except ValueError as error:
        raise _at_parser(parser, padded, "E1001", str(error)) from None
    except RecursionError:
        # xDSL's parser recurses several frames per level of nesting (types,
        # attributes, regions): 100 to 200 levels reach Python's recursion limit.
        line, col = parser.line_col(parser.pos)
        raise (
            PreskError("E1001", "nesting too deep for the parser (Python's recursion limit)")
            .located(filename, line, col)
            .with_source(padded)
        ) from None
    return ParsedModule(module, dict(parser.attribute_aliases), text, filename, line_offset)


_UNREGISTERED = re.compile(r"^(?:Operation (\S+)|'([^']+)') is not registered")


def _error_start(error: ParseError, padded: str) -> int:
    """Where the error's subject starts.

    xDSL reports an unregistered name at the token after it; MLIR (and the
    user) expect the caret on the name itself, which is the last occurrence
    of the name before that token.
    """
    start = error.span.start
    if (match := _UNREGISTERED.match(error.msg)) is not None:
        name = match.group(1) or match.group(2)
        found = padded.rfind(name, 0, start)
        if found != -1:
            return found - 1 if found > 0 and padded[found - 1] in '!#"' else found
    return start


def _message(error: ParseError, padded: str) -> str:
    """xDSL's message, completed where it is only a context fragment.

    Some xDSL errors carry just the context (" in block definition"); say
    what was found there, as MLIR would.
    """
    if not error.msg[:1].isspace():
        return error.msg.strip()
    found = padded[error.span.start : error.span.end].strip()
    what = f"unexpected '{found}'" if found else "unexpected end of input"
    return f"{what}{error.msg.rstrip()}"


def _from_parse_error(error: ParseError, filename: str, padded: str) -> PreskError:
    lines = _LineIndex(padded)
    line, col = lines.line_col(_error_start(error, padded))
    message = _message(error, padded)
    result = PreskError(classify_parse_message(message), message).located(filename, line, col)
    if isinstance(error, MultipleSpansParseError):
        for span, note in error.refs:
            ref_line, ref_col = lines.line_col(span.start)
            result = result.with_note(note or error.ref_text or "here", SourceLocation(filename, ref_line, ref_col))
    return result.with_source(padded)


def _at_parser(parser: PreskParser, padded: str, code: str, message: str) -> PreskError:
    """An error placed at the operation being parsed when it was raised."""
    line, col = parser.line_col(parser.op_starts[-1] if parser.op_starts else parser.pos)
    return PreskError(code, message.strip()).located(parser.filename, line, col).with_source(padded)


def read_source(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise PreskError("E0001", f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PreskError("E0001", f"cannot read {path}: {e}") from None
