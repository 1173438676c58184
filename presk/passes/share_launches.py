"""`psk-share-launches`: a launch that repeats an earlier one on the same buffers reads the earlier one's result.

Differentiation makes such repeats: the weight gradients of the query, key
and value projections, `xᵀ·dq`, `xᵀ·dk` and `xᵀ·dv`, each transpose and pack
the same `x` for their product (`psk-pack`), three identical launches of
one pack kernel on one buffer in each layer of the course GPT. A kernel
computes its output from its inputs alone, so the second launch's output
holds the first's bits; it is dropped, and its readers read the first's.

A launch L2 shares the output of an earlier L1 when:

- both launch the same kernel on the same input buffers (the same host
  values), and the kernel writes its last buffer only;
- their outputs are fresh allocations (`psk_kernel.alloc`), neither returned
  nor written by any other launch (through a view or not), so the first
  output holds what L1 wrote for as long as anything reads it;
- no launch between them writes a buffer L1 reads (views followed to the
  buffer they show).

The executor recycles a buffer once nothing holds it, so keeping L1's
output longer costs at most that one buffer's memory for the span between
the two launches.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from presk.analysis import written_buffers
from presk.dialects import psk_kernel as pk
from presk.passes.host_launches import kernels_beside, rewrite_host_programs, root

__all__ = ["ShareLaunches", "ShareRepeatedLaunches"]


@dataclass
class ShareRepeatedLaunches(RewritePattern):
    """Every repeated launch of a host program reads the first one's output instead."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: pk.HostOp, rewriter: PatternRewriter) -> None:
        kernels = kernels_beside(op)
        written_by = {name: written_buffers(k) for name, k in kernels.items()}
        ops = list(op.body.block.ops)
        launches = [l for l in ops if isinstance(l, pk.LaunchOp) and l.kernel.string_value() in kernels]
        writers: dict[SSAValue, int] = {}
        for l in launches:
            for i in written_by[l.kernel.string_value()]:
                buffer = root(l.buffers[i])
                writers[buffer] = writers.get(buffer, 0) + 1
        returned = {root(v) for r in ops if isinstance(r, pk.ReturnOp) for v in r.values}

        def shareable_output(l: pk.LaunchOp) -> bool:
            out = l.buffers[-1]
            return isinstance(out.owner, pk.AllocOp) and writers.get(out, 0) == 1 and out not in returned

        seen: dict[tuple[str, tuple[SSAValue, ...]], pk.LaunchOp] = {}
        for l in launches:
            name = l.kernel.string_value()
            # A launch that writes a buffer ends the sharing of every earlier result computed from it.
            written = {root(l.buffers[i]) for i in written_by[name]}
            for key in [key for key in seen if written & {root(b) for b in key[1]}]:
                del seen[key]
            if written_by[name] != {len(l.buffers) - 1} or not shareable_output(l):
                continue
            key = (name, tuple(l.buffers[:-1]))
            first = seen.get(key)
            if first is None:
                seen[key] = l
                continue
            out = l.buffers[-1]
            alloc = out.owner
            rewriter.replace_all_uses_with(out, first.buffers[-1])
            rewriter.erase(l)
            assert isinstance(alloc, pk.AllocOp)
            rewriter.erase(alloc)


@dataclass(frozen=True)
class ShareLaunches(ModulePass):
    """Drop launches that repeat an earlier one on the same inputs (see the module docstring)."""

    name = "psk-share-launches"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_host_programs(op, ShareRepeatedLaunches())
