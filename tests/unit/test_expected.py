"""`--verify-diagnostics`: reading annotations and matching errors against them."""

from __future__ import annotations

from presk.cli.expected import Expectation, check_diagnostics, collect_expectations
from presk.cli.split import Chunk, split_input
from presk.diagnostics import PreskError

ANNOTATED = """\
a  // expected-error {{same line}}
// expected-error @+2 {{two down}}
// expected-error @-2 {{two up}}
b
// expected-error @above {{above b}}
// expected-error @below {{below}}
// expected-note @below {{a note}}
c
// expected-error @unknown {{nowhere}}
"""


def _targets(text: str, offset: int = 0) -> list[tuple[str, int | None, str]]:
    return [(e.kind, e.line, e.text) for e in collect_expectations(text, offset)]


def test_every_designator() -> None:
    assert _targets(ANNOTATED) == [
        ("error", 1, "same line"),
        ("error", 4, "two down"),
        ("error", 1, "two up"),
        ("error", 4, "above b"),
        ("error", 8, "below"),  # collected when line 8 is reached
        ("note", 8, "a note"),
        ("error", None, "nowhere"),
    ]


def test_lines_count_from_the_chunk_start_in_the_file() -> None:
    assert _targets("x // expected-error {{e}}\n", offset=20) == [("error", 21, "e")]


def _error(line: int | None, message: str, code: str = "E2001") -> PreskError:
    return PreskError(code, message, file="f.mlir", line=line, col=1 if line else None)


def test_errors_meet_expectations_by_line_and_substring() -> None:
    expected = collect_expectations("x\ny // expected-error {{E2001: bad}}\n")
    assert check_diagnostics(expected, [_error(2, "bad type")], "f.mlir") == []


def test_the_code_is_part_of_the_matched_text() -> None:
    expected = collect_expectations("y // expected-error {{E2002}}\n")
    assert len(check_diagnostics(expected, [_error(1, "m", code="E2001")], "f.mlir")) == 2


def test_unmet_and_unexpected_are_both_failures() -> None:
    expected = collect_expectations("a\nb // expected-error {{wanted}}\n")
    failures = check_diagnostics(expected, [_error(1, "got")], "f.mlir")
    assert failures == [
        "f.mlir:1:1: error: unexpected error: E2001: got",
        'f.mlir:2:6: error: expected error "wanted" was not produced',
    ]


def test_notes_can_never_be_met() -> None:
    expected = [Expectation("note", 1, "n", 1, 1)]
    assert len(check_diagnostics(expected, [_error(1, "n")], "f.mlir")) == 2


def test_unknown_matches_unlocated_errors() -> None:
    expected = collect_expectations("// expected-error @unknown {{E3003}}\n")
    assert check_diagnostics(expected, [PreskError("E3003", "pass failed")], "f.mlir") == []


def test_no_expectations_no_errors_is_success() -> None:
    assert check_diagnostics([], [], "f.mlir") == []


def test_split_keeps_file_line_numbers() -> None:
    text = "a\nb\n// -----\nc\n  // -----  \nd"
    assert split_input(text) == [Chunk("a\nb\n", 0), Chunk("c\n", 3), Chunk("d", 5)]
    assert split_input(text, split=False) == [Chunk(text, 0)]
