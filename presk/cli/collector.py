"""The garbage collector's thresholds for presk's own processes.

Lowering builds and drops IR by the million objects (ops, uses, attributes),
and CPython's default thresholds (700, 10, 10) start a young collection every
700 allocations, so the collector walks the same live IR again and again.
Measured on the 2-core AMD EPYC (Zen 3), three test files of lowering and
running (`test_epilogue`, `test_tile_remainders`, `test_fuse_slices`), two
alternate runs each: 46.1 and 46.4 s of CPU at the defaults, 44.2 and 43.0
at (100 000, 20, 20), the peak memory 284 MB against 337 MB. mypy makes the
same trade for the same reason. Only the commands and the test suite set it;
a program importing presk as a library keeps its own.
"""

from __future__ import annotations

import gc

THRESHOLDS = (100_000, 20, 20)


def collect_less_often() -> None:
    gc.set_threshold(*THRESHOLDS)
