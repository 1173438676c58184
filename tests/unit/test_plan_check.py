"""The plan's first check, fuzzed: random plans on corpus programs, against an oracle.

The seed (§"Well-formedness"): before anything runs, every nest a plan names
exists and is a nest, and states only decisions its kind has, with values
in their domains (§"The layout decisions", the table); an epilogue only on a
contraction whose value one add (beyond the seed: or mul) alone reads, launched by itself, of the
product's storage type, and not the function's result. A violation is
E7002 (E7001 for the realization), never ignored and never another
exception.

`Oracle` restates those rules from the seed's table, independently of
`presk.dialects.psk_realize_layout` and `epilogue_violation`: what kind
each nest is (read off its primitive), each decision's domain, and the
epilogue's conditions (read off the fused program). Every generated plan
(`PLANS`, seeded, so every run sees the same ones) is applied with
`apply_plan` to a fresh copy of its fused program, and the outcome must be
the oracle's: accepted exactly when the oracle finds no fault, and refused
with a code of one of the faults it finds (and, when every fault is a
nest's, placed at one of those nests and naming it and one of its faulty
decisions). 600 random plans come in three flavours: clean (only valid
decisions of the right kinds on existing nests: they must be accepted), one
fault of `FAULTS` injected into a clean plan (refused with that fault's
code, naming the nest and the decision when it is a nest's), and wild
(random names — nests, near misses, garbage —, random decisions including
unknown ones, random JSON values of every type, half of them drawn from the
domains). `systematic` adds the cases no sample may miss: every decision on
every kind of nest, every near miss of every domain, every domain value,
every order against every k-block, and the epilogue on every contraction of
every program, uniform and with the product typed apart from its add.

Where the seed leaves a choice open, the oracle follows the implementation's
documented one: the lanes' domain is every register width (1, 2, 4, 8, 16;
whether the machine has it is a launch condition), a JSON float is no
integer (4.0 is not 4), and `"epilogue": false` (the default) may be stated
on any contraction.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from presk.diagnostics import PlanWarning, PreskError
from presk.dialects.psk_core_types import RealType, TensorType
from presk.dialects.psk_realize import SiteOp
from presk.ir.context import presk_context
from presk.ir.names import binding_names
from presk.ir.parse import parse_module
from presk.ir.print import print_module
from presk.passes.fuse import FuseElementwise
from presk.passes.realize import RealizeSites, apply_plan
from presk.plans import parse_plan

ROOT = Path(__file__).resolve().parents[2]
SEED = 20240607
PLAN_COUNT = 600

SMALL = """
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!B = !psk_core.tensor<[j: 16]>
!N = !psk_core.tensor<[n: 2, i: 4, j: 16]>
!W3 = !psk_core.tensor<[k: 8, j: 16, n: 2]>
!I = !psk_core.tensor<[i: 4]>
!R = !psk_core.real
!Q = !psk_core.tensor<[b: 2, h: 2, s: 8, d: 4]>
!K = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!V = !psk_core.tensor<[b: 2, h: 2, t: 8, d: 4]>
!S = !psk_core.tensor<[b: 2, h: 2, s: 8, t: 8]>
!M = !psk_core.tensor<[s: 8, t: 8]>
!Tr = !psk_core.tensor<[j: 16, i: 4]>

func.func @linear(%a: !A, %w: !W, %b: !B) -> !O {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %b, %0 : !O
  %2 = psk_core.softmax %1 [j] : !O
  func.return %2 : !O
}
func.func @fused(%a: !A, %w: !W, %b: !B) -> !O {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  %2 = psk_core.exp %1 : !O
  func.return %2 : !O
}
func.func @twice(%a: !A, %w: !W, %b: !B) -> (!O, !O) {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  %2 = psk_core.mul %0, %b : !O
  func.return %1, %2 : !O, !O
}
func.func @result(%a: !A, %w: !W, %b: !B) -> (!O, !O) {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  func.return %0, %1 : !O, !O
}
func.func @real(%a: !A, %w: !W, %c: !R) -> !O {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %c, %0 : !O
  func.return %1 : !O
}
func.func @wide(%a: !A, %w: !W, %x: !N) -> !N {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %x : !N
  func.return %1 : !N
}
func.func @attend(%q: !Q, %k: !K, %v: !V, %m: !M) -> !Q {
  %0 = psk_core.ein %q[b, h, s, d], %k[b, h, t, d] : !S
  %1 = psk_core.add %0, %m : !S
  %2 = psk_core.softmax %1 [t] : !S
  %3 = psk_core.ein %2[b, h, s, t], %v[b, h, t, d] : !Q
  %4 = psk_core.add %3, %q : !Q
  func.return %4 : !Q
}
func.func @others(%a: !A, %w: !W, %w3: !W3, %x: !O) -> (!O, !I) {
  %0 = psk_core.dot %a, %w3 : !psk_core.tensor<[i: 4, j: 16, n: 2]>
  %1 = psk_core.sum %0 [n] : !O
  %2 = psk_core.ein %a[i, k], %w[k, j] : !Tr
  %3 = psk_core.ein %2[j, i] : !O
  %4 = psk_core.add %1, %3 : !O
  %5 = psk_core.sum %x [j] : !I
  func.return %4, %5 : !O, !I
}
"""
"""A program with every epilogue situation: accepted (linear, attend's two eins) and not."""

PROGRAMS: dict[str, str] = {
    "small": "<small>",
    "gpt": "corpus/nlp/gpt.mlir",
    "minigpt": "corpus/minigpt.mlir",
    "mlp": "corpus/mlp.mlir",
    "attention": "corpus/attention.mlir",
    "layernorm": "corpus/layernorm.mlir",
}
PROGRAM_WEIGHTS = {"small": 4, "gpt": 4, "minigpt": 1, "mlp": 2, "attention": 2, "layernorm": 1}


# ---------------------------------------------------------------------------
# The programs: fused once; every plan is applied to a fresh copy.


@dataclass
class Program:
    name: str
    path: str
    fused: ModuleOp
    sites: dict[str, SiteOp]
    bindings: list[str]
    """Every `<function>/%<binding>` of the PSK-Core program: nests, and group members, views, fields, arguments."""

    def copy(self) -> ModuleOp:
        return self.fused.clone()


@cache
def program(name: str) -> Program:
    ctx = presk_context()
    path = PROGRAMS[name]
    text = SMALL if path == "<small>" else (ROOT / path).read_text()
    parsed = parse_module(ctx, text, path)
    parsed.verify()
    functions = [f for f in parsed.module.walk() if isinstance(f, FuncOp)]
    bindings = sorted({f"{f.sym_name.data}/%{n}" for f in functions for n in binding_names(f).values()})
    FuseElementwise().apply(ctx, parsed.module)
    sites = {op.site_name: op for op in parsed.module.walk() if isinstance(op, SiteOp)}
    return Program(name, path, parsed.module, sites, bindings)


# ---------------------------------------------------------------------------
# The oracle: the seed's table and conditions, restated.

CONTRACTION_DECISIONS = ("form", "tile", "kblock", "jblock", "order", "lanes", "split", "pack", "epilogue")
KIND_DECISIONS = {"contraction": CONTRACTION_DECISIONS, "softmax": ("passes", "split"), "other": ("split",)}
ALL_DECISIONS = ("form", "tile", "kblock", "jblock", "order", "lanes", "split", "pack", "passes", "epilogue")
REALIZATION_NAMES = ("f64", "f32", "bf16")


def is_int(v: Any) -> bool:
    return type(v) is int


def _order_ok(v: Any) -> bool:
    return isinstance(v, str) and (v in ("IJ", "JI") or (len(v) == 3 and sorted(v) == ["I", "J", "K"]))


DOMAIN: dict[str, Callable[[Any], bool]] = {
    "form": lambda v: isinstance(v, str) and v in ("tiled", "row-wise"),
    "tile": lambda v: isinstance(v, list)
    and len(v) == 2
    and all(is_int(x) for x in v)
    and (v == [1, 1] or (v[0] in (1, 2, 4, 8) and v[1] in (4, 8, 16, 32))),
    "kblock": lambda v: (isinstance(v, str) and v == "none") or (is_int(v) and v in (32, 128)),
    "jblock": lambda v: (isinstance(v, str) and v == "none") or (is_int(v) and v in (256, 512, 1024)),
    "order": _order_ok,
    "lanes": lambda v: is_int(v) and v in (1, 2, 4, 8, 16),
    "split": lambda v: (isinstance(v, str) and v == "none")
    or (
        isinstance(v, dict)
        and set(v) == {"depth", "workers"}
        and is_int(v["depth"])
        and 0 <= v["depth"] <= 2
        and is_int(v["workers"])
        and v["workers"] >= 1
    ),
    "pack": lambda v: isinstance(v, bool),
    "epilogue": lambda v: isinstance(v, bool),
    "passes": lambda v: is_int(v) and v in (2, 3),
}


def oracle_kind(site: SiteOp) -> str:
    """Contraction, softmax or other, read off the primitive (the seed's §"The layout decisions")."""
    if site.name == "psk_realize.group":
        return "other"
    prim = next(iter(site.body.block.ops))
    if prim.name == "psk_core.softmax":
        return "softmax"
    if prim.name == "psk_core.dot":
        x, w = (v.type for v in prim.operands)
        ok = isinstance(x, TensorType) and isinstance(w, TensorType) and len(w.names) == 2 and len(x.names) >= 2
        return "contraction" if ok else "other"
    if prim.name == "psk_core.ein" and len(prim.operands) == 2:
        out = list(prim.results[0].type.names)
        a, b = ([s.data for s in labels] for labels in prim.properties["labels"].data)
        summed = {n for n in a + b if n not in out}
        if len(summed) != 1 or len(out) < 2:
            return "other"
        (k,) = summed
        *outer, i, j = out
        b_outer = b[:-2]
        in_order = [n for n in outer if n in b_outer] == b_outer
        if a == [*outer, i, k] and b[-2:] in ([k, j], [j, k]) and in_order:
            return "contraction"
    return "other"


def _uses(op: Operation) -> list[tuple[Operation, int]]:
    return [(u.operation, u.index) for u in op.results[0].uses]


def epilogue_ok(site: SiteOp, storage_of: Callable[[str], str]) -> bool:
    """The seed's conditions on the product whose nest states "epilogue": true; beyond the seed, a mul may take
    the add's place, its other operand a tensor or a real."""
    uses = _uses(site)
    if len(uses) != 1:
        return False
    add, index = uses[0]
    group = add.parent_op()
    if add.name not in ("psk_core.add", "psk_core.mul") or group is None or group.name != "psk_realize.group":
        return False
    members = [op for op in group.body.block.ops if op.name != "psk_realize.yield"]  # type: ignore[attr-defined]
    other = add.operands[1 - index]
    return (
        len(members) == 1
        and (isinstance(other.type, TensorType) or (add.name == "psk_core.mul" and isinstance(other.type, RealType)))
        and add.results[0].type == site.results[0].type
        and storage_of(site.site_name) == storage_of(group.site_name)  # type: ignore[attr-defined]
    )


@dataclass
class Verdict:
    codes: set[str] = field(default_factory=set)
    """The codes of the faults found (empty: the plan is accepted)."""
    nest_faults: dict[str, set[str]] = field(default_factory=dict)
    """Existing nest -> the decisions at fault on it."""
    plan_level: bool = False
    """Whether a fault is the plan's (its shape, its realization, a nest that is none)."""

    @property
    def accepted(self) -> bool:
        return not self.codes


def oracle(prog: Program, data: Any) -> Verdict:
    verdict = Verdict()

    def plan_fault(code: str) -> None:
        verdict.codes.add(code)
        verdict.plan_level = True

    if not isinstance(data, dict):
        plan_fault("E7002")
        return verdict
    if set(data) - {"realization", "profile", "layout"} or "realization" not in data:
        plan_fault("E7002")
    if "profile" in data and not isinstance(data["profile"], str):
        plan_fault("E7002")
    layout = data.get("layout", {})
    if not isinstance(layout, dict) or any(not isinstance(d, dict) for d in layout.values()):
        plan_fault("E7002")
        layout = {}
    realization = data.get("realization", "f64")
    record: dict[str, str] = {}
    if isinstance(realization, str):
        if realization not in REALIZATION_NAMES:
            plan_fault("E7001")  # a name that is none, or an @FILE the fuzz never writes
        default = realization
    elif isinstance(realization, dict):
        if any(not (isinstance(t, str) and t in REALIZATION_NAMES) for t in realization.values()):
            plan_fault("E7001")
        if any(s != "default" and s not in prog.sites for s in realization):
            plan_fault("E7001")
        default = realization.get("default", "f64")
        record = {s: t for s, t in realization.items() if s != "default"}
    else:
        plan_fault("E7001")
        default = "f64"

    def storage_of(site: str) -> str:
        return record.get(site, default)

    for nest, decisions in layout.items():
        if nest not in prog.sites:
            plan_fault("E7002")
            continue
        site = prog.sites[nest]
        kind = oracle_kind(site)
        faults = set()
        for name, value in decisions.items():
            if name not in ALL_DECISIONS or name not in KIND_DECISIONS[kind] or not DOMAIN[name](value):
                faults.add(name)
        if "order" in decisions and not faults & {"order", "kblock"}:
            blocked = decisions.get("kblock", "none") != "none"
            if blocked != (len(decisions["order"]) == 3):
                faults.add("order")
        if decisions.get("epilogue") is True and not faults and not epilogue_ok(site, storage_of):
            faults.add("epilogue")
        if faults:
            verdict.codes.add("E7002")
            verdict.nest_faults[nest] = faults
    return verdict


# ---------------------------------------------------------------------------
# Random plans.

STRINGS = (
    "tiled", "row-wise", "Tiled", "rowwise", "none", "None", "IJ", "JI", "IJK", "KJI", "IK", "ij", "IJJ",
    "executor", "widest", "at launch", "true", "4", "32", "", " ", "\u0133", "\x00", "f32", "{}",
)  # fmt: skip
NUMBERS = (0, 1, 2, 3, 4, 5, 8, 16, 32, 64, 128, -1, -4, 2**40)
FLOATS = (4.0, 1.0, 0.5, 32.0, -0.0, 1e300, math.inf)
UNKNOWN_DECISIONS = ("tiles", "Tile", "vector", "vectorize", "threads", "", "default", "epilog", "pass", "lane", "TILE", "k_block")


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(("null", "bool", "int", "float", "str", "list", "dict") if depth < 2 else ("null", "bool", "int", "str"))
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice(NUMBERS)
    if kind == "float":
        return rng.choice(FLOATS)
    if kind == "str":
        return rng.choice(STRINGS)
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.choice((0, 1, 2, 2, 2, 3)))]
    keys = rng.sample(("depth", "workers", "m", "n", "axis", ""), rng.choice((0, 1, 2, 2, 3)))
    return {key: random_json(rng, depth + 1) for key in keys}


def valid_value(rng: random.Random, decision: str, decisions: dict[str, Any]) -> Any:
    """A value of the decision's domain (an order consistent with the k-block stated so far)."""
    if decision == "form":
        return rng.choice(("tiled", "row-wise"))
    if decision == "tile":
        return rng.choice(([1, 1], [rng.choice((1, 2, 4, 8)), rng.choice((4, 8, 16, 32))]))
    if decision == "kblock":
        return rng.choice(("none", 32, 128))
    if decision == "jblock":
        return rng.choice(("none", 256, 512, 1024))
    if decision == "order":
        if decisions.get("kblock", "none") != "none":
            return rng.choice(("IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI"))
        return rng.choice(("IJ", "JI"))
    if decision == "lanes":
        return rng.choice((1, 2, 4, 8, 16))
    if decision == "split":
        return rng.choice(("none", {"depth": rng.choice((0, 1, 2)), "workers": rng.choice((1, 2, 7, 64))}))
    if decision == "passes":
        return rng.choice((2, 3))
    return rng.random() < 0.5  # pack, epilogue


def invalid_value(rng: random.Random, decision: str) -> Any:
    """A value outside the decision's domain: a near miss, or any JSON value that is none."""
    near = {
        "form": ["Tiled", "rowwise", "row_wise", 1, None],
        "tile": [[3, 8], [1, 2], [16, 8], [2, 1], [4], [1, 8, 1], [1.0, 8], [True, 8], "1x8", [0, 4], 8],
        "kblock": [64, 0, "32", "None", 32.0, True, None, [32]],
        "jblock": [128, 0, 2048, "512", 512.0, True, None, [512]],
        "order": ["IK", "ij", "IJJ", "IJKI", 12, ["I", "J"], None],
        "lanes": [3, 0, 32, -4, "4", 4.0, True, None, "widest"],
        "split": ["auto", "executor", 2, {"depth": 1}, {"depth": 3, "workers": 2}, {"depth": 0, "workers": 0},
                  {"depth": 1, "workers": 2, "axis": 0}, {"depth": 1.0, "workers": 2}, {"depth": 1, "workers": True}, None],
        "pack": [1, 0, "true", None, [True]],
        "passes": [1, 4, 0, "2", 2.0, True, None],
        "epilogue": [1, "true", "yes", None, {"add": True}],
    }  # fmt: skip
    while True:
        value = rng.choice(near[decision]) if rng.random() < 0.7 else random_json(rng)
        if not DOMAIN[decision](value):
            return value


def near_miss(rng: random.Random, prog: Program, site: str) -> str:
    function, _, binding = site.partition("/%")
    options = [
        f"{function}/%{int(binding) + rng.choice((1, 2, 50))}" if binding.isdigit() else f"{function}/%{binding}x",
        f"{function.lower()}/%{binding}",
        f"{function}%{binding}",
        f"{function}/{binding}",
        f"{function}/% {binding}",
        f"{function}/%{binding} ",
        f"{function}.x/%{binding}",
        f"/%{binding}",
        f"{function}/%",
        function,
        f"%{binding}",
        rng.choice(prog.bindings),  # a value of the program: a nest, or a group member, a view, a field, ...
    ]
    return rng.choice(options)


GARBAGE_NAMES = ("", " ", "/%", "%", "\u00e9/%0", "a/%b/%c", "nope/%1", "main/%0", "\n", "GPT.apply/%-1", "x" * 200)


def random_name(rng: random.Random, prog: Program) -> str:
    site = rng.choice(list(prog.sites))
    roll = rng.random()
    if roll < 0.55:
        return site
    if roll < 0.85:
        return near_miss(rng, prog, site)
    return rng.choice(GARBAGE_NAMES)


def clean_layout(rng: random.Random, prog: Program, storage_of: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """Only existing nests, only decisions of their kinds, only values of the domains."""
    layout: dict[str, dict[str, Any]] = {}
    for nest in rng.sample(list(prog.sites), min(len(prog.sites), rng.choice((0, 1, 2, 3, 4, 6)))):
        site = prog.sites[nest]
        names = list(KIND_DECISIONS[oracle_kind(site)])
        decisions: dict[str, Any] = {}
        for name in sorted(rng.sample(names, rng.randint(0, len(names))), key=ALL_DECISIONS.index):
            if name == "epilogue":
                decisions[name] = epilogue_ok(site, storage_of) and rng.random() < 0.8
            else:
                decisions[name] = valid_value(rng, name, decisions)
        layout[nest] = decisions
    return layout


def clean_realization(rng: random.Random, prog: Program) -> Any:
    if rng.random() < 0.7:
        return rng.choice(REALIZATION_NAMES)
    record: dict[str, str] = {"default": rng.choice(REALIZATION_NAMES)} if rng.random() < 0.7 else {}
    for site in rng.sample(list(prog.sites), min(2, len(prog.sites))):
        record[site] = rng.choice(REALIZATION_NAMES)
    return record


def storage_function(realization: Any) -> Callable[[str], str]:
    if isinstance(realization, dict):
        default = realization.get("default", "f64")
        return lambda site: realization.get(site, default)
    return lambda site: realization


FAULTS = (
    "unknown nest", "not a nest", "decision of another kind", "unknown decision", "value outside the domain",
    "order against the k-block", "epilogue on an ineligible product", "realization name", "realization record site",
    "realization record type", "plan key", "no realization", "layout not an object", "nest layout not an object",
    "profile not a string", "plan not an object",
)  # fmt: skip


def inject(rng: random.Random, prog: Program, data: dict[str, Any], fault: str) -> tuple[Any, str | None, str | None]:
    """`data` with one fault; the nest and decision it is on, when it is a nest's."""
    layout: dict[str, dict[str, Any]] = data.setdefault("layout", {})
    nest = rng.choice(list(prog.sites))
    kind = oracle_kind(prog.sites[nest])
    decisions = layout.setdefault(nest, {})
    if fault == "unknown nest":
        layout[rng.choice(GARBAGE_NAMES[1:]) if rng.random() < 0.3 else near_miss(rng, prog, nest) + "\u2009"] = {}
    elif fault == "not a nest":
        non_nests = [b for b in prog.bindings if b not in prog.sites]
        layout[rng.choice(non_nests) if non_nests else nest + "0000"] = {"split": "none"}
    elif fault == "decision of another kind":
        name = rng.choice([d for d in ALL_DECISIONS if d not in KIND_DECISIONS[kind]])
        decisions[name] = valid_value(rng, name, decisions)
        return data, nest, name
    elif fault == "unknown decision":
        name = rng.choice(UNKNOWN_DECISIONS)
        decisions[name] = random_json(rng)
        return data, nest, name
    elif fault == "value outside the domain":
        name = rng.choice(KIND_DECISIONS[kind])
        decisions[name] = invalid_value(rng, name)
        return data, nest, name
    elif fault == "order against the k-block":
        contractions = [s for s in prog.sites if oracle_kind(prog.sites[s]) == "contraction"]
        if not contractions:
            return inject(rng, prog, data, "unknown decision")
        nest = rng.choice(contractions)
        decisions = layout.setdefault(nest, {})
        if rng.random() < 0.5:
            decisions.update(kblock=rng.choice((32, 128)), order=rng.choice(("IJ", "JI")))
        else:
            decisions.update(order=rng.choice(("IJK", "KIJ", "JKI")))
            decisions.pop("kblock", None) if rng.random() < 0.5 else decisions.update(kblock="none")
        return data, nest, "order"
    elif fault == "epilogue on an ineligible product":
        storage_of = storage_function(data["realization"])
        ineligible = [
            s for s in prog.sites if oracle_kind(prog.sites[s]) == "contraction" and not epilogue_ok(prog.sites[s], storage_of)
        ]
        if not ineligible:
            return inject(rng, prog, data, "decision of another kind")
        nest = rng.choice(ineligible)
        layout[nest] = {k: v for k, v in layout.get(nest, {}).items() if k in ("tile", "lanes", "pack")} | {"epilogue": True}
        return data, nest, "epilogue"
    elif fault == "realization name":
        data["realization"] = rng.choice(("f16", "F32", "float32", "", 32, None, ["f32"], True, "bf16 "))
    elif fault == "realization record site":
        data["realization"] = {"default": "f32", near_miss(rng, prog, nest) + "#": "bf16"}
    elif fault == "realization record type":
        data["realization"] = {rng.choice(("default", nest)): rng.choice(("f16", "int8", 32, None, ["bf16"], {}))}
    elif fault == "plan key":
        data[rng.choice(("layouts", "Layout", "realize", "plan", ""))] = {}
    elif fault == "no realization":
        del data["realization"]
    elif fault == "layout not an object":
        data["layout"] = rng.choice(([], [layout], None, "f/%0", 3))
    elif fault == "nest layout not an object":
        layout[nest] = rng.choice(([], None, "tile", 4, [["tile", [1, 8]]]))
    elif fault == "profile not a string":
        data["profile"] = rng.choice((None, 3, ["out/profile.json"], {}))
    elif fault == "plan not an object":
        return rng.choice(([data], None, "f32", 7)), None, None
    return data, None, None


@dataclass
class Case:
    index: int
    program: str
    flavour: str
    data: Any
    fault: str | None = None
    nest: str | None = None
    decision: str | None = None


def generate(count: int = PLAN_COUNT, seed: int = SEED) -> list[Case]:
    rng = random.Random(seed)
    names = [n for n, w in PROGRAM_WEIGHTS.items() for _ in range(w)]
    cases: list[Case] = []
    for index in range(count):
        prog = program(rng.choice(names))
        flavour = rng.choice(("clean", "clean", "fault", "fault", "fault", "wild", "wild"))
        realization = clean_realization(rng, prog)
        data: dict[str, Any] = {"realization": realization}
        if rng.random() < 0.2:
            data["profile"] = "out/profile.json"
        if flavour == "wild":
            data["layout"] = {
                random_name(rng, prog): {
                    (rng.choice(ALL_DECISIONS) if rng.random() < 0.85 else rng.choice(UNKNOWN_DECISIONS)): random_json(rng)
                    for _ in range(rng.randint(0, 3))
                }
                for _ in range(rng.randint(0, 4))
            }
            # Half of the wild values are drawn from the domains, so that some wild plans are accepted.
            for nest, decisions in data["layout"].items():
                for name in list(decisions):
                    if name in ALL_DECISIONS and rng.random() < 0.5:
                        decisions[name] = valid_value(rng, name, decisions)
            cases.append(Case(index, prog.name, flavour, data))
            continue
        data["layout"] = clean_layout(rng, prog, storage_function(realization))
        if flavour == "clean":
            cases.append(Case(index, prog.name, flavour, data))
            continue
        fault = rng.choice(FAULTS)
        faulty, nest, decision = inject(rng, prog, data, fault)
        cases.append(Case(index, prog.name, flavour, faulty, fault, nest, decision))
    return cases


NEAR_MISSES: dict[str, list[Any]] = {
    "form": ["Tiled", "rowwise", "row_wise", "columnar", "", 1, True, None, ["tiled"], 1.0],
    "tile": [[3, 8], [1, 2], [16, 8], [2, 1], [1, 64], [4, 64], [0, 4], [-1, 4], [4], [1, 8, 1], [], [1.0, 8], [True, 8],
             [1, "8"], [[1, 8]], "1x8", 8, None, {"m": 1, "n": 8}],
    "kblock": [64, 0, 16, 256, "32", "None", "", 32.0, True, False, None, [32]],
    "jblock": [32, 0, 300, 2048, -512, "512", "none ", 512.0, True, False, None, [512]],
    "order": ["IK", "ij", "IJJ", "IJKI", "I", "", "KK", 12, ["I", "J"], None],
    "lanes": [3, 0, 5, 32, -4, "4", 4.0, True, None, "widest", [4]],
    "split": ["auto", "executor", "", 2, [1, 2], {}, {"depth": 1}, {"workers": 2}, {"depth": 3, "workers": 2},
              {"depth": -1, "workers": 2}, {"depth": 0, "workers": 0}, {"depth": 1, "workers": -2},
              {"depth": 1, "workers": 2, "axis": 0}, {"depth": 1.0, "workers": 2}, {"depth": "1", "workers": 2},
              {"depth": True, "workers": 2}, {"depth": 1, "workers": True}, {"depth": 1, "workers": "all"},
              {"depth": 1, "workers": 2.0}, None],
    "pack": [1, 0, "true", "false", None, [True], {}],
    "passes": [1, 4, 0, -2, "2", 2.0, True, None, [2]],
    "epilogue": [1, 0, "true", "yes", None, {"add": True}, [True]],
}  # fmt: skip
"""Values just outside each decision's domain, and values of every other JSON type."""

DOMAIN_VALUES: dict[str, list[Any]] = {
    "form": ["tiled", "row-wise"],
    "tile": [[1, 1]] + [[m, n] for m in (1, 2, 4, 8) for n in (4, 8, 16, 32)],
    "kblock": ["none", 32, 128],
    "jblock": ["none", 256, 512, 1024],
    "order": ["IJ", "JI"],
    "lanes": [1, 2, 4, 8, 16],
    "split": ["none"] + [{"depth": d, "workers": w} for d in (0, 1, 2) for w in (1, 2, 3, 64)],
    "pack": [True, False],
    "passes": [2, 3],
    "epilogue": [False],
}
"""Every value of every domain (an order with a k-block, and the epilogue's true, come apart)."""


def systematic() -> list[Case]:
    """The cases no sample may miss: each decision on each kind, each near miss, each value, each epilogue."""
    out: list[tuple[str, Any, str | None, str | None]] = []
    small = program("small")
    # Every decision, with a value of its domain, on every nest of the small program and on one nest of
    # each kind of every other program: accepted exactly on the kinds that have it.
    for prog in (program(name) for name in PROGRAMS):
        by_kind: dict[str, list[str]] = {}
        for nest, site in prog.sites.items():
            by_kind.setdefault(oracle_kind(site), []).append(nest)
        nests = list(prog.sites) if prog.name == "small" else [ns[len(ns) // 2] for ns in by_kind.values()]
        for nest in nests:
            for decision in ALL_DECISIONS:
                out.append((prog.name, {"layout": {nest: {decision: DOMAIN_VALUES[decision][-1]}}}, None, None))
    kinds = {kind: [n for n, site in small.sites.items() if oracle_kind(site) == kind] for kind in KIND_DECISIONS}
    for decision in ALL_DECISIONS:
        nest = kinds["softmax" if decision == "passes" else "contraction"][0]
        for value in NEAR_MISSES[decision]:
            out.append(("small", {"layout": {nest: {decision: value}}}, nest, decision))
        for value in DOMAIN_VALUES[decision]:
            out.append(("small", {"layout": {nest: {decision: value}}}, None, None))
    contraction = kinds["contraction"][0]
    for kblock in ("none", 32, 128, None):
        for order in ("IJ", "JI", "IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI"):
            decisions = {"order": order} if kblock is None else {"kblock": kblock, "order": order}
            out.append(("small", {"layout": {contraction: decisions}}, None, None))
    # The epilogue on every contraction of every program, uniform and with the product typed apart.
    for prog in (program(name) for name in PROGRAMS):
        for nest, site in prog.sites.items():
            if oracle_kind(site) == "contraction":
                out.append((prog.name, {"layout": {nest: {"epilogue": True}}}, None, None))
                record = {"default": "f32", nest: "bf16"}
                out.append((prog.name, {"realization": record, "layout": {nest: {"epilogue": True, "tile": [1, 8]}}}, None, None))
    cases = []
    for name, data, nest, decision in out:
        data.setdefault("realization", "f32")
        cases.append(Case(0, name, "systematic", data, "value outside the domain" if nest else None, nest, decision))
    return cases


PLANS = [*generate(), *systematic()]
for _index, _case in enumerate(PLANS):
    _case.index = _index


# ---------------------------------------------------------------------------
# The tests.


@cache
def outcome_of(index: int) -> PreskError | None:
    """`outcome` of `PLANS[index]`, computed once for every test that asks."""
    return outcome(PLANS[index])


def outcome(case: Case) -> PreskError | None:
    """Apply the case's plan to a fresh copy of its fused program: None when accepted."""
    module = program(case.program).copy()
    try:
        with warnings.catch_warnings():  # random tiles spill on 16 registers: test_plan_spill_warning.py tests that
            warnings.simplefilter("ignore", PlanWarning)
            apply_plan(module, parse_plan(json.loads(json.dumps(case.data)), f"plan{case.index}.json"))
    except PreskError as error:
        return error
    return None


def _describe(case: Case) -> str:
    return f"plan {case.index} ({case.flavour}, {case.fault or 'no fault'}) on {case.program}: {json.dumps(case.data)[:600]}"


def test_the_fuzz_covers_every_flavour_program_and_fault() -> None:
    assert len([c for c in PLANS if c.flavour != "systematic"]) >= 500
    assert {c.flavour for c in PLANS} == {"clean", "fault", "wild", "systematic"}
    assert {c.program for c in PLANS} == set(PROGRAMS)
    assert {c.fault for c in PLANS if c.fault} == set(FAULTS)
    verdicts = [oracle(program(c.program), c.data) for c in PLANS]
    accepted = sum(v.accepted for v in verdicts)
    assert 100 < accepted < len(PLANS) - 150, "the oracle should accept some plans and refuse many"
    assert sum(v.accepted for c, v in zip(PLANS, verdicts, strict=True) if c.flavour == "wild") > 10
    assert generate(50) == PLANS[:50], "the plans are seeded: every run sees the same ones"
    systematic_verdicts = [v for c, v in zip(PLANS, verdicts, strict=True) if c.flavour == "systematic"]
    assert 100 < sum(v.accepted for v in systematic_verdicts) < len(systematic_verdicts) - 100


def _chunks(n: int) -> Iterator[list[Case]]:
    size = math.ceil(len(PLANS) / n)
    for start in range(0, len(PLANS), size):
        yield PLANS[start : start + size]


@pytest.mark.parametrize("chunk", list(_chunks(8)), ids=lambda chunk: f"plans{chunk[0].index}-{chunk[-1].index}")
def test_every_plan_is_accepted_or_refused_as_the_oracle_says(chunk: list[Case]) -> None:
    for case in chunk:
        prog = program(case.program)
        verdict = oracle(prog, case.data)
        try:
            error = outcome_of(case.index)
        except Exception as unexpected:  # noqa: BLE001 - any other exception is the failure this test looks for
            pytest.fail(f"{_describe(case)} raised {type(unexpected).__name__}: {unexpected}")
        if verdict.accepted:
            assert error is None, f"{_describe(case)} is well-formed but was refused: {error}"
            continue
        assert error is not None, f"{_describe(case)} was accepted; the oracle finds {verdict}"
        assert error.code in verdict.codes, f"{_describe(case)}: {error.headline}; expected one of {verdict.codes}"
        if not verdict.plan_level:
            # Only nests' faults: the error is placed at one of them, naming it and the decision.
            nests = [n for n in verdict.nest_faults if f'nest "{n}", decision ' in error.message]
            assert nests, f"{_describe(case)}: {error.headline} names none of {verdict.nest_faults}"
            assert any(f'decision "{d}"' in error.message for d in verdict.nest_faults[nests[0]]), error.headline
            assert error.line is not None, f"{_describe(case)}: {error.headline} is not placed at the nest"


def test_clean_plans_are_accepted_and_one_fault_is_refused_with_its_code() -> None:
    """The classification by construction, apart from the oracle's evaluation."""
    realization_faults = {"realization name", "realization record site", "realization record type"}
    for case in PLANS:
        if case.flavour == "wild" or (case.flavour == "systematic" and case.nest is None):
            continue
        error = outcome_of(case.index)
        if case.flavour == "clean":
            assert error is None, f"{_describe(case)}: {error}"
            continue
        assert error is not None, f"{_describe(case)} was accepted"
        assert error.code == ("E7001" if case.fault in realization_faults else "E7002"), f"{_describe(case)}: {error.headline}"
        if case.nest is not None:
            assert f'nest "{case.nest}", decision "{case.decision}": ' in error.message, f"{_describe(case)}: {error.headline}"


@pytest.mark.filterwarnings("ignore::presk.diagnostics.PlanWarning")  # random tiles spill on 16 registers, as in `outcome`
def test_accepted_plans_print_a_program_that_reads_back_and_verifies() -> None:
    """What psk-realize attaches (stated decisions beside defaults) passes the same check when read back."""
    ctx = presk_context()
    accepted = [c for c in PLANS if c.flavour != "systematic" and oracle(program(c.program), c.data).accepted]
    small = [c for c in accepted if c.program in ("small", "mlp", "attention", "layernorm")]
    for case in small[::6] + [c for c in accepted if c.program == "gpt"][:2]:
        module = program(case.program).copy()
        apply_plan(module, parse_plan(case.data, "plan.json"))
        parse_module(ctx, print_module(module, {}), "printed.mlir").verify()


def test_the_pass_reads_the_plan_file(tmp_path: Path) -> None:
    """`psk-realize{plan=...}`, the pass itself, on a slice of the plans written as files."""
    ctx = presk_context()
    for case in PLANS[::25]:
        path = tmp_path / f"plan{case.index}.json"
        path.write_text(json.dumps(case.data))
        module = program(case.program).copy()
        verdict = oracle(program(case.program), case.data)
        try:
            RealizeSites(plan=str(path)).apply(ctx, module)
        except PreskError as error:
            assert error.code in verdict.codes, f"{_describe(case)}: {error.headline}"
            assert str(path) in error.message
        else:
            assert verdict.accepted, _describe(case)


def _cli_cases() -> list[Case]:
    """A few refused plans of both flavours (E7002 alone), one E7001, one accepted (the small program, and the GPT once)."""
    def first(program_name: str, want: Callable[[Case, Verdict], bool], n: int = 1) -> list[Case]:
        found = [c for c in PLANS if c.program == program_name and want(c, oracle(program(c.program), c.data))]
        return found[:n]

    def e7002(flavour: str) -> Callable[[Case, Verdict], bool]:
        return lambda c, v: c.flavour == flavour and v.codes == {"E7002"}

    return [
        *first("small", e7002("fault"), 2),
        *first("small", e7002("wild"), 2),
        *first("gpt", e7002("fault")),
        *first("small", lambda c, v: v.codes == {"E7001"}),
        *first("small", lambda c, v: v.accepted),
    ]


def test_no_traceback_reaches_the_user(tmp_path: Path) -> None:
    """The presk-opt CLI in subprocesses: exit 1 and `error: E7002` (or E7001), exit 0 when accepted."""
    tool = Path(sys.executable).parent / "presk-opt"
    command = [str(tool)] if tool.exists() else [sys.executable, "-m", "presk.cli.opt"]
    small = tmp_path / "small.mlir"
    small.write_text(SMALL)
    runs = []
    for case in _cli_cases():
        path = tmp_path / f"plan{case.index}.json"
        path.write_text(json.dumps(case.data))
        source = str(small) if case.program == "small" else str(ROOT / PROGRAMS[case.program])
        pipeline = f'psk-fuse,psk-realize{{plan="{path}"}}'
        process = subprocess.Popen(
            [*command, source, "-p", pipeline], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        runs.append((case, process))
    assert len(runs) == 7
    for case, process in runs:
        _, stderr = process.communicate(timeout=120)
        verdict = oracle(program(case.program), case.data)
        assert "Traceback" not in stderr and "internal error" not in stderr, f"{_describe(case)}:\n{stderr}"
        if verdict.accepted:
            assert process.returncode == 0, f"{_describe(case)}:\n{stderr}"
            continue
        assert process.returncode == 1, f"{_describe(case)}:\n{stderr}"
        (code,) = verdict.codes
        assert f"error: {code}: " in stderr, f"{_describe(case)}:\n{stderr}"
