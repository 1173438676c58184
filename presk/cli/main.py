"""`presk`: the user-facing command (run, dump, launches, ...); subcommands register here.

Each subcommand lives in its own module with `add_parser(subparsers)`,
which registers its arguments and handler; this module only dispatches, and
the guard turns every failure into a diagnostic and an exit code. Only the
module of the command given is imported (every one for `presk --help` or a
name that is none of them): the tuning commands' imports would be half of
`presk run`'s start, which every lit line that runs it pays.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from presk.cli.collector import collect_less_often
from presk.cli.guard import run_guarded
from presk.cli.march import add_march_argument, apply_march, command_settings
from presk.cli.plugins import report_plugin_failures
from presk.cli.version import VersionAction

SUBCOMMANDS = ("run", "dump", "launches", "bench", "train", "refit", "plan", "autotune", "rank")
"""The modules of `presk.cli` that define a command each, in the order `presk --help` lists them."""

EXIT_USAGE = 2


def command_modules(argv: Sequence[str]) -> list[ModuleType]:
    """The subcommand modules the parser of `argv` needs: the command's own when `argv` starts with one."""
    names = [argv[0]] if argv and argv[0] in SUBCOMMANDS else SUBCOMMANDS
    return [importlib.import_module(f"presk.cli.{name}") for name in names]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `presk` argument parser; each subcommand adds a subparser to `commands`.

    With `argv`, only the command it names (if it starts with one); else every command."""
    parser = argparse.ArgumentParser(prog="presk", description="presk: a tensor compiler for PSK-Core programs")
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in command_modules(argv or []):
        command.add_parser(subparsers)
    for subparser in subparsers.choices.values():
        add_march_argument(subparser)
    return parser


def _run(argv: Sequence[str] | None) -> int:
    collect_less_often()
    report_plugin_failures()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if args.command is None or handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    with command_settings():
        apply_march(args.march)
        return int(handler(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `presk` console script."""
    return run_guarded(lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
