"""The kernel ABI's LLVM function type: `void @name(ptr %args, i64 %lo, i64 %hi)`.

`%args` holds the buffers' base pointers in the kernel's buffer order; which
iterations `[lo, hi)` select is `presk.analysis.split_loop`'s business.
"""

from __future__ import annotations

from llvmlite import ir

from presk.lowering.llvm.irtypes import I64, PTR

__all__ = ["KERNEL_TYPE"]

KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])
