"""`PreskError`: its format, how layers add locations, and the code registry."""

from __future__ import annotations

import re
from pathlib import Path

from presk.diagnostics import ERROR_CODES, PreskError, SourceLocation

REPO = Path(__file__).resolve().parents[2]


def test_unlocated_error_names_the_tool() -> None:
    assert PreskError("E3001", "unknown pass 'x'").format() == "presk: error: E3001: unknown pass 'x'"


def test_located_error_has_source_line_and_caret() -> None:
    error = PreskError("E2001", "bad type", file="f.mlir", line=3, col=5, source_line="  %0 = foo")
    assert error.format() == "f.mlir:3:5: error: E2001: bad type\n  %0 = foo\n    ^"


def test_caret_keeps_tabs_so_it_lines_up() -> None:
    error = PreskError("E2001", "m", file="f", line=1, col=3, source_line="\t\tx")
    assert error.format().splitlines()[-1] == "\t\t^"


def test_file_without_line() -> None:
    assert PreskError("E3003", "m", file="f.mlir").format() == "f.mlir: error: E3003: m"


def test_notes_follow_with_their_own_location() -> None:
    error = PreskError("E1004", "m", file="f", line=2, col=1).with_note("here", SourceLocation("f", 1, 4))
    assert error.format().splitlines() == ["f:2:1: error: E1004: m", "f:1:4: note: here"]


def test_str_is_the_headline() -> None:
    assert str(PreskError("E4001", "--dim B: bad")) == "E4001: --dim B: bad"


def test_located_keeps_a_more_precise_location() -> None:
    precise = PreskError("E2001", "m").located("a.mlir", 4, 2)
    assert precise.located("b.mlir") is precise
    assert precise.located("b.mlir", 9, 9) is precise
    only_file = PreskError("E2001", "m").located("a.mlir")
    assert only_file.location == SourceLocation("a.mlir")
    assert only_file.located("a.mlir", 4, 2).location == SourceLocation("a.mlir", 4, 2)


def test_with_source_uses_file_line_numbers_of_a_chunk() -> None:
    chunk = "first\nsecond\n"  # file lines 11 and 12
    error = PreskError("E1001", "m", file="f", line=12, col=1).with_source(chunk, line_offset=10)
    assert error.source_line == "second"
    assert PreskError("E1001", "m", file="f", line=99, col=1).with_source(chunk, 10).source_line is None


def test_every_code_is_documented() -> None:
    table = (REPO / "docs" / "errors.md").read_text()
    documented = set(re.findall(r"^\|\s*(E\d{4})\s*\|", table, flags=re.MULTILINE))
    assert documented == set(ERROR_CODES)


def test_every_code_presk_raises_is_registered() -> None:
    used: set[str] = set()
    for source in (REPO / "presk").rglob("*.py"):
        used |= set(re.findall(r"[\"'](E\d{4})[\"']", source.read_text()))
    assert used <= set(ERROR_CODES), sorted(used - set(ERROR_CODES))
