"""Buffer accesses: base pointers, addresses, `memref.load`/`memref.store`, prefetches.

A buffer access is `getelementptr inbounds T, ptr %base, i64 %linear` with
the row-major linear index `((i0*d1 + i1)*d2 + i2)...` formed with
`nuw nsw` (an in-bounds index of a static shape cannot wrap; an
out-of-bounds one is undefined behaviour anyway); loads and stores are
aligned to the element size (what `check_buffers` guarantees). Base
pointers are loaded from `%args` with `!noundef !nonnull !align
!dereferenceable(bytes of the buffer)`: the shape is checked before every
call, and dereferenceability lets LLVM speculate loads out of selects.
Every access carries its buffer's alias scopes (`presk.lowering.llvm.alias_scopes`).
A `psk_kernel.scratch` is an `alloca` of one block of rows in the entry
block, 64-byte aligned; an index along a folded axis is taken modulo the
block's rows (for a power of two, a mask LLVM folds into the index's own
arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llvmlite import ir
from xdsl.dialects.builtin import MemRefType, NoneAttr
from xdsl.ir import Operation, SSAValue

from presk.dialects.psk_kernel import PREFETCH_AHEAD, ScratchOp, folded_shape
from presk.lowering.llvm.alias_scopes import buffer_scopes
from presk.lowering.llvm.base import TranslatorBase
from presk.lowering.llvm.errors import fail
from presk.lowering.llvm.irtypes import I32, I64, PTR, buffer_bytes, element_size, llvm_type

__all__ = ["PREFETCH_BYTES", "MemoryAccess"]

PREFETCH_BYTES = 32 << 10
"""How far ahead a vector loop of running sums prefetches (into L2: L1 holds the block being worked on):
two blocks of 16 rows of 1 KiB."""


class MemoryAccess(TranslatorBase):
    """The buffers of the kernel: their base pointers, and the loads and stores into them."""

    def load_bases(self) -> None:
        b = self.builder
        args = self.fn.args[0]
        types = self.kernel.buffers
        for i, t in enumerate(types):
            if any(size < 0 for size in t.get_shape()) or not isinstance(t.layout, NoneAttr):
                raise fail(self.kernel, f"buffer {i} is {t}; kernels take static-shape row-major buffers")
            slot = b.gep(args, [I64(i)], inbounds=True, source_etype=PTR)
            base = b.load(slot, name=f"buf{i}", typ=PTR, align=8)
            size = buffer_bytes(t)
            base.set_metadata("noundef", self.metadata())
            base.set_metadata("align", self.metadata(I64(element_size(t.element_type))))
            if size > 0:
                base.set_metadata("nonnull", self.metadata())
                base.set_metadata("dereferenceable", self.metadata(I64(size)))
            self.bases.append(base)
        self.scopes = buffer_scopes(self.module, self.kernel, self.assume_disjoint)

    def scratch(self, op: ScratchOp) -> None:
        """The scratch's block of rows on the stack: the entry block's `alloca`, so one per call."""
        t = op.result.type
        assert isinstance(t, MemRefType)
        count = math.prod(op.stored_shape)
        with self.builder.goto_block(self.fn.entry_basic_block):
            base = self.builder.alloca(llvm_type(t.element_type), size=I64(count), name=f"scratch{len(self.bases)}")
        base.align = 64
        base.type = PTR  # llvmlite types an alloca's pointer by its element; the translation uses opaque pointers
        self.buffers[op.result] = len(self.bases)
        self.bases.append(base)
        self.scopes.append(None)  # an alloca that never escapes: LLVM knows it aliases no buffer
        self.folded_rows[op.result] = op.folded_rows

    def memory_op(self, op: Operation) -> None:
        """`memref.load` and `memref.store`: scalar, or vectors of `lanes` in a vectorised loop body."""
        b = self.builder
        name = op.name
        if name == "memref.load":
            buffer, *indices = op.operands
            t = buffer.type
            pointer = self.address(buffer, indices)
            element = llvm_type(t.element_type)
            if op in self.vector_loads:
                element = ir.VectorType(element, self.lanes)
                if buffer not in self.folded_rows:
                    self.prefetch(pointer, write=False)
            if (ahead := op.attributes.get(PREFETCH_AHEAD)) is not None:
                self.request_line(pointer, ahead.value.data, write=False, locality=3)  # type: ignore[attr-defined]
            loaded = b.load(pointer, typ=element, align=element_size(t.element_type))
            self.scope(loaded, buffer)
            self.values[op.results[0]] = loaded
        elif name == "memref.store":
            value, buffer, *indices = op.operands
            t = buffer.type
            pointer = self.address(buffer, indices)
            if op in self.streaming_stores:
                stored = b.store(self.value(value), pointer, align=64)
                stored.set_metadata("nontemporal", self.metadata(I32(1)))
            else:
                if self.lanes and buffer not in self.folded_rows:
                    self.prefetch(pointer, write=True)
                stored = b.store(self.value(value), pointer, align=element_size(t.element_type))
            self.scope(stored, buffer)
        else:
            raise fail(self.kernel, f"cannot translate '{name}' (not in the PSK-Kernel subset)")

    def address(self, buffer: SSAValue, indices: Sequence[SSAValue], inbounds: bool = True) -> ir.Value:
        b = self.builder
        if buffer not in self.buffers:
            raise fail(self.kernel, "a memref access to something other than a kernel argument")
        t = buffer.type
        assert isinstance(t, MemRefType)
        base = self.bases[self.buffers[buffer]]
        shape = t.get_shape()
        if len(indices) != len(shape):
            raise fail(self.kernel, f"{len(indices)} indices into {t}")
        if not shape:
            return base
        values = [self.value(index) for index in indices]
        rows = self.folded_rows.get(buffer, ())
        if rows:
            shape = folded_shape(t, rows)
            values = [I64(0) if r == 1 else b.urem(v, I64(r)) for v, r in zip(values, rows)] + values[len(rows) :]
        flags = ["nuw", "nsw"] if inbounds else []
        linear = values[0]
        for size, index in zip(shape[1:], values[1:]):
            linear = b.add(b.mul(linear, I64(size), flags=flags), index, flags=flags)
        return b.gep(base, [linear], inbounds=inbounds, source_etype=llvm_type(t.element_type))

    def prefetch(self, pointer: ir.Value, write: bool) -> None:
        """Ask for the line `PREFETCH_BYTES` ahead of `pointer` (in the loops that set `prefetching`).

        Two kinds of loop do. A vector loop of running sums works on a block
        of rows held in L1 (`presk.lowering.softmax`); when its terms are
        transcendentals it is compute-bound, it leaves the memory system idle,
        and the hardware prefetchers, which follow misses, idle with it.
        Touching the next block's lines there overlaps its misses with this
        block's arithmetic (softmax [24576, 256]: 7.0 → 5.7 ms on one thread).
        A plain running sum is better left to the hardware (a mean over rows
        of 768: 0.74 → 1.05 ms with prefetches), so only those with a
        transcendental prefetch. A streaming loop (`streaming_stores`) always
        does: its inputs come from memory. A prefetch never faults, so running
        past a buffer's end is harmless (and the address is formed without
        `inbounds`).
        """
        if self.prefetching:
            self.request_line(pointer, PREFETCH_BYTES, write, locality=2)  # into L2, not L1

    def request_line(self, pointer: ir.Value, ahead: int, write: bool, locality: int) -> None:
        """`llvm.prefetch` of the line `ahead` bytes past `pointer` (locality 3: into L1; 2: into L2)."""
        b = self.builder
        address = b.gep(pointer, [I64(ahead)], source_etype=ir.IntType(8))
        fn = self.module.globals.get("llvm.prefetch.p0")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]), "llvm.prefetch.p0")
        b.call(fn, [address, I32(int(write)), I32(locality), I32(1)])

    def scope(self, access: ir.Instruction, buffer: SSAValue) -> None:
        scopes = self.scopes[self.buffers[buffer]]
        if scopes is not None:
            access.set_metadata("alias.scope", scopes[0])
            access.set_metadata("noalias", scopes[1])
