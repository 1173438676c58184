"""Conversions to and from bf16, and f64 → f32 rounded to odd, in scalar or vector code.

bf16 is `i16` in memory and in registers (never LLVM's `bfloat`: x86's
`vcvtneps2bf16` flushes subnormal inputs). Extending is `zext` to i32,
`shl 16`, `bitcast` to float; truncating f32 rounds to nearest even on the
bit pattern (`(b + 0x7fff + ((b >> 16) & 1)) >> 16`) and turns every nan
into `sign | 0x7fc0`, as `ml_dtypes.bfloat16` does. f64 → bf16 is one
IEEE rounding (`arith.truncf`'s meaning, and the kernel interpreter's
`truncate_f64_to_bf16`): f64 is rounded to f32 *to odd* first, which makes
the second rounding exact (24 >= 8 + 2 bits). ml_dtypes itself rounds
f64 → f32 → bf16 to nearest twice (1 + 2**-8 + 2**-30 gives it 1, not
1 + 2**-7), so it is not the reference for that conversion.
"""

from __future__ import annotations

from llvmlite import ir

from presk.lowering.llvm.irtypes import F32, I16, I32, shaped, splat_constant
from presk.lowering.llvm.target import intrinsic

__all__ = ["bf16_to_f32", "f32_to_bf16", "f64_to_f32_odd"]


def bf16_to_f32(builder: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """Exact: the bf16 pattern is the high half of the f32 one (scalar or vector)."""
    wide = builder.zext(bits, shaped(I32, bits))
    return builder.bitcast(builder.shl(wide, splat_constant(I32, 16, bits)), shaped(F32, bits))


def f32_to_bf16(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even on the bit pattern; every nan becomes `sign | 0x7fc0` (ml_dtypes)."""

    def k(v: int) -> ir.Constant:
        return splat_constant(I32, v, x)

    b = builder.bitcast(x, shaped(I32, x))
    high = builder.lshr(b, k(16))
    odd = builder.and_(high, k(1))
    rounded = builder.lshr(builder.add(builder.add(b, k(0x7FFF)), odd), k(16))
    nan = builder.or_(builder.and_(high, k(0x8000)), k(0x7FC0))
    is_nan = builder.fcmp_unordered("uno", x, x)
    return builder.trunc(builder.select(is_nan, nan, rounded), shaped(I16, x))


def f64_to_f32_odd(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 → f32 rounded *to odd*: the truncation toward zero, with its last bit set when inexact.

    Nan stays nan (the comparisons are false); a value beyond the f32 range
    gives 0x7f7fffff with its sign, which a later bf16 rounding takes to inf.
    """
    fabs = intrinsic(builder.module, "llvm.fabs", x.type, 1)
    t = builder.fptrunc(x, shaped(F32, x))
    tb = builder.bitcast(t, shaped(I32, x))
    back = builder.fpext(t, x.type)
    inexact = builder.fcmp_ordered("!=", back, x)
    away = builder.fcmp_ordered(">", builder.call(fabs, [back]), builder.call(fabs, [x]))
    toward_zero = builder.select(away, builder.sub(tb, splat_constant(I32, 1, x)), tb)
    odd = builder.or_(toward_zero, splat_constant(I32, 1, x))
    return builder.bitcast(builder.select(inexact, odd, tb), shaped(F32, x))
