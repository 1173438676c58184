"""The whole way down for one entry: PSK-Core → bound → fused → realized → PSK-Kernel.

It stands above the passes and the lowering, which it strings together, so
that neither room imports the other's driver. The same sequence `presk-opt` spells as
`psk-bind,psk-fuse,psk-realize,psk-lower-kernel{entry=F},psk-epilogue,psk-pack,psk-tile,psk-softmax-passes,psk-split,psk-vectorize`
(then `psk-share-launches,psk-fuse-launches,psk-fuse-slices,psk-promote-to-scratch`), as one function
for the subcommands and tests that run or print a program's kernels.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from presk import sizes
from presk.target import Machine, target_machine
from presk.ir.context import presk_context
from presk.lowering.realize_to_kernel import LowerToKernel
from presk.passes.autodiff import AutoDiff
from presk.passes.bind import BindSizes
from presk.passes.epilogue import FoldEpilogues
from presk.passes.fuse import FuseElementwise
from presk.passes.fuse_launches import FuseLaunches
from presk.passes.fuse_slices import FuseSlices
from presk.passes.pack import PackOperands
from presk.passes.promote_to_scratch import PromoteToScratch
from presk.passes.share_launches import ShareLaunches
from presk.passes.realize import apply_plan
from presk.passes.softmax_passes import SoftmaxPasses
from presk.passes.split import split_kernels
from presk.passes.tile import TileContractions
from presk.passes.vectorize import VectorizeContractions
from presk.passes.verify_layout import check_layouts
from presk.plans import Plan


def apply_layouts(kernels: ModuleOp, machine: Machine | None = None) -> None:
    """The layout passes, in the order `presk-opt` spells them after `psk-lower-kernel`.

    `machine` (default: this one) is what a split's workers and the lanes'
    register widths are checked against.
    """
    ctx = presk_context()
    machine = machine or target_machine()
    for layout_pass in (FoldEpilogues(), PackOperands(), TileContractions(), SoftmaxPasses()):
        layout_pass.apply(ctx, kernels)
    split_kernels(kernels, machine)
    VectorizeContractions(machine=machine).apply(ctx, kernels)


def realize(
    module: ModuleOp, env: dict[str, int], plan: Plan, fuse: bool = True, entry: str | None = None
) -> ModuleOp:
    """A realized copy of `module` at the sizes of `env` (every constant and dimension).

    With `entry`, only the gradients it reaches are generated.
    """
    realized = module.clone()
    ctx = presk_context()
    constants = sizes.declared_constants(module)
    dims = ",".join(f"{k}={v}" for k, v in env.items() if k not in constants)
    consts = ",".join(f"{k}={v}" for k, v in env.items() if k in constants)
    BindSizes(dims=dims, consts=consts).apply(ctx, realized)
    # Derivatives after binding (a fold's gradient runs its layers one by one), before fusion groups them.
    AutoDiff(entries=entry or "").apply(ctx, realized)
    FuseElementwise(max_nodes=64 if fuse else 1).apply(ctx, realized)
    apply_plan(realized, plan)
    # The second check: every layout at its launch shapes, before any kernel exists.
    check_layouts(realized, env)
    return realized


def lower(
    module: ModuleOp, entry: str, env: dict[str, int], plan: Plan, fuse: bool = True, fuse_launches: bool | None = None,
    fuse_slices: bool | None = None,
) -> ModuleOp:
    """The kernels and host program of `entry` (a new module; `module` is unchanged).

    `fuse_launches` (default: as `fuse`) runs `psk-share-launches` and `psk-fuse-launches` on the kernels, and
    `fuse_slices` (default: as `fuse_launches`) `psk-fuse-slices` and `psk-promote-to-scratch` after them.
    """
    kernels = realize(module, env, plan, fuse, entry)
    ctx = presk_context()
    LowerToKernel(entry=entry).apply(ctx, kernels)
    apply_layouts(kernels)
    launches = fuse if fuse_launches is None else fuse_launches
    if launches:
        ShareLaunches().apply(ctx, kernels)
        FuseLaunches().apply(ctx, kernels)
    if launches if fuse_slices is None else fuse_slices:
        FuseSlices().apply(ctx, kernels)
        PromoteToScratch().apply(ctx, kernels)
    return kernels
