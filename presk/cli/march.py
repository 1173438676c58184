"""`--march`: the machine presk lowers for, on both commands.

Named as in GCC and Clang (`-march=x86-64-v3`) because `presk-opt` inherits
xDSL's `-t/--target`, the output format. It sets `PRESK_TARGET` for the
command (`command_settings` puts it back after), so the passes, the
translation and the JIT, and every worker thread, read one target.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from presk.target import LEVELS, TARGET_ENV, THREADS_ENV, target_named

__all__ = ["add_march_argument", "apply_march", "command_settings"]


def add_march_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--march",
        metavar="TARGET",
        help=f"lower for TARGET: host (default, or {TARGET_ENV}) or an x86-64 level "
        f"({', '.join(LEVELS)}); a level narrower than the host runs natively",
    )


def apply_march(value: str | None) -> None:
    """Make `value` the target of this process (E4005 when it names none)."""
    if value is None:
        return
    target_named(value)
    os.environ[TARGET_ENV] = value


@contextmanager
def command_settings() -> Iterator[None]:
    """`PRESK_TARGET` and `PRESK_THREADS` as they were before the command, put back after it.

    `--march` and `--threads` set them for the command's every layer (the
    lowering, the pricing, the runner's workers); they hold for that command
    only, so that a library caller's next command starts from its own settings.
    """
    saved = {name: os.environ.get(name) for name in (TARGET_ENV, THREADS_ENV)}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
