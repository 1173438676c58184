"""The machine presk compiles for, as the CPU reports it.

Vector widths, worker counts and kernel cache keys all derive from one
`Machine`, read from LLVM's view of the host CPU and never hard-coded: the
code LLVM emits for `cpu_name` + `features` is what runs, so the cost model
and the layout domain must reason about exactly those registers. A cache key
includes the features so that an object compiled on an AVX-512 host is never
loaded on an AVX2 one (a shared home directory across machines).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from functools import cache

import llvmlite.binding as llvm

from presk.diagnostics import PreskError

THREADS_ENV = "PRESK_THREADS"
"""Overrides the number of workers a split runs on (default: the usable cores)."""

CACHE_LINE = 64
"""Bytes of a cache line on x86-64: the unit a non-temporal store writes whole, and its alignment."""

_ELEMENT_BITS: dict[str, int] = {"f64": 64, "f32": 32}
_SCALAR_ONLY = frozenset({"bf16"})
"""bf16 stores 16 bits but computes in f32 one element at a time: no vector lanes."""


@dataclass(frozen=True)
class Machine:
    """The host as LLVM sees it: target triple, CPU name and enabled features."""

    triple: str
    cpu_name: str
    features: frozenset[str]
    """Enabled target features, without the leading '+'."""
    cores: int
    """Cores this process may run on (its affinity mask, not the machine's total)."""
    vector_bits: int
    """The widest vector register: 512 with AVX-512F, 256 with AVX/AVX2, else 128."""
    disabled_features: frozenset[str] = field(default=frozenset(), compare=False)
    """Features LLVM knows and the host lacks; given to the target machine so a
    CPU name that implies a feature the OS disabled cannot re-enable it."""

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

    def workers(self) -> int:
        """Threads a split runs on: `PRESK_THREADS` if set, else the usable cores.

        Read on every call (not cached) so that a test or a long-lived process
        sees a changed environment.
        """
        text = os.environ.get(THREADS_ENV, "").strip()
        if not text:
            return self.cores
        if not text.isdecimal() or int(text) < 1:
            raise PreskError(
                "E4001", f"{THREADS_ENV}='{text}': expected a positive integer number of threads, e.g. {THREADS_ENV}=2"
            )
        return int(text)

    def allowed_workers(self) -> tuple[int, ...]:
        """Worker counts a split may use: the machine's, or half of them."""
        workers = self.workers()
        return tuple(dict.fromkeys((workers, max(1, workers // 2))))

    def feature_string(self) -> str:
        """LLVM's `+a,-b` form, for creating a target machine for exactly this host."""
        enabled = (f"+{name}" for name in sorted(self.features))
        disabled = (f"-{name}" for name in sorted(self.disabled_features))
        return ",".join((*enabled, *disabled))

    def key(self) -> str:
        """A stable string identifying the generated code's target (part of kernel cache keys)."""
        return f"{self.triple}|{self.cpu_name}|{','.join(sorted(self.features))}"


def _vector_bits(features: frozenset[str]) -> int:
    if "avx512f" in features:
        return 512
    if "avx2" in features or "avx" in features:
        return 256
    return 128


def _usable_cores() -> int:
    """Cores in this process's affinity mask (a container or `taskset` may restrict it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


_init_lock = threading.Lock()
_initialized = False


def initialize_llvm() -> None:
    """Initialise llvmlite for native code generation, once per process.

    llvmlite 0.45+ initialises LLVM's core itself and `llvm.initialize()`
    raises; only the native target and its assembly printer remain to set up.
    A throwaway MCJIT engine is also created once: creating an engine is what
    makes LLVM load the process's own symbols (`LoadLibraryPermanently(nullptr)`),
    and until then `llvm.address_of_symbol("expf")` returns None, which would
    make the JIT's unresolved-symbol check refuse every libm call.
    """
    global _initialized
    with _init_lock:
        if _initialized:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target_machine = llvm.Target.from_default_triple().create_target_machine(jit=True)
        llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine).close()
        _initialized = True


@cache
def host_machine() -> Machine:
    """The machine this process runs on (read once; the CPU does not change)."""
    initialize_llvm()
    feature_map = llvm.get_host_cpu_features()
    features = frozenset(name for name, enabled in feature_map.items() if enabled)
    disabled = frozenset(name for name, enabled in feature_map.items() if not enabled)
    return Machine(
        triple=llvm.get_process_triple(),
        cpu_name=llvm.get_host_cpu_name(),
        features=features,
        cores=_usable_cores(),
        vector_bits=_vector_bits(features),
        disabled_features=disabled,
    )
