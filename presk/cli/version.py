"""`presk --version` and `presk-opt --version`: what was installed, and the target `presk` compiles for.

The target line is what a speed figure or a bug report needs beside it (the
CPU, its vector registers, caches and workers, or the x86-64 level
`PRESK_TARGET`/`--march` names), so it is computed only when asked: reading
it initialises LLVM, which no other command's start should pay for.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def presk_version() -> str:
    """The installed distribution's version; "unknown" in a source tree that was never installed."""
    try:
        return version("presk")
    except PackageNotFoundError:
        return "unknown"


def version_text() -> str:
    """Two lines: presk and the versions it runs on, then the target (`Machine.describe`)."""
    import llvmlite
    import llvmlite.binding as llvm
    import xdsl

    from presk.target import target_machine

    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return (f"presk {presk_version()} (xDSL {xdsl.__version__}, llvmlite {llvmlite.__version__}, LLVM {llvm_version})\n"
            f"target {target_machine().describe()}")  # fmt: skip


class VersionAction(argparse.Action):
    """`--version`: print `version_text()` and exit 0, as argparse's own action does with a fixed string."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print presk's version, the versions it runs on and its target, then exit")  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        print(version_text())
        parser.exit()
