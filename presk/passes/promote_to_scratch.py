"""`psk-promote-to-scratch`: a buffer that only one kernel uses, a block of rows at a time, moves into the kernel.

`psk-fuse-slices` runs LayerNorm's backward pass as one kernel that, per
block of eight rows, computes a row's products, sums them, broadcasts the
sums, and so on: each step writes a `[B, T, D]` buffer the next one reads
back at once. Only the last buffer leaves the kernel. The others are
allocated by the host program and written whole, 3 MiB each at the course
GPT's size, and every line written is first read from memory (for
ownership) and later written back to it, although nothing reads them after
the kernel: the training step's LayerNorm backward kernels moved seven such
buffers each. The attention's merged kernels do the same with `[B, H, T, T]`
scores and probabilities.

A launch's buffer becomes the kernel's own `psk_kernel.scratch` when:

- in every launch of the kernel it is a fresh `psk_kernel.alloc` that
  nothing else uses: no other launch, no view, not the host's results;
- in the kernel, it is never read (then its stores go with it), or every
  access is sliced by the kernel's first `p >= 1` outer loops
  (`presk.passes.fuse_slices.sliced_kernel`: along axis `j < p` the index
  is `s_j·t_j + e`, `0 <= e < s_j`), so that an iteration of those loops
  touches only its own block of `s_j` rows;
- the blocks of the kernel's scratch buffers fit `SCRATCH_BYTES` together
  (a worker's stack holds them).

The scratch keeps the buffer's type and every access its indices; the
kernel interpreter holds it whole, so it runs exactly the program it ran
before. Native code keeps one block of rows per worker (`ScratchOp`'s
folding), which is the same memory as long as the iterations of a worker
run one after the other, as they do. The buffer leaves the launches, and
its allocation the host program. A buffer the kernel never reads (a value
`psk-fuse-launches` forwarded to its reader) leaves with its stores.

It runs after `psk-fuse-slices`, whose merges make such buffers, and
changes no value: the same operations read the same values in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from presk.analysis import STORE_OPS
from presk.dialects import psk_kernel as pk
from presk.lowering.llvm.irtypes import element_size
from presk.passes.fuse_slices import SlicedKernel, sliced_kernel

__all__ = ["SCRATCH_BYTES", "PromoteToScratch", "promotable_buffers"]

SCRATCH_BYTES = 1 << 20
"""The most one kernel keeps on a worker's stack, all its scratch buffers' blocks together. A thread's
stack is 8 MiB under Linux's defaults (the `ulimit -s` glibc gives new threads); the attention's
merged kernels need 0.25 MiB a `[T, T]` block at T = 256 in f32."""


@dataclass(frozen=True)
class Promotion:
    """The arguments of one kernel that become scratch, each with the rows it keeps (empty: never read, so
    its stores go and no scratch is needed)."""

    kernel: pk.KernelOp
    rows: dict[int, tuple[int, ...]]


def _only_use_is(value: SSAValue, launch: pk.LaunchOp) -> bool:
    """`value` is a host allocation used by `launch` alone, and only once."""
    uses = list(value.uses)
    return isinstance(value.owner, pk.AllocOp) and len(uses) == 1 and uses[0].operation is launch


def _block_bytes(t: MemRefType, rows: tuple[int, ...]) -> int:
    return math.prod(pk.folded_shape(t, rows)) * element_size(t.element_type)


def promotable_buffers(kernel: pk.KernelOp, launches: list[pk.LaunchOp], sliced: SlicedKernel) -> Promotion:
    """Which of `kernel`'s arguments become scratch under every one of its `launches` (see the module docstring).

    Arguments are taken in their order while the blocks fit `SCRATCH_BYTES`."""
    rows: dict[int, tuple[int, ...]] = {}
    budget = SCRATCH_BYTES
    for i, arg in enumerate(kernel.body.block.args):
        depth = sliced.prefixes[i]
        read = any(use.operation.name not in STORE_OPS for use in arg.uses)
        if read and depth < 1:
            continue
        if not all(_only_use_is(launch.buffers[i], launch) for launch in launches):
            continue
        kept = sliced.steps[:depth] if read else ()
        size = _block_bytes(arg.type, kept) if read else 0  # type: ignore[arg-type]
        if size > budget:
            continue
        budget -= size
        rows[i] = kept
    return Promotion(kernel, rows)


def _promote(promotion: Promotion, launches: list[pk.LaunchOp]) -> None:
    kernel = promotion.kernel
    block = kernel.body.block
    rewriter = PatternRewriter(kernel)
    for i in sorted(promotion.rows, reverse=True):
        arg = block.args[i]
        if not promotion.rows[i]:  # never read: its stores go
            for use in list(arg.uses):
                rewriter.erase(use.operation)
        else:
            scratch = pk.ScratchOp(arg.type, promotion.rows[i])  # type: ignore[arg-type]
            rewriter.insert(scratch, InsertPoint.at_start(block))
            rewriter.replace_all_uses_with(arg, scratch.result)
        rewriter.erase_block_argument(arg)
    for launch in launches:
        rewriter = PatternRewriter(launch)
        kept = [v for i, v in enumerate(launch.buffers) if i not in promotion.rows]
        gone = [launch.buffers[i] for i in promotion.rows]
        replacement = pk.LaunchOp(launch.kernel.string_value(), kept, launch.attributes["site"].data)  # type: ignore[attr-defined]
        replacement.attributes.update(launch.attributes)
        rewriter.replace(launch, replacement)
        for value in gone:
            assert isinstance(value.owner, pk.AllocOp)
            rewriter.erase(value.owner)


@dataclass(frozen=True)
class PromoteToScratch(ModulePass):
    """Move the buffers one kernel uses a block of rows at a time into the kernel (see the module docstring)."""

    name = "psk-promote-to-scratch"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels = {k.sym_name.data: k for k in op.body.block.ops if isinstance(k, pk.KernelOp)}
        launches: dict[str, list[pk.LaunchOp]] = {}
        for host in op.body.block.ops:
            if isinstance(host, pk.HostOp):
                for launch in host.body.block.ops:
                    if isinstance(launch, pk.LaunchOp):
                        launches.setdefault(launch.kernel.string_value(), []).append(launch)
        for name, launched in launches.items():
            kernel = kernels.get(name)
            sliced = sliced_kernel(kernel) if kernel is not None else None
            if sliced is None:
                continue
            promotion = promotable_buffers(kernel, launched, sliced)  # type: ignore[arg-type]
            if promotion.rows:
                _promote(promotion, launched)
