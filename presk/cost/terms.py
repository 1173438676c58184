"""What the cost models read of one kernel launch: its quantities at concrete shapes.

A `KernelTerms` is computed from a PSK-Kernel kernel whose buffers have
static shapes (`presk.cost.quantities.kernel_terms`), for one worker's share
of it: the kernel with its split loop cut to `1/workers` of its iterations.
The models (`presk.cost.models`) turn it into a predicted time with a
profile's constants; the calibration stores it beside the measured time, so
a profile can be refitted without lowering anything again.

The quantities are those the seed's layout cost model names:

* `work` (W): operations weighted as the seed weighs them (arithmetic 1, a
  transcendental 8, index arithmetic and loads 0), each lane of a vector
  operation counted, so that a vector kernel weighs what its scalar twin
  does and the rate π of its group tells them apart;
* `bytes` (Q): the bytes of every buffer the kernel reads, plus its outputs;
* `loads` (N_ld): the loads and stores the worker executes, once whatever
  their lanes, a broadcast of a loaded scalar being part of its load;
* `spill` (S): two level-1 accesses per iteration of the busiest innermost
  loop and per register live there beyond the target's vector registers;
* `q_l2`, `q_l3`, `q_mem`: the bytes brought from the second-level cache,
  the third, and memory, from each buffer's access footprint inside every
  loop against each level's capacity;
* `stall`, beyond the seed: the work an FMA's latency adds where a loop's
  running sums are too few independent chains to keep the FMA units busy
  (a register tile of few accumulators), in units of W, so that the layout
  model prices it with the group's π;
* `q_l2_scattered` and `q_l3_scattered`, beyond the seed: of `q_l2` and
  `q_l3`, what arrives in runs a page or more apart (a register tile's
  column block of an operand read in place, its rows 4 KiB or more apart),
  each run on a page of its own where no prefetcher follows it, so that it
  comes at its level's latency. A run costs its whole cache lines: it is
  counted in lines, as bytes;
* `q_l2_written`, beyond the seed: of `q_l2`, the bytes of the buffers the
  kernel writes. Such a line comes back to L1 to be read and written again
  (a register tile's sums between two k-blocks, when the output does not
  stay in L1) and leaves it dirty: a write-back for every line brought, and
  the tile's first FMAs wait for its load;
* `transcendental`, beyond the seed: the transcendental functions the
  worker evaluates, once per register whatever its lanes (a loop the
  backend vectorises counting once per vector, as loads do). presk lowers
  each to a method of its own (a range reduction, a Horner polynomial of
  dependent FMAs, a scaling), whose time W's weight of 8 a lane does not
  say: the layout model prices them again at a rate fitted per machine type;
* `page_walks`, beyond the seed: the 4 KiB pages whose translation the
  TLB does not hold when they are touched, counted as a cache level's
  lines are, with the pages each footprint lies on (`page_bytes`) against
  the description's `tlb_pages`: a column block of an operand read in
  place whose rows lie a page or more apart touches a page a row, and
  once those pages outnumber the TLB's entries every row costs a walk of
  the page tables.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from presk.target import CacheLevel, Machine

__all__ = ["OPTIONAL_TERMS", "RULES", "KernelTerms", "MachineDesc", "group_key"]

RULES: tuple[str, ...] = ("lines", "shared", "overhead", "sets")
"""The rules of the planned cost a profile may name, each off by default:

* `lines`: a footprint counts whole cache lines along its contiguous axis;
* `shared`: a loop is resident when the footprints of all its buffers, summed, fit;
* `overhead`: each loop iteration weighs one operation of work;
* `sets`: a footprint fits a level only if no set of it needs more lines than the level has ways.
"""


OPTIONAL_TERMS: tuple[str, ...] = (
    "stall", "q_l2_scattered", "q_l3_scattered", "q_l2_written", "transcendental", "page_walks",
)
"""Terms counted after samples were first written: written only when non-zero, read as 0 when absent."""


@dataclass(frozen=True)
class KernelTerms:
    """One worker's quantities of one kernel launch (see the module docstring)."""

    work: float
    bytes: float
    loads: float
    spill: float
    q_l2: float
    q_l3: float
    q_mem: float
    workers: int
    """p: the workers the launch runs on (1: not split)."""
    lanes: int
    """The widest vector of the kernel in elements (1: scalar)."""
    dtype: str
    """The machine type the kernel computes in: `f64`, `f32` or `bf16` (its output's storage type)."""
    stall: float = 0.0
    """Latency-bound work (see the module docstring); 0 where the description states no `fma_chains`,
    and in samples written before it was counted."""

    q_l3_scattered: float = 0.0
    """Of `q_l3`, the lines in runs a page or more apart, in bytes (see the module docstring); 0 in samples
    written before it was counted."""
    q_l2_scattered: float = 0.0
    """The same of `q_l2`; 0 in samples written before it was counted."""
    q_l2_written: float = 0.0
    """Of `q_l2`, the bytes of the buffers the kernel writes (see the module docstring); 0 in samples
    written before it was counted."""
    transcendental: float = 0.0
    """The transcendental functions evaluated, in registers (see the module docstring); 0 in samples
    written before it was counted."""
    page_walks: float = 0.0
    """Pages translated by a walk of the page tables (see the module docstring); 0 where the description
    states no `tlb_pages`, and in samples written before it was counted."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for optional in OPTIONAL_TERMS:
            if not data[optional]:  # samples without it read back alike, and earlier versions read them
                del data[optional]
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> KernelTerms:
        return KernelTerms(**{name: data[name] for name in KernelTerms.__dataclass_fields__ if name in data})


def group_key(terms: KernelTerms) -> str:
    """The group whose rates π and ρ price the kernel: machine type × lane width × workers."""
    return f"{terms.dtype}/l{terms.lanes}/p{terms.workers}"


@dataclass(frozen=True)
class MachineDesc:
    """The machine as the cost models see it: caches, registers, workers.

    Taken from the target (`of`), written into a profile as `machine_desc`,
    and read back from it, so that a user who knows better (a cache the OS
    misreports, a pinned run) edits the profile and every prediction follows.
    """

    caches: tuple[CacheLevel, ...]
    """Data caches innermost first: size in bytes of one instance, line, CPUs of the mask sharing it,
    ways (0: not known)."""
    vector_registers: int
    line: int
    """Bytes of a first-level cache line."""
    workers: int
    """p_M: the workers a split may use at most."""
    vector_bits: int = 0
    """The widest vector register in bits, at which the backend runs the loops it vectorises itself
    (`presk.cost.quantities`, "Lanes"); 0 (a profile written before it was recorded): not known, and
    only the kernel's explicit vectors count."""
    fma_chains: int = 0
    """Independent FMA chains that keep the core's FMA units busy (about latency × units); fewer running
    sums in a loop leave them idle, which `stall` counts; 0 (a profile written before it was
    recorded): no stall is counted."""
    tlb_pages: int = 0
    """4 KiB pages the TLB translates without a page walk; 0 (not known, or a profile written before it was
    recorded): no page walk is counted."""

    @staticmethod
    def of(machine: Machine) -> MachineDesc:
        # The model reads how many workers share a level, not whether the hardware gives it to one core.
        caches = tuple(replace(cache, core_private=None) for cache in machine.caches)
        return MachineDesc(
            caches, machine.vector_registers, machine.cache_line, machine.workers(), machine.vector_bits,
            machine.fma_chains, machine.tlb_pages,
        )  # fmt: skip

    def cache(self, level: int) -> CacheLevel | None:
        return next((cache for cache in self.caches if cache.level == level), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "caches": [_cache_json(cache) for cache in self.caches],
            "vector_registers": self.vector_registers,
            "line": self.line,
            "workers": self.workers,
            **({"vector_bits": self.vector_bits} if self.vector_bits else {}),
            **({"fma_chains": self.fma_chains} if self.fma_chains else {}),
            **({"tlb_pages": self.tlb_pages} if self.tlb_pages else {}),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> MachineDesc:
        caches = tuple(
            CacheLevel(*(int(c[k]) for k in ("level", "size", "line", "shared_by")), int(c.get("ways", 0)))
            for c in data["caches"]
        )  # a profile written before "ways" existed: not known
        bits = _count(data, "vector_bits", "the widest vector register in bits (256, 512)")
        chains = _count(data, "fma_chains", "the independent FMA chains the core needs busy (about latency × units, 10)")
        tlb = _count(data, "tlb_pages", "the 4 KiB pages the TLB holds (2560)")
        return MachineDesc(
            caches, int(data["vector_registers"]), int(data["line"]), int(data["workers"]), bits, chains, tlb,
        )  # fmt: skip


def _count(data: dict[str, Any], name: str, what: str) -> int:
    """An optional count of `machine_desc` (0 when absent), or a clear error naming what it is."""
    value = data.get(name, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"machine_desc.{name} is {what}, not {value!r}")
    return value


def _cache_json(cache: CacheLevel) -> dict[str, int]:
    """A cache as a profile stores it: "ways" only when known, so that 0 and absent read back alike."""
    data = asdict(cache)
    del data["core_private"]
    if not cache.ways:
        del data["ways"]
    return data
