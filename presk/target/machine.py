"""The machine presk compiles for: its instruction set, register file, caches and workers.

Vector widths, register counts, cache sizes, worker counts and kernel cache
keys all derive from one `Machine`, never from constants: the code LLVM emits
for `cpu_name` + `features` is what runs, so the layout domain, the lowering
and the cost model must reason about exactly those registers and caches. A
cache key includes the features so that an object compiled for AVX-512 is
never loaded for AVX2 (a home directory shared across machines, or a
narrower `--target` on the same host).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from presk.diagnostics import PreskError
from presk.target.caches import CacheLevel

__all__ = ["CACHE_LINE", "THREADS_ENV", "Machine", "cpu_of_key", "vector_bits_of"]

THREADS_ENV = "PRESK_THREADS"
"""Overrides the number of workers a split runs on (default: the usable cores)."""
MAX_WORKERS = 4096
"""The most workers `PRESK_THREADS` (or `--threads`) may ask for: more than the largest machines' cores, so a
plan for any real machine can be made here, and few enough that a typo does not start threads by the billion."""

CACHE_LINE = 64
"""Bytes of a cache line when the OS does not say (every x86-64 CPU so far): the unit a
non-temporal store writes whole, and the alignment of host buffers."""

_ELEMENT_BITS: dict[str, int] = {"f64": 64, "f32": 32}
_SCALAR_ONLY = frozenset({"bf16"})
"""bf16 stores 16 bits but computes in f32 one element at a time: no vector lanes."""


def vector_bits_of(features: frozenset[str]) -> int:
    """The widest vector register that `features` enable: 512 with AVX-512F, 256 with AVX, else 128."""
    if "avx512f" in features:
        return 512
    if "avx2" in features or "avx" in features:
        return 256
    return 128


@dataclass(frozen=True)
class Machine:
    """A target as LLVM sees it (triple, CPU name, features) with the host's cores and caches."""

    triple: str
    cpu_name: str
    features: frozenset[str]
    """Enabled target features, without the leading '+'."""
    cores: int
    """Cores this process may run on (its affinity mask, not the machine's total)."""
    vector_bits: int
    """The widest vector register: 512 with AVX-512F, 256 with AVX/AVX2, else 128."""
    disabled_features: frozenset[str] = field(default=frozenset(), compare=False)
    """Features LLVM knows and the target lacks; given to the target machine so a
    CPU name that implies a feature the OS disabled cannot re-enable it."""
    caches: tuple[CacheLevel, ...] = ()
    """Data and unified caches, innermost first, as the OS describes them (`presk.target.caches`)."""
    name: str = "host"
    """What `PRESK_TARGET`/`--target` named: `host`, or an x86-64 level such as `x86-64-v3`."""
    tlb_pages: int = 0
    """4 KiB pages the TLB holds, as the OS reports them (`presk.target.caches.read_tlb_pages`); 0: not known."""

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: 32 zmm with AVX-512, 16 xmm/ymm otherwise on x86-64."""
        return 32 if "avx512f" in self.features else 16

    @property
    def fma_chains(self) -> int:
        """Independent FMA chains that keep the FMA units busy, as measured: 10; 0 without FMA.

        Every x86-64 core with FMA that presk has run on issues two FMAs a
        cycle with a latency of four cycles (Skylake-SP and later Xeons, Zen 3
        to Zen 5, on ymm and zmm alike), so 8 chains would fill both units if
        nothing else took an issue slot. A register tile's k loop also loads
        and broadcasts its operands: on a Zen 3, tiles of 8 chains (`[8, 8]`,
        `[2, 32]` in 8 lanes) run at 78-83 % of the FMA peak and `[6, 16]`'s
        12 at 94 % (docs/cost.md §6.5), which 10 describes (8/10) and 8 does
        not. The OS does not report it, so it is this documented constant,
        which a profile's `machine_desc` may override.
        """
        return 10 if "fma" in self.features else 0

    def _register_bits(self) -> tuple[int, ...]:
        if self.vector_bits >= 512:
            return (256, 512)
        if self.vector_bits >= 256:
            return (256,)
        return (128,)

    def lane_widths(self, dtype: str) -> tuple[int, ...]:
        """Vector widths in elements that this CPU's registers hold, ascending.

        With AVX-512 both ymm and zmm are listed: half-width vectors are a real
        choice for the layout search (lower clock penalties, smaller tails).
        """
        if dtype in _SCALAR_ONLY:
            return ()
        bits = _ELEMENT_BITS.get(dtype)
        if bits is None:
            raise ValueError(f"unknown element type '{dtype}' (expected f64, f32 or bf16)")
        return tuple(register // bits for register in self._register_bits())

    def register_width(self, dtype: str) -> int:
        """The widest vector of `dtype` in elements, or 1 when it has no vector lanes."""
        return max(self.lane_widths(dtype), default=1)

    def cache(self, level: int) -> CacheLevel | None:
        """The data cache of `level` (1, 2, 3), or None when the OS does not describe it."""
        return next((cache for cache in self.caches if cache.level == level), None)

    @property
    def last_level_cache(self) -> CacheLevel | None:
        """The outermost cache the OS describes (L3 on a server), or None."""
        return self.caches[-1] if self.caches else None

    @property
    def private_cache(self) -> CacheLevel | None:
        """The outermost cache no other core shares (L2 on current x86-64), or None (`CacheLevel.private`)."""
        private = [cache for cache in self.caches if cache.private]
        return private[-1] if private else None

    @property
    def cache_line(self) -> int:
        """Bytes of a first-level data cache line: the OS's figure, else `CACHE_LINE`."""
        first = self.caches[0] if self.caches else None
        return first.line if first is not None else CACHE_LINE

    def workers(self) -> int:
        """Threads a split runs on: `PRESK_THREADS` if set, else the usable cores.

        Read on every call (not cached) so that a test or a long-lived process
        sees a changed environment.
        """
        text = os.environ.get(THREADS_ENV, "").strip()
        if not text:
            return self.cores
        digits = text.lstrip("0")  # its length is checked before int(), which reads at most 4300 digits
        if not text.isdecimal() or not digits or len(digits) > len(str(MAX_WORKERS)) or int(digits) > MAX_WORKERS:
            raise PreskError(
                "E4001", f"{THREADS_ENV}='{text[:20]}': expected a number of threads from 1 to {MAX_WORKERS}, "
                f"e.g. {THREADS_ENV}=2",
            )
        return int(text)

    def allowed_workers(self) -> tuple[int, ...]:
        """Worker counts a split may use: the machine's, or half of them."""
        workers = self.workers()
        return tuple(dict.fromkeys((workers, max(1, workers // 2))))

    def feature_string(self) -> str:
        """LLVM's `+a,-b` form, for creating a target machine for exactly this target."""
        enabled = (f"+{name}" for name in sorted(self.features))
        disabled = (f"-{name}" for name in sorted(self.disabled_features))
        return ",".join((*enabled, *disabled))

    def describe(self) -> str:
        """One line a person reads (what `presk --version` prints): the target, its registers, caches and workers."""
        fma = ", FMA" if "fma" in self.features else ""
        parts = [f"{self.name}: {self.cpu_name} ({self.triple}), {self.vector_bits}-bit vectors{fma}, "
                 f"{self.vector_registers} vector registers"]  # fmt: skip
        if self.caches:
            parts.append(", ".join(
                f"L{c.level} {_size(c.size)}" + (f" shared by {c.shared_by}" if c.shared_by > 1 else "")
                for c in self.caches))  # fmt: skip
        parts.append(f"{self.workers()} workers")
        return "; ".join(parts)

    def key(self) -> str:
        """A stable string identifying the generated code's target (part of kernel cache keys).

        The caches and the cores are part of it: they decide which stores go
        around the caches (`presk.lowering.llvm.streaming_stores`).
        """
        caches = ",".join(f"L{c.level}:{c.size}/{c.shared_by}" for c in self.caches)
        return f"{self.triple}|{self.cpu_name}|{','.join(sorted(self.features))}|{caches}|cores={self.cores}"

    def file_stem(self) -> str:
        """`<cpu>-<16 hex digits of key()>`: the name of what presk keeps of this machine in its cache (a cost
        profile, the tuned layouts), one per machine key, so that a home shared by machines holds each."""
        return f"{self.cpu_name}-{hashlib.sha256(self.key().encode()).hexdigest()[:16]}"


def cpu_of_key(key: str) -> str:
    """The CPU name a `Machine.key()` holds (`znver3`), to name another machine in a message; the key itself
    when it holds none."""
    parts = key.split("|")
    return parts[1] if len(parts) > 1 and parts[1] else key


def _size(nbytes: int) -> str:
    """Bytes as the OS's cache sizes read: in KiB or MiB when they divide."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"
