"""`psk-split`: the loop at a layout's depth divided among its workers.

`{"depth": d, "workers": p}`: the loop at depth d of the kernel's perfect
nest (outermost first) must be parallel with two iterations or more (the
seed's condition 8), and p the machine's workers or half of them (5). The
native runner divides the kernel's outermost loop among its workers, so
that loop must become the outermost, carrying `psk_kernel.workers = p`:

* When every loop above it is parallel too, the loop itself moves to the
  top, the loops above it keeping their order below it: the runner hands
  out its iterations in chunks, and the order of parallel loops is free.
* When a serial loop encloses it (a block of K, in the orders with K
  before I or J), the loop is *strip-mined* instead: a new outermost loop
  over p blocks of its iterations, the loops above it inside that in their
  order, and the loop itself running over its block,
  `[lb + b·B, min(lb + b·B + B, ub))` with B = ⌈n / p⌉ iterations times
  its step. Each worker then runs the k-blocks over its own rows, as a
  worksharing loop at depth d would without a barrier after each block of
  K, and the panel of operand 1 that a block of K brings into the cache
  serves every tile of the worker's rows. Moving the loop itself to the
  top would sweep the whole panel once per tile: f64, N = 1024, tile
  [6, 8] KIJ on AVX2, two threads, 28.8 ms against 19.3 strip-mined
  (docs/performance.md).

Either is legal: a loop whose iterations are independent owns its output
elements, so each element keeps its own chain in the same order; and the
strip-mined form is the hoisted one of a loop of blocks. `"none"` puts
`psk_kernel.workers = 1` on the outermost loop; the default (`"executor"`,
the runner's own split above one million weighted operations) changes
nothing. The pass runs after `psk-tile` and `psk-softmax-passes`: a split
names a loop, and only loops can be split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from presk.target import Machine, target_machine
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_kernel import PARALLEL, WORKERS
from presk.dialects.psk_kernel_structured import STRUCTURED_OPS
from presk.analysis import constant_int, split_loop, trip_count
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
    if any(PARALLEL not in lp.attributes for lp in loops[:depth]):
        strip_mine(loops[0], loop, count, workers)
        return None
    hoist(loops, depth)
    loops[0].attributes[WORKERS] = IntegerAttr(workers, i64)
    return None


def hoist(loops: list[scf.ForOp], depth: int) -> None:
    """The loop at `depth` of the chain `loops` moved to its top, the loops above it below it in their order.

    Each loop keeps its op; bounds, attributes and the uses of the counters
    move between them, so the chain's structure stays as it was."""
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


def strip_mine(top: scf.ForOp, loop: scf.ForOp, count: int, workers: int) -> None:
    """A new outermost loop over `workers` blocks of `loop`'s iterations (`count` of them) around `top`, and
    `loop` over its block (see the module)."""
    blocks = min(workers, count)
    per_block = -(-count // blocks)
    lb, ub, step = (constant_int(v) for v in (loop.lb, loop.ub, loop.step))
    assert lb is not None and ub is not None and step is not None
    # Fresh constants at the top: `loop`'s own may be defined inside a loop that now runs within a block.
    values = (0, 1, blocks, per_block * step, lb, ub)
    constants = [arith.ConstantOp.from_int_and_width(n, IndexType()) for n in values]
    zero, one, block_count, block_span, lower, upper = (c.result for c in constants)
    Rewriter.insert_op(constants, InsertPoint.before(top))
    body = Block(arg_types=[IndexType()])
    blocks_loop = scf.ForOp(zero, block_count, one, [], Region(body))
    blocks_loop.attributes[PARALLEL] = UnitAttr()
    blocks_loop.attributes[WORKERS] = IntegerAttr(workers, i64)
    Rewriter.insert_op(blocks_loop, InsertPoint.before(top))
    offset = arith.MuliOp(body.args[0], block_span)
    first = arith.AddiOp(lower, offset.result)
    past = arith.AddiOp(first.result, block_span)
    last = arith.MinSIOp(past.result, upper)
    top.detach()
    Rewriter.insert_op([offset, first, past, last, top, scf.YieldOp()], InsertPoint.at_end(body))
    loop.operands = (first.result, last.result, loop.step)


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
