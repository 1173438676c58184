"""Loading a program for the `presk` subcommands: read, parse, verify, bind sizes, realize.

Every step raises `PreskError`, so each subcommand only formats and exits.
Errors placed at an operation of the program carry its source line
(`in_program`), so a plan refused at a nest prints as
`file:line:col: error: E7002: ...` with the line of the nest's root.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from presk import sizes
from presk.diagnostics import PreskError
from presk.ir.context import presk_context
from presk.ir.parse import ParsedModule, parse_module, read_source
from presk.passes.fuse import FuseElementwise
from presk.passes.realize import apply_plan
from presk.plans import Plan, plan_from_options, realization_record


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dim", action="append", default=[], metavar="NAME=N", help="bind a run-time dimension variable (repeatable)"
    )
    parser.add_argument(
        "--const", action="append", default=[], metavar="NAME=N", help="override a declared constant (repeatable)"
    )


@dataclass
class Program:
    parsed: ParsedModule
    env: dict[str, int]
    """Every constant and every bound dimension variable."""


def load_program(path: str, dims: list[str], consts: list[str]) -> Program:
    text = read_source(path)
    parsed = parse_module(presk_context(), text, path)
    parsed.verify()
    env = sizes.resolve(
        parsed.module, sizes.parse_bindings(consts, "--const"), sizes.parse_bindings(dims, "--dim")
    )
    return Program(parsed, env)


def add_realize_arguments(parser: argparse.ArgumentParser) -> None:
    """`--realize R | --plan @P.json`: the machine types (and layouts) the program is realized in."""
    parser.add_argument(
        "--realize",
        metavar="R",
        help="realize the program: f64, f32, bf16 (stored in bf16, computed in f32), "
        "or @FILE, a record of types per site ({\"default\": \"f32\", \"f/%%3\": \"bf16\"})",
    )
    parser.add_argument(
        "--plan",
        metavar="@P.json",
        help="a realization plan (its realization and a layout per nest), in place of --realize",
    )


def plan_of(realize: str | None, plan: str | None) -> Plan | None:
    """The plan `--realize`/`--plan` give, or None when neither is given (E4001 when both are)."""
    if realize is not None and plan is not None:
        raise PreskError("E4001", "--plan gives the realization too: pass --plan or --realize, not both")
    if realize is None and plan is None:
        return None
    if realize == "":
        realization_record(realize, "--realize")  # refuses it, E7001
    if plan is not None and plan.lstrip("@") == "":
        raise PreskError("E7002", "--plan names a plan file: --plan @P.json")
    return plan_from_options(realize, plan)


def in_program(error: PreskError, program: Program) -> PreskError:
    """`error` with its source line when it is placed in the program's file."""
    parsed = program.parsed
    if error.file == parsed.filename:
        return error.with_source(parsed.text, parsed.line_offset)
    return error


def realize_program(program: Program, plan: Plan) -> None:
    """`psk-fuse`, then `psk-realize` with `plan`: every launch a site with its realization and layout.

    A plan refused at a nest (E7002) or a realization that names no launch
    (E7001) is reported with the nest's source line; the result is verified.
    """
    module = program.parsed.module
    try:
        FuseElementwise().apply(presk_context(), module)
        apply_plan(module, plan)
        program.parsed.verify()
    except PreskError as error:
        raise in_program(error, program) from None
