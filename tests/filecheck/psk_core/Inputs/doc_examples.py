"""Keep the IR examples of docs/reference.md and reference_examples.mlir the same.

    doc_examples.py blocks DOC.md          every ```mlir block, '// -----'-separated
    doc_examples.py check DOC.md FILE.mlir  exit 1 unless the blocks and FILE's chunks
                                            are the same code (comment lines ignored)
    doc_examples.py chunk FILE.mlir NAME    the chunk of FILE that defines @NAME
"""

from __future__ import annotations

import re
import sys

SPLIT = "// -----"


def doc_blocks(path: str) -> list[str]:
    text = open(path, encoding="utf-8").read()
    return [m.group(1) for m in re.finditer(r"^```mlir\n(.*?)^```", text, re.S | re.M)]


def chunks(path: str) -> list[str]:
    text = open(path, encoding="utf-8").read()
    return re.split(rf"^{re.escape(SPLIT)}\s*$", text, flags=re.M)


def code(text: str) -> str:
    """The lines that are not blank or comments, stripped of trailing space."""
    return "\n".join(
        line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("//")
    )


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "blocks":
        print(f"\n{SPLIT}\n".join(doc_blocks(argv[1])), end="")
        return 0
    if len(argv) == 3 and argv[0] == "check":
        docs = [code(b) for b in doc_blocks(argv[1])]
        tests = [c for c in (code(c) for c in chunks(argv[2])) if c]
        ok = True
        for i, block in enumerate(docs):
            if block not in tests:
                print(f"{argv[1]}: mlir block {i + 1} is not a chunk of {argv[2]}:\n{block}\n", file=sys.stderr)
                ok = False
        for chunk in tests:
            if chunk not in docs:
                print(f"{argv[2]}: this chunk is not an mlir block of {argv[1]}:\n{chunk}\n", file=sys.stderr)
                ok = False
        return 0 if ok else 1
    if len(argv) == 3 and argv[0] == "chunk":
        found = [c for c in chunks(argv[1]) if re.search(rf"func\.func @{re.escape(argv[2])}\(", c)]
        if len(found) != 1:
            print(f"{argv[1]}: {len(found)} chunks define @{argv[2]}", file=sys.stderr)
            return 1
        print(found[0], end="")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
