"""Loading a program for the `presk` subcommands: read, parse, verify, bind sizes.

Every step raises `PreskError`, so each subcommand only formats and exits.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from presk import sizes
from presk.diagnostics import PreskError
from presk.ir.context import presk_context
from presk.ir.parse import ParsedModule, parse_module


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


def read_source(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise PreskError("E0001", f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PreskError("E0001", f"cannot read {path}: {e}") from None


def load_program(path: str, dims: list[str], consts: list[str]) -> Program:
    text = read_source(path)
    parsed = parse_module(presk_context(), text, path)
    parsed.verify()
    env = sizes.resolve(
        parsed.module, sizes.parse_bindings(consts, "--const"), sizes.parse_bindings(dims, "--dim")
    )
    return Program(parsed, env)
