"""`--verify-diagnostics`: checking the errors a test case expects, MLIR's way.

A test declares each error it expects in a comment:

    %0 = arith.addi %a, %b : i32  // expected-error {{E2001: operand}}
    // expected-error @+1 {{...}}     the next line (@-N: N lines up)
    // expected-error @above {{...}}  the last line that is not an annotation
    // expected-error @below {{...}}  the next line that is not an annotation
    // expected-error @unknown {{...}} an error with no line

An expectation is met by an error on that line whose text (`EXXXX: message`)
contains the braces' text. Unmet expectations and unexpected errors are both
failures; `expected-warning`, `-note` and `-remark` are recognised but can
never be met, since presk only reports errors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from presk.diagnostics import PreskError

_ANNOTATION = re.compile(
    r"expected-(?P<kind>error|warning|note|remark)\s*(?:@(?P<where>above|below|unknown|[+-]\d+))?\s*\{\{(?P<text>.*?)\}\}"
)


@dataclass(frozen=True)
class Expectation:
    """One `expected-<kind>` annotation."""

    kind: str
    line: int | None
    """File line the diagnostic must be on; None for `@unknown`."""
    text: str
    comment_line: int
    comment_col: int


def collect_expectations(text: str, line_offset: int = 0) -> list[Expectation]:
    """Every annotation in `text` (which starts at file line `line_offset + 1`)."""
    found: list[Expectation] = []
    waiting_for_next_line: list[tuple[re.Match[str], int]] = []
    last_plain_line: int | None = None
    for index, line_text in enumerate(text.splitlines()):
        line = line_offset + index + 1
        matches = list(_ANNOTATION.finditer(line_text))
        if not matches:
            last_plain_line = line
            found.extend(_expectation(match, line, line) for match, _ in waiting_for_next_line)
            waiting_for_next_line.clear()
            continue
        for match in matches:
            where = match.group("where")
            if where == "below":
                waiting_for_next_line.append((match, line))
            elif where == "above":
                found.append(_expectation(match, last_plain_line, line))
            elif where == "unknown":
                found.append(_expectation(match, None, line))
            else:
                found.append(_expectation(match, line + int(where or "0"), line))
    # `@below` with no line after it can only be met by a diagnostic past the end.
    found.extend(_expectation(match, line + 1, line) for match, line in waiting_for_next_line)
    return found


def _expectation(match: re.Match[str], target: int | None, comment_line: int) -> Expectation:
    return Expectation(match.group("kind"), target, match.group("text").strip(), comment_line, match.start() + 1)


def check_diagnostics(expected: Sequence[Expectation], produced: Sequence[PreskError], filename: str) -> list[str]:
    """Failures, one printable message each; empty when the diagnostics are exactly as expected."""
    open_expectations = list(expected)
    failures: list[str] = []
    for error in produced:
        match = next((e for e in open_expectations if _meets(e, error)), None)
        if match is not None:
            open_expectations.remove(match)
        else:
            where = "presk" if error.location is None else str(error.location)
            failures.append(f"{where}: error: unexpected error: {error.headline}")
    for expectation in open_expectations:
        where = f"{filename}:{expectation.comment_line}:{expectation.comment_col}"
        failures.append(f'{where}: error: expected {expectation.kind} "{expectation.text}" was not produced')
    return failures


def _meets(expectation: Expectation, error: PreskError) -> bool:
    return expectation.kind == "error" and expectation.line == error.line and expectation.text in error.headline
