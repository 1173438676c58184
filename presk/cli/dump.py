"""`presk dump`: print a program at a stage of the compiler.

`--stage core` prints the verified PSK-Core program, bound to the given
sizes when `--dim`/`--const` are passed (so the types show the integers a
run would use). Later stages (realize, kernel, llvm) come with their
dialects.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from presk.cli.program import add_size_arguments, load_program
from presk.diagnostics import PreskError
from presk.ir.context import presk_context
from presk.ir.print import print_module
from presk.dialects.psk_core_types import map_type
from presk.passes.bind import BindSizes

STAGES = ("core",)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("dump", help="print a program at a stage of the compiler")
    p.add_argument("file", help="a PSK-Core program (.mlir)")
    p.add_argument("--stage", default="core", help=f"the stage to print: {', '.join(STAGES)} (default core)")
    add_size_arguments(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.stage not in STAGES:
        raise PreskError("E4001", f"--stage {args.stage}: this presk knows the stages {', '.join(STAGES)}")
    program = load_program(args.file, args.dim, args.const)
    module, aliases = program.parsed.module, program.parsed.aliases
    if args.dim or args.const:
        bind = BindSizes(dims=",".join(args.dim), consts=",".join(args.const))
        bind.apply(presk_context(), module)
        # The file's aliases name the bound types too, so the dump stays as short as the source.
        aliases = {name: map_type(value, lambda s: program.env.get(s, s) if isinstance(s, str) else s)
                   for name, value in aliases.items()}
    sys.stdout.write(print_module(module, aliases))
    return 0
