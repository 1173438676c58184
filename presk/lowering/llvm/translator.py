"""One kernel, one function of the kernel ABI: the translator and the module-level entry points.

`Translator` assembles the concept mixins (`ScalarOps`, `VectorOps` over
`MemoryAccess`, `RunningSumLoops`, `MaximumLoops` and `StreamingLoops` over
`ScalarLoops`)
and owns what ties them together: the op dispatcher, the choice of how to
translate each loop, and the function's frame (the `[lo, hi)` guard of a
kernel without a split loop, the fence after streaming stores).
"""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation

from presk.target import Machine, target_machine
from presk.dialects.psk_kernel import KernelOp, ScratchOp
from presk.lowering.llvm.errors import fail
from presk.lowering.llvm.irtypes import I64
from presk.lowering.llvm.guarded_division import GuardedDivisionLoops, guarded_division
from presk.lowering.llvm.maximum_loops import MaximumLoops, running_maximum
from presk.lowering.llvm.running_sums import RunningSumLoops, ordered_sums
from presk.lowering.llvm.scalar_ops import ScalarOps
from presk.lowering.llvm.streaming_stores import StreamingLoops, streaming
from presk.lowering.llvm.target import new_module
from presk.lowering.llvm.vector_ops import VectorOps

__all__ = ["Translator", "translate_kernel", "translate_module"]


class Translator(ScalarOps, VectorOps, RunningSumLoops, MaximumLoops, StreamingLoops, GuardedDivisionLoops):
    """Translates one kernel into `module` (`translate`)."""

    def translate(self) -> ir.Function:
        self.load_bases()
        b = self.builder
        zero = I64(0)
        lo, hi = self.fn.args[1], self.fn.args[2]
        if self.split is None:
            # One iteration: run when 0 is in [lo, hi).
            run = b.and_(b.icmp_signed("<=", lo, zero), b.icmp_signed(">", hi, zero))
            body, done = self.fn.append_basic_block("run"), self.fn.append_basic_block("done")
            b.cbranch(run, body, done)
            b.position_at_end(body)
            self.block(self.kernel.body.block)
            b.branch(done)
            b.position_at_end(done)
        else:
            self.block(self.kernel.body.block)
        if self.fenced:
            # Non-temporal stores are weakly ordered: complete them before another
            # thread (or kernel) reads the buffers. `fence seq_cst` is an mfence.
            b.fence("seq_cst")
        b.ret_void()
        return self.fn

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        name = op.name
        if name.startswith(("arith.", "math.")):
            self.scalar_op(op)
        elif name.startswith("memref."):
            self.memory_op(op)
        elif name.startswith("vector."):
            self.vector_op(op)
        elif name == "scf.for":
            assert isinstance(op, scf.ForOp)
            self.loop(op)
        elif isinstance(op, ScratchOp):
            self.scratch(op)
        elif name == "scf.yield":
            raise fail(self.kernel, "scf.yield outside a loop body")
        else:
            raise fail(self.kernel, f"cannot translate '{name}' (not in the PSK-Kernel subset)")

    def loop(self, op: scf.ForOp) -> None:
        """A loop: running sums or a running maximum in vectors, streaming stores, guarded divisions in vectors,
        or as written (in that order)."""
        lb, ub, step = (self.value(v) for v in (op.lb, op.ub, op.step))
        if op is self.split:
            lb, ub = self.split_bounds(op, lb, ub, step)
        inits = [self.value(v) for v in op.iter_args]
        vectorise = self.assume_disjoint and not self.lanes
        plan = ordered_sums(op, self.machine.vector_bits) if vectorise else None
        maximum = running_maximum(op, self.machine.vector_bits) if vectorise and plan is None else None
        vectorised = plan is not None or maximum is not None
        stream = streaming(op, self.machine, self.kernel_bytes, self.loads) if vectorise and not vectorised else None
        guarded = guarded_division(op, self.machine) if vectorise and not vectorised and stream is None else None
        if plan is not None:
            results = self.ordered_sum_loop(op, plan, lb, ub, inits)
        elif maximum is not None:
            results = [self.maximum_loop(op, maximum, lb, ub, inits[0])]
        elif stream is not None:
            self.streaming_loop(op, stream, lb, ub, step)
            results = []
        elif guarded is not None:
            self.guarded_division_loop(op, guarded, lb, ub, step)
            results = []
        else:
            results = self.scalar_loop(op, lb, ub, step, inits)
        for result, value in zip(op.results, results):
            self.values[result] = value


def translate_kernel(kernel: KernelOp, machine: Machine | None = None, *, assume_disjoint: bool = True) -> str:
    """LLVM IR text of a module holding `kernel` as one function of the kernel ABI.

    `assume_disjoint=False` leaves out the per-buffer alias scopes: the variant
    for launches where a written buffer overlaps another buffer.
    """
    machine = machine if machine is not None else target_machine()
    module = new_module(f"presk.{kernel.sym_name.data}", machine)
    Translator(module, kernel, machine, assume_disjoint).translate()
    return str(module)


def translate_module(module: ModuleOp, machine: Machine | None = None) -> str:
    """LLVM IR of every kernel of a PSK-Kernel module, in order (`presk dump --stage llvm`)."""
    machine = machine if machine is not None else target_machine()
    out = new_module("presk", machine)
    for op in module.body.block.ops:
        if isinstance(op, KernelOp):
            Translator(out, op, machine, True).translate()
    return str(out)
