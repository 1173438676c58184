"""`presk`: the user-facing command (run, dump, launches, ...); subcommands register here.

Each subcommand lives in its own module with `add_parser(subparsers)`,
which registers its arguments and handler; this module only dispatches, and
the guard turns every failure into a diagnostic and an exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from presk.cli import autotune, bench, dump, launches, plan, rank, refit, run, train
from presk.cli.collector import collect_less_often
from presk.cli.guard import run_guarded
from presk.cli.march import add_march_argument, apply_march
from presk.cli.plugins import report_plugin_failures

SUBCOMMANDS = (run, dump, launches, bench, train, refit, plan, autotune, rank)

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The `presk` argument parser; each subcommand adds a subparser to `commands`."""
    parser = argparse.ArgumentParser(prog="presk", description="presk: a tensor compiler for PSK-Core programs")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in SUBCOMMANDS:
        command.add_parser(subparsers)
    for subparser in subparsers.choices.values():
        add_march_argument(subparser)
    return parser


def _run(argv: Sequence[str] | None) -> int:
    collect_less_often()
    report_plugin_failures()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if args.command is None or handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    apply_march(args.march)
    return int(handler(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `presk` console script."""
    return run_guarded(lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
