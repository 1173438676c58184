"""Alias scopes: telling LLVM that the buffers of a launch are distinct.

LLVM cannot see that two buffers are distinct (they are loaded from a
table), so without help every store may clobber every load and the
vectoriser needs run-time overlap checks. `noalias` function parameters do
not apply (the pointers are not parameters), so each buffer gets its own
alias scope (`!alias.scope` on its accesses, `!noalias` on every other
buffer's): scoped noalias metadata, what inlining a `noalias` parameter
produces. This is valid when no *written* buffer overlaps any other buffer
of the launch; read-only buffers may overlap each other freely (LLVM only
uses no-alias facts to move accesses across stores). presk's host programs
never pass an output together with a view of the same allocation, and the
native runner checks it at every new set of arrays: when a written buffer
overlaps another one it runs the variant translated with
`assume_disjoint=False` (no scopes) on one thread, which computes what the
sequential loop nest computes.
"""

from __future__ import annotations

from llvmlite import ir

from presk.dialects.psk_kernel import KernelOp
from presk.analysis import written_buffers

__all__ = ["buffer_scopes"]


def buffer_scopes(
    module: ir.Module, kernel: KernelOp, assume_disjoint: bool
) -> list[tuple[ir.MDValue, ir.MDValue] | None]:
    """Per buffer, its (`!alias.scope`, `!noalias`) metadata, or None (no scopes: nothing to tell).

    None for every buffer without `assume_disjoint`, with fewer than two
    buffers, or when the kernel writes none of them.
    """
    name = kernel.sym_name.data
    count = len(kernel.buffers)
    written = written_buffers(kernel)
    if not assume_disjoint or count < 2 or not written:
        return [None] * count

    def metadata(*operands: object) -> ir.MDValue:
        return module.add_metadata(list(operands))

    domain = metadata(ir.MetaDataString(module, f"presk.{name}"))
    scopes = [metadata(ir.MetaDataString(module, f"presk.{name}.buffer{i}"), domain) for i in range(count)]
    return [
        (metadata(scopes[i]), metadata(*(s for j, s in enumerate(scopes) if j != i)))
        for i in range(count)
    ]
