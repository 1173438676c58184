"""Where an operation came from, and errors placed there.

The parser (`presk.ir.parse`) stamps every operation with a
`FileLineColLoc`; operations that passes create have none, so an error about
them is placed at the nearest ancestor that has one: the user sees the line
of the function or region the pass was working on rather than nothing.
"""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Operation

from presk.diagnostics import PreskError, SourceLocation


def op_location(op: Operation) -> SourceLocation | None:
    """The source location of `op`, or of its nearest located ancestor."""
    current: Operation | None = op
    while current is not None:
        loc = current.location
        if isinstance(loc, FileLineColLoc):
            return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
        current = current.parent_op()
    return None


def error_at(op: Operation, code: str, message: str) -> PreskError:
    """A `PreskError` placed at `op`; the driver adds the source line later.

    Passes raise this when they cannot apply: `raise error_at(op, "E3003", ...)`
    (E3003: a pass could not be applied; E7002 is kept for ill-formed layouts).
    An operation with no located ancestor, such as the implicit module of a
    file without `builtin.module {`, gives an error with no line, as MLIR's
    `unknown` location: the driver names the file and prefixes the message
    with `pass 'x' failed:`, and `// expected-error @unknown {{...}}` matches it.
    """
    error = PreskError(code, message)
    if (loc := op_location(op)) is not None:
        error = error.located(loc.file, loc.line, loc.col)
    return error
