"""presk's dialects and passes, as seen by xDSL tools through the `xdsl.universe` entry point.

Each entry is a factory that imports its module only when the dialect or
pass is used, so starting `presk-opt` (or `xdsl-opt`) does not import every
pass, and one module that fails to import does not break the others.
Adding a pass is one line in `_PASSES`.

`load_multiverse` merges every installed universe as xDSL's
`Universe.get_multiverse` does, except that a plugin that fails to load is
skipped and recorded rather than breaking every command (and `--help`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
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
    "psk-autodiff": "presk.passes.autodiff:AutoDiff",
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
    "psk-fuse-slices": "presk.passes.fuse_slices:FuseSlices",
    "psk-promote-to-scratch": "presk.passes.promote_to_scratch:PromoteToScratch",
    "psk-share-launches": "presk.passes.share_launches:ShareLaunches",
    "psk-in-place": "presk.passes.in_place:InPlace",
    "psk-verify-layout": "presk.passes.verify_layout:VerifyLayouts",
    "psk-egraph-opt": "presk.passes.egraph:EGraphOpt",
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


# -- every installed universe, with the plugins that failed to load -----------------


@dataclass(frozen=True)
class PluginFailure:
    """An `xdsl.universe` entry point that could not be loaded, and why."""

    distribution: str
    """The installed package the entry point belongs to (`pip uninstall` takes this name)."""
    entry_point: str
    """The entry point as its package declares it: `name = module:attribute`."""
    reason: str

    def describe(self) -> str:
        return f"plugin '{self.distribution}' (entry point '{self.entry_point}') could not be loaded: {self.reason}"


@dataclass(frozen=True)
class Multiverse:
    """What every installed universe adds, as xDSL's `Universe.get_multiverse` merges it.

    Unlike xDSL's, one plugin that raises on import, names a missing
    attribute, is not a `Universe` or redefines a name another universe
    defines is skipped and recorded in `failures` instead of breaking every
    command; `origins` says which distribution defines each pass, so a pass
    that fails to load can be blamed on its plugin.
    """

    universe: Universe
    failures: tuple[PluginFailure, ...]
    origins: dict[str, str]


def _distribution(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return dist.name if dist is not None else entry.name


def _tables(universe: Universe) -> tuple[tuple[str, dict[str, Any]], ...]:
    return (("dialect", universe.all_dialects), ("pass", universe.all_passes), ("target", universe.all_targets))


def _clash(universe: Universe, tables: dict[str, dict[str, Any]], owners: dict[tuple[str, str], str]) -> str | None:
    """Why `universe` cannot join the tables (a name another universe defines), or None."""
    for kind, table in _tables(universe):
        for name in table:
            if name in tables[kind]:
                return f"it defines the {kind} '{name}', which '{owners[kind, name]}' defines too"
    return None


@cache
def load_multiverse() -> Multiverse:
    """Every installed `xdsl.universe` entry point, merged; each broken one skipped and recorded.

    Entry points are taken in name order, as xDSL does, after xDSL's and
    presk's own, so which of two clashing plugins is skipped does not depend
    on installation order and a plugin never displaces a built-in name.
    presk's own universe is included even when presk is not installed (a
    source checkout), so its dialects and passes are always there.
    """
    tables: dict[str, dict[str, Any]] = {"dialect": {}, "pass": {}, "target": {}}
    owners: dict[tuple[str, str], str] = {}
    failures: list[PluginFailure] = []
    # xDSL's and presk's own universes first, so a plugin can never displace them.
    entries = sorted(
        entry_points(group="xdsl.universe"),
        key=lambda entry: (_distribution(entry) not in _BASE_DISTRIBUTIONS, entry.name),
    )
    loaded: list[tuple[PluginFailure, Universe]] = []
    """Each universe with the failure it would be reported as (distribution and entry point)."""
    if not any(entry.value == _OWN_ENTRY_POINT for entry in entries):
        loaded.append((PluginFailure("presk", f"presk = {_OWN_ENTRY_POINT}", ""), PRESK_UNIVERSE))
    for entry in entries:
        origin = PluginFailure(_distribution(entry), f"{entry.name} = {entry.value}", "")
        try:
            universe = entry.load()
        except Exception as error:  # noqa: BLE001 - a plugin's import can raise anything
            failures.append(replace(origin, reason=_reason(error)))
            continue
        if not isinstance(universe, Universe):
            failures.append(replace(origin, reason=f"it names a {type(universe).__name__}, not an xdsl.universe.Universe"))
            continue
        loaded.append((origin, universe))
    for origin, universe in loaded:
        if (clash := _clash(universe, tables, owners)) is not None:
            failures.append(replace(origin, reason=clash))
            continue
        for kind, table in _tables(universe):
            for name, factory in table.items():
                tables[kind][name] = factory
                owners[kind, name] = origin.distribution
    merged = Universe(all_dialects=tables["dialect"], all_passes=tables["pass"], all_targets=tables["target"])
    origins = {name: owner for (kind, name), owner in owners.items() if kind == "pass"}
    return Multiverse(merged, tuple(failures), origins)


def _reason(error: BaseException) -> str:
    """`Type: message` of an exception, as a one-line reason."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


_OWN_ENTRY_POINT = "presk.universe:PRESK_UNIVERSE"
_BASE_DISTRIBUTIONS = ("xdsl", "presk")
