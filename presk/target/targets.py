"""Which machine to compile for: the host, or a narrower x86-64 level (`PRESK_TARGET`, `--target`).

An AVX-512 host runs AVX2 code natively, so lowering for `x86-64-v3` there
exercises the 256-bit register file, its layout domain and its kernels on one
machine: one CI host tests both widths. A target wider than the host (`x86-64-v4`
on an AVX2 host) still lowers, to IR and to assembly, and runs on the kernel
interpreter, which executes vector ops of any width; only native execution is
refused (`require_native`).

The levels are the x86-64 psABI's microarchitecture levels, spelled with
LLVM's feature names; a level's CPU name is the generic one LLVM defines for
it, so code for it is tuned for no particular core.
"""

from __future__ import annotations

import os
from functools import cache

from presk.diagnostics import PreskError
from presk.target.caches import affinity_cpus, read_caches, read_tlb_pages
from presk.target.machine import Machine, vector_bits_of

__all__ = ["LEVELS", "TARGET_ENV", "host_machine", "require_native", "target_machine", "target_named"]

TARGET_ENV = "PRESK_TARGET"
"""Names the target presk lowers for: `host` (the default) or one of `LEVELS`."""

_BASELINE = frozenset({"64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2"})
_V2 = _BASELINE | {"cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3", "crc32"}
_V3 = _V2 | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "evex512"}

LEVELS: dict[str, frozenset[str]] = {
    "x86-64": _BASELINE,
    "x86-64-v2": frozenset(_V2),
    "x86-64-v3": frozenset(_V3),
    "x86-64-v4": frozenset(_V4),
}
"""The psABI levels: the features each guarantees (LLVM's names)."""


@cache
def host_machine() -> Machine:
    """The machine this process runs on (read once; the CPU does not change).

    llvmlite is imported here, not with the module: loading LLVM is a tenth of
    a second that `presk-opt` on PSK-Core never needs.
    """
    import llvmlite.binding as llvm

    feature_map = llvm.get_host_cpu_features()
    features = frozenset(name for name, enabled in feature_map.items() if enabled)
    disabled = frozenset(name for name, enabled in feature_map.items() if not enabled)
    cpus = affinity_cpus()
    return Machine(
        triple=llvm.get_process_triple(),
        cpu_name=llvm.get_host_cpu_name(),
        features=features,
        cores=len(cpus),
        vector_bits=vector_bits_of(features),
        disabled_features=disabled,
        caches=read_caches(cpus),
        tlb_pages=read_tlb_pages(),
    )


@cache
def target_named(name: str) -> Machine:
    """The machine `name` describes: the host, or a psABI level with the host's cores and caches."""
    host = host_machine()
    if name == "host":
        return host
    level = LEVELS.get(name)
    if level is None:
        known = ", ".join(("host", *LEVELS))
        raise PreskError("E4005", f"unknown target '{name}': expected one of {known}")
    known_features = host.features | host.disabled_features
    features = frozenset(level & known_features)
    return Machine(
        triple=host.triple,
        cpu_name=name,
        features=features,
        cores=host.cores,
        vector_bits=vector_bits_of(features),
        disabled_features=frozenset(known_features - features),
        caches=host.caches,
        name=name,
        tlb_pages=host.tlb_pages,
    )


def target_machine() -> Machine:
    """The machine to compile for: `PRESK_TARGET` (read at every call, so a test can set it), else the host."""
    return target_named(os.environ.get(TARGET_ENV, "").strip() or "host")


def require_native(machine: Machine) -> None:
    """Refuse to run code for `machine` on a host that lacks some of its features (E5002)."""
    missing = sorted(machine.features - host_machine().features)
    if missing:
        raise PreskError(
            "E5002",
            f"code for target '{machine.name}' needs {', '.join(missing)}, which this host "
            f"({host_machine().cpu_name}) lacks; run it with --backend kernel, or lower for a narrower --march",
        )
