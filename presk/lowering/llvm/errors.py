"""The one diagnostic of the LLVM translation: E5001, native compilation failed.

Every module of the translation reports through `fail`, so that a kernel
outside the translatable subset gives one error code and one message shape
(naming the kernel when there is one), never a traceback.
"""

from __future__ import annotations

from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import KernelOp

__all__ = ["fail"]


def fail(kernel: KernelOp | None, message: str) -> PreskError:
    where = f"kernel '{kernel.sym_name.data}': " if kernel is not None else ""
    return PreskError("E5001", f"native compilation failed: {where}{message}")
