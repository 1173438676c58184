"""Where a pass's failure is placed and how it reads (issue 14, fault 2).

A pass that refuses the whole module (`error_at(module, ...)`) on a file
without `builtin.module {` has no line to point at: the error names the
file, says which pass failed, and `--verify-diagnostics` matches it with
`expected-error @unknown`, as MLIR matches unknown locations. With an
explicit module it is placed at the module's line. Every failure without a
place reads `pass 'x' failed: ...`, whatever raised it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from presk.ir.locations import error_at
from test_opt_passes import run_pass

PROGRAM = "func.func @f(%a: i32) -> i32 {\n  func.return %a : i32\n}\n"
EXPLICIT = "builtin.module {\n" + PROGRAM + "}\n"


@dataclass(frozen=True)
class RefusesModule(ModulePass):
    name = "refuses-module"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise error_at(op, "E3003", "nothing to fold in this module")


@dataclass(frozen=True)
class NamesItself(ModulePass):
    """A pass whose message starts with its own name, as several built-in ones do."""

    name = "names-itself"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise error_at(op, "E3002", "names-itself: level is between 1 and 3")


@dataclass(frozen=True)
class RaisesVerify(ModulePass):
    name = "raises-verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise VerifyException("the module has no entry")


def test_a_module_error_names_the_file_and_the_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, PROGRAM, RefusesModule()) == 1
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path / 'p.mlir'}: error: E3003: pass 'refuses-module' failed: nothing to fold in this module"
    )


def test_expected_error_at_unknown_matches_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "// expected-error @unknown {{E3003: pass 'refuses-module' failed: nothing to fold}}\n" + PROGRAM
    assert run_pass(tmp_path, text, RefusesModule(), "--verify-diagnostics") == 0
    assert capsys.readouterr() == ("", "")


def test_expected_error_on_a_line_does_not_match_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = PROGRAM.replace("{\n", "{  // expected-error {{E3003: pass 'refuses-module' failed}}\n", 1)
    assert run_pass(tmp_path, text, RefusesModule(), "--verify-diagnostics") == 1
    err = capsys.readouterr().err
    assert "unexpected error: E3003: pass 'refuses-module' failed" in err
    assert "was not produced" in err


def test_an_explicit_module_places_it_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, EXPLICIT, RefusesModule()) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{tmp_path / 'p.mlir'}:1:1: error: E3003: nothing to fold in this module",
        "builtin.module {",
        "^",
    ]
    text = EXPLICIT.replace("builtin.module {", "builtin.module {  // expected-error {{E3003: nothing to fold}}")
    assert run_pass(tmp_path, text, RefusesModule(), "--verify-diagnostics") == 0


def test_the_pass_is_not_named_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, PROGRAM, NamesItself()) == 1
    assert capsys.readouterr().err.strip().endswith(
        "error: E3002: pass 'names-itself' failed: level is between 1 and 3"
    )


def test_a_verify_exception_reads_the_same_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, PROGRAM, RaisesVerify()) == 1
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path / 'p.mlir'}: error: E2001: pass 'raises-verify' failed: the module has no entry"
    )
