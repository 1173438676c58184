"""Hand-written kernels following the kernel ABI, for the JIT's tests.

Built with llvmlite.ir, as `presk.lowering.kernel_to_llvm` will build them:
`void @name(ptr %args, i64 %lo, i64 %hi)`, buffer base pointers in `args`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

F32 = ir.FloatType()
I64 = ir.IntType(64)
PTR = ir.PointerType()
KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])

Body = Callable[[ir.IRBuilder, list[ir.Value], ir.Value], None]
"""`body(builder, buffers, i)`: the loop body at iteration `i`."""


def kernel_module(name: str, buffers: int, body: Body, module_name: str = "test") -> str:
    """A module with one kernel looping `i` over `[lo, hi)` around `body`."""
    module = ir.Module(name=module_name)
    fn = ir.Function(module, KERNEL_TYPE, name)
    args, lo, hi = fn.args
    entry, loop, done = (fn.append_basic_block(label) for label in ("entry", "loop", "done"))
    builder = ir.IRBuilder(entry)
    bases = [
        builder.load(builder.gep(args, [ir.Constant(I64, index)], source_etype=PTR), typ=PTR)
        for index in range(buffers)
    ]
    builder.cbranch(builder.icmp_signed("<", lo, hi), loop, done)
    builder.position_at_end(loop)
    i = builder.phi(I64)
    i.add_incoming(lo, entry)
    body(builder, bases, i)
    following = builder.add(i, ir.Constant(I64, 1))
    i.add_incoming(following, loop)
    builder.cbranch(builder.icmp_signed("<", following, hi), loop, done)
    builder.position_at_end(done)
    builder.ret_void()
    return str(module)


def scale_ir(factor: float = 2.0, name: str = "scale") -> str:
    """`out[i] = a[i] * factor` over f32 buffers (a, out)."""

    def body(builder: ir.IRBuilder, bases: list[ir.Value], i: ir.Value) -> None:
        x = builder.load(builder.gep(bases[0], [i], source_etype=F32), typ=F32)
        builder.store(builder.fmul(x, ir.Constant(F32, factor)), builder.gep(bases[1], [i], source_etype=F32))

    return kernel_module(name, 2, body)


def vector_fma_ir(name: str = "vfma") -> str:
    """`out[16i:16i+16] = fma(a, b, out)` on `<16 x float>` vectors: one zmm per iteration."""
    vector = ir.VectorType(F32, 16)

    def body(builder: ir.IRBuilder, bases: list[ir.Value], i: ir.Value) -> None:
        fma = builder.module.globals.get("llvm.fma.v16f32") or ir.Function(
            builder.module, ir.FunctionType(vector, [vector] * 3), "llvm.fma.v16f32"
        )
        a, b, out = (builder.gep(base, [i], source_etype=vector) for base in bases)
        loaded = [builder.load(pointer, typ=vector, align=4) for pointer in (a, b, out)]
        builder.store(builder.call(fma, loaded), out, align=4)

    return kernel_module(name, 3, body)


def pointer_table(arrays: Sequence[np.ndarray]) -> ctypes.Array[ctypes.c_void_p]:
    """A plain `args` table, independent of `PointerArray` (which is under test too)."""
    return (ctypes.c_void_p * len(arrays))(*(array.ctypes.data for array in arrays))


NOOP_IR = "define void @noop(ptr %args, i64 %lo, i64 %hi) {\n  ret void\n}\n"

UNRESOLVED_CALL_IR = """
declare void @presk_no_such_function(ptr)
define void @calls_missing(ptr %args, i64 %lo, i64 %hi) {
  call void @presk_no_such_function(ptr %args)
  ret void
}
"""

UNRESOLVED_GLOBAL_IR = """
@presk_no_such_global = external global i64
define void @reads_missing(ptr %args, i64 %lo, i64 %hi) {
  %x = load i64, ptr @presk_no_such_global
  store i64 %x, ptr %args
  ret void
}
"""

UNKNOWN_INTRINSIC_IR = """
declare void @llvm.presk.bogus()
define void @calls_bogus(ptr %args, i64 %lo, i64 %hi) {
  call void @llvm.presk.bogus()
  ret void
}
"""

LIBCALL_IR = """
define void @divides(ptr %args, i64 %lo, i64 %hi) {
  %p = getelementptr i128, ptr %args, i64 1
  %x = load i128, ptr %args
  %d = load i128, ptr %p
  %y = sdiv i128 %x, %d
  store i128 %y, ptr %args
  ret void
}
"""
"""Declares nothing, yet its code calls `__divti3` (compiler-rt), absent from CPython."""
