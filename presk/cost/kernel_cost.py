"""How much work a kernel is, and how many workers the executor gives it by default.

`weighted_operations` counts every operation of a kernel once per execution:
its weight times the trip counts of all the loops around it. The weights
approximate the cost of one scalar execution in simple-instruction units;
they decide only whether a kernel is worth splitting, so they are coarse:

| operations | weight | why |
|---|---|---|
| `arith.constant`, `arith.index_cast`, `scf.yield`, `scf.for` itself | 0 | no instruction (or loop overhead, amortised) |
| `memref.load`, `memref.store` | 1 | one memory access |
| other `arith` ops (add, sub, mul, neg, maximum, cmp, select, ext, trunc, index arithmetic) | 1 | one simple instruction (bf16 rounding is a few integer ones, still cheap) |
| `math.fma`, `vector.fma` | 2 | two flops, the usual count for contractions |
| `arith.divf`, `math.sqrt` | 4 | long-latency units |
| `math.exp`, `math.log`, `math.tanh`, `math.erf` | 20 | presk's inline polynomials: 15 to 30 operations each |

A `vector` operation counts once per lane (`vector.fma` of 16 lanes: 16
fmas, a `vector.load` of 16: 16 accesses), so that vector code weighs what
the scalar code it stands for does: the attention pack's register
transpose (16 loads, 64 shuffles and 16 stores per 256 elements) counted
3.3 million operations one per instruction, below the threshold, and ran
its 6.3 million elements on one thread.

`default_split` is the executor's default: a kernel with a split loop (an
outermost parallel loop, `presk.lowering.kernel_to_llvm.split_loop`) and
more than one million weighted operations runs on every worker
(`Machine.workers()`); anything smaller runs on the calling thread, where
handing chunks to the other workers (2–3 µs with `presk.jit.pool`'s native
dispatcher, plus their caches warming to the kernel's data) would cost more
than it saves. One million, not four: on the Xeon host the course GPT's
`loss_grad` ran 1.5–2.5 % faster with it, measured side by side (see
`docs/performance.md`, "Split launches handed out in native code"). A
`psk_kernel.workers = p` attribute on the split loop (set by a layout's
split) overrides the default.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, VectorType
from xdsl.ir import Block, Operation

from presk.target import Machine
from presk.dialects.psk_kernel import WORKERS, KernelOp
from presk.analysis import loop_trips, split_loop

__all__ = [
    "OPERATION_WEIGHTS",
    "SPLIT_THRESHOLD",
    "declared_workers",
    "default_split",
    "split_workers",
    "weighted_operations",
]

SPLIT_THRESHOLD = 1_000_000
"""Weighted operations above which a kernel is split over every worker by default."""

OPERATION_WEIGHTS: dict[str, int] = {
    "arith.constant": 0,
    "arith.index_cast": 0,
    "scf.yield": 0,
    "scf.for": 0,
    "memref.load": 1,
    "memref.store": 1,
    "math.fma": 2,
    "vector.fma": 2,
    "arith.divf": 4,
    "math.sqrt": 4,
    "math.exp": 20,
    "math.log": 20,
    "math.tanh": 20,
    "math.erf": 20,
}
DEFAULT_WEIGHT = 1
"""Any other operation (the rest of `arith`)."""


def _lanes(op: Operation) -> int:
    """Elements an operation works on: a vector's lanes (its result's, or the stored value's), else 1."""
    for value in (*op.results, *op.operands[:1]):
        if isinstance(value.type, VectorType):
            return value.type.get_shape()[0]
    return 1


def _block_operations(block: Block) -> int:
    total = 0
    for op in block.ops:
        total += OPERATION_WEIGHTS.get(op.name, DEFAULT_WEIGHT) * _lanes(op)
        if isinstance(op, scf.ForOp):
            count = loop_trips(op)
            # Every loop of PSK-Kernel has constant bounds or is a strip-mined block; anything else counts once.
            total += (1 if count is None else count) * _block_operations(op.body.block)
        else:
            for region in op.regions:
                for inner in region.blocks:
                    total += _block_operations(inner)
    return total


def weighted_operations(kernel: KernelOp) -> int:
    """Each operation's weight times the trip counts of its enclosing loops, summed."""
    return _block_operations(kernel.body.block)


def declared_workers(kernel: KernelOp) -> int | None:
    """The `psk_kernel.workers` of the split loop, if a layout set one."""
    loop = split_loop(kernel)
    if loop is None:
        return None
    attr = loop.attributes.get(WORKERS)
    if isinstance(attr, IntegerAttr):
        return max(1, attr.value.data)
    return None


def split_workers(splittable: bool, declared: int | None, operations: int, machine: Machine) -> int:
    """The executor's split policy: a layout's declared workers, else every worker above
    `SPLIT_THRESHOLD` weighted operations, else 1 (and 1 for a kernel without a split loop)."""
    if not splittable:
        return 1
    if declared is not None:
        return declared
    return machine.workers() if operations > SPLIT_THRESHOLD else 1


def default_split(kernel: KernelOp, machine: Machine) -> int:
    """Workers the executor runs `kernel` on (its split loop divided among them; 1: not split)."""
    splittable = split_loop(kernel) is not None
    declared = declared_workers(kernel)
    # A layout's split decides alone: the count, a walk of the whole kernel, is needed only without one.
    operations = weighted_operations(kernel) if splittable and declared is None else 0
    return split_workers(splittable, declared, operations, machine)
