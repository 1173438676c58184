"""The quantities of one kernel for one worker: work, bytes, loads, spills and the traffic of each cache level.

`kernel_terms(kernel, desc, workers, rules)` reads a PSK-Kernel kernel whose
buffers have static shapes and returns its `KernelTerms` (`presk.cost.terms`)
for one worker's share: the split loop (`presk.analysis.split_loop`) cut to
⌈trip / workers⌉ iterations. A kernel without a split loop runs on one
worker whatever `workers` says, and its terms say `workers = 1`.

One walk over the kernel's ops builds a tree of its loops (trip counts at
the worker's share), each holding its own work, loads and accesses (with
their index expressions, `presk.cost.footprints`); every term is then read
off that tree, and footprints are cached per (loop, scope, buffer), since
the three cache levels ask for the same ones; accesses that differ only by
constants (a register tile's) are one family whose box is computed once.
Measured on the 2-core Xeon (AVX-512) while other jobs shared it (load
about 2.4), one analysis of a GEMM kernel at N = 1024 takes: tile [4, 32]
in 16 lanes, k-block 128, packed (five loops, 14 accesses), 0.75 ms with no
rule and 0.8 ms with all three; the scalar [1, 1] tile 0.4 ms; [6, 16] in
8 lanes 0.9 ms; the largest tile in one lane, [8, 32] (256 running sums,
296 accesses), 4.5–5 ms. Every kernel of the course GPT's three entries in
f64, f32 and bf16 takes under 3 ms (its softmax, 24 loops, the slowest).
The rule `sets` (this machine's three levels with their ways), measured in
one process before and after it was added (load about 0.5), f64 at
N = 1024: the packed [4, 32] tile in 8 lanes, k-block 128, 1.07 ms with
`lines`, `shared`, `overhead` and 1.18 ms with the four rules (0.95–0.99 ms
with none, before and after); the unpacked [4, 16] tile in 8 lanes, order
JI, 0.79 ms and 0.98 ms; the scalar tile 0.50 ms and 0.67 ms.

The choices the specification leaves open, as made here:

* **Work.** Floating-point arithmetic weighs 1 per lane: `arith` add, sub,
  mul, div, neg, maximum/minimum, `math.absf`, `math.sqrt` (a square root
  is algebraic, one instruction on x86, not a transcendental), and a
  compare or select whose operands or result are floats; `math.fma` and
  `vector.fma` weigh 2; `math.exp`, `log`, `tanh`, `erf` (and the other
  transcendental `math` ops) weigh 8. Everything on indices and integers,
  constants, every cast (`extf`, `truncf`: bf16's rounding included),
  loads, stores, and the vector ops that only move lanes (`broadcast`,
  `extract`, `insert`, `shuffle`, any `vector` op but `fma` and
  `reduction`) weigh 0. A `vector.reduction` weighs its operand's lanes.
  The shuffles LLVM adds to vectorise the loop around a short chain whose
  operand moves along its rows (an interleaved group) weigh a vector fma
  each (`SHUFFLE_WEIGHT`, `shuffles_per_element`).
  Under the rule `overhead`, each executed iteration of each loop adds 1.
* **Transcendentals.** The same transcendental `math` ops again, counted
  as loads are: once per execution per register they fill, once per vector
  in a loop the backend vectorises; each in exps, the instructions presk's
  own implementation emits for it over an exp's, in the lanes it runs in
  (`presk.lowering.mathlib.instructions`: in vectors of 256 bits a log is
  1.42 exps in f32 and 1.29 in f64, a tanh 1.58 and 1.65, an erf 1.96 and
  3.48; in scalars, where an exp is its whole method, a log is 0.86), so
  that the rate the calibration fits on its exponentials prices the others.
* **Bytes (Q).** Every buffer the kernel loads from or stores to, once
  (a buffer both read and written counts once), whole: elements × element
  size. For a worker's share, each buffer is scaled by the fraction of its
  elements the worker touches (its footprint over the kernel at the
  worker's trip counts over the footprint at the full ones), so a buffer
  the split loop indexes counts ⌈trip / p⌉ / trip of itself and one it does
  not index counts whole; with one worker, Q is exactly the whole buffers.
* **Loads.** `memref.load`, `memref.store`, `vector.load`, `vector.store`:
  each once per execution whatever its lanes (a `vector.broadcast` of a
  loaded scalar is part of its load and counts 0). In an innermost loop
  that the backend vectorises although PSK-Kernel writes it in scalars
  (`backend_lanes`: LLVM's loop vectoriser, the translator's running sums
  and maxima), once per L executions, L its lanes: the kernel as it runs.
  A written vector wider than the description's register (the transposed
  pack's 16 f32 lanes on 256 bits) is as many accesses as the registers it
  fills, and its lanes count as the register's.
* **Index expressions.** Affine in the loop counters through `addi`,
  `subi`, `muli` by a constant, integer casts and clamps against a constant;
  anything else is opaque and taken conservatively (`presk.cost.footprints`).
* **Spill.** Among the innermost loops (no loop inside), the one with the
  most executed iterations (ties: the one with the most live values); its
  live values are the most float and vector values live at once between two
  of its body's operations, in their order: an iter_arg from the body's
  start, a value from its definition, each until its last use (the yield
  keeps the running values to the end); a loaded scalar used only by
  broadcasts is not counted (x86 broadcasts from memory), its broadcasts
  are; and each float or vector value defined outside the loop and used
  inside it is live throughout. S = 2 × max(0, live − vector registers) ×
  that loop's executed iterations.
* **Traffic.** A loop (all its iterations) whose footprint fits a level's
  capacity is brought once per execution of the loop; otherwise one of its
  iterations (its own accesses and every loop inside it) is tried: if that
  fits, it is brought once per iteration, and otherwise the loop's own
  accesses are brought once per iteration and each loop inside is looked at
  the same way. The kernel's body is the outermost such "loop", of one
  iteration. Without the rule `shared` each buffer takes this walk apart;
  with it, all buffers take it together (a loop fits when their footprints,
  summed, fit). Under `lines` or `shared`, a loop that does not fit while one
  of its iterations does brings once what consecutive iterations share:
  the first iteration, then what each next one adds, which for footprints
  that are boxes sums to the footprint of the whole loop; so that loop
  brings its own footprint once per execution.
  Under `sets`, a footprint fits a level only if, besides its bytes, its
  lines spread over the level's S = size / (line · ways) sets so that
  none needs more lines than the level has ways (`presk.cost.footprints`,
  `set_load`): a box's rows (its runs along the last axis, c lines each)
  start at byte offsets that are sums of its outer axes' walks (e_a rows
  at stride d_a); their set offsets modulo the way size S · line are
  enumerated when at most 4096 (each axis counted up to its period
  S · line / gcd(d_a, S · line)), and bounded by the gcd of the strides
  otherwise; the sets used are the union of the c-line runs from those
  offsets (at most min(S, offsets · c)), and the busiest set needs
  ⌈lines / sets used⌉ lines; a box with no gap (contiguous lines) needs
  ⌈lines / S⌉. Several footprints together (a buffer's groups of accesses
  that are not comparable, and all buffers under `shared`) are placed by
  `combined_load`: the busiest set of each takes the others' lines spread
  evenly over the S sets, since where one buffer lies from another is not
  known. A level whose way spans more than a 4 KiB page is indexed above
  the page by physical address bits the program does not choose: it is
  seen as the 4096 / line sets one page spans, each with the ways of all
  S · line / 4096 page colours (`_page_folded`). A level whose ways are 0 (not
  known) is taken as fully associative, as without the rule; the rule
  changes when a footprint fits, never how many bytes it brings.
  Q_L2 is this traffic against L1's capacity, Q_L3 against L2's, Q_mem
  against L3's. A level shared by several CPUs (`shared_by`) gives each
  worker `size / min(workers, shared_by)` and, under `sets`, that share
  of each set's ways (the sets stay the level's); a level the description
  lacks holds what the next inner one holds (a missing L1 holds nothing, so
  every access is brought each time it executes). The traffic is the
  worker's own (the models multiply the shared levels' by p).
* **Stall.** An innermost loop whose every float running value is an
  fma's sum (a register tile's k loop) has one independent chain per
  running value, a written vector being one; in one lane, when the
  description states the register's width, LLVM's SLP vectoriser packs each
  row of consecutive columns into vectors (`_Walk._fma_chains`), so the
  chains are those vectors. With c chains below the description's
  `fma_chains` (about latency × units, as measured: `Machine.fma_chains`),
  the loop's fmas run at c / `fma_chains` of the units' rate: its work
  W_loop adds W_loop · (fma_chains / c − 1), c counted once per execution
  of the loop that the reorder window (`REORDER_WINDOW`) overlaps, so a
  short k loop stalls less (`_stall`).
  A loop that adds fmas to memory in place (the row-wise product's j loop,
  `_in_place_fma`) at addresses the loop around it comes back to has a
  chain per vector, carried by that loop, each step twice the fma's
  latency (`MEMORY_CHAIN`).
  0 when the description has no `fma_chains` (a profile written before it).
* **Page walks.** The TLB is a level like the caches, of the description's
  `tlb_pages` pages, shared by every buffer (one structure for all), whose
  footprints are the pages they lie on (`page_bytes`: rows closer than a
  page share their pages); the pages it brings, counted as `_traffic`
  counts a level's bytes with consecutive iterations sharing what stays,
  are the walks. 0 when the description does not know its TLB.
* **Lanes, dtype.** The widest vector of the kernel, as written or as the
  backend vectorises its innermost loops (`backend_lanes` and SLP's tile
  rows, when the description states the register's width: a profile
  written before `vector_bits` was recorded sees only the vectors written;
  1: scalar). A short chain of FMAs, which the translator unrolls whole
  (a contraction's k terms at its default layout, `is_short_fma_chain`),
  is no loop to the backend: the parallel loop around it is the innermost
  one, vectorised on the same conditions or with an operand read along its
  rows (`unrolled_chain_lanes`), its chains' loads and FMAs then one per
  vector. So an elementwise chain, a one-lane tile or a small default
  contraction is priced with the vector groups it runs like, and the
  lane-1 groups hold only code that stays scalar (a [1, 1] tile over a
  long k, a one-column tile). The element
  type of the first buffer the kernel stores to (its output), as `f64`,
  `f32` or `bf16` (an integer output, a mask or an index range, gives its
  type's name, `i64`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    VectorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from presk.analysis import block_trip_count, constant_int, split_loop, trip_count
from presk.cost.footprints import (
    PAGE, Access, Affine, Box, Family, Index, Opaque, SetGeometry, combined_load, families, footprint_bytes,
    page_bytes, scattered_bytes, set_load,
)  # fmt: skip
from presk.cost.terms import RULES, KernelTerms, MachineDesc
from presk.dialects.psk_kernel import PARALLEL, KernelOp
from presk.lowering import mathlib
from presk.lowering.llvm.math_calls import MATH
from presk.lowering.llvm.loops import is_short_fma_chain
from presk.lowering.llvm.maximum_loops import running_maximum
from presk.lowering.llvm.running_sums import ordered_sums
from presk.passes.vectorize import tile_rows

__all__ = ["TRANSCENDENTAL_WEIGHT", "kernel_terms", "kernel_terms_by_rules"]

_FLOATS = frozenset({BFloat16Type, Float16Type, Float32Type, Float64Type})
_LOADS = frozenset({"memref.load", "vector.load"})
_STORES = frozenset({"memref.store", "vector.store"})
_FMA = frozenset({"math.fma", "vector.fma"})
_TRANSCENDENTAL = frozenset({
    "math.exp", "math.exp2", "math.expm1", "math.log", "math.log2", "math.log10", "math.log1p", "math.tanh",
    "math.erf", "math.erfc", "math.sin", "math.cos", "math.tan", "math.atan", "math.atan2", "math.powf",
    "math.fpowi", "math.cbrt", "math.rsqrt",
})  # fmt: skip
_MATH_FUNCTIONS = {op: function for op, function in MATH.items() if op in _TRANSCENDENTAL}
"""The transcendentals presk implements itself (`presk.lowering.mathlib`), by the name it gives them there."""
_MATH_WIDTHS: dict[type, int] = {Float32Type: 32, Float64Type: 64}
"""The element types presk's implementations take (bf16 computes in f32), by their bits."""
_FREE = frozenset({
    "arith.constant", "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
    "arith.bitcast", "arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci",
})  # fmt: skip
"""Ops that compute nothing the work counts: constants and casts."""
_VECTOR_ARITHMETIC = frozenset({"vector.fma", "vector.reduction"})
"""The `vector` ops that compute (the others move lanes)."""
_INTEGER = frozenset({
    "arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.ceildivsi", "arith.floordivsi",
    "arith.remsi", "arith.remui", "arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui", "arith.cmpi",
    "arith.andi", "arith.ori", "arith.xori", "arith.shli", "arith.shrsi", "arith.shrui",
})  # fmt: skip
"""Integer and index arithmetic: weight 0, known without looking at the types."""
_PASS_THROUGH = frozenset({"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"})
_CLAMPS = frozenset({"arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui"})
TRANSCENDENTAL_WEIGHT = 8
SHUFFLE_WEIGHT = 2
"""The work, per lane, of one shuffle instruction: a vector fma's, since a shuffle takes a vector unit's issue
slot as an fma does (two a cycle on Zen 3; Intel's port 5, one)."""

_ROOT = 0
"""The loop id of the kernel's body, a loop of one iteration with no counter."""


def shuffles_per_element(vector_bits: int, lanes: int) -> float:
    """The shuffle instructions per element with which LLVM transposes an interleaved group into `lanes` lanes.

    With 256-bit registers about one (unpacks, shuffles, blends and 128-bit inserts: the assembly of MiniGPT's
    scores `ein`, 8 terms into 8 lanes, has 66 for 64 elements; of its head's, 16 terms, 112 for 128); with
    512-bit ones AVX-512F's two-source permute (`vpermt2ps`) builds each vector of a term in one: 1 / lanes
    (16 for 16 fmas of the scores at 16 lanes). `tests/unit/test_kernel_to_llvm.py` counts them."""
    return 1.0 / lanes if vector_bits >= 512 else 1.0


def _is_float(t: Attribute) -> bool:
    kind = type(t)
    return kind in _FLOATS or (kind is VectorType and type(t.element_type) in _FLOATS)  # type: ignore[attr-defined]


def _lanes(t: Attribute) -> int:
    if type(t) is VectorType:
        count = 1
        for n in t.get_shape():
            count *= n
        return count
    return 1


def _element_bytes(t: Attribute) -> int:
    if isinstance(t, (BFloat16Type, Float16Type)):
        return 2
    if isinstance(t, Float32Type):
        return 4
    if isinstance(t, IntegerType):
        return max(1, t.width.data // 8)
    return 8  # f64, index


def _dtype_name(t: Attribute) -> str:
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float64Type):
        return "f64"
    return str(t)


def _op_weight(op: Operation) -> int:
    """The work of one execution of `op`: its weight times its lanes (0 for anything not float arithmetic)."""
    name = op.name
    if name in _INTEGER or name in _FREE or name in _LOADS or name in _STORES:
        return 0
    dialect = name.split(".", 1)[0]
    if dialect not in ("arith", "math") and name not in _VECTOR_ARITHMETIC:
        return 0
    # The result says it (a select's first operand is its condition), or the last operand (a compare's result
    # is i1, a reduction's is scalar).
    result = op.results[0].type if op.results else None
    operand = op.operands[-1].type if op.operands else None
    if not (result is not None and _is_float(result)) and not (operand is not None and _is_float(operand)):
        return 0
    lanes = max(_lanes(result) if result is not None else 1, _lanes(operand) if operand is not None else 1)
    if name in _FMA:
        return 2 * lanes
    if name in _TRANSCENDENTAL:
        return TRANSCENDENTAL_WEIGHT * lanes
    return lanes


@dataclass(eq=False)
class _Loop:
    """A loop of the kernel (or its body, the root), with what executes directly in its body."""

    id: int
    trip: int
    full_trip: int
    parent: _Loop | None
    op: scf.ForOp | None
    children: list[_Loop] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    scratch: list[Access] = field(default_factory=list)
    """The loads and stores of the kernel's scratch in its body (buffer -1): no traffic, but the backend
    vectorises the loop only if they are contiguous along it too (`backend_lanes`)."""
    work: int = 0
    loads: int = 0
    transcendentals: list[tuple[str, int, int, int]] = field(default_factory=list)
    """The transcendental functions evaluated directly in its body: (`mathlib`'s name, or "" for one presk
    does not implement; the element's bits; the registers it fills; the lanes it is written in)."""
    vector_lanes: int = 1
    """The lanes the backend runs this (innermost, scalar-written) loop at (`backend_lanes`); 1: as written."""
    shuffles: float = 0.0
    """The shuffles per iteration (per element) with which LLVM brings the accesses it reads as interleaved
    groups to vectorise the loop around a short chain (`unrolled_chain_lanes`, `shuffles_per_element`),
    each `SHUFFLE_WEIGHT` · lanes of work."""
    chains: int = 0
    """Independent FMA chains of an innermost loop whose every running value is an fma's sum, as the
    backend runs it (`_Walk._fma_chains`); 0: not such a loop."""
    through_memory: bool = False
    """Its chains run through memory: each element's fma adds to what the previous iteration of the
    enclosing loop stored there (a row-wise product), so each step also waits for a store to reach the
    next load."""
    narrow: float = 1.0
    """How many times slower than the group's narrowest register SLP's vectors run this loop's fmas
    (4 f32 lanes in a group of 8: 2); 1 otherwise."""
    running_sums: int = 0
    """The running vectors of an innermost loop whose every running value is an `arith.addf`'s sum (a row
    sum, a softmax's denominators), as the backend adds them (`_running_vectors`); 0: not such a loop."""
    enclosing: tuple[int, ...] = ()
    """Ids of this loop and the loops around it, outermost first (not the root)."""
    subtree: frozenset[int] = frozenset()
    """Ids of this loop and every loop inside it."""
    inside: dict[int, list[Family]] = field(default_factory=dict)
    """Per buffer, the access families in this loop's body and in every loop inside it."""
    direct: dict[int, list[Family]] = field(default_factory=dict)
    """Per buffer, the access families in this loop's own body."""


class _Walk:
    """One pass over the kernel: the loop tree, the index expressions, the work and loads per loop."""

    def __init__(self, kernel: KernelOp, workers: int, vector_bits: int = 0, fma_chains: int = 0) -> None:
        self.vector_bits = vector_bits
        self.fma_chains = fma_chains
        self.args = list(kernel.body.block.args)
        self.arg_index = {arg: i for i, arg in enumerate(self.args)}
        self.split = split_loop(kernel)
        self.workers = workers if self.split is not None else 1
        self.loops: list[_Loop] = []
        self.indices: dict[SSAValue, Index] = {}
        self.lanes = 1
        self.written: list[int] = []
        root = self._new_loop(None, None, 1, 1)
        self._block(kernel.body.block, root)
        self._finish(root)
        self.root = root

    def _new_loop(self, parent: _Loop | None, op: scf.ForOp | None, trip: int, full_trip: int) -> _Loop:
        loop = _Loop(len(self.loops), trip, full_trip, parent, op)
        self.loops.append(loop)
        if parent is not None:
            parent.children.append(loop)
            loop.enclosing = (*parent.enclosing, loop.id)
        return loop

    def _registers(self, t: Attribute) -> tuple[int, int]:
        """A value's lanes as the machine runs them, and the registers it takes: a written vector wider than
        the register (the transposed pack's 16 f32 lanes on 256 bits) runs as several of them."""
        lanes = _lanes(t)
        if lanes == 1 or not self.vector_bits:
            return lanes, 1
        held = max(1, self.vector_bits // (8 * _element_bytes(t.element_type)))  # type: ignore[attr-defined]
        return min(lanes, held), -(-lanes // held)

    def _register_group(self, t: Attribute) -> int:
        """The lanes of the register group a written vector runs in: its own where they fill a register the
        profiles calibrate (256 or 512 bits), else the narrowest such register that holds them.

        A blocked pack copies rows of a tile's m_i or n_j elements as one vector each (`emit_blocked_pack`):
        4 f32 lanes run in an xmm, 6 f64 lanes in a masked zmm, priced as the group of that register's width
        as SLP's narrow vectors are (`_fma_chains`)."""
        lanes, _ = self._registers(t)
        if lanes == 1 or not self.vector_bits:
            return lanes
        size = _element_bytes(t.element_type)  # type: ignore[attr-defined]
        width = min(self.vector_bits, 256) // (8 * size)
        while width < lanes and width * 8 * size < self.vector_bits:
            width *= 2
        return width

    def _block(self, block: Block, loop: _Loop) -> None:
        for op in block.ops:
            for result in op.results:
                if isinstance(result.type, VectorType):
                    self.lanes = max(self.lanes, self._register_group(result.type))
            if isinstance(op, scf.ForOp):
                self._for(op, loop)
                continue
            name = op.name
            if name in _LOADS:
                self._access(op, loop, op.operands[0], op.operands[1:], op.results[0].type)
            elif name in _STORES:
                self._access(op, loop, op.operands[1], op.operands[2:], op.operands[0].type)
            else:
                weight = _op_weight(op)
                loop.work += weight
                if weight and name in _TRANSCENDENTAL:
                    result = op.results[0].type
                    element = getattr(result, "element_type", result)
                    lanes, registers = self._registers(result)
                    width = _MATH_WIDTHS.get(type(element), 0)
                    loop.transcendentals.append((_MATH_FUNCTIONS.get(name, ""), width, registers, lanes))
            for region in op.regions:
                for inner in region.blocks:
                    self._block(inner, loop)

    def _for(self, op: scf.ForOp, parent: _Loop) -> None:
        full = trip_count(op)
        counter: Index
        block = block_trip_count(op) if full is None else None
        first = self._index(op.lb) if block is not None else None
        step = constant_int(op.step)
        if block is not None and isinstance(first, Affine) and step is not None:
            # A strip-mined block (psk-split under a serial loop): its start follows the loop of blocks.
            full = block
            inner = self._new_loop(parent, op, block, block)
            counter = first.plus(Affine(0, ((inner.id, step),)))
        elif full is None:  # no other loop of PSK-Kernel lacks constant bounds: run the body once, counter unknown
            inner = self._new_loop(parent, op, 1, 1)
            counter = Opaque(frozenset({inner.id}), id(op))
        else:
            trip = -(-full // self.workers) if op is self.split else full
            inner = self._new_loop(parent, op, trip, full)
            lb, step = constant_int(op.lb), constant_int(op.step)
            assert lb is not None and step is not None
            counter = Affine(lb, ((inner.id, step),) if step else ())
        args = op.body.block.args
        self.indices[args[0]] = counter
        for arg in args[1:]:
            if not _is_float(arg.type):
                self.indices[arg] = Opaque(frozenset({inner.id}), id(arg))
        self._block(op.body.block, inner)
        if inner.children and full is not None and self.vector_bits:
            lanes = unrolled_chain_lanes(op, inner, self.vector_bits)
            if lanes > 1:
                for loop in _subtree(inner):
                    loop.vector_lanes = lanes
                    interleaved = sum(_interleaved(access, inner.id) for access in loop.accesses)
                    loop.shuffles = interleaved * shuffles_per_element(self.vector_bits, lanes)
                self.lanes = max(self.lanes, lanes)
        if not inner.children and full is not None:
            if self.vector_bits:
                inner.vector_lanes = backend_lanes(op, inner, self.vector_bits)
                self.lanes = max(self.lanes, inner.vector_lanes)
            inner.chains = self._fma_chains(op, inner)
            if not inner.chains and self.fma_chains:
                inner.running_sums = _running_vectors(op, self.vector_bits)
            store = _in_place_fma(op) if not inner.chains and self.fma_chains and parent.op is not None else None
            if store is not None and not any(parent.id in self._index(v).loops() for v in store.operands[2:]):
                # The loop around it comes back to the same elements: a chain per vector, through memory.
                inner.chains = -(-inner.trip // inner.vector_lanes)
                inner.through_memory = True

    def _fma_chains(self, op: scf.ForOp, loop: _Loop) -> int:
        """The independent FMA chains of an innermost loop whose every float running value is an fma's sum.

        Written vectors are a chain each. A register tile written in scalars
        (one lane) runs as LLVM's SLP vectoriser packs it, when the register's
        width is known: each row of n consecutive columns (`tile_rows`) in
        vectors of the largest power of two P ≤ n that the register holds,
        ⌈n / P⌉ chains a row; its operand-1 loads are then ⌈n / P⌉ vector
        loads, and the kernel's lanes are P. The assembly of the one-lane
        GEMM tiles shows it (docs/cost.md): [1, 1] scalar, [1, 8] one f32
        vector of 8, [4, 16] four of 16 on AVX-512. P narrower than the
        narrowest register of a group (4 f32 lanes: half a ymm) is priced in
        that register's group at P / its lanes of the rate (`narrow`). A
        description without `fma_chains` (a profile written before it) sees
        the tile as written, in one lane, as its samples were priced.
        """
        chains = _fma_recurrences(op)
        if not chains or loop.vector_lanes > 1 or self.vector_bits == 0 or self.fma_chains == 0:
            return chains
        rows = tile_rows(op)
        if rows is None:
            return chains
        element = op.body.block.args[1].type
        if type(element) is VectorType:
            return chains
        width = self.vector_bits // (8 * _element_bytes(element))
        packed = [min(1 << (n.bit_length() - 1), width) for n in rows]
        widest = max(packed)
        if widest < 2:
            return chains
        columns = max(rows)
        loop.loads -= columns - -(-columns // widest)
        group = max(widest, min(self.vector_bits, 256) // (8 * _element_bytes(element)))
        loop.narrow = group / widest
        self.lanes = max(self.lanes, group)
        return sum(-(-n // p) for n, p in zip(rows, packed, strict=True))

    def _access(
        self, op: Operation, loop: _Loop, base: SSAValue, indices: Iterable[SSAValue], value: Attribute
    ) -> None:
        loop.loads += self._registers(value)[1]
        buffer = self.arg_index.get(base)
        if buffer is None:  # the kernel's scratch: one block of rows, kept in the core's caches, no traffic
            loop.scratch.append(Access(-1, tuple(self._index(v) for v in indices), _lanes(value), loop.enclosing))
            return
        if op.name in _STORES and buffer not in self.written:
            self.written.append(buffer)
        access = Access(buffer, tuple(self._index(v) for v in indices), _lanes(value), loop.enclosing)
        loop.accesses.append(access)
        if op.name in _LOADS and not _is_float(value):  # a loaded index (a gather): opaque, moves with its loads
            deps = frozenset().union(*(ix.loops() for ix in access.indices))
            self.indices[op.results[0]] = Opaque(deps, id(op.results[0]))

    def _index(self, value: SSAValue) -> Index:
        known = self.indices.get(value)
        if known is not None:
            return known
        index = self._compute_index(value)
        self.indices[value] = index
        return index

    def _compute_index(self, value: SSAValue) -> Index:
        owner = value.owner
        if isinstance(owner, Block) or isinstance(value, BlockArgument):
            return Opaque(frozenset(), id(value))
        assert isinstance(owner, Operation)
        name = owner.name
        if name == "arith.constant":
            constant = constant_int(value)
            if constant is not None:
                return Affine(constant)
        operands = [self._index(v) for v in owner.operands if isinstance(v.type, (IndexType, IntegerType))]
        if len(operands) == len(owner.operands):
            affine = _affine_of(name, operands)
            if affine is not None:
                return affine
        deps = frozenset().union(*(ix.loops() for ix in operands)) if operands else frozenset()
        return Opaque(deps, id(value))

    def _finish(self, loop: _Loop) -> None:
        """Bottom-up: each loop's subtree ids and its access families per buffer, inside it and in its own body."""
        subtree = {loop.id}
        own: dict[int, list[Family]] = {}
        for family in families(loop.accesses):
            own.setdefault(family.buffer, []).append(family)
        inside: dict[int, list[Family]] = {buffer: list(found) for buffer, found in own.items()}
        for child in loop.children:
            self._finish(child)
            subtree |= child.subtree
            for buffer, found in child.inside.items():
                inside.setdefault(buffer, []).extend(found)
        loop.subtree = frozenset(subtree)
        loop.direct = own
        loop.inside = inside


def _fma_recurrences(op: scf.ForOp) -> int:
    """The running values of a loop when each is updated by one fma (`math.fma` or `vector.fma`) whose
    addend it is, and nothing else carries a float; else 0."""
    block = op.body.block
    carried = block.args[1:]
    yielded = block.last_op
    if not carried or not isinstance(yielded, scf.YieldOp):
        return 0
    for arg, value in zip(carried, yielded.operands, strict=True):
        owner = value.owner
        if not isinstance(owner, Operation) or owner.name not in _FMA or owner.operands[2] is not arg:
            return 0
    return len(carried)


def _running_vectors(op: scf.ForOp, vector_bits: int) -> int:
    """The chains of dependent additions of a loop whose every running value is `acc + term` (`arith.addf`,
    the accumulator an operand), as the native backend runs them; 0 for any other loop.

    The translator's ordered sums (`presk.lowering.llvm.running_sums`) keep the sums of a block of rows in
    the lanes of vectors of up to `group` sums and add each iteration's terms to them in order: a chain
    of one addition per iteration for each running vector, however wide the terms' vectors are."""
    block = op.body.block
    carried = block.args[1:]
    yielded = block.last_op
    if not carried or not isinstance(yielded, scf.YieldOp) or not all(_is_float(a.type) for a in carried):
        return 0
    for arg, value in zip(carried, yielded.operands, strict=True):
        owner = value.owner
        if not isinstance(owner, Operation) or owner.name != "arith.addf" or arg not in owner.operands:
            return 0
    plan = ordered_sums(op, vector_bits) if vector_bits else None
    return len(carried) // plan.group if plan is not None else len(carried)


def _in_place_fma(op: scf.ForOp) -> Operation | None:
    """The store by which a loop adds to memory in place, if it has one: an fma whose addend was loaded from
    the same buffer at the same indices (the row-wise product's `out[i, j] = fma(x[i, k], w[k, j], out[i, j])`)."""
    for inner in op.body.block.ops:
        if inner.name != "memref.store":
            continue
        fma = inner.operands[0].owner
        if not isinstance(fma, Operation) or fma.name != "math.fma":
            continue
        load = fma.operands[2].owner
        if (isinstance(load, Operation) and load.name == "memref.load"
                and list(load.operands) == list(inner.operands[1:])):  # fmt: skip
            return inner
    return None


def _in_exps(loop: _Loop) -> float:
    """The transcendentals of `loop`'s body, once per register, each in exps: the instructions presk's
    implementation emits for it over an exp's (`mathlib.instructions`), both in the lanes it runs in (a
    written vector's, else the loop's as the backend runs it: a scalar exp is the whole method, a
    vector's the quick form of the normal range), so that the rate the calibration fits on its
    exponentials prices the others; 1 for a function presk does not implement itself."""
    total = 0.0
    for function, width, registers, written in loop.transcendentals:
        if not function or not width:
            total += registers
            continue
        lanes = written if written > 1 else loop.vector_lanes
        total += registers * mathlib.instructions(function, width, lanes) / mathlib.instructions("exp", width, lanes)
    return total


def backend_lanes(op: scf.ForOp, loop: _Loop, vector_bits: int) -> int:
    """The lanes at which the native backend runs an innermost loop that PSK-Kernel writes in scalars.

    The translator's own vector loops (`presk.lowering.llvm`: ordered running
    sums, a running maximum) at the lanes it chooses; a parallel loop without
    running values whose every access (the kernel's scratch included) is contiguous along its counter (the
    counter only in the last index, with coefficient 1) or does not move
    with it at the register's width for its widest element, as LLVM's loop
    vectoriser (or the translator's streaming and guarded-division loops)
    runs it; anything else, and a loop already holding vectors, at 1.
    """
    body = list(_ops_in(op.body.block))
    if any(type(t) is VectorType for inner in body for t in (*inner.result_types, *inner.operand_types)):
        return 1
    if (sums := ordered_sums(op, vector_bits)) is not None:
        return sums.lanes
    if (maximum := running_maximum(op, vector_bits)) is not None:
        return maximum.lanes
    if PARALLEL not in op.attributes or op.iter_args or not (loop.accesses or loop.scratch):
        return 1
    if not _vectorise_along((*loop.accesses, *loop.scratch), loop.id):
        return 1
    return _register_lanes(body, vector_bits)


def _vectorise_along(accesses: Iterable[Access], loop_id: int) -> bool:
    """Whether every access is contiguous along loop `loop_id`'s counter (the counter only in the last
    index, with coefficient 1) or does not move with it: what LLVM's loop vectoriser needs of a loop."""
    for access in accesses:
        if not access.indices:  # a scalar buffer: the same element in every lane
            continue
        *outer, last = access.indices
        if any(loop_id in index.loops() for index in outer):
            return False
        if type(last) is Opaque and loop_id in last.deps:
            return False
        if type(last) is Affine and dict(last.coefs).get(loop_id, 0) not in (0, 1):
            return False
    return True


def _interleaved(access: Access, loop_id: int) -> bool:
    """Whether `access` moves with loop `loop_id` in an index before the last, affinely, and not in the last:
    consecutive iterations read rows of the buffer, which LLVM loads whole and transposes between lanes
    (an interleaved group) when the loop around a short chain is vectorised."""
    if not access.indices:
        return False
    *outer, last = access.indices
    moves = [index for index in outer if loop_id in index.loops()]
    return bool(moves) and all(type(index) is Affine for index in moves) and loop_id not in last.loops()


def _subtree(loop: _Loop) -> list[_Loop]:
    """`loop` and every loop inside it, during the walk (`_Loop.subtree` holds their ids once it is done)."""
    return [loop, *(inner for child in loop.children for inner in _subtree(child))]


def unrolled_chain_lanes(op: scf.ForOp, loop: _Loop, vector_bits: int) -> int:
    """The lanes at which the native backend runs a parallel loop whose inner loops are short chains of FMAs.

    The translator unrolls each such chain whole (`is_short_fma_chain`: a
    contraction's k terms at its default layout), so the parallel loop
    around them is the innermost loop LLVM sees, and its loop vectoriser
    runs it at the register's width for the widest element, each lane its
    own element's chain in the same order, when every access in it (the
    chains' included) is contiguous along its counter, does not move with
    it, or moves with it only in an index before the last (`_interleaved`:
    the scores' operand read along its rows, which LLVM loads row by row
    and transposes into the lanes with shuffles, counted in `_Loop.shuffles`).
    The chains' loads are then one per vector and their FMAs a vector
    chain each. A loop whose trip count is below that width, or with any
    other access (a gather, a stride in the last index), keeps its scalar
    price: 1.
    """
    if PARALLEL not in op.attributes or op.iter_args:
        return 1
    if not all(child.op is not None and is_short_fma_chain(child.op) for child in loop.children):
        return 1
    body = list(_ops_in(op.body.block))
    if any(_lanes(r.type) > 1 for inner in body for r in inner.results):  # written vectors
        return 1
    loops = _subtree(loop)
    if any(inner.scratch for inner in loops):
        return 1
    accesses = [access for inner in loops for access in inner.accesses]
    if not _vectorise_along([access for access in accesses if not _interleaved(access, loop.id)], loop.id):
        return 1
    lanes = _register_lanes(body, vector_bits)
    return lanes if loop.full_trip >= lanes else 1


def _register_lanes(body: list[Operation], vector_bits: int) -> int:
    """The lanes of a register for the widest element `body` loads, stores or computes (bf16 loads are
    widened to f32 to compute)."""
    sizes = [_element_bytes(r.type) for inner in body for r in inner.results if _is_float(r.type)]
    sizes += [_element_bytes(inner.operands[0].type) for inner in body if inner.name in _STORES]
    return max(1, vector_bits // (8 * max(sizes, default=8)))


def _affine_of(name: str, operands: list[Index]) -> Affine | None:
    """The affine form of an integer op on affine operands, or None (the op is not followed)."""
    if not all(type(ix) is Affine for ix in operands):
        return None
    affine: list[Affine] = operands  # type: ignore[assignment]
    if name in _PASS_THROUGH and len(affine) == 1:
        return affine[0]
    if len(affine) != 2:
        return None
    a, b = affine
    if name == "arith.addi":
        return a.plus(b)
    if name == "arith.subi":
        return a.plus(b, -1)
    if name == "arith.muli":
        if not b.coefs:
            return a.times(b.const)
        if not a.coefs:
            return b.times(a.const)
        return None
    if name in _CLAMPS:  # a clamp against a constant: the other operand (the footprint is cut to the buffer)
        if not b.coefs:
            return a
        if not a.coefs:
            return b
    return None


# --------------------------------------------------------------------------- work, loads, spill


def _executions(walk: _Walk) -> list[int]:
    """Per loop id: how many times its body runs (the product of its trip and those around it)."""
    runs = [0] * len(walk.loops)
    for loop in walk.loops:  # parents come first: ids are given in walk order
        outer = runs[loop.parent.id] if loop.parent is not None else 1
        runs[loop.id] = outer * loop.trip
    return runs


def _live_values(op: scf.ForOp) -> int:
    """The most float and vector values live at once in an innermost loop's body, in its order (see the
    module docstring). A loaded scalar used only by broadcasts takes no register of its own: x86
    broadcasts straight from memory, so its value is live from each broadcast on."""
    block = op.body.block
    body_ops = list(_ops_in(block))
    position = {id(inner): index for index, inner in enumerate(body_ops, start=1)}
    defined: set[SSAValue] = set(block.args)
    for inner in body_ops:
        defined.update(inner.results)
    invariant = {
        operand
        for inner in body_ops
        for operand in inner.operands
        if operand not in defined and _is_float(operand.type)
    }
    spans: list[tuple[int, int]] = []  # (after which op a value is live, after which op it is dead)

    def span(value: SSAValue, start: int) -> None:
        ends = [position[id(use.operation)] for use in value.uses if id(use.operation) in position]
        if ends and max(ends) > start:
            spans.append((start, max(ends)))

    for arg in block.args[1:]:
        if _is_float(arg.type):
            span(arg, 0)
    for inner in body_ops:
        if inner.name in _LOADS and inner.results:
            if all(use.operation.name == "vector.broadcast" for use in inner.results[0].uses):
                continue
        for result in inner.results:
            if _is_float(result.type):
                span(result, position[id(inner)])
    change = [0] * (len(body_ops) + 2)
    for start, end in spans:
        change[start] += 1
        change[end] -= 1
    return max(accumulate(change)) + len(invariant)


def _ops_in(block: Block) -> Iterable[Operation]:
    for op in block.ops:
        yield op
        for region in op.regions:
            for inner in region.blocks:
                yield from _ops_in(inner)


def _spill(walk: _Walk, runs: list[int], registers: int) -> float:
    innermost = [loop for loop in walk.loops if loop.op is not None and not loop.children]
    if not innermost:
        return 0.0
    most = max(runs[loop.id] for loop in innermost)
    live = max(_live_values(loop.op) for loop in innermost if runs[loop.id] == most)  # type: ignore[arg-type]
    return 2.0 * max(0, live - registers) * most


MEMORY_CHAIN = 2
"""How many FMA latencies one step of a chain through memory takes: the fma, then the store that the
next load forwards (four to five cycles on the cores presk targets, about an fma's latency)."""

REORDER_WINDOW = 256
"""Operations the core keeps in flight, which overlap consecutive executions of a short loop: the
smallest reorder buffer of the x86-64 cores presk targets (Zen 3; Zen 4 320, Zen 5 448, Golden Cove
512), so that the overlap is never overstated."""


def _stall(walk: _Walk, runs: list[int], needed: int) -> float:
    """The work the FMA's latency adds: a loop of c < `needed` chains runs its fmas at c / `needed` of
    the units' rate (and SLP vectors narrower than the group's at `narrow` times less), so its work
    W_loop costs W_loop · narrow · max(1, needed / c) and the stall is the difference.

    The chains of consecutive executions of the loop (the next tile's) are independent, and a core
    overlaps as many executions as its reorder window holds: a k loop of 8 iterations of about 12
    operations each is 96 operations, so about 2.7 executions run at once and c counts that many
    times. An execution is counted as trip × (its fmas, its loads and stores, and 2 for the loop)."""
    if needed <= 0:
        return 0.0
    stall = 0.0
    for loop in walk.loops:
        if loop.running_sums:
            stall += _sum_latency(loop, runs[loop.id], needed)
            continue
        if not loop.chains:
            continue
        if loop.through_memory:  # the chain is carried by the enclosing loop: no two executions overlap
            chains, step = float(loop.chains), MEMORY_CHAIN * needed
        else:
            operations = loop.trip * (loop.chains + loop.loads + 2)
            chains, step = loop.chains * max(1.0, REORDER_WINDOW / operations), needed
        if chains < step or loop.narrow > 1.0:
            stall += loop.work * runs[loop.id] * (loop.narrow * max(1.0, step / chains) - 1.0)
    return stall


def _sum_latency(loop: _Loop, runs: int, needed: int) -> float:
    """The work a loop of running sums adds while its additions wait for each other.

    With r < `needed` running vectors, an iteration takes at least one addition's latency (its chains
    advance together), in which the core could have done `needed` · lanes of the loop's work (the
    latency times the units, each `lanes` wide): the stall is what the iteration's own work W_iter falls
    short of that, `needed` · lanes − W_iter, or 0. A softmax's denominators summed a row at a time (one
    chain) stall; eight rows summed in the lanes of one vector, whose exponentials are eight times the
    work, stall little or not at all. Consecutive executions overlap within the reorder window, as in
    `_stall`."""
    if loop.running_sums >= needed:
        return 0.0
    operations = loop.trip * (loop.running_sums + loop.loads + 2)
    floor = needed * loop.vector_lanes / max(1.0, REORDER_WINDOW / operations)
    return runs * max(0.0, floor - loop.work)


# --------------------------------------------------------------------------- bytes and traffic


class _Footprints:
    """Footprints per (loop, scope, buffer), computed once: the three levels ask for the same ones.

    Under the rule `sets` each footprint keeps its boxes too, and its load on
    each level's sets is computed once per level, when its bytes fit.
    """

    LOOP, ITERATION, OWN = 0, 1, 2

    def __init__(
        self, walk: _Walk, shapes: list[tuple[int, ...]], sizes: list[int], line: int | None, sets: bool = False
    ) -> None:
        self.trips = [loop.trip for loop in walk.loops]
        self.shapes, self.sizes, self.line, self.sets = shapes, sizes, line, sets
        self.cache: dict[tuple[int, int, int], int] = {}
        self.boxes: dict[tuple[int, int, int], list[Box]] = {}
        self.loads: dict[tuple[int, int, int, int], tuple[int, int]] = {}

    def __call__(self, loop: _Loop, scope: int, buffers: Iterable[int]) -> int:
        return sum(self.one(loop, scope, buffer) for buffer in buffers)

    def accesses(self, loop: _Loop, scope: int, buffer: int) -> tuple[list[Family], frozenset[int]]:
        """A buffer's accesses in a scope of a loop, and the loops that run in it."""
        if scope == self.OWN:
            return loop.direct.get(buffer, []), frozenset()
        free = loop.subtree if scope == self.LOOP else loop.subtree - {loop.id}
        return loop.inside.get(buffer, []), free

    def one(self, loop: _Loop, scope: int, buffer: int) -> int:
        key = (loop.id, scope, buffer)
        known = self.cache.get(key)
        if known is not None:
            return known
        accesses, free = self.accesses(loop, scope, buffer)
        boxes: list[Box] | None = [] if self.sets else None
        value = footprint_bytes(accesses, free, self.trips, self.shapes[buffer], self.sizes[buffer], self.line, boxes)
        self.cache[key] = value
        if boxes is not None:
            self.boxes[key] = boxes
        return value

    def set_load(self, loop: _Loop, scope: int, buffer: int, level: int, geometry: SetGeometry) -> tuple[int, int]:
        """(lines the busiest set needs, lines) of one buffer's footprint on a level's sets."""
        key = (loop.id, scope, buffer, level)
        known = self.loads.get(key)
        if known is None:
            self.one(loop, scope, buffer)
            boxes = self.boxes[key[:3]]
            known = self.loads[key] = set_load(boxes, self.shapes[buffer], self.sizes[buffer], geometry)
        return known


class _Boxed(_Footprints):
    """Each footprint measured from its boxes (`footprint_bytes`'s groups of comparable accesses) by `measure`:
    the lines in runs a page or more apart (`scattered_bytes`), or the pages it lies on (`page_bytes`)."""

    def __init__(
        self, walk: _Walk, shapes: list[tuple[int, ...]], sizes: list[int],
        measure: Callable[[list[Box], tuple[int, ...], int], int],
    ) -> None:  # fmt: skip
        super().__init__(walk, shapes, sizes, None)
        self.measure = measure

    def one(self, loop: _Loop, scope: int, buffer: int) -> int:
        key = (loop.id, scope, buffer)
        known = self.cache.get(key)
        if known is None:
            accesses, free = self.accesses(loop, scope, buffer)
            boxes: list[Box] = []
            shape, size = self.shapes[buffer], self.sizes[buffer]
            footprint_bytes(accesses, free, self.trips, shape, size, None, boxes)
            known = self.cache[key] = self.measure(boxes, shape, size) if boxes else 0
        return known


@dataclass(frozen=True)
class _Written:
    """Of each footprint, the bytes of the buffers the kernel writes (`footprint`'s own counts)."""

    footprint: _Footprints
    written: frozenset[int]

    def __call__(self, loop: _Loop, scope: int, buffers: Iterable[int]) -> int:
        return sum(self.footprint.one(loop, scope, b) for b in buffers if b in self.written)


@dataclass(frozen=True)
class _Level:
    """What one worker may keep in a cache level: bytes, and its sets under the rule `sets` (None: no limit)."""

    level: int
    capacity: float
    geometry: SetGeometry | None


def _traffic(
    root: _Loop, footprint: _Footprints, level: _Level, groups: list[list[int]], carry: bool,
    measure: Callable[[_Loop, int, list[int]], int] | None = None,
) -> int:
    """Bytes brought into a cache level, each group of buffers walking the loops together.

    `measure` counts, of what each loop brings where `footprint` decides it
    is brought, only what it measures (the bytes in runs a page apart).
    """
    capacity, geometry = level.capacity, level.geometry
    amount = measure if measure is not None else footprint

    def fits(loop: _Loop, scope: int, buffers: list[int], nbytes: int) -> bool:
        if nbytes > capacity:
            return False
        if geometry is None:
            return True
        loads = [footprint.set_load(loop, scope, b, level.level, geometry) for b in buffers]
        return combined_load(loads, geometry.sets) <= geometry.ways

    def descend(loop: _Loop, executions: int, buffers: list[int]) -> int:
        buffers = [b for b in buffers if b in loop.inside]
        if not buffers or executions == 0:
            return 0
        whole = footprint(loop, _Footprints.LOOP, buffers)
        if fits(loop, _Footprints.LOOP, buffers, whole):
            return executions * amount(loop, _Footprints.LOOP, buffers)
        iterations = executions * loop.trip
        one = footprint(loop, _Footprints.ITERATION, buffers)
        if fits(loop, _Footprints.ITERATION, buffers, one):
            # Consecutive iterations share what stays (under `lines`/`shared`): the loop's footprint, once.
            if carry:
                return executions * amount(loop, _Footprints.LOOP, buffers)
            return iterations * amount(loop, _Footprints.ITERATION, buffers)
        total = iterations * amount(loop, _Footprints.OWN, buffers)
        for child in loop.children:
            total += descend(child, iterations, buffers)
        return total

    return sum(descend(root, 1, group) for group in groups)


def _page_folded(sets: int, line: int, ways: float) -> SetGeometry:
    """A level's sets as a footprint can know them: a way larger than a page is indexed partly by physical page
    bits, so two lines one way apart in the program's addresses (rows 128 KiB apart on a 2 MiB L2 of 16 ways)
    share a set only when their pages happen to: the level is seen as the sets one page spans, each holding the
    ways of every page colour (an L2 of 2 048 sets × 16 ways as 64 × 512). An L1 whose way is a page (48 KiB,
    12 ways, 64 sets) is indexed by the page offset alone and stays as it is."""
    colours = sets * line // PAGE
    if colours <= 1:
        return SetGeometry(sets, line, ways)
    return SetGeometry(sets // colours, line, ways * colours)


def _levels(desc: MachineDesc, workers: int, sets: bool) -> tuple[_Level, _Level, _Level]:
    """Each level for one worker; a missing level holds what the next inner one holds.

    A level shared by several workers gives each its share of the bytes and,
    under `sets`, of the ways of every set (the sets stay the level's).
    """
    levels: list[_Level] = []
    inner = _Level(0, 0.0, None)
    for number in (1, 2, 3):
        cache = desc.cache(number)
        if cache is not None:
            share = max(1, min(workers, cache.shared_by))
            geometry = None
            if sets and cache.ways > 0 and cache.line > 0 and cache.size % (cache.ways * cache.line) == 0:
                geometry = _page_folded(cache.size // (cache.ways * cache.line), cache.line, cache.ways / share)
            inner = _Level(number, cache.size / share, geometry)
        levels.append(inner)
    return levels[0], levels[1], levels[2]


def _buffer_facts(kernel: KernelOp) -> tuple[list[tuple[int, ...]], list[int]]:
    shapes: list[tuple[int, ...]] = []
    sizes: list[int] = []
    for arg in kernel.body.block.args:
        t = arg.type
        if not isinstance(t, MemRefType):
            shapes.append(())
            sizes.append(8)
            continue
        shape = tuple(int(n) for n in t.get_shape())
        if any(n < 0 for n in shape):
            raise ValueError(
                f"kernel @{kernel.sym_name.data}: buffer of dynamic shape {t}: its terms need static shapes"
            )
        shapes.append(shape)
        sizes.append(_element_bytes(t.element_type))
    return shapes, sizes


def _whole_bytes(walk: _Walk, shapes: list[tuple[int, ...]], sizes: list[int], share: Callable[[int], float]) -> float:
    total = 0.0
    for buffer in walk.root.inside:
        elements = 1
        for n in shapes[buffer]:
            elements *= n
        total += elements * sizes[buffer] * share(buffer)
    return total


# --------------------------------------------------------------------------- the entry point


def kernel_terms(
    kernel: KernelOp, desc: MachineDesc, workers: int = 1, rules: frozenset[str] = frozenset()
) -> KernelTerms:
    """One worker's quantities of `kernel` on the machine `desc` (the module docstring says how each is counted)."""
    return kernel_terms_by_rules(kernel, desc, workers, [rules])[0]


def kernel_terms_by_rules(
    kernel: KernelOp, desc: MachineDesc, workers: int, rule_sets: Sequence[frozenset[str]]
) -> list[KernelTerms]:
    """`kernel_terms` under each rule set, the kernel walked once (a calibration sample keeps every set)."""
    for rules in rule_sets:
        unknown = set(rules) - set(RULES)
        if unknown:
            raise ValueError(f"unknown cost rules {sorted(unknown)}: the rules are {', '.join(RULES)}")
    if workers < 1:
        raise ValueError(f"workers = {workers}: a kernel runs on one worker or more")
    walk = _Walk(kernel, workers, desc.vector_bits, desc.fma_chains)
    shapes, sizes = _buffer_facts(kernel)
    runs = _executions(walk)

    base_work = sum(
        (loop.work + SHUFFLE_WEIGHT * loop.vector_lanes * loop.shuffles) * runs[loop.id] for loop in walk.loops
    )
    loop_runs = sum(runs[loop.id] for loop in walk.loops if loop.op is not None)
    loads = sum(loop.loads * runs[loop.id] / loop.vector_lanes for loop in walk.loops)
    transcendental = sum(_in_exps(loop) * runs[loop.id] / loop.vector_lanes for loop in walk.loops)
    spill = _spill(walk, runs, desc.vector_registers)
    stall = _stall(walk, runs, desc.fma_chains)

    plain = _Footprints(walk, shapes, sizes, None)
    if walk.workers > 1:
        full = _Footprints(walk, shapes, sizes, None)
        full.trips = [loop.full_trip for loop in walk.loops]

        def share(buffer: int) -> float:
            whole = full.one(walk.root, _Footprints.LOOP, buffer)
            return plain.one(walk.root, _Footprints.LOOP, buffer) / whole if whole else 0.0

    else:

        def share(buffer: int) -> float:
            return 1.0

    nbytes = _whole_bytes(walk, shapes, sizes, share)
    output = walk.written[0] if walk.written else len(walk.args) - 1
    out_type = walk.args[output].type if walk.args else None
    dtype = _dtype_name(out_type.element_type) if isinstance(out_type, MemRefType) else "f64"
    buffers = sorted(walk.root.inside)
    footprints: dict[tuple[int | None, bool], _Footprints] = {(None, False): plain}
    scattered = _Boxed(walk, shapes, sizes, lambda boxes, shape, size: scattered_bytes(boxes, shape, size, desc.line))
    written = frozenset(walk.written)

    walks = 0.0
    if desc.tlb_pages:  # one TLB for every buffer: the pages they lie on, brought as a level's lines are
        tlb = _Level(0, float(desc.tlb_pages * PAGE), None)
        walks = _traffic(walk.root, _Boxed(walk, shapes, sizes, page_bytes), tlb, [buffers], True) / PAGE

    traffic: dict[tuple[bool, bool, bool], tuple[float, ...]] = {}

    def traffic_of(lines: bool, sets: bool, shared: bool) -> tuple[float, ...]:
        """The six traffic terms, which the rules decide through these three alone (not `overhead`)."""
        if (lines, sets, shared) not in traffic:
            line = desc.line if lines else None
            if (line, sets) not in footprints:
                footprints[line, sets] = _Footprints(walk, shapes, sizes, line, sets)
            footprint = footprints[line, sets]
            groups = [buffers] if shared else [[b] for b in buffers]
            carry = lines or shared
            levels = _levels(desc, walk.workers, sets)
            traffic[lines, sets, shared] = (
                *(_traffic(walk.root, footprint, level, groups, carry) for level in levels),
                *(_traffic(walk.root, footprint, level, groups, carry, scattered) for level in levels[:2]),
                _traffic(walk.root, footprint, levels[0], groups, carry, _Written(footprint, written)),
            )
        return traffic[lines, sets, shared]

    def terms(rules: frozenset[str]) -> KernelTerms:
        work = base_work + (loop_runs if "overhead" in rules else 0)
        q_l2, q_l3, q_mem, q_l2_scattered, q_l3_scattered, q_l2_written = traffic_of(
            "lines" in rules, "sets" in rules, "shared" in rules
        )
        return KernelTerms(
            work=float(work), bytes=float(nbytes), loads=float(loads), spill=float(spill),
            q_l2=float(q_l2), q_l3=float(q_l3), q_mem=float(q_mem),
            workers=walk.workers, lanes=walk.lanes, dtype=dtype, stall=float(stall),
            q_l2_scattered=float(q_l2_scattered), q_l3_scattered=float(q_l3_scattered),
            q_l2_written=float(q_l2_written), transcendental=float(transcendental), page_walks=walks,
        )  # fmt: skip

    return [terms(rules) for rules in rule_sets]
