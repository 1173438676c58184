"""The LLVM types of PSK-Kernel types, and the sizes of buffer elements.

bf16 is `i16` in memory and in registers (never LLVM's `bfloat`: x86's
`vcvtneps2bf16` flushes subnormal inputs; see `presk.lowering.llvm.bf16`);
index is `i64`; vectors are one-dimensional. `shaped` and `splat_constant`
let one emitter serve scalar code and vector code alike.
"""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    VectorType,
)
from xdsl.ir import Attribute

from presk.lowering.llvm.errors import fail

__all__ = [
    "F32",
    "F64",
    "I1",
    "I16",
    "I32",
    "I64",
    "PTR",
    "buffer_bytes",
    "element_size",
    "llvm_type",
    "shaped",
    "splat_constant",
]

I1 = ir.IntType(1)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()


def element_size(element: Attribute) -> int:
    if isinstance(element, Float64Type):
        return 8
    if isinstance(element, Float32Type):
        return 4
    if isinstance(element, BFloat16Type):
        return 2
    if isinstance(element, IndexType):
        return 8
    if isinstance(element, IntegerType) and element.width.data in (8, 16, 32, 64):
        return element.width.data // 8
    raise fail(None, f"no buffers of {element} (f64, f32, bf16 and i64 are supported)")


def buffer_bytes(t: MemRefType) -> int:
    """Size of a row-major buffer of type `t` in bytes."""
    count = 1
    for size in t.get_shape():
        count *= size
    return count * element_size(t.element_type)


def llvm_type(t: Attribute) -> ir.Type:
    if isinstance(t, VectorType):
        shape = t.get_shape()
        if len(shape) != 1 or isinstance(t.element_type, BFloat16Type):
            raise fail(None, f"no LLVM type for {t} (vectors are one-dimensional, of f32, f64 or integers)")
        return ir.VectorType(llvm_type(t.element_type), shape[0])
    if isinstance(t, Float64Type):
        return F64
    if isinstance(t, Float32Type):
        return F32
    if isinstance(t, BFloat16Type):
        return I16  # bf16 lives as its bit pattern; arithmetic happens in f32
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    raise fail(None, f"no LLVM type for {t}")


def shaped(element: ir.Type, like: ir.Value) -> ir.Type:
    """`element`, or a vector of it with as many lanes as `like` has (scalar code and vector code alike)."""
    return ir.VectorType(element, like.type.count) if isinstance(like.type, ir.VectorType) else element


def splat_constant(element: ir.Type, value: int | float, like: ir.Value) -> ir.Constant:
    ty = shaped(element, like)
    return ir.Constant(ty, [value] * ty.count if isinstance(ty, ir.VectorType) else value)
