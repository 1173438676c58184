"""The located parser: op locations, error codes and places, verification."""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, FileLineColLoc
from xdsl.dialects.func import Func

from presk.diagnostics import PreskError
from presk.ir.parse import classify_parse_message, parse_module


@pytest.fixture
def ctx() -> Context:
    context = Context()
    for dialect in (Builtin, Func, Arith):
        context.load_dialect(dialect)
    return context


PROGRAM = """\
func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
     %1 = arith.muli %0, %0 : i32
  func.return %1 : i32
}
"""


def _locations(ctx: Context, text: str, line_offset: int = 0) -> dict[str, tuple[int, int]]:
    module = parse_module(ctx, text, "p.mlir", line_offset).module
    located: dict[str, tuple[int, int]] = {}
    for op in module.walk():
        if isinstance(op.location, FileLineColLoc):
            assert op.location.filename.data == "p.mlir"
            located[op.name] = (op.location.line.data, op.location.column.data)
    return located


def test_each_op_is_located_at_its_first_token(ctx: Context) -> None:
    assert _locations(ctx, PROGRAM) == {
        "func.func": (1, 1),
        "arith.addi": (2, 3),
        "arith.muli": (3, 6),
        "func.return": (4, 3),
    }


def test_line_offset_gives_file_lines(ctx: Context) -> None:
    assert _locations(ctx, PROGRAM, line_offset=10)["arith.muli"] == (13, 6)


def test_locations_are_not_printed(ctx: Context) -> None:
    module = parse_module(ctx, PROGRAM, "p.mlir").module
    assert "loc(" not in str(module)


def test_aliases_are_kept_in_definition_order(ctx: Context) -> None:
    parsed = parse_module(ctx, "!b = i64\n!a = i32\nfunc.func @f(%x: !a) { func.return }\n", "p.mlir")
    assert list(parsed.aliases) == ["!b", "!a"]


def _error(ctx: Context, text: str) -> PreskError:
    with pytest.raises(PreskError) as caught:
        parse_module(ctx, text, "e.mlir").verify()
    return caught.value


@pytest.mark.parametrize(
    ("text", "code", "line", "col", "fragment"),
    [
        ("func.func @f() {\n  %0 = arith.addi : i32\n}", "E1001", 2, 19, "operand expected"),
        ("$", "E1001", 1, 1, "Unexpected character"),
        ("func.func @f() {\n  foo.bar\n}", "E1002", 2, 3, "Operation foo.bar is not registered"),
        ("func.func @f(%a: !foo.t) {\n  func.return\n}", "E1003", 1, 18, "'foo.t' is not registered"),
        ("func.func @f(%a: !t) {\n  func.return\n}", "E1004", 1, 20, "undefined symbol alias '!t'"),
        (
            "func.func @f(%a: i32) {\n  %0 = arith.addi %a, %b : i32\n  func.return\n}",
            "E1004",
            2,
            23,
            "use of undefined value %b",
        ),
        (
            "func.func @f(%a: i32) {\n  %0 = arith.addi %a, %a : i32\n  %0 = arith.addi %a, %a : i32\n  func.return\n}",
            "E1004",
            3,
            3,
            "SSA value %0 is already defined",
        ),
        (
            "func.func @f(%a: i32) -> i64 {\n  func.return %a : i32\n}",
            "E2001",
            2,
            3,
            "Expected arguments to have the same types as the function output types",
        ),
        (
            'func.func @f(%a: i32, %b: i64) {\n  %0 = "arith.addi"(%a, %b) : (i32, i64) -> i32\n  func.return\n}',
            "E2001",
            2,
            3,
            "operand 'rhs' at position 1 does not verify",
        ),
        (
            "func.func @f(%a: i32) {\n  %0 = func.call @g(%a) : (i32) -> i32\n  func.return\n}",
            "E2002",
            2,
            3,
            "call to unknown function @g",
        ),
    ],
)
def test_errors_have_a_code_and_a_place(
    ctx: Context, text: str, code: str, line: int, col: int, fragment: str
) -> None:
    error = _error(ctx, text)
    assert (error.code, error.file, error.line, error.col) == (code, "e.mlir", line, col)
    assert fragment in error.message
    assert error.source_line == text.splitlines()[line - 1]


def test_verifier_message_has_no_ir_dump(ctx: Context) -> None:
    error = _error(ctx, "func.func @f(%a: i32) -> i64 {\n  func.return %a : i32\n}")
    assert "\n" not in error.message and "^^^" not in error.message


def test_error_at_end_of_input_says_so(ctx: Context) -> None:
    error = _error(ctx, "func.func @f() {\n")
    assert error.code == "E1001" and error.message.startswith("unexpected end of input")


def test_empty_body_is_reported_at_the_function(ctx: Context) -> None:
    error = _error(ctx, "func.func @f(%a: i32) {\n}")
    assert (error.code, error.line, error.col) == ("E2001", 1, 1)


def test_unknown_messages_are_syntax_errors() -> None:
    assert classify_parse_message("something else entirely") == "E1001"
    assert classify_parse_message("dialect foo is not registered") == "E1003"
