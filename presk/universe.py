"""presk's dialects and passes, as seen by xDSL tools through the `xdsl.universe` entry point.

Each entry is a factory that imports its module only when the dialect or
pass is used, so starting `presk-opt` (or `xdsl-opt`) does not import every
pass, and one module that fails to import does not break the others.
Adding a pass is one line in `_PASSES`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

_DIALECTS: dict[str, str] = {
    "psk_core": "presk.dialects.psk_core:PSKCore",
    "psk_realize": "presk.dialects.psk_realize:PSKRealize",
    "psk_kernel": "presk.dialects.psk_kernel:PSKKernel",
}

_PASSES: dict[str, str] = {
    "psk-inline": "presk.passes.inline:InlineCalls",
    "psk-bind": "presk.passes.bind:BindSizes",
    "psk-fuse": "presk.passes.fuse:FuseElementwise",
    "psk-realize": "presk.passes.realize:RealizeSites",
    "psk-lower-kernel": "presk.lowering.realize_to_kernel:LowerToKernel",
    "psk-epilogue": "presk.passes.epilogue:FoldEpilogues",
    "psk-pack": "presk.passes.pack:PackOperands",
    "psk-tile": "presk.passes.tile:TileContractions",
    "psk-softmax-passes": "presk.passes.softmax_passes:SoftmaxPasses",
    "psk-split": "presk.passes.split:SplitLoops",
    "psk-vectorize": "presk.passes.vectorize:VectorizeContractions",
    "psk-fuse-launches": "presk.passes.fuse_launches:FuseLaunches",
    "psk-in-place": "presk.passes.in_place:InPlace",
    "psk-verify-layout": "presk.passes.verify_layout:VerifyLayouts",
}


def _lazy(target: str) -> Callable[[], Any]:
    """A factory returning the object at `module:attribute`, imported on first call."""
    module_name, attribute = target.split(":")

    def load() -> Any:
        return getattr(import_module(module_name), attribute)

    load.__name__ = f"load_{attribute}"
    load.__doc__ = f"Import and return {target}."
    return load


_DIALECT_FACTORIES: dict[str, Callable[[], Dialect]] = {name: _lazy(target) for name, target in _DIALECTS.items()}
_PASS_FACTORIES: dict[str, Callable[[], type[ModulePass]]] = {name: _lazy(target) for name, target in _PASSES.items()}

PRESK_UNIVERSE = Universe(all_dialects=_DIALECT_FACTORIES, all_passes=_PASS_FACTORIES)
