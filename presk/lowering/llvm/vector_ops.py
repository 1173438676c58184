"""The `vector` ops that `psk-vectorize` and the pack's copy emit: vector code written in the kernel.

The other vector code here comes from loops this translation vectorises
itself (`presk.lowering.llvm.running_sums`, `presk.lowering.llvm.maximum_loops`,
`presk.lowering.llvm.streaming_stores`);
everything else is left to LLVM's vectorisers.
"""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Operation, SSAValue

from presk.lowering.llvm.errors import fail
from presk.lowering.llvm.irtypes import I32, I64, element_size, llvm_type
from presk.lowering.llvm.memory import MemoryAccess
from presk.lowering.llvm.streaming_stores import streams_around_caches
from presk.lowering.llvm.target import intrinsic

__all__ = ["VectorOps"]


class VectorOps(MemoryAccess):
    """`vector.broadcast`, `.load`, `.store`, `.fma`, `.extract`, `.insert` and `.shuffle`."""

    def vector_op(self, op: Operation) -> None:
        """The `vector` ops of `psk-vectorize` and the pack's transpose (one-dimensional vectors of lanes).

        Loads and stores are of consecutive elements along a buffer's last
        axis, aligned to the element (like the scalar accesses); `vector.fma`
        is `llvm.fma` on vectors: one rounding per lane, the scalar fma's bits.
        """
        b = self.builder
        name = op.name
        if name == "vector.broadcast":
            t = op.results[0].type
            assert isinstance(t, VectorType)
            self.values[op.results[0]] = self.splat(self.value(op.operands[0]), t.get_shape()[0])
        elif name == "vector.load":
            buffer, *indices = op.operands
            t = buffer.type
            assert isinstance(t, MemRefType)
            pointer = self.address(buffer, indices)
            loaded = b.load(pointer, typ=llvm_type(op.results[0].type), align=element_size(t.element_type))
            self.scope(loaded, buffer)
            self.values[op.results[0]] = loaded
        elif name == "vector.store":
            value, buffer, *indices = op.operands
            t = buffer.type
            assert isinstance(t, MemRefType)
            pointer = self.address(buffer, indices)
            if self.streams_lines(op):
                self.store_line_around_caches(self.value(value), pointer, buffer, element_size(t.element_type))
            else:
                stored = b.store(self.value(value), pointer, align=element_size(t.element_type))
                self.scope(stored, buffer)
        elif name == "vector.fma":
            x, y, z = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = b.call(intrinsic(self.module, "llvm.fma", x.type, 3), [x, y, z])
        elif name in ("vector.extract", "vector.insert"):
            positions = op.properties["static_position"].get_values()  # type: ignore[attr-defined]
            if len(positions) != 1 or len(op.operands) != (1 if name == "vector.extract" else 2):
                raise fail(self.kernel, f"{name} with positions {positions} (one static lane is supported)")
            lane = I32(positions[0])
            if name == "vector.extract":
                self.values[op.results[0]] = b.extract_element(self.value(op.operands[0]), lane)
            else:
                source, dest = (self.value(v) for v in op.operands)
                self.values[op.results[0]] = b.insert_element(dest, source, lane)
        elif name == "vector.shuffle":
            mask = op.properties["mask"].get_values()  # type: ignore[attr-defined]
            a, c = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, len(mask)), list(mask)))
        else:
            raise fail(self.kernel, f"cannot translate '{name}' (not in the PSK-Kernel subset)")

    def streams_lines(self, op: Operation) -> bool:
        """Whether a `vector.store` goes around the caches: a whole line, into a buffer this kernel never reads.

        As for `presk.lowering.llvm.streaming_stores`: in a kernel over more
        than the last level cache (its output will be read back from memory
        anyway) a plain store first reads the line it writes; a tile's store
        into an output no load of the kernel touches (a contraction without
        a k-block keeps its sums in registers) writes each line once, so a
        non-temporal store saves that read. The attention scores' output is
        25 MB against 6 MB of operands.
        """
        value, buffer = op.operands[0], op.operands[1]
        t = value.type
        assert isinstance(t, VectorType) and isinstance(buffer.type, MemRefType)
        if not (self.assume_disjoint and streams_around_caches(self.kernel_bytes, self.machine)):
            return False
        if t.get_shape()[0] * element_size(buffer.type.element_type) != self.machine.cache_line:
            return False
        return buffer not in self.loads and buffer not in self.folded_rows  # a scratch stays in the caches

    def store_line_around_caches(self, value: ir.Value, pointer: ir.Value, buffer: SSAValue, align: int) -> None:
        """A non-temporal store where the address is on a line (host buffers are), else a plain one.

        LLVM emits a non-temporal vector store only when told it is aligned,
        and an unaligned `vmovntps` faults: so the line is tested at run
        time, a branch that goes the same way for every store of a buffer.
        """
        b = self.builder
        on_line = b.icmp_unsigned("==", b.and_(b.ptrtoint(pointer, I64), I64(self.machine.cache_line - 1)), I64(0))
        with b.if_else(on_line) as (streamed, plain):
            with streamed:
                stored = b.store(value, pointer, align=self.machine.cache_line)
                stored.set_metadata("nontemporal", self.metadata(I32(1)))
                self.scope(stored, buffer)
            with plain:
                self.scope(b.store(value, pointer, align=align), buffer)
        self.fenced = True
