"""Lowering for a named x86-64 level inside a test, whatever the host.

A test that states a register width (16 lanes of f32 are AVX-512's) lowers
for the level that has it, so its IR checks and its kernel-interpreter runs
hold on an AVX2 host too; native runs compile for the host, where LLVM splits
a vector wider than the host's registers into several, with the same bits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from presk.target import TARGET_ENV

WIDEST = "x86-64-v4"
"""The level with every register width the layout domain names (8 and 16 f32 lanes, 4 and 8 f64)."""


@contextmanager
def lowering_for(level: str = WIDEST) -> Iterator[None]:
    """`PRESK_TARGET=level` inside the block, restored after it."""
    before = os.environ.get(TARGET_ENV)
    os.environ[TARGET_ENV] = level
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TARGET_ENV, None)
        else:
            os.environ[TARGET_ENV] = before
