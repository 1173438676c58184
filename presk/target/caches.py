"""The data caches of the CPUs this process may run on, and the pages their TLB holds, as the OS describes them.

Linux publishes each CPU's caches under
`/sys/devices/system/cpu/cpuN/cache/indexK/` (level, type, size, line,
associativity, the CPUs that share it). The first CPU of the affinity mask stands for all of
them, so that a run pinned to some cores describes those cores; a level's
sharing counts only the CPUs of the mask, which is what a split's workers
compete for. Nothing is assumed when the OS says nothing: an unknown level is
absent, an unknown associativity is 0, and every rule that reads a cache
says what it does without one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CPUINFO", "SYSFS_CPU", "CacheLevel", "affinity_cpus", "read_caches", "read_tlb_pages"]

SYSFS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class CacheLevel:
    """One level of data (or unified) cache, seen from one core."""

    level: int
    size: int
    """Bytes of one instance of this cache."""
    line: int
    """Bytes of its line (`coherency_line_size`)."""
    shared_by: int
    """How many CPUs of this process's affinity mask share one instance (1: private)."""
    ways: int = 0
    """Lines of one set (`ways_of_associativity`); 0 when not known, and the rule `sets` of the
    cost model then takes the level as fully associative."""
    core_private: bool | None = None
    """Whether an instance belongs to one core (its hardware threads) whatever the affinity mask: a
    process pinned to one CPU shares the L3 with nothing of its own, but other processes fill it. None
    when not read from the OS (a profile's description); `shared_by == 1` then stands for it."""

    @property
    def private(self) -> bool:
        """Whether lines written here stay for this core's next read (`core_private`, else `shared_by == 1`)."""
        return self.core_private if self.core_private is not None else self.shared_by == 1


def _size_bytes(text: str) -> int:
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale != 1 else text
    return int(digits) * scale


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _ways(index: Path, size: int, line: int) -> int:
    """The level's associativity, or 0 when sysfs does not give one that agrees with its size.

    Some kernels and hypervisors publish no `ways_of_associativity`, or 0 (a
    fully associative cache, or not known), or a value whose sets × ways ×
    line is not the size; none of them is a geometry the rule `sets` can use.
    """
    try:
        ways = int((index / "ways_of_associativity").read_text())
    except (OSError, ValueError):
        return 0
    if ways <= 0 or line <= 0 or size % (ways * line):
        return 0
    try:
        sets = int((index / "number_of_sets").read_text())
    except (OSError, ValueError):
        return ways
    return ways if sets <= 0 or sets * ways * line == size else 0


def read_caches(cpus: Iterable[int], root: Path = SYSFS_CPU) -> tuple[CacheLevel, ...]:
    """The data and unified caches of the first of `cpus`, innermost first; () when the OS does not say."""
    mask = sorted(set(cpus))
    if not mask:
        return ()
    levels: dict[int, CacheLevel] = {}
    try:
        core = _cpu_list((root / f"cpu{mask[0]}" / "topology" / "thread_siblings_list").read_text()) | {mask[0]}
    except (OSError, ValueError):
        core = {mask[0]}
    for index in sorted((root / f"cpu{mask[0]}" / "cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = int((index / "level").read_text())
            size = _size_bytes((index / "size").read_text())
            line = int((index / "coherency_line_size").read_text())
            sharing = _cpu_list((index / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        shared_by = max(1, len(sharing & set(mask)))
        levels[level] = CacheLevel(level, size, line, shared_by, _ways(index, size, line), sharing <= core)
    return tuple(levels[level] for level in sorted(levels))


def affinity_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (a container or `taskset` may restrict them)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


CPUINFO = Path("/proc/cpuinfo")


def read_tlb_pages(path: Path = CPUINFO) -> int:
    """The 4 KiB pages the TLB translates without a page walk, as `/proc/cpuinfo` says ("TLB size : 2560 4K
    pages": Linux prints it for AMD CPUs, from the second-level TLBs' entries, data and instructions
    together); 0 when it does not say (Intel CPUs: the kernel prints no such line), and the cost model
    then counts no page walks. A profile's `machine_desc` may state it instead."""
    try:
        text = path.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "TLB size":
            words = value.split()
            if len(words) >= 2 and words[0].isdigit() and words[1] == "4K":
                return int(words[0])
            return 0
    return 0
