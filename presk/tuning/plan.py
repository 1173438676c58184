"""`presk plan`: choose a layout for every contraction and softmax nest of an entry, statically.

Nothing is compiled or timed: each nest's layout space (`presk.tuning.space`)
is priced by a calibrated cost profile (`presk.cost`), and the cheapest
legal point of each nest is written as a realization plan.

How. The entry is realized and lowered once at its default layouts, to learn
which nests it launches and how often (a fold's layers, repeated calls): a
nest's price in the plan is its launches times its predicted time, since a
nest launched 24 times outweighs one launched once. Each nest is then lowered
*in isolation*: a module of one function whose body is the nest's primitive
(`psk_core.dot`, `psk_core.ein`, `psk_core.softmax` with its mask) on its
operand types at the captured sizes, under each point of its space, through
the real pipeline (`presk.pipeline.lower`), so that the kernels priced are
the kernels the plan will run (a packed point's price includes its pack
kernel). Lowering is the expensive step (tens of milliseconds a point), so
prices are cached by (nest shape, point): the four projections of an
attention with the same shapes are priced once. And a point's splits share
one lowering, its lanes above one one tile pass, and the points are priced
in groups over the CPUs (`Pricer`, `_price_groups`): the prices are the
full lowering's, to the bit, in a tenth of the time. And the terms each
point lowers to are kept on disk (`presk.tuning.terms_cache`, keyed by the
shape, the point, presk's code and the machine), so planning the same
nests again lowers nothing: only the model runs, microseconds a point.

A nest may be launched at several shapes (its kernel keyed by its operands'
buffer types). It gets one layout, legal at every shape, whose
launch-weighted predicted time summed over the shapes is least. Points the
checks refuse (E7002: `psk-verify-layout`'s conditions, statically, then the
lowering's own guards) are dropped and counted. Ties keep the point first in
the space's order (the simplest).

A profile of another machine is used with a warning: its constants describe
that machine, so the plan is advisory here. A group (type, lanes, workers)
the profile has no constants for is an error naming the nest, never a guess.
"""

from __future__ import annotations

import gc
import hashlib
import json
import multiprocessing
import threading
import os
import signal
import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Region, SSAValue

from presk.cost.kernel_cost import default_split
from presk.cost.models import PROFILE_ERROR, Constants, UnmeasuredGroup, predict_many
from presk.cost.profile import Profile, load_profile
from presk.cost.quantities import kernel_terms
from presk.cost.terms import KernelTerms, MachineDesc
from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects import psk_kernel as kernel
from presk.dialects.psk_kernel_structured import SoftmaxOp as StructuredSoftmaxOp
from presk.dialects.psk_realize import LayoutAttr, NestOp
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.ir.print import print_module
from presk.lowering.contraction import LANES, lanes_attribute
from presk.lowering.realize_to_kernel import LowerToKernel
from presk.lowering.softmax import causal_axes
from presk.passes.epilogue import FoldEpilogues
from presk.passes.kernel_layout import resolved
from presk.passes.pack import PackOperands
from presk.passes.softmax_passes import SoftmaxPasses
from presk.passes.split import apply_split, split_kernels
from presk.passes.tile import TileContractions
from presk.passes.vectorize import VectorizeContractions
from presk.passes.verify_layout import LayoutViolation, layout_violation
from presk.pipeline import lower, realize
from presk.plans import Plan, parse_plan
from presk.target import Machine, cpu_of_key, target_machine
from presk.tuning.calibration import Progress, stale_samples
from presk.tuning.space import SPACES, Point, nest_space, point_key
from presk.tuning.terms_cache import TermsCache

if TYPE_CHECKING:
    from presk.tuning.tuned import Tuned

__all__ = [
    "Isolated",
    "legal_points",
    "Nest",
    "NestChoice",
    "PlanResult",
    "Pricer",
    "capture",
    "choose",
    "with_epilogue",
    "isolate",
    "isolated_from_record",
    "isolated_record",
    "launched_kernels",
    "make_plan",
    "unpriced",
    "plan_text",
    "price_ahead",
    "profile_constants",
    "profile_pricer",
    "report",
]

PLANNED_KINDS = ("contraction", "softmax")
ISOLATED_FUNCTION = "nest"


# --------------------------------------------------------------------------
# A nest in isolation.


@dataclass
class Isolated:
    """One nest at one shape: the module of its primitive alone, realized as the program realizes it.

    `site` is the realized nest of that module: the static checks set its
    layout to each point in turn, without lowering anything.
    """

    module: ModuleOp
    site: NestOp
    storage: str
    """The nest's storage type (its realization's)."""
    operand_storage: str
    """The type its operands are stored in (the isolated function's arguments, the realization's default)."""
    key: str

    @property
    def name(self) -> str:
        return self.site.site_name

    def plan(self, point: Point) -> Plan:
        realization: Any = self.storage
        if self.operand_storage != self.storage:
            realization = {"default": self.operand_storage, self.name: self.storage}
        plan = parse_plan({"realization": realization, "layout": {self.name: point}}, "presk plan")
        return replace(plan, warns_of_spills=False)

    def describe(self) -> str:
        """`[i: 64, k: 64] · [k2: 64, j: 64] in f32`: the operands and the type, for the report."""
        shapes = " · ".join(_axes(o.type) for o in self.site.primitive.operands)
        return f"{shapes} in {self.storage}"

    def violation(self, point: Point, machine: Machine) -> LayoutViolation | None:
        """The first condition `point` breaks at this shape (the second check, `psk-verify-layout`)."""
        return violation_at(self.site, point, machine)


def violation_at(site: NestOp, point: Point, machine: Machine) -> LayoutViolation | None:
    """The first condition `point` breaks on `site` (its sizes bound), the site's own layout left as it was."""
    original = site.layout
    site.layout = LayoutAttr(point)
    try:
        return layout_violation(site, {}, machine)
    finally:
        site.layout = original


def _axes(t: Any) -> str:
    text = str(t)
    start, end = text.find("<"), text.rfind(">")
    return text[start + 1 : end] if start >= 0 and end > start else text


def isolate(nest: NestOp, operand_storage: str | None = None) -> Isolated:
    """The module `func.func @nest(operands) { primitive }` of `nest` (its sizes bound), realized alone.

    A causal mask stays `causal_mask` in the isolated function rather than
    becoming an argument: the program's softmax computes it from its loop
    counters, and one that read it from memory would be priced for
    traffic the program never has (the mask read again for every row of
    every head, which made a split over the rows look cheaper than one over
    the batch). The mask's own launch is not the nest's and is not priced
    (`Pricer.terms`).
    """
    primitive = nest.primitive
    inputs = [v for v in primitive.operands if causal_axes(v) is None]
    block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(inputs, block.args):
        mapping.setdefault(value, arg)
    for value in primitive.operands:
        if value not in mapping:
            mask = core.CausalMaskOp(value.type)
            block.add_op(mask)
            mapping[value] = mask.result
    clone = primitive.clone(value_mapper=mapping)
    block.add_op(clone)
    block.add_op(func.ReturnOp(clone.results[0]))
    types = [arg.type for arg in block.args]
    module = ModuleOp([func.FuncOp(ISOLATED_FUNCTION, (types, [clone.results[0].type]), Region(block))])
    storage = nest.realization.storage_name if nest.realization is not None else "f64"
    return _realized_alone(module, primitive.name, storage, operand_storage or storage)


def _realized_alone(module: ModuleOp, primitive: str, storage: str, operands: str) -> Isolated:
    realized = realize(module, {}, parse_plan({"realization": storage}, "presk plan"))
    site = next(op for op in realized.walk() if isinstance(op, NestOp) and op.primitive.name == primitive)
    return Isolated(module, site, storage, operands, f"{module}|{storage}|{operands}")


def isolated_record(iso: Isolated) -> dict[str, str]:
    """What `isolated_from_record` needs to rebuild `iso`: its module as text, its primitive and storage types.

    A results file keeps it beside the measured points, so that they can be
    priced again under another profile without the program they came from.
    """
    return {"module": print_module(iso.module, {}), "primitive": iso.site.primitive.name, "storage": iso.storage,
            "operand_storage": iso.operand_storage}  # fmt: skip


def isolated_from_record(record: Mapping[str, Any], where: str) -> Isolated:
    """The nest `isolated_record` described, with the same `key` (so the same cached prices and terms)."""
    try:
        module = parse_module(presk_context(), str(record["module"]), where).module
        return _realized_alone(module, str(record["primitive"]), str(record["storage"]),
                               str(record["operand_storage"]))  # fmt: skip
    except (PreskError, StopIteration, KeyError) as error:
        detail = error.message if isinstance(error, PreskError) else "it holds no such nest"
        raise PreskError("E8001", f"{where}: not a nest presk can rebuild: {detail}") from None


# --------------------------------------------------------------------------
# Which nests the entry launches, and how often.


@dataclass
class Nest:
    """A nest of the entry: each shape it is launched at, with its launches per run of the entry."""

    site: str
    kind: str
    shapes: list[tuple[Isolated, int]]
    program_site: NestOp | None = None
    """The nest in the realized program: whether an epilogue folds into it depends on who reads its value."""

    @property
    def launches(self) -> int:
        return sum(n for _, n in self.shapes)

    @property
    def key(self) -> str:
        """What the nest's measurements depend on: each shape's isolated module and storage (`Isolated.key`),
        with its launches per run, in a fixed order (16 hex digits). Two programs' nests of one key are one
        workload: a layout measured for one holds for the other (`presk.tuning.tuned`)."""
        text = "\n".join(f"{launches} {iso.key}" for iso, launches in sorted(self.shapes, key=lambda s: s[0].key))
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def with_epilogue(nest: Nest, point: Point, machine: Machine) -> Point:
    """`point` with `"epilogue": true` when the nest's product can take the add or mul that alone reads it.

    The epilogue saves a launch that reads and writes the product's whole
    value again, and costs a product's kernel one operation a stored
    element, so it is stated wherever the checks allow it at `point` (the
    structural conditions on the program, the lanes' on the point) rather
    than priced. The sizes are the program's, bound when it was realized.

    An epilogue taken is also stated on the program's nest, so that a later
    nest whose product the same add reads (the tied weights of a gradient:
    two products summed) sees it taken and keeps its own product: call it
    on a program's nests in launch order, the first of two taking the add.
    """
    site = nest.program_site
    if nest.kind != "contraction" or site is None or point.get("epilogue") is not None:
        return point
    candidate: Point = {**point, "epilogue": True}
    if violation_at(site, candidate, machine) is not None:
        return point
    site.layout = LayoutAttr(candidate)
    return candidate


def _element_name(t: MemRefType) -> str:
    name = str(t.element_type)
    return {"bf16": "bf16", "f32": "f32", "f64": "f64"}.get(name, name)


def capture(module: ModuleOp, entry: str, env: Mapping[str, int], plan: Plan) -> list[Nest]:
    """The contraction and softmax nests `entry` launches, in launch order, with their shapes and launches.

    The program is realized under `plan` (no layout) and its host program
    built; each launch of a nest's kernel is one launch at that kernel's
    buffer types (a fold launches its layers' kernel once per layer).
    """
    find_entry(module, entry)
    realized = realize(module, env, plan, entry=entry)
    nests = {op.site_name: op for op in realized.walk() if isinstance(op, NestOp) and op.kind in PLANNED_KINDS}
    lowered = realized.clone()
    LowerToKernel(entry=entry).apply(presk_context(), lowered)
    kernels = {op.sym_name.data: op for op in lowered.ops if isinstance(op, kernel.KernelOp)}
    counts: dict[str, dict[str, int]] = {}
    for op in lowered.walk():
        if isinstance(op, kernel.LaunchOp):
            site = op.attributes["site"].data  # type: ignore[attr-defined]
            if site in nests:
                name = op.kernel.string_value()
                per_site = counts.setdefault(site, {})
                per_site[name] = per_site.get(name, 0) + 1
    out: list[Nest] = []
    isolated: dict[str, Isolated] = {}
    for site, per_kernel in counts.items():
        shapes: list[tuple[Isolated, int]] = []
        for name, launches in per_kernel.items():
            operand_storage = _element_name(kernels[name].buffers[0])
            iso = isolate(nests[site], operand_storage)
            iso = isolated.setdefault(iso.key, iso)
            shapes.append((iso, launches))
        out.append(Nest(site, nests[site].kind, shapes, nests[site]))
    return out


# --------------------------------------------------------------------------
# Pricing.


def profile_constants(profile: Profile, path: str) -> Constants:
    constants = profile.layout or profile.roofline
    if constants is None:
        raise PreskError(PROFILE_ERROR, f"{path} has no fitted constants: run `presk refit {path}` first")
    return constants


@dataclass
class _Lowered:
    """A point's kernels lowered once with the split left to the executor, for its split variants to share.

    Each entry: the kernel (vectorized, its loops in the order the tile pass
    left them), its launches per launch of the nest, whether the point's split
    applies to it (its layout had a split pending), and its terms when it does
    not (a pack kernel: the same whatever the split).
    """

    kernels: list[tuple[kernel.KernelOp, int, bool, KernelTerms | None]]


SHARED_LOWERINGS = 64
"""Lowerings kept for split variants to share: a space lists a point's splits one after another, so a
few suffice; 64 also covers a nest priced at several shapes in turn."""


@dataclass
class Pricer:
    """Predicted seconds of one launch of a nest at a shape under a point, cached by (shape, point).

    Why a point is not always lowered whole: lowering is the cost of a plan
    (the tile pass's unrolled register tile and the vectorizer's rewrites of
    it, tens of milliseconds), and a split changes no kernel before
    `psk-split`, which only moves the split loop to the top of the nest and
    marks its workers. So a tiled point is lowered once with its split left
    to the executor (not stated: the default `"executor"`, under which `psk-split` moves nothing), and
    each of its splits is that lowering's kernel, cloned, with the split
    applied by `psk-split`'s own `apply_split` (which commutes with
    `psk-vectorize`: the vectorizer rewrites the tile inside the k loop, below
    every loop a split can name). The terms are those of the full lowering
    (`terms`), to the bit: tests/unit/test_plan_static.py checks it point by
    point. Whatever this cannot price exactly (a point a check refuses, the
    row-wise form whose tile pass reads the split, a softmax) is lowered whole.
    """

    constants: Constants
    desc: MachineDesc
    rules: frozenset[str]
    machine: Machine
    cache: dict[tuple[str, str], float | LayoutViolation | PreskError] = field(default_factory=dict)
    lowered: int = 0
    shared: OrderedDict[tuple[str, str], _Lowered | PreskError] = field(default_factory=OrderedDict, repr=False)
    tiles: OrderedDict[tuple[str, str], tuple[ModuleOp, int]] = field(default_factory=OrderedDict, repr=False)
    keep_tiles: bool = field(default=True, repr=False)
    """Whether `_tiled` keeps a copy for other lanes (a copy costs about what the tile pass does): the
    grouped pricing knows when no other lanes follow."""
    store: TermsCache | None = field(default=None, repr=False)
    """The terms kept on disk (`presk.tuning.terms_cache`): a point found there is not lowered."""
    tile_reuses: int | None = field(default=None, repr=False)
    """How many other lanes will reuse a kept tile pass (None: not known, so it is kept until evicted). The
    grouped pricing knows: the last reuse then takes the kept module itself instead of a copy of it."""
    reuses_left: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)

    def cached(self, iso: Isolated, point: Point) -> bool:
        return (iso.key, point_key(point)) in self.cache

    def price(self, iso: Isolated, point: Point) -> float | PreskError:
        """Seconds, or the E7002 the lowering refused the point with."""
        key = (iso.key, point_key(point))
        if key not in self.cache:
            self.cache[key] = self._price(iso, point)
        value = self.cache[key]
        assert not isinstance(value, LayoutViolation)
        return value

    def terms(self, iso: Isolated, point: Point) -> list[tuple[KernelTerms, int]]:
        """Each kernel the point lowers to, with its launches per launch of the nest (a pack: one).

        The reference: the point lowered whole through `presk.pipeline.lower`.
        """
        kernels = lower(iso.module, ISOLATED_FUNCTION, {}, iso.plan(point), fuse_launches=False)
        self.lowered += 1
        out = []
        for k, count in launched_kernels(kernels, site=iso.name):
            out.append((kernel_terms(k, self.desc, default_split(k, self.machine), self.rules), count))
        return out

    def fast_terms(self, iso: Isolated, point: Point, checked: bool = False) -> list[tuple[KernelTerms, int]]:
        """`terms(iso, point)`, from a lowering the point's split variants share where that is exact.

        `checked`: the caller knows the second check accepts `point` at this
        shape (`iso.violation` is None), as `choose`'s legal points are.
        """
        split = point.get("split")
        if "tile" not in point or point.get("form", "tiled") != "tiled" or split is None or split == "executor":
            return self.terms(iso, point)
        if not checked and iso.violation(point, self.machine) is not None:
            return self.terms(iso, point)  # refused: the full lowering raises the check's own E7002
        base = self._shared(iso, point)
        if isinstance(base, PreskError):
            raise base
        layout_machine = target_machine()  # what `presk.pipeline.lower` splits against
        out = []
        for k, count, splits, fixed in base.kernels:
            if not splits:
                assert fixed is not None
                out.append((fixed, count))
                continue
            terms = self._split_terms(k, split, layout_machine)
            if terms is None:
                return self.terms(iso, point)  # refused by psk-split: its error, from the full lowering
            out.append((terms, count))
        return out

    def _split_terms(self, k: kernel.KernelOp, split: Any, layout_machine: Machine) -> KernelTerms | None:
        """The terms of `k` under `split` (None: psk-split refuses it).

        `"none"` and a split at depth 0 move no loop: they only mark the top
        loop's workers, which `kernel_terms` takes as an argument. So they are
        applied to the shared kernel itself and the top loops' attributes put
        back (a clone costs as much as the terms); a deeper split, which moves
        loops, is applied to a clone.
        """
        in_place = split == "none" or (isinstance(split, dict) and split.get("depth") == 0)
        if not in_place:
            variant = k.clone()
            if apply_split(variant, split, layout_machine) is not None:
                return None
            return kernel_terms(variant, self.desc, default_split(variant, self.machine), self.rules)
        tops = [(op, dict(op.attributes)) for op in k.body.block.ops if isinstance(op, scf.ForOp)]
        try:
            if apply_split(k, split, layout_machine) is not None:
                return None
            return kernel_terms(k, self.desc, default_split(k, self.machine), self.rules)
        finally:
            for op, attributes in tops:
                op.attributes = attributes

    def _shared(self, iso: Isolated, point: Point) -> _Lowered | PreskError:
        """The point lowered with its split left to the executor: `presk.pipeline.lower`'s passes, stopped
        to note which kernels the split would apply to."""
        base = {name: value for name, value in point.items() if name != "split"}  # the default: "executor"
        key = (iso.key, point_key(base))
        if key in self.shared:
            self.shared.move_to_end(key)
            return self.shared[key]
        try:
            value: _Lowered | PreskError = self._lower_shared(iso, base)
        except PreskError as error:
            if error.code != "E7002":
                raise
            value = error
        self.shared[key] = value
        while len(self.shared) > SHARED_LOWERINGS:
            self.shared.popitem(last=False)
        return value

    def _lower_shared(self, iso: Isolated, base: Point) -> _Lowered:
        ctx = presk_context()
        layout_machine = target_machine()
        kernels = self._tiled(iso, base)
        splits = {op.sym_name.data for op in kernels.ops if isinstance(op, kernel.KernelOp) and "split" in resolved(op)}
        split_kernels(kernels, layout_machine)  # "executor": consumed, nothing moved
        VectorizeContractions(machine=layout_machine).apply(ctx, kernels)
        self.lowered += 1
        out: list[tuple[kernel.KernelOp, int, bool, KernelTerms | None]] = []
        for k, count in launched_kernels(kernels, host_only=True, site=iso.name):
            applies = k.sym_name.data in splits
            fixed = None if applies else kernel_terms(k, self.desc, default_split(k, self.machine), self.rules)
            out.append((k, count, applies, fixed))
        return _Lowered(out)

    def _tiled(self, iso: Isolated, base: Point) -> ModuleOp:
        """`base` (a point without its split) lowered up to `psk-split`: a module the caller may change.

        Why lanes share it too: up to `psk-split`, lanes are a number on the
        column loops (`psk_kernel.lanes`, which `psk-tile` records when the
        lanes are stated away from their default, and `psk-vectorize` reads),
        and the checks before (the second check, the lowering's guard:
        condition 4) refuse what `fast_terms` sent to the full lowering. So a
        point with lanes above one is the module of another such point of the
        same tile, k-block, order and pack, with that number changed. Lanes of
        one (the default of some tiles) are lowered each time.
        """
        lanes = base.get("lanes")
        wide = isinstance(lanes, int) and not isinstance(lanes, bool) and lanes > 1
        key = (iso.key, point_key({n: v for n, v in base.items() if n != "lanes"}))
        if wide and key in self.tiles:
            self.tiles.move_to_end(key)
            module, _ = self.tiles[key]
            left = self.reuses_left.get(key)
            if left is not None and left <= 1:  # its last user: no copy to keep
                del self.tiles[key]
                del self.reuses_left[key]
                kernels = module
            else:
                kernels = module.clone()
                if left is not None:
                    self.reuses_left[key] = left - 1
            for op in kernels.walk():
                if LANES in op.attributes:
                    op.attributes[LANES] = lanes_attribute(lanes)  # type: ignore[arg-type]
            return kernels
        ctx = presk_context()
        kernels = realize(iso.module, {}, iso.plan(base))
        LowerToKernel(entry=ISOLATED_FUNCTION).apply(ctx, kernels)
        for layout_pass in (FoldEpilogues(), PackOperands()):
            layout_pass.apply(ctx, kernels)
        # psk-softmax-passes rewrites structured softmaxes only: where there is none, its walk over the
        # unrolled tile (after psk-tile) changes nothing, and is skipped.
        softmaxes = any(isinstance(op, StructuredSoftmaxOp) for op in kernels.walk())
        TileContractions().apply(ctx, kernels)
        if softmaxes:
            SoftmaxPasses().apply(ctx, kernels)
        if wide and self.keep_tiles:
            marked = [op.attributes[LANES] for op in kernels.walk() if LANES in op.attributes]
            if marked and all(attr == lanes_attribute(lanes) for attr in marked):  # type: ignore[arg-type]
                self.tiles[key] = (kernels.clone(), lanes)  # type: ignore[assignment]
                if self.tile_reuses is not None:
                    self.reuses_left[key] = self.tile_reuses
                while len(self.tiles) > SHARED_LOWERINGS:
                    evicted, _ = self.tiles.popitem(last=False)
                    self.reuses_left.pop(evicted, None)
        return kernels

    def _price(self, iso: Isolated, point: Point, checked: bool = False) -> float | PreskError:
        terms = self.stored_terms(iso, point, checked)
        if isinstance(terms, PreskError):
            return terms
        return self.predict(terms)

    def predict(self, terms: list[tuple[KernelTerms, int]]) -> float:
        """Seconds of one launch of the nest whose kernels have `terms` (each with its launches)."""
        seconds = predict_many(self.constants, [t for t, _ in terms])
        return float(sum(s * n for s, (_, n) in zip(seconds, terms)))

    def stored_terms(self, iso: Isolated, point: Point, checked: bool = False) -> list[tuple[KernelTerms, int]] | PreskError:
        """`fast_terms`, or the lowering's E7002, from the terms cache when it has them (and put there when not)."""
        key = point_key(point)
        if self.store is not None:
            found = self.store.get(iso.key, key)
            if found is not None:
                return found
        try:
            terms: list[tuple[KernelTerms, int]] | PreskError = self.fast_terms(iso, point, checked)
        except PreskError as error:
            if error.code != "E7002":
                raise
            terms = error
        if self.store is not None:
            self.store.put(iso.key, key, terms)
        return terms


def launched_kernels(
    kernels: ModuleOp, host_only: bool = False, site: str | None = None
) -> list[tuple[kernel.KernelOp, int]]:
    """The kernels the host program launches, in the order of their first launch, with their launches.

    `host_only`: kernels launch nothing, so their bodies (an unrolled tile) need not be walked.
    `site`: only the launches of that nest (its packs included), not those of a value the isolated
    function computes for it (a causal mask).
    """
    by_name = {op.sym_name.data: op for op in kernels.ops if isinstance(op, kernel.KernelOp)}
    launches: dict[str, int] = {}
    for host in kernels.ops:
        if host_only and isinstance(host, kernel.KernelOp):
            continue
        for op in host.walk():
            if isinstance(op, kernel.LaunchOp) and (site is None or op.attributes["site"].data == site):  # type: ignore[attr-defined]
                name = op.kernel.string_value()
                launches[name] = launches.get(name, 0) + 1
    return [(by_name[name], count) for name, count in launches.items()]


# --------------------------------------------------------------------------
# Choosing.


@dataclass
class NestChoice:
    """What `presk plan` chose for one nest, and how sure the model is of it."""

    nest: Nest
    point: Point
    seconds: float
    """Predicted seconds per run of the entry: the nest's launches at each shape times their prices (measured
    seconds, for a nest whose point `presk autotune` measured: `measured_s`)."""
    priced: int
    """Points legal at every shape and priced."""
    refused: int
    """Points of the space some check refused at some shape."""
    within: int
    """Points whose predicted time is within 1 + u of the chosen one's (the chosen one included)."""
    conditions: dict[str, int] = field(default_factory=dict)
    """Refusals by condition (`3`, `4`, ..., `lowering`, and `unmeasured`: in a group the profile lacks)."""
    unmeasured: tuple[str, ...] = ()
    """The groups (machine type/lanes/workers) of the points left unpriced because no calibration sample
    was of them: the plan is the best of the others, and the report says so."""
    prices: tuple[float, ...] = ()
    """Every priced point's predicted seconds per run, in the space's order (`presk plan --plot` draws them)."""
    measured_s: float | None = None
    """Set when `point` is the one `presk autotune` measured best here (`presk.tuning.tuned`): its measured
    seconds per run. Such a nest is not priced (`priced`, `refused` and `within` are 0)."""


def legal_points(nest: Nest, machine: Machine, space: str,
                 store: TermsCache | None = None) -> tuple[list[Point], dict[str, int]]:  # fmt: skip
    """The points of the nest's space legal at every shape (statically), in the space's order, and refusals.

    `store`: the terms cache, which keeps each verdict (the checks are most
    of what a plan whose terms are cached costs)."""
    spaces = [nest_space(iso.site, {}, machine, space) for iso, _ in nest.shapes]
    others = [{point_key(p) for p in s} for s in spaces[1:]]
    legal: list[Point] = []
    conditions: dict[str, int] = {}
    for point in spaces[0]:
        key = point_key(point)
        if not all(key in other for other in others):
            conditions["shape"] = conditions.get("shape", 0) + 1
            continue
        found = next((label for iso, _ in nest.shapes if (label := _verdict(iso, point, key, machine, store))), None)
        if found is not None:
            conditions[found] = conditions.get(found, 0) + 1
            continue
        legal.append(point)
    return legal, conditions


def _verdict(iso: Isolated, point: Point, key: str, machine: Machine, store: TermsCache | None) -> str:
    """The condition `point` breaks at `iso` (`"3"`, `"4"`, ...), or `""`: the cache's, else checked (and kept)."""
    if store is not None:
        known = store.check(iso.key, key)
        if known is not None:
            return known
    found = iso.violation(point, machine)
    verdict = str(found.condition) if found is not None else ""
    if store is not None:
        store.put_check(iso.key, key, verdict)
    return verdict


def choose(
    nests: Sequence[Nest], pricer: Pricer, u: float, space: str = "quick", progress_stream: TextIO | None = None
) -> list[NestChoice]:
    """The cheapest legal point of every nest (launch-weighted over its shapes), with how many come close."""
    if space not in SPACES:
        raise PreskError("E4001", f"--space {space}: expected one of {', '.join(SPACES)}")
    # Nests of the same shapes (an attention's projections) have the same legal points: checked once.
    checked: dict[tuple[str, ...], tuple[list[Point], dict[str, int]]] = {}
    legal = []
    for nest in nests:
        shapes = tuple(iso.key for iso, _ in nest.shapes)
        if shapes not in checked:
            checked[shapes] = legal_points(nest, pricer.machine, space, pricer.store)
        points, conditions = checked[shapes]
        legal.append((points, dict(conditions)))  # `_choose` adds its own refusals to each nest's counts
    todo = unpriced(nests, legal, pricer)
    progress = Progress(len(todo), label="pricing", stream=progress_stream or sys.stderr)
    try:
        todo = price_ahead(nests, legal, todo, pricer, progress)
        return _choose(nests, legal, todo, pricer, u, space, progress)
    finally:
        progress.close()


PARALLEL_MIN = 64
"""Points to price below which the processes are not worth their start."""


def unpriced(nests: Sequence[Nest], legal: Sequence[tuple[list[Point], dict[str, int]]],
             pricer: Pricer) -> set[tuple[str, str]]:  # fmt: skip
    """The (shape, point) keys of `legal` that `pricer` has no price for, once those whose terms the terms
    cache holds are priced from it (the model alone: microseconds each)."""
    todo = {(iso.key, point_key(p)) for nest, (points, _) in zip(nests, legal) for iso, _ in nest.shapes
            for p in points if not pricer.cached(iso, p)}  # fmt: skip
    if pricer.store is not None:
        todo -= _from_store(nests, legal, todo, pricer)
    return todo


def price_ahead(nests: Sequence[Nest], legal: Sequence[tuple[list[Point], dict[str, int]]],
                todo: set[tuple[str, str]], pricer: Pricer, progress: Progress) -> set[tuple[str, str]]:  # fmt: skip
    """Price `todo` (`unpriced`'s) over `plan_jobs()` processes, when there are enough points to repay them;
    the keys still unpriced, which the caller prices one by one (and says which nest a failure was)."""
    if len(todo) < PARALLEL_MIN:
        return todo
    _price_groups(nests, legal, todo, pricer, plan_jobs(), progress)
    return {key for key in todo if key not in pricer.cache}


def _from_store(nests: Sequence[Nest], legal: Sequence[tuple[list[Point], dict[str, int]]],
                todo: set[tuple[str, str]], pricer: Pricer) -> set[tuple[str, str]]:  # fmt: skip
    """Price the points of `todo` whose terms the cache holds (the model alone: microseconds each); the keys
    priced. A point the model cannot price (a group the profile lacks) is left for `_choose`, which says
    which nest it was."""
    assert pricer.store is not None
    done: set[tuple[str, str]] = set()
    for nest, (points, _) in zip(nests, legal):
        for point in points:
            for iso, _ in nest.shapes:
                key = (iso.key, point_key(point))
                if key not in todo or key in done:
                    continue
                terms = pricer.store.get(*key)
                if terms is None:
                    continue
                try:
                    pricer.cache[key] = terms if isinstance(terms, PreskError) else pricer.predict(terms)
                except PreskError:
                    continue
                done.add(key)
    return done


def plan_jobs() -> int:
    """Processes pricing points: the CPUs this process may run on, or `PRESK_PLAN_JOBS` (1: none).

    Pricing forks, so it runs in this process alone whenever another thread
    is alive (a split's worker pool from an earlier entry of `presk bench
    --plan auto`): a fork copies the locks those threads hold, and a child
    that needs one would wait for ever."""
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return 1
    stated = os.environ.get("PRESK_PLAN_JOBS", "")
    if stated.strip():
        try:
            return max(1, int(stated))
        except ValueError:
            raise PreskError("E4001", f"PRESK_PLAN_JOBS={stated}: expected a number of processes") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


_FORKED: tuple[Pricer, dict[str, Isolated]] | None = None
"""What the forked pricing processes inherit: the pricer and the shapes, by key."""


def _group_key(point: Point) -> str:
    """Points that share lowerings (`Pricer.fast_terms`, `Pricer._tiled`): a tiled point's splits, and its
    lanes above one."""
    if "tile" not in point:
        return point_key(point)
    lanes = point.get("lanes")
    wide = isinstance(lanes, int) and not isinstance(lanes, bool) and lanes > 1
    return point_key({n: v for n, v in point.items() if n != "split" and not (wide and n == "lanes")})


def _price_groups(
    nests: Sequence[Nest],
    legal: Sequence[tuple[list[Point], dict[str, int]]],
    todo: set[tuple[str, str]],
    pricer: Pricer,
    jobs: int,
    progress: Progress,
) -> None:
    """Fill `pricer.cache` with the prices of `todo`, points that share lowerings together, over `jobs`
    forked processes when there are more than one.

    Why in groups: the space lists lanes outside k-blocks, orders and packs,
    so in its order the points that share a lowering are far apart; grouped,
    one process prices them one after another and keeps one lowering at a
    time. The prices are the serial ones (each is a function of its point
    alone), so the plan is the same whatever the scheduling; a point whose
    pricing fails other than by the lowering's E7002 (a group the profile
    has no constants for) is left for `_choose`, which prices it again and
    says which nest it was.
    """
    global _FORKED
    isos: dict[str, Isolated] = {}
    groups: dict[tuple[str, str], list[Point]] = {}
    sites: dict[tuple[str, str], str] = {}
    for nest, (points, _) in zip(nests, legal):
        for point in points:
            for iso, _ in nest.shapes:
                key = (iso.key, point_key(point))
                if key not in todo or key in sites:
                    continue
                isos.setdefault(iso.key, iso)
                sites[key] = nest.site
                groups.setdefault((iso.key, _group_key(point)), []).append(point)
    tasks = [(iso_key, points) for (iso_key, _), points in groups.items()]
    batch = max(1, min(4, len(tasks) // (jobs * 16)))
    chunks = [tasks[i : i + batch] for i in range(0, len(tasks), batch)]
    _FORKED = (pricer, isos)
    try:
        if jobs > 1:
            with multiprocessing.get_context("fork").Pool(jobs, initializer=_start_pricing_worker) as pool:
                results: Iterable[tuple[list[tuple[str, str, Any]], int, dict[str, dict[str, Any]]]]
                results = pool.imap(_price_chunk, chunks)
                _merge(results, pricer, sites, progress)
        else:  # lowerings counted here already; the terms handed back to be stored again (`_price_chunk`)
            _merge(((priced, 0, stored) for priced, _, stored in map(_price_chunk, chunks)), pricer, sites, progress)
    finally:
        _FORKED = None


def _merge(
    results: Iterable[tuple[list[tuple[str, str, Any]], int, dict[str, dict[str, Any]]]], pricer: Pricer,
    sites: dict[tuple[str, str], str], progress: Progress,
) -> None:  # fmt: skip
    for priced, lowered, stored in results:
        pricer.lowered += lowered
        for iso_key, key, value in priced:
            pricer.cache[(iso_key, key)] = value if isinstance(value, float) else PreskError(*value)
            progress.step(sites[(iso_key, key)])
        if pricer.store is not None:
            for iso_key, entries in stored.items():
                for key, entry in entries.items():
                    pricer.store.put_encoded(iso_key, key, entry)


def _start_pricing_worker() -> None:
    """A forked pricing process: the signals' default actions, and a quiet collector (`_quiet_collector`).

    The pool ends its workers with SIGTERM when its `with` closes
    (`Pool.terminate`) and counts on them dying of it. Through fork they
    inherit the handler of the presk command that started them
    (`presk.cli.guard`: SIGTERM raises `Terminated`), so a worker unwound
    instead, printing a traceback, and one that took the signal as it
    acquired the task queue's lock (the traceback's last frame) could unwind
    without releasing it: its sibling then waited for that lock forever, and
    `presk plan` with it (one run in about thirty, repeated in a loop). So
    SIGTERM kills a worker again, and Ctrl-C, which reaches every process
    of the terminal's group, is left to the parent: it leaves the `with`,
    which terminates the workers.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _quiet_collector()


def _quiet_collector() -> None:
    """In a forked process: no automatic cyclic collection, and the inherited objects out of its reach.

    Lowering allocates IR by the thousand, so the collector would otherwise
    run every few hundred objects over everything live (a fifth of the time).
    `_price_chunk` collects once at the end of each chunk instead, which
    bounds the memory the IR's cycles hold; prices do not depend on it.
    """
    gc.freeze()
    gc.disable()


def _price_chunk(
    chunk: list[tuple[str, list[Point]]],
) -> tuple[list[tuple[str, str, Any]], int, dict[str, dict[str, Any]]]:
    """The prices of `chunk`'s points ((code, message) for a refusal, as a forked process returns it), the
    lowerings, and the terms cache's new entries (a forked process's cache is its own copy)."""
    assert _FORKED is not None
    pricer, isos = _FORKED
    before = pricer.lowered
    out: list[tuple[str, str, Any]] = []
    for iso_key, points in chunk:
        wide = {p.get("lanes") for p in points if isinstance(p.get("lanes"), int) and p["lanes"] > 1}
        pricer.keep_tiles = len(wide) > 1
        pricer.tile_reuses = len(wide) - 1
        for point in points:
            try:
                value = pricer._price(isos[iso_key], point, checked=True)  # legal: `_legal` checked every shape
            except PreskError:
                continue
            out.append((iso_key, point_key(point), value if isinstance(value, float) else (value.code, value.message)))
    pricer.shared.clear()
    pricer.tiles.clear()
    pricer.reuses_left.clear()
    pricer.keep_tiles = True
    pricer.tile_reuses = None
    stored: dict[str, dict[str, Any]] = {}
    if pricer.store is not None:
        stored, pricer.store.added = pricer.store.added, {}
    if not gc.isenabled():
        gc.collect()
    return out, pricer.lowered - before, stored


def _choose(
    nests: Sequence[Nest],
    legal: Sequence[tuple[list[Point], dict[str, int]]],
    todo: set[tuple[str, str]],
    pricer: Pricer,
    u: float,
    space: str,
    progress: Progress,
) -> list[NestChoice]:
    seen: set[tuple[str, str]] = set()
    choices = []
    for nest, (points, conditions) in zip(nests, legal):
        priced: list[tuple[Point, float]] = []
        unmeasured: dict[str, str] = {}  # group -> the first message of a point in it, which the profile lacks
        for point in points:
            total: float | None = 0.0
            for iso, launches in nest.shapes:
                key = (iso.key, point_key(point))
                fresh = key in todo and key not in seen
                try:
                    value = pricer.price(iso, point)
                except UnmeasuredGroup as error:
                    unmeasured.setdefault(error.group, f"{iso.describe()}, layout {json.dumps(point)}: {error.message}")
                    value = error
                except PreskError as error:
                    if error.code == PROFILE_ERROR:
                        raise PreskError(PROFILE_ERROR, f"nest \"{nest.site}\" ({iso.describe()}), layout "
                                         f"{json.dumps(point)}: {error.message}") from None  # fmt: skip
                    raise
                if fresh:
                    seen.add(key)
                    progress.step(nest.site)
                if isinstance(value, PreskError):
                    total = None
                    condition = "unmeasured" if isinstance(value, UnmeasuredGroup) else "lowering"
                    conditions[condition] = conditions.get(condition, 0) + 1
                    break
                total += launches * value  # type: ignore[operator]
            if total is not None:
                priced.append((point, total))
        if not priced and unmeasured:
            raise PreskError(PROFILE_ERROR, f"nest \"{nest.site}\": no point of its {space} space can be priced: "
                             f"{next(iter(unmeasured.values()))}")  # fmt: skip
        if not priced:
            raise PreskError("E7002", f"nest \"{nest.site}\": no point of its {space} space is legal at every shape "
                             "it is launched at")  # fmt: skip
        best_point, best = min(priced, key=lambda pair: pair[1])  # min keeps the first of equals
        within = sum(1 for _, seconds in priced if seconds <= best * (1 + u))
        refused = sum(conditions.values())
        choices.append(NestChoice(nest, best_point, best, len(priced), refused, within, dict(conditions),
                                  tuple(sorted(unmeasured)), tuple(seconds for _, seconds in priced)))  # fmt: skip
    return choices


# --------------------------------------------------------------------------
# The command's work, and its report.


@dataclass
class PlanResult:
    plan: dict[str, Any]
    choices: list[NestChoice]
    u: float
    lowered: int
    """Points priced (a nest shape and a point each), as many as the full lowering lowered."""
    profile_path: str
    space: str
    lowerings: int = 0
    """Lowerings they took (`Pricer.lowered`): a point's splits and its lanes above one share them."""
    stored: int = 0
    """Points whose terms came from the terms cache (`presk.tuning.terms_cache`): not lowered at all."""


def profile_pricer(profile: Profile, path: str, machine: Machine, keep_terms: bool) -> Pricer:
    """The pricer of `profile`'s layout model on `machine`, under the profile's machine description and rules.

    With `keep_terms`, the terms are read from and written to the presk cache
    (`presk.tuning.terms_cache`), so a point priced once under the same
    description and rules is not lowered again; `presk autotune` does without,
    so that its pricing time is what pricing costs.
    """
    desc = profile.machine_desc or MachineDesc.of(machine)
    rules = frozenset(profile.rules)
    store = TermsCache.open(desc, rules, machine, target_machine()) if keep_terms else None
    return Pricer(profile_constants(profile, path), desc, rules, machine, store=store)


def make_plan(
    module: ModuleOp,
    entry: str,
    env: Mapping[str, int],
    realization: str,
    profile_path: str,
    space: str = "quick",
    warn: TextIO | None = None,
    plan_dir: str = ".",
    tuned: Mapping[str, Tuned] | None = None,
) -> PlanResult:
    """The plan of `entry` at `env` under `profile_path`'s model (see the module docstring).

    `tuned` (`--plan auto`: `presk.tuning.tuned.read_tuned`) maps a nest's key to the point `presk autotune`
    measured best for it on this machine; a nest it holds takes that point where it is legal at every shape."""
    find_entry(module, entry)
    if space not in SPACES:
        raise PreskError("E4001", f"--space {space}: expected one of {', '.join(SPACES)}")
    profile = load_profile(profile_path)
    profile_constants(profile, profile_path)  # a profile without fitted constants is refused before the capture
    machine = target_machine()
    if profile.machine and profile.machine != machine.key():
        (warn or sys.stderr).write(
            f"presk plan: warning: {profile_path} was measured on another machine ({cpu_of_key(profile.machine)}); "
            f"this one is {machine.cpu_name}: the plan is advisory here\n"
        )
    if stale := stale_samples(profile.samples):
        (warn or sys.stderr).write(
            f"presk plan: note: {stale} samples of {profile_path} were priced by another version of presk; "
            f"`presk refit {profile_path} --relower` prices them as this one does\n"
        )
    base = parse_plan({"realization": realization}, "--realize")
    nests = capture(module, entry, env, base)
    pricer = profile_pricer(profile, profile_path, machine, keep_terms=True)
    store = pricer.store
    u = profile.u if profile.u is not None else 0.0
    measured = {nest.site: line for nest in nests
                if (line := (tuned or {}).get(nest.key)) is not None
                and all(iso.violation(line.point, machine) is None for iso, _ in nest.shapes)}  # fmt: skip
    try:  # a nest measured here is not priced: its measurement is what the plan runs
        priced = iter(choose([n for n in nests if n.site not in measured], pricer, u, space))
    finally:  # what was lowered is kept, even when an error or Ctrl-C stops the choice
        if store is not None:
            store.save()
    choices = [next(priced) if nest.site not in measured else _measured_choice(nest, measured[nest.site])
               for nest in nests]  # fmt: skip
    for choice in choices:
        choice.point = with_epilogue(choice.nest, choice.point, machine)
    plan: dict[str, Any] = {
        "realization": _relative_realization(realization, plan_dir),
        "profile": profile_path,
        "layout": {choice.nest.site: choice.point for choice in choices},
    }
    return PlanResult(plan, choices, u, len(pricer.cache), profile_path, space, pricer.lowered,
                      store.hits if store is not None else 0)  # fmt: skip


def _measured_choice(nest: Nest, line: Tuned) -> NestChoice:
    """The choice of a nest `presk autotune` measured here: its best point, at its measured time, nothing priced."""
    return NestChoice(nest, line.point, line.seconds, priced=0, refused=0, within=0, measured_s=line.seconds)


def _relative_realization(realization: str, plan_dir: str) -> str:
    """`@FILE` as the plan reads it: relative to the plan's folder, not to where the command ran."""
    if not realization.startswith("@"):
        return realization
    return "@" + os.path.relpath(os.path.abspath(realization[1:]), os.path.abspath(plan_dir or "."))


def plan_text(plan: Mapping[str, Any]) -> str:
    """The plan as JSON, one line per nest's layout, so that a plan of thirty nests reads as a table."""
    head = {k: v for k, v in plan.items() if k != "layout"}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    layout = list(plan.get("layout", {}).items())
    if not layout:
        return "\n".join(lines + ['  "layout": {}', "}"]) + "\n"
    lines.append('  "layout": {')
    lines += [f"    {json.dumps(site)}: {json.dumps(point)}{',' if i < len(layout) - 1 else ''}"
              for i, (site, point) in enumerate(layout)]  # fmt: skip
    return "\n".join(lines + ["  }", "}"]) + "\n"


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} µs"


def report(result: PlanResult) -> Iterable[str]:
    """Per nest: its launches and shapes, the point chosen, its predicted time, and how many come close."""
    cached = f" and the terms cache ({result.stored} points)" if result.stored else ""
    yield (f"{len(result.choices)} nests, space {result.space}, profile {result.profile_path} "
           f"(u = {result.u:.3g}); {result.lowered} points priced from {result.lowerings} lowerings{cached}")  # fmt: skip
    total = 0.0
    for choice in result.choices:
        nest = choice.nest
        total += choice.seconds
        shapes = "; ".join(f"{n} × {iso.describe()}" for iso, n in nest.shapes)
        yield f"{nest.site} ({nest.kind}): {shapes}"
        yield f"  {json.dumps(choice.point)}"
        refused = ", ".join(f"{k}: {v}" for k, v in sorted(choice.conditions.items()))
        yield (f"  predicted {_time(choice.seconds / max(nest.launches, 1))} a launch, {_time(choice.seconds)} a run; "
               f"{choice.within} of {choice.priced} points within 1 + u; {choice.refused} refused"
               + (f" ({refused})" if refused else ""))  # fmt: skip
        if choice.unmeasured:
            yield (f"  warning: {choice.conditions['unmeasured']} points not priced: the profile measured no kernel of "
                   f"{', '.join(choice.unmeasured)}; calibrate them to weigh those points too")  # fmt: skip
    yield f"predicted for the planned nests: {_time(total)} a run"
