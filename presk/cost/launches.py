"""Kernel launches of an entry, counted as the program would run, and what fusion removes.

A launch is one kernel: one `psk_realize.group` or `psk_realize.nest`,
once per leaf of its type (a group over a parameter tree runs once per
leaf, `SiteOp.launch_count`). The count is dynamic, as the program runs:

* a `func.call` launches what its callee launches, every time it is called;
* a `psk_core.fold` launches what its callee launches once per layer (its
  layer count, bound through the size environment);
* fields, records, tuples, constants, sizes and the `split`/`merge` views
  launch nothing (they have no data of their own, or reshape a row-major
  buffer in place).

A PSK-Core primitive that is in no group (a program `psk-fuse` has not run
on) counts as `psk-fuse{max-nodes=1}` would wrap it: one launch per leaf if
it computes or moves data. So an unfused program gives its unfused count.

`launch_table` is the seed's table: each entry's launches without fusion
(`psk-fuse{max-nodes=1}`) and with it (`psk-fuse`), on two parses of the
program. `presk launches` prints it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import CallOp, FuncOp
from xdsl.ir import Operation

from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import Size, leaves
from presk.dialects.psk_realize import SiteOp
from presk.dialects.psk_realize_nests import launches as is_launching_primitive
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.locations import error_at
from presk.ir.parse import parse_module, read_source
from presk.passes.fuse import FuseElementwise

# --------------------------------------------------------------------------
# Counting one module.


@dataclass(frozen=True)
class FunctionLaunches:
    """What one call of a function launches: its own sites, and the functions it calls."""

    name: str
    own: int
    """Launches of the function's own groups and nests, per call."""
    calls: tuple[tuple[str, int], ...]
    """Each callee with the times one call of this function runs it (a fold: its layers), in order."""


def _layers(op: core.FoldOp, env: Mapping[str, int]) -> int:
    size: Size = op.layer_count()
    if isinstance(size, int):
        return size
    if size not in env:
        callee = op.callee.string_value()
        raise error_at(op, "E4002", f"fold of @{callee}: its layer count '{size}' is not bound; pass --dim {size}=N")
    return env[size]


def _leaf_count(op: Operation) -> int:
    return sum(1 for _ in leaves(op.results[0].type))


def _top_level_ops(func: FuncOp) -> Iterable[Operation]:
    """Every op of `func` outside the sites (a site's members launch as the site)."""
    for region in func.regions:
        for block in region.blocks:
            yield from _ops_outside_sites(block.ops)


def _ops_outside_sites(ops: Iterable[Operation]) -> Iterable[Operation]:
    for op in ops:
        yield op
        if isinstance(op, SiteOp):
            continue
        for region in op.regions:
            for block in region.blocks:
                yield from _ops_outside_sites(block.ops)


def function_launches(func: FuncOp, env: Mapping[str, int]) -> FunctionLaunches:
    """The launches of one call of `func`, without its callees'."""
    own = 0
    calls: list[tuple[str, int]] = []
    for op in _top_level_ops(func):
        if isinstance(op, SiteOp):
            own += op.launch_count()
        elif isinstance(op, CallOp):
            calls.append((op.callee.string_value(), 1))
        elif isinstance(op, core.FoldOp):
            calls.append((op.callee.string_value(), _layers(op, env)))
        elif is_launching_primitive(op):
            own += _leaf_count(op)
    return FunctionLaunches(func.sym_name.data, own, tuple(calls))


class _Counter:
    """Memoised totals per call, callees included; refuses recursion (it would never end)."""

    def __init__(self, module: ModuleOp, env: Mapping[str, int]) -> None:
        self.funcs = {f.sym_name.data: f for f in module.walk() if isinstance(f, FuncOp)}
        self.env = env
        self.own: dict[str, FunctionLaunches] = {}
        self.totals: dict[str, int] = {}
        self.active: list[str] = []

    def function(self, name: str) -> FunctionLaunches:
        if name not in self.own:
            if name not in self.funcs:
                raise PreskError("E2002", f"call to unknown function @{name}")
            self.own[name] = function_launches(self.funcs[name], self.env)
        return self.own[name]

    def total(self, name: str) -> int:
        if name in self.totals:
            return self.totals[name]
        if name in self.active:
            cycle = " -> ".join(f"@{n}" for n in [*self.active[self.active.index(name) :], name])
            raise PreskError("E3003", f"launches: the program calls itself ({cycle}); its launches are unbounded")
        self.active.append(name)
        info = self.function(name)
        total = info.own + sum(times * self.total(callee) for callee, times in info.calls)
        self.active.pop()
        self.totals[name] = total
        return total

    def runs(self, entry: str) -> dict[str, int]:
        """How many times one run of `entry` calls each function (entry included), in first-call order."""
        counts: dict[str, int] = {}

        def visit(name: str, times: int) -> None:
            counts[name] = counts.get(name, 0) + times
            for callee, k in self.function(name).calls:
                visit(callee, times * k)

        self.total(entry)  # refuses recursion before walking the call tree
        visit(entry, 1)
        return counts


def count_launches(module: ModuleOp, entry: str, env: Mapping[str, int]) -> int:
    """Kernel launches of one run of `@entry`: its sites and its callees', once per leaf and per layer."""
    find_entry(module, entry)
    return _Counter(module, env).total(entry)


# --------------------------------------------------------------------------
# Without and with fusion.


@dataclass(frozen=True)
class LaunchRow:
    """One row of the seed's table."""

    entry: str
    unfused: int
    fused: int

    @property
    def removed(self) -> float:
        """The share of launches fusion removes, in [0, 1]."""
        return (self.unfused - self.fused) / self.unfused if self.unfused else 0.0


@dataclass(frozen=True)
class FunctionRow:
    """One function's part in one run of an entry, without and with fusion."""

    entry: str
    function: str
    runs: int
    """Times one run of the entry calls the function (the entry itself: 1)."""
    unfused: int
    """Launches of the function's own sites, per call, without fusion."""
    fused: int
    """The same, with fusion."""

    @property
    def share_unfused(self) -> int:
        return self.runs * self.unfused

    @property
    def share_fused(self) -> int:
        return self.runs * self.fused


def fused_module(source: str | ModuleOp, max_nodes: int | None = None) -> ModuleOp:
    """A fresh copy of the program (parsed, or cloned) after `psk-fuse` (`max_nodes=1`: unfused)."""
    ctx = presk_context()
    if isinstance(source, ModuleOp):
        module = source.clone()
    else:
        parsed = parse_module(ctx, read_source(source), source)
        parsed.verify()
        module = parsed.module
    fuse = FuseElementwise() if max_nodes is None else FuseElementwise(max_nodes=max_nodes)
    fuse.apply(ctx, module)
    return module


def function_names(source: str | ModuleOp) -> list[str]:
    """Every function of the program, in source order."""
    module = source if isinstance(source, ModuleOp) else fused_module(source, 1)
    return [f.sym_name.data for f in module.walk() if isinstance(f, FuncOp)]


def _counters(
    source: str | ModuleOp, entries: Sequence[str] | None, env: Mapping[str, int]
) -> tuple[list[str], _Counter, _Counter]:
    """The entries (checked; default every function) and their counters without fusion and with it."""
    unfused, fused = fused_module(source, 1), fused_module(source)
    names = list(entries) if entries else function_names(unfused)
    for entry in names:
        find_entry(unfused, entry)
    return names, _Counter(unfused, env), _Counter(fused, env)


def launch_table(source: str | ModuleOp, entries: Sequence[str] | None, env: Mapping[str, int]) -> list[LaunchRow]:
    """Each entry's launches without fusion (`psk-fuse{max-nodes=1}`) and with it (`psk-fuse`).

    `source` is a program's path or a module (cloned, never changed);
    `entries` default to every function, in source order.
    """
    names, without, with_ = _counters(source, entries, env)
    rows = []
    for entry in names:
        rows.append(LaunchRow(entry, without.total(entry), with_.total(entry)))
    return rows


def breakdown(source: str | ModuleOp, entries: Sequence[str] | None, env: Mapping[str, int]) -> list[FunctionRow]:
    """Per entry, every function one run of it calls: its runs and its own launches per call, both ways.

    The entry's launch count is the sum over its rows of `runs × own`; that
    is how the table's totals decompose.
    """
    names, without, with_ = _counters(source, entries, env)
    rows = []
    for entry in names:
        for function, runs in without.runs(entry).items():
            rows.append(
                FunctionRow(entry, function, runs, without.function(function).own, with_.function(function).own)
            )
    return rows


# --------------------------------------------------------------------------
# Printing, as the seed's tables.


def percent(share: float) -> str:
    return f"{round(100 * share)} %"


def format_table(rows: Sequence[LaunchRow]) -> str:
    """`| Entry | Launches without fusion | With | Removed |`, one row per entry (Markdown)."""
    lines = ["| Entry | Launches without fusion | With | Removed |", "|---|---|---|---|"]
    lines += [f"| {r.entry} | {r.unfused} | {r.fused} | {percent(r.removed)} |" for r in rows]
    return "\n".join(lines) + "\n"


def format_breakdown(rows: Sequence[FunctionRow]) -> str:
    """One Markdown table per entry: each function's runs, its launches per call and its part of the total."""
    out: list[str] = []
    for entry in dict.fromkeys(r.entry for r in rows):
        mine = [r for r in rows if r.entry == entry]
        out += [
            f"Launches of one run of {entry}, by function:",
            "",
            "| Function | Runs | Own launches per call, without fusion | With | Part of the total, without | With |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {r.function} | {r.runs} | {r.unfused} | {r.fused} | {r.share_unfused} | {r.share_fused} |" for r in mine
        ]
        total_unfused = sum(r.share_unfused for r in mine)
        total_fused = sum(r.share_fused for r in mine)
        out += [f"| total | | | | {total_unfused} | {total_fused} |", ""]
    return "\n".join(out)
