"""User-facing errors: one exception type, one registry of codes, one format.

Every error a user can cause is a `PreskError` with a stable code (`E2001`),
so tests, docs and scripts can refer to it without matching prose. The
format is MLIR's, `file:line:col: error: E2001: message`, followed by the
source line and a caret, so editors and `--verify-diagnostics` understand it.
`docs/errors.md` mirrors `ERROR_CODES`; a unit test keeps the two in step.

This module deliberately imports nothing from xDSL: the IR-specific helpers
that locate an error at an operation live in `presk.ir.locations`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

ERROR_CODES: dict[str, str] = {
    "E0001": "a file cannot be read or written (missing, unreadable, not UTF-8)",
    "E1001": "syntax error",
    "E1002": "unknown operation",
    "E1003": "unknown type, attribute or dialect",
    "E1004": "undefined or redefined SSA value, block or alias",
    "E2001": "type-rule violation: an operation's verifier failed",
    "E2002": "call to a function that is not in the module",
    "E3001": "unknown pass",
    "E3002": "bad pass option or pass-pipeline syntax",
    "E3003": "a pass reported that it could not be applied",
    "E3004": "no derivative: psk-autodiff has no rule for an operation a gradient must cross",
    "E4001": "bad --dim or --const argument",
    "E4002": "unbound or invalid size at run time",
    "E4003": "bad input file or input shape",
    "E4004": "unknown entry function",
    "E4005": "unknown target",
    "E4006": "not enough memory for the sizes asked",
    "E5001": "native compilation failed (invalid LLVM IR, unresolved symbol)",
    "E5002": "the target's code cannot run on this host",
    "E7001": "ill-formed realization (unknown type, or a site the program does not have)",
    "E7002": "ill-formed layout or plan",
    "E8001": "ill-formed cost profile, or a prediction or fit it cannot make",
}
"""Every code presk can report, with its one-line meaning (see docs/errors.md)."""


@dataclass(frozen=True)
class SourceLocation:
    """A point in a source file; `line` and `col` are 1-based, as editors count."""

    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.col is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Note:
    """A secondary message attached to an error, at its own place if it has one."""

    message: str
    location: SourceLocation | None = None


class PlanWarning(UserWarning):
    """A plan that is valid but will run slowly on this machine (a register tile that spills, more workers
    than the cores the process may run on).

    Issued with `warnings.warn`, so a library caller decides what to do with
    it; the command line prints it as `presk: warning: ...` (`presk.cli.guard`).
    """


@dataclass(eq=False)
class PreskError(Exception):
    """An error to show the user, with a stable code and, when known, where it is.

    Construct it as `PreskError("E4001", "--dim B: ...")`; the location
    keywords are filled in by whoever knows them (the parser, the verifier,
    the driver), usually through `located` and `with_source`.
    """

    code: str
    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    source_line: str | None = None
    notes: Sequence[Note] = field(default=())

    def __post_init__(self) -> None:
        super().__init__(self.code, self.message)

    def __str__(self) -> str:
        return self.headline

    @property
    def headline(self) -> str:
        """`EXXXX: message`: the text `expected-error` patterns are matched against."""
        return f"{self.code}: {self.message}"

    @property
    def location(self) -> SourceLocation | None:
        return None if self.file is None else SourceLocation(self.file, self.line, self.col)

    def located(
        self,
        file: str,
        line: int | None = None,
        col: int | None = None,
    ) -> PreskError:
        """A copy placed at `file:line:col`, unless this error already knows its place.

        Errors raised deep inside a pass often know the operation but not the
        file; errors raised by the driver know the file but not the line.
        Keeping a more precise location that is already there lets each layer
        add what it knows without overwriting what a lower layer found.
        """
        if self.file is not None and (self.line is not None or line is None):
            return self
        return replace(self, file=file, line=line, col=col)

    def with_source(self, text: str, line_offset: int = 0) -> PreskError:
        """A copy carrying the source line it points at, taken from `text`.

        `text` starts at file line `line_offset + 1` (a chunk of a split file).
        """
        if self.source_line is not None or self.line is None:
            return self
        index = self.line - line_offset - 1
        lines = text.splitlines()
        if not 0 <= index < len(lines):
            return self
        return replace(self, source_line=lines[index])

    def with_note(self, message: str, location: SourceLocation | None = None) -> PreskError:
        return replace(self, notes=(*self.notes, Note(message, location)))

    def format(self) -> str:
        """The full diagnostic: headline, then the source line and a caret, then notes."""
        where = "presk" if self.location is None else str(self.location)
        lines = [f"{where}: error: {self.headline}"]
        if self.source_line is not None:
            lines.append(self.source_line)
            if self.col is not None:
                lines.append(_caret_line(self.source_line, self.col))
        lines.extend(f"{note.location or where}: note: {note.message}" for note in self.notes)
        return "\n".join(lines)


def _caret_line(source_line: str, col: int) -> str:
    """Spaces up to column `col`, then `^`; tabs are kept so the caret lines up."""
    prefix = "".join("\t" if ch == "\t" else " " for ch in source_line[: max(col - 1, 0)])
    return prefix + "^"


def describe(code: str) -> str:
    """The one-line meaning of `code`, or a note that it is not a known code."""
    return ERROR_CODES.get(code, "unknown error code")
