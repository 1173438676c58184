"""The state of one kernel's translation, and its map from SSA values to LLVM values.

`Translator` (`presk.lowering.llvm.translator`) is assembled from one mixin
per concept (scalar ops, memory accesses, vector ops, loops, running sums,
streaming stores); they share this state and these helpers. `op` is the
dispatcher every mixin calls back into to translate a loop body.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from llvmlite import ir
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Operation, SSAValue

from presk.target import Machine
from presk.dialects.psk_kernel import KernelOp
from presk.analysis import index_range, split_loop
from presk.lowering.llvm.abi import KERNEL_TYPE
from presk.lowering.llvm.errors import fail
from presk.lowering.llvm.irtypes import I32, buffer_bytes
from presk.lowering.llvm.target import FunctionAttributes, target_attributes
from presk.lowering.llvm.vector_body import lane_slope

__all__ = ["TranslatorBase"]


class TranslatorBase:
    """One kernel translated into one function of the kernel ABI in `module`."""

    def __init__(self, module: ir.Module, kernel: KernelOp, machine: Machine, assume_disjoint: bool) -> None:
        self.module = module
        self.kernel = kernel
        self.machine = machine
        self.name = kernel.sym_name.data
        self.fn = ir.Function(module, KERNEL_TYPE, self.name)
        self.fn.attributes = FunctionAttributes(target_attributes(machine), ["nounwind", "norecurse"])
        self.fn.args[0].name, self.fn.args[1].name, self.fn.args[2].name = "args", "lo", "hi"
        self.builder = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.values: dict[SSAValue, ir.Value] = {}
        self.buffers: dict[SSAValue, int] = {arg: i for i, arg in enumerate(kernel.body.block.args)}
        self.bases: list[ir.Value] = []
        self.scopes: list[tuple[ir.MDValue, ir.MDValue] | None] = []
        self.folded_rows: dict[SSAValue, tuple[int, ...]] = {}
        """Per `psk_kernel.scratch`, the rows of its leading axes the stack holds (`MemoryAccess.scratch`)."""
        self.assume_disjoint = assume_disjoint
        self.split = split_loop(kernel)
        self.loop_number = 0
        self.vector_loads: set[Operation] = set()
        """Loads that read `lanes` consecutive elements (inside a vectorised loop body)."""
        self.lanes = 0
        """The vector width of the loop body being translated in vector form (0: scalar code)."""
        self.streaming_stores: set[Operation] = set()
        """Stores of whole aligned lines that bypass the caches (`streaming`)."""
        self.kernel_bytes = sum(buffer_bytes(t) for t in kernel.buffers)
        self.fenced = False
        self._loads: dict[SSAValue, list[Operation]] | None = None
        self.prefetching = False

    @property
    def loads(self) -> dict[SSAValue, list[Operation]]:
        """The kernel's loads (scalar and vector) of each buffer, found on first use: whether a store may go
        around the caches depends on who reads its buffer (`VectorOps.streams_lines`, `streaming`)."""
        if self._loads is None:
            self._loads = {}
            for inner in self.kernel.walk():
                if inner.name in ("memref.load", "vector.load"):
                    self._loads.setdefault(inner.operands[0], []).append(inner)
        return self._loads

    def op(self, op: Operation) -> None:
        """Translate one op (the dispatcher, `Translator.op`)."""
        raise NotImplementedError

    def new_loop(self, kind: str = "") -> tuple[str, ir.Block, ir.Block]:
        """A fresh loop's label (`loop<n>[.kind]`) and its body and exit blocks, appended in that order."""
        self.loop_number += 1
        label = f"loop{self.loop_number}" + (f".{kind}" if kind else "")
        return label, self.fn.append_basic_block(f"{label}.body"), self.fn.append_basic_block(f"{label}.exit")

    def leave_loop(self, exit_: ir.Block) -> None:
        """Continue after a loop: its exit block moved after the body's blocks (the IR reads in program order)."""
        self.fn.blocks.remove(exit_)
        self.fn.blocks.append(exit_)
        self.builder.position_at_end(exit_)

    @contextmanager
    def in_vector_form(self, vector_loads: Iterable[Operation], lanes: int) -> Iterator[None]:
        """Translate a loop body as vectors of `lanes` along its loop: `vector_loads` read consecutive elements."""
        self.vector_loads, self.lanes = set(vector_loads), lanes
        try:
            yield
        finally:
            self.vector_loads, self.lanes = set(), 0

    def metadata(self, *operands: object) -> ir.MDValue:
        return self.module.add_metadata(list(operands))

    # ---- values

    def value(self, v: SSAValue) -> ir.Value:
        try:
            return self.values[v]
        except KeyError:
            raise fail(self.kernel, f"value {v} is used but not translated (a buffer used as a value?)") from None

    def splat(self, x: ir.Value, lanes: int) -> ir.Value:
        """`x` in every lane of a `<lanes x T>` vector (a vector stays as it is)."""
        if isinstance(x.type, ir.VectorType):
            return x
        if isinstance(x, ir.Constant):
            return ir.Constant(ir.VectorType(x.type, lanes), [x] * lanes)
        b = self.builder
        one = b.insert_element(ir.Constant(ir.VectorType(x.type, 1), ir.Undefined), x, I32(0))
        return b.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def counter_lanes(self, op: Operation) -> list[ir.Value]:
        """In a vector loop body: the op's operands as vectors, an index that moves with the loop's counter
        (`vector_body.lane_slope`) taking lane j at its value + j · slope, the others broadcast; in 32-bit
        lanes when every lane fits (`_fits_i32`), else in the index's 64."""
        loop = op.parent_op()
        assert loop is not None
        iv = loop.regions[0].blocks[0].args[0]
        slopes = [lane_slope(v, iv) for v in op.operands]
        if not any(slopes):
            return self.operands(op)
        scalars = [self.value(v) for v in op.operands]
        if self._fits_i32(op.operands, slopes) and not any(isinstance(x.type, ir.VectorType) for x in scalars):
            scalars = [self.builder.trunc(x, I32) for x in scalars]
        values = []
        for x, slope in zip(scalars, slopes):
            if slope and not isinstance(x.type, ir.VectorType):
                steps = ir.Constant(ir.VectorType(x.type, self.lanes), [slope * j for j in range(self.lanes)])
                x = self.builder.add(self.splat(x, self.lanes), steps)
            values.append(self.splat(x, self.lanes))
        return values

    def _fits_i32(self, operands: Sequence[SSAValue], slopes: Sequence[int]) -> bool:
        """Whether every lane of the compared indices lies in i32's range (`index_range`), so that comparing
        them in 32 bits decides as in 64: a vector of 32-bit lanes compares in one instruction, where 64-bit
        lanes take two and a pack (a causal softmax's test, a third of its time at T = 64)."""
        for v, slope in zip(operands, slopes):
            span = index_range(v) if isinstance(v.type, IndexType) else None
            if span is None:
                return False
            reach = slope * (self.lanes - 1)
            if span[0] + min(0, reach) < -(2**31) or span[1] + max(0, reach) >= 2**31:
                return False
        return True

    def operands(self, op: Operation) -> list[ir.Value]:
        """The op's operands, scalars broadcast when another operand is a vector (vector loop bodies)."""
        values = [self.value(v) for v in op.operands]
        lanes = max((x.type.count for x in values if isinstance(x.type, ir.VectorType)), default=0)
        if lanes:
            values = [self.splat(x, lanes) for x in values]
        return values
