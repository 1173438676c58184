"""Reading the input program, the same way for `presk-opt` and every `presk` subcommand; and checking, before
the work, that an output file can be written where it is asked for.

`-` reads standard input, named `<stdin>` in diagnostics, as `mlir-opt`
does. A file that cannot be read has no place in any file, so its error
starts with `presk:` (`presk: error: E0001: cannot open input file 'x.mlir':
no such file`) whichever command reads it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from presk.diagnostics import PreskError

STDIN_NAME = "<stdin>"


@dataclass(frozen=True)
class Source:
    """An input's name (as diagnostics show it) and its text."""

    name: str
    text: str


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PreskError("E0001", f"{what} is not UTF-8 text ({error.reason} at byte {error.start})") from None


def read_input(path: str | None) -> Source:
    """The text of `path`; `-` or None reads standard input. E0001 when it cannot be read."""
    if path is None or path == "-":
        return Source(STDIN_NAME, _decode(sys.stdin.buffer.read(), "standard input"))
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except FileNotFoundError:
        raise PreskError("E0001", f"cannot open input file '{path}': no such file") from None
    except IsADirectoryError:
        raise PreskError("E0001", f"cannot read input file '{path}': it is a directory") from None
    except OSError as error:
        raise PreskError("E0001", f"cannot read input file '{path}': {error.strerror}") from None
    return Source(path, _decode(data, f"input file '{path}'"))


def check_output(path: str) -> None:
    """Refuse (E0001) an output whose folder is missing or not writable, before the minutes of planning, tuning
    or training that would produce it: the write at the end would otherwise lose them."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise PreskError("E0001", f"cannot write {path}: it is a directory")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise PreskError("E0001", f"cannot write {path}: {folder} is not a writable directory")
