"""`psk-split`: the loop at a layout's depth divided among its workers.

`{"depth": d, "workers": p}`: the loop at depth d of the kernel's perfect
nest (outermost first) must be parallel with two iterations or more (the
seed's condition 8), and p the machine's workers or half of them (5). That
loop is moved to the top, the loops above it keeping their order below it,
and carries `psk_kernel.workers = p`: the native runner divides the
kernel's outermost loop among its workers. Moving a loop whose iterations
are independent outward is legal (each output element keeps its own
chain); each worker then runs the loops that were above it over its chunk,
as a worksharing loop at depth d would. `"none"` puts
`psk_kernel.workers = 1` on the outermost loop; the default (`"executor"`,
the runner's own split above one million weighted operations) changes
nothing. The pass runs after `psk-tile` and `psk-softmax-passes`: a split
names a loop, and only loops can be split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from presk.target import Machine, target_machine
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_kernel import PARALLEL, WORKERS
from presk.dialects.psk_kernel_structured import STRUCTURED_OPS
from presk.analysis import split_loop, trip_count
from presk.passes.kernel_layout import Violation, consume, kernels, refuse, resolved


def perfect_nest(k: kernel.KernelOp) -> list[scf.ForOp]:
    """The kernel's loops from the outside in, while each block holds one loop alone (besides constants)."""
    loops: list[scf.ForOp] = []
    block = k.body.block
    while True:
        inner = [op for op in block.ops if not isinstance(op, scf.YieldOp) and op.name != "arith.constant"]
        if len(inner) != 1 or not isinstance(inner[0], scf.ForOp):
            return loops
        loops.append(inner[0])
        if inner[0].iter_args:
            return loops
        block = inner[0].body.block


def apply_split(k: kernel.KernelOp, split: Any, machine: Machine) -> Violation | None:
    """The layout's split on a finished kernel, or the condition (8 or 5) it breaks (see the module)."""
    if split == "none":
        if (top := split_loop(k)) is not None:
            top.attributes[WORKERS] = IntegerAttr(1, i64)
        return None
    if not isinstance(split, dict):
        return None
    depth, workers = split["depth"], split["workers"]
    chain = perfect_nest(k)
    if depth >= len(chain):
        return 8, "split", (
            f"the kernel has no loop at depth {depth} holding the rest of its nest alone "
            f"(its perfect nest is {len(chain)} loop{'s' if len(chain) != 1 else ''} deep)"
        )
    loop = chain[depth]
    if PARALLEL not in loop.attributes:
        return 8, "split", f"the loop at depth {depth} is serial (its iterations carry running sums or run in order)"
    count = trip_count(loop)
    if count is None or count < 2:
        return 8, "split", f"the loop at depth {depth} has {count} iteration{'s' if count != 1 else ''}; a split needs two or more"
    allowed = machine.allowed_workers()
    if workers not in allowed:
        return 5, "split", (
            f"{workers} workers: a split runs on the machine's workers ({allowed[0]}) or half of them "
            f"({allowed[-1]})"
        )
    loops = chain[: depth + 1]
    if any(lp.iter_args for lp in loops):
        return 8, "split", f"a loop with running values encloses the loop at depth {depth}"
    bounds = [tuple(lp.operands) for lp in loops]
    attributes = [dict(lp.attributes) for lp in loops]
    ivs = [lp.body.block.args[0] for lp in loops]
    uses = [[(use.operation, use.index) for use in iv.uses] for iv in ivs]
    for position, source in enumerate([depth, *range(depth)]):
        target = loops[position]
        target.operands = bounds[source]
        target.attributes = attributes[source]
        for user, index in uses[source]:
            user.operands[index] = ivs[position]
    loops[0].attributes[WORKERS] = IntegerAttr(workers, i64)
    return None


@dataclass(frozen=True)
class SplitLoops(ModulePass):
    """Each kernel's pending split applied to its loops (E7002 where condition 8 or 5 fails)."""

    name = "psk-split"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        split_kernels(op, target_machine())


def split_kernels(module: ModuleOp, machine: Machine) -> None:
    """`psk-split` against a given machine's workers (the pass uses the host's)."""
    for k in kernels(module):
        layout = resolved(k)
        if "split" not in layout:
            continue
        if any(isinstance(inner, STRUCTURED_OPS) for inner in k.walk()):
            raise refuse(k, None, "split", "the kernel still holds a structured op: run psk-tile and psk-softmax-passes first")
        if (violation := apply_split(k, layout["split"], machine)) is not None:
            raise refuse(k, *violation)
        consume(k, ["split"])
