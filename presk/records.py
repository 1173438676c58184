"""JSON-lines files that long runs append to as they go (calibration samples, autotune results).

Each record is one line, appended and synced at once, so that a run killed
at any moment loses at most the record it was writing. Reading skips a last
line that a kill cut short; the next append cuts it off first (or ends it
with its newline, when only that was missing), so it cannot merge with the
new line into one that reads as garbage. Every other line that is not JSON
is an error naming the file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from presk.diagnostics import PreskError

__all__ = ["append_records", "read_records"]


def append_records(path: str | Path, records: Sequence[Mapping[str, Any]], what: str) -> None:
    """Append `records`, one line each, and sync; `what` names the file in an error ("the samples file")."""
    target = Path(path)
    lines = "".join(json.dumps(dict(record), allow_nan=False) + "\n" for record in records)
    try:
        with open(target, "a+b") as stream:
            size = stream.seek(0, os.SEEK_END)
            if size:
                stream.seek(size - 1)
                if stream.read(1) != b"\n":
                    _cut_torn_tail(stream)
            stream.write(lines.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as error:
        raise PreskError("E0001", f"cannot append to {what} '{target}': {error.strerror}") from None


def _cut_torn_tail(stream: BinaryIO) -> None:
    """Drop a last line a crash cut short, or end a whole one that only lacks its newline."""
    stream.seek(0)
    data = stream.read()
    end = data.rfind(b"\n")
    try:
        json.loads(data[end + 1 :])
    except ValueError:
        stream.truncate(end + 1)
        stream.seek(0, os.SEEK_END)
        return
    stream.seek(0, os.SEEK_END)
    stream.write(b"\n")


def read_records(path: str | Path, what: str, code: str) -> list[tuple[int, Any]]:
    """(line number, parsed JSON) of every line; [] when the file does not exist.

    A line that is not JSON is error `code` at `file:line`, unless it is the
    last and unterminated one (a write a kill cut short), which is skipped.
    """
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise PreskError("E0001", f"cannot read {what} '{target}': {error.strerror}") from None
    lines = data.split(b"\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line.decode("utf-8"))))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            if number == len(lines):  # no newline after it: a write a kill cut short
                break
            why = error.msg if isinstance(error, json.JSONDecodeError) else "not UTF-8 text"
            raise PreskError(code, f"{target}:{number}: {what} holds a line that is not JSON ({why})") from None
    return records
