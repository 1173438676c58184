"""Streaming stores: a big kernel's innermost parallel loop stores around the caches.

In a kernel over more than its workers' private caches hold, the
innermost parallel loop's stores become aligned non-temporal vector stores,
after a peel that aligns them, saving the read for ownership of every line
written; the kernel ends with a fence (`Translator.translate`).

Only in the variant with disjoint buffers (`assume_disjoint`); the other
keeps every loop as written. The threshold is read here, at translation:
to force streaming stores in a test, set
`presk.lowering.llvm.streaming_stores.STREAMING_BYTES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llvmlite import ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import Float32Type, Float64Type
from xdsl.ir import Operation, SSAValue

from presk.target import Machine
from presk.dialects.psk_kernel import PARALLEL, ScratchOp
from presk.lowering.llvm.irtypes import I1, I64, element_size
from presk.lowering.llvm.loops import ScalarLoops
from presk.lowering.llvm.memory import MemoryAccess
from presk.analysis import constant_int
from presk.lowering.llvm.vector_body import vector_body

__all__ = ["STREAMING_BYTES", "Streaming", "StreamingLoops", "streams_around_caches", "streaming"]

STREAMING_BYTES: int | None = None
"""Buffers of a kernel, in bytes, beyond which its stores go around the caches (`streaming`);
None: what the target's cores hold privately (`streaming_threshold`)."""


def streaming_threshold(machine: Machine) -> int | None:
    """`STREAMING_BYTES`, else the private caches of every core (L2 × cores); None (never) when unknown.

    Lines a kernel writes beyond what its cores keep to themselves reach the
    shared cache, where other cores (and, on a virtual machine, other
    tenants: the OS may describe a whole socket's L3) evict them before the
    next kernel reads them. The attention scores (25 MB of output, 2 cores
    of 2 MiB of L2, AVX-512) ran 12.1 ms with plain stores and 7.8 ms with
    non-temporal ones, side by side, where the OS reports 480 MiB of L3.
    """
    if STREAMING_BYTES is not None:
        return STREAMING_BYTES
    private = machine.private_cache
    return private.size * machine.cores if private is not None else None


def streams_around_caches(kernel_bytes: int, machine: Machine) -> bool:
    """Whether a kernel's whole-line stores go around the caches: beyond `streaming_threshold`, with line-wide vectors.

    The rule both kinds share: loops this translation vectorises (`streaming`)
    and the tile stores `psk-vectorize` writes (`VectorOps.streams_lines`). A
    non-temporal store writes a whole line only when a vector is a line.
    """
    threshold = streaming_threshold(machine)
    return threshold is not None and kernel_bytes > threshold and machine.vector_bits >= 8 * machine.cache_line


@dataclass(frozen=True)
class Streaming:
    """How `streaming` vectorises a parallel innermost loop that writes memory it will not read again soon."""

    lanes: int
    vector_loads: frozenset[Operation]
    stores: tuple[Operation, ...]
    """Stored with non-temporal vector stores, `lanes` elements (a cache line) each, once aligned."""


def streaming(
    loop: scf.ForOp, machine: Machine, kernel_bytes: int, loads: Mapping[SSAValue, Sequence[Operation]]
) -> Streaming | None:
    """A plan to run a parallel loop as aligned vectors with non-temporal stores, or None.

    For a kernel touching more than `STREAMING_BYTES` (more than the last
    level cache holds: its outputs will be read back from memory anyway), a
    plain store first reads each line it writes (read for ownership); a
    non-temporal store of a whole 64-byte line does not, which cuts an
    elementwise kernel's traffic from reads + 2 x writes to reads + writes.
    LLVM emits non-temporal vector stores only when it knows them aligned, so
    the translation peels iterations until the stores are (see
    `StreamingLoops.streaming_loop`). The stores' element types must all be one
    type of 4 or 8 bytes (so that one peel aligns every store stream). A
    buffer another loop of the kernel reads (`loads`: the kernel's loads of
    each buffer) is stored through the caches:
    in a kernel `psk-fuse-slices` merged, the next loop reads the row just
    written, and a line sent around the caches would come back from memory.
    """
    if not streams_around_caches(kernel_bytes, machine):
        return None
    if PARALLEL not in loop.attributes or loop.iter_args or constant_int(loop.step) != 1:
        return None
    body = vector_body(loop, (), ())
    if body is None:
        return None
    _kinds, vector_loads, stores = body
    if not stores:
        return None
    if any(isinstance(op.operands[1].owner, ScratchOp) for op in stores):
        return None  # a scratch is there to stay in the caches
    inside = set(loop.walk())
    if any(load not in inside for op in stores for load in loads.get(op.operands[1], ())):
        return None
    elements = {op.operands[1].type.element_type for op in stores}  # type: ignore[attr-defined]
    if len(elements) != 1:
        return None
    (element,) = elements
    if not isinstance(element, Float32Type | Float64Type):
        return None
    ordered = tuple(op for op in loop.body.block.ops if op in stores)
    if any(op.name != "arith.constant" and not op.name.startswith("arith.") for op in _index_closure(loop, ordered)):
        return None
    return Streaming(machine.cache_line // element_size(element), vector_loads, ordered)


def _index_closure(loop: scf.ForOp, stores: Sequence[Operation]) -> list[Operation]:
    """The ops of the loop body that the stores' indices depend on, in program order."""
    block = loop.body.block
    needed: set[Operation] = set()
    work = [v for op in stores for v in op.operands[2:]]
    while work:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, Operation) and owner.parent_block() is block and owner not in needed:
            needed.add(owner)
            work.extend(owner.operands)
    return [op for op in block.ops if op in needed]


class StreamingLoops(ScalarLoops, MemoryAccess):
    """Parallel loops translated by a `Streaming` plan."""

    def streaming_loop(self, op: scf.ForOp, plan: Streaming, lb: ir.Value, ub: ir.Value, step: ir.Value) -> None:
        """A parallel loop with aligned non-temporal vector stores (see `streaming`).

        Iterations `[lb, mid)` run as written until the first store's address
        is on a cache line (every store's then is, when their addresses agree
        modulo the line, which is checked: else all run as written); `[mid, end)`
        as vectors of `lanes` iterations, loads unaligned, stores aligned and
        non-temporal, each vector load requesting its line `PREFETCH_BYTES`
        ahead; `[end, ub)` as written.

        The requests: the course GPT's `loss_grad` (Xeon, 2 threads, side by
        side in one process) ran 518.9 ms without, 500.6 with them in the
        loops with a transcendental only, 497.6 in every streaming loop; its
        GELU kernel, its input cold, 4.2 → 1.5 ms, as fast as with its input
        in the caches (`docs/performance.md`, "Streaming loops request their
        lines ahead").
        """
        b = self.builder
        lanes = plan.lanes
        line_mask = I64(self.machine.cache_line - 1)
        block = op.body.block
        iv = block.args[0]
        self.values[iv] = lb
        for inner in _index_closure(op, plan.stores):
            self.op(inner)
        # The addresses at `lb` (formed without `inbounds`: with no iteration, `lb` may be past the end).
        starts = [b.ptrtoint(self.address(s.operands[1], s.operands[2:], inbounds=False), I64) for s in plan.stores]
        together = I1(1)
        for start in starts[1:]:
            same = b.icmp_unsigned("==", b.and_(b.sub(start, starts[0]), line_mask), I64(0))
            together = b.and_(together, same)
        size = element_size(plan.stores[0].operands[1].type.element_type)  # type: ignore[attr-defined]
        count = b.select(b.icmp_signed(">", ub, lb), b.sub(ub, lb), I64(0))
        peel = b.lshr(b.and_(b.sub(I64(0), starts[0]), line_mask), I64(size.bit_length() - 1))
        peel = b.select(together, b.select(b.icmp_signed("<", peel, count), peel, count), count)
        mid = b.add(lb, peel)
        rest = b.sub(count, peel)
        end = b.add(mid, b.sub(rest, b.and_(rest, I64(lanes - 1))))
        self.scalar_loop(op, lb, mid, step, [])

        b = self.builder
        before = b.block
        label, body, exit_ = self.new_loop("stream")
        b.cbranch(b.icmp_signed("<", mid, end), body, exit_)
        b.position_at_end(body)
        index = b.phi(I64, name=f"{label}.i")
        index.add_incoming(mid, before)
        self.values[iv] = index
        self.streaming_stores = set(plan.stores)
        # Its inputs come from memory too (a kernel this big was written around the caches, or long ago), and a
        # loop with transcendentals, or stores holding the line fill buffers, keeps too few loads in flight for
        # the hardware prefetchers: each vector load asks for its line PREFETCH_BYTES ahead.
        self.prefetching = True
        try:
            with self.in_vector_form(plan.vector_loads, lanes):
                for inner in block.ops:
                    if inner is not block.last_op:
                        self.op(inner)
        finally:
            self.streaming_stores = set()
            self.prefetching = False
        latch = b.block
        following = b.add(index, I64(lanes), name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, end), body, exit_)
        index.add_incoming(following, latch)
        self.leave_loop(exit_)
        self.fenced = True
        self.scalar_loop(op, end, ub, step, [])
