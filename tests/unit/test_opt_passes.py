"""How presk-opt reports passes that fail, in-process with stand-in passes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from presk.cli.opt import PreskOptMain
from presk.ir.locations import error_at

PROGRAM = "func.func @f(%a: i32) -> i32 {\n  %0 = arith.addi %a, %a : i32\n  func.return %0 : i32\n}\n"


@dataclass(frozen=True)
class GivesUp(ModulePass):
    name = "gives-up"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise PassFailedException("nothing to do here")


@dataclass(frozen=True)
class RefusesAddi(ModulePass):
    name = "refuses-addi"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        addi = next(o for o in op.walk() if isinstance(o, arith.AddiOp))
        raise error_at(addi, "E7002", "cannot handle this addition")


@dataclass(frozen=True)
class BreaksTypes(ModulePass):
    """Makes the function return an i64 it does not have: invalid IR."""

    name = "breaks-types"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        function = next(o for o in op.walk() if isinstance(o, func.FuncOp))
        function.function_type = func.FunctionType.from_lists([function.function_type.inputs.data[0]], [i64])


def run_pass(tmp_path: Path, text: str, pass_: ModulePass, *flags: str) -> int:
    """presk-opt on `text` (written to p.mlir) with `pass_` as its pipeline; its exit code."""
    source = tmp_path / "p.mlir"
    source.write_text(text)
    driver = PreskOptMain(args=[str(source), *flags])
    driver.passes = (pass_,)
    return driver.run()


def test_pass_failure_is_e3003(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, PROGRAM, GivesUp()) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"{tmp_path / 'p.mlir'}: error: E3003: pass 'gives-up' failed: nothing to do here"


def test_pass_error_at_an_op_gets_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, PROGRAM, RefusesAddi()) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{tmp_path / 'p.mlir'}:2:3: error: E7002: cannot handle this addition",
        "  %0 = arith.addi %a, %a : i32",
        "  ^",
    ]


def test_invalid_ir_after_a_pass_names_the_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pass(tmp_path, PROGRAM, BreaksTypes()) == 1
    err = capsys.readouterr().err
    assert "error: E2001: " in err
    assert "note: the IR does not verify after pass 'breaks-types'" in err


def test_pass_errors_can_be_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "p.mlir"
    source.write_text(PROGRAM.replace("a : i32\n", "a : i32  // expected-error {{E7002: cannot handle}}\n", 1))
    driver = PreskOptMain(args=[str(source), "--verify-diagnostics"])
    driver.passes = (RefusesAddi(),)
    assert driver.run() == 0
    assert capsys.readouterr() == ("", "")
