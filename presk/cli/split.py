"""`--split-input-file`: one file, several independent test cases.

Cases are separated by a line `// -----`, as in MLIR. Each chunk remembers
the file line it starts on, so its diagnostics and `expected-error`
annotations use the line numbers the user sees in the file.
"""

from __future__ import annotations

from dataclasses import dataclass

SPLIT_MARKER = "// -----"


@dataclass(frozen=True)
class Chunk:
    """A piece of the input: its text, which starts at file line `line_offset + 1`."""

    text: str
    line_offset: int = 0


def split_input(text: str, split: bool = True) -> list[Chunk]:
    """The chunks of `text`; the whole text as one chunk when `split` is false."""
    if not split:
        return [Chunk(text)]
    lines = text.splitlines(keepends=True)
    chunks: list[Chunk] = []
    start = 0
    for index, line in enumerate(lines):
        if line.strip().startswith(SPLIT_MARKER):
            chunks.append(Chunk("".join(lines[start:index]), start))
            start = index + 1
    chunks.append(Chunk("".join(lines[start:]), start))
    return chunks
