"""The kernel ABI: which iterations a call of a kernel runs.

Every kernel becomes a function of the kernel ABI (`presk.jit.engine`):

    define void @name(ptr %args, i64 %lo, i64 %hi)

`%args` holds the buffers' base pointers in the kernel's buffer order. The
kernel's *split loop* (`split_loop`: its outermost `scf.for` when that loop is
the only loop at the top of the body, is marked `psk_kernel.parallel`, yields
nothing, and no store sits beside it) runs its iterations `[lo, hi)`, clamped
to `[0, trip count)`; the ops around it run in every call (they are constants,
index arithmetic and loads). A kernel without a split loop has one iteration:
it runs entirely when `lo <= 0 < hi`, so the executor calls it with (0, 1).
`launch_iterations(kernel)` is that `n`: the executor's `[0, n)`.

This module answers those questions on the PSK-Kernel op, without building
any IR: the executor, the cost model and `psk-split` ask them too.
"""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects import scf

from presk.dialects.psk_kernel import PARALLEL, KernelOp
from presk.lowering.llvm.irtypes import I64, PTR
from presk.lowering.llvm.queries import constant_int

__all__ = ["KERNEL_TYPE", "launch_iterations", "split_loop", "trip_count", "written_buffers"]

KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])


def trip_count(loop: scf.ForOp) -> int | None:
    """Iterations of an `scf.for` with constant bounds (None if a bound is not a constant)."""
    lb, ub, step = (constant_int(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -((lb - ub) // step))


def split_loop(kernel: KernelOp) -> scf.ForOp | None:
    """The loop whose iterations `[lo, hi)` a call runs, or None (the kernel is one iteration).

    The only `scf.for` at the top of the body, marked parallel, without results,
    with constant bounds, and with no store beside it (a store outside the
    loop would run in every chunk).
    """
    loops = [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1:
        return None
    loop = loops[0]
    if PARALLEL not in loop.attributes or loop.results or trip_count(loop) is None:
        return None
    if any(op.name in ("memref.store", "vector.store") for op in kernel.body.block.ops):
        return None
    return loop


def launch_iterations(kernel: KernelOp) -> int:
    """`n`: the executor runs the kernel over `[0, n)` (the split loop's trip count, else 1)."""
    loop = split_loop(kernel)
    if loop is None:
        return 1
    count = trip_count(loop)
    assert count is not None
    return count


def written_buffers(kernel: KernelOp) -> frozenset[int]:
    """Indices of the buffers the kernel stores to (its outputs)."""
    args = kernel.body.block.args
    written: set[int] = set()
    for op in kernel.walk():
        if op.name in ("memref.store", "vector.store"):
            target = op.operands[1]
            if target in args:
                written.add(args.index(target))
    return frozenset(written)
