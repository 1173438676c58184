"""`presk launches`: the kernel launches of each entry, without fusion and with it.

    presk launches corpus/nlp/gpt.mlir --entry loss --entry adamw.step --dim B=2 --dim T=32

prints the seed's table (Markdown), one row per `--entry` (every function
of the program, in source order, by default):

    | Entry | Launches without fusion | With | Removed |

"Without fusion" is the program after `psk-fuse{max-nodes=1}` (every
primitive a launch of its own), "with" after `psk-fuse`; each counts the
launches one run of the entry makes (`presk.cost.launches`): a group or nest
once per leaf of its type, a call as its callee, a fold once per layer.
`--by-function` adds, for each entry, the part of every function it calls.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from presk.cli.program import add_input_arguments, add_size_arguments, entries_of, load_program, opt_of, pipeline_of
from presk.cli.source import read_input
from presk.cost.launches import breakdown, format_breakdown, format_table, launch_table
from presk.diagnostics import PreskError


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("launches", help="count each entry's kernel launches, without fusion and with it")
    add_input_arguments(p)
    p.add_argument(
        "--entry",
        action="append",
        default=[],
        metavar="F",
        help="a function to count (repeatable; default: every function, in source order)",
    )
    add_size_arguments(p)
    p.add_argument(
        "--by-function",
        action="store_true",
        help="also print, per entry, each function's runs and launches per call (where the totals come from)",
    )
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    passes = pipeline_of(args)
    source = read_input(args.file)
    try:
        program = load_program(source, args.dim, args.const, passes, opt=opt_of(args), entries=entries_of(args))
        module, env = program.parsed.module, program.env
        entries = args.entry or None
        text = format_table(launch_table(module, entries, env))
        if args.by_function:
            text += "\n" + format_breakdown(breakdown(module, entries, env))
    except PreskError as error:
        raise error.located(source.name) from None
    sys.stdout.write(text)
    return 0
