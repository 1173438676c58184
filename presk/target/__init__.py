"""The machine presk compiles for: instruction set, vector registers, caches and workers.

Read from LLVM and the OS, never hard-coded, and overridable with
`PRESK_TARGET`/`--target` to lower for a narrower x86-64 level than the host's.
"""

from presk.target.caches import CacheLevel, read_caches, read_tlb_pages
from presk.target.machine import CACHE_LINE, MAX_WORKERS, THREADS_ENV, Machine, cpu_of_key, vector_bits_of
from presk.target.targets import LEVELS, TARGET_ENV, host_machine, require_native, target_machine, target_named

__all__ = [
    "cpu_of_key",
    "CACHE_LINE",
    "LEVELS",
    "MAX_WORKERS",
    "TARGET_ENV",
    "THREADS_ENV",
    "CacheLevel",
    "Machine",
    "host_machine",
    "read_caches",
    "read_tlb_pages",
    "require_native",
    "target_machine",
    "target_named",
    "vector_bits_of",
]
