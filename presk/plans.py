"""Realization plans and realization records: reading them, and what each site gets.

A plan is JSON, exactly the seed's format:

    {"realization": "f32", "profile": "out/profile.json",
     "layout": {"twice/%2": {"lanes": 4}, "attend/%3": {"passes": 3}}}

`realization` (required) is a uniform realization (`f64`, `f32`, `bf16`),
`@FILE` naming a realization record, or the record itself; `--realize R` is
the plan `{"realization": R}`. A realization record gives a type per site,
`{"default": "f32", "LayerNorm.apply/%11": "bf16"}`; sites it does not name
take `default` (f64 when absent). Layouts are kept beside the realization
and not inside it: a layout moves no bit, so a change of tile must not
change what a checkpoint or a measured gap names.

A plan that is not of this shape is refused with E7002 (a realization
record that names no site of the program, or a type that is none, E7001),
before anything runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from presk.diagnostics import PreskError
from presk.dialects.psk_realize import REALIZATIONS

PLAN_KEYS = ("realization", "profile", "layout")


@dataclass(frozen=True)
class RealizationRecord:
    """A storage type per site: the default, and the sites stated apart from it."""

    default: str = "f64"
    sites: dict[str, str] = field(default_factory=dict)
    source: str = "--realize"

    def type_of(self, site: str) -> str:
        return self.sites.get(site, self.default)

    def check_sites(self, known: Iterable[str]) -> None:
        """Every site the record names exists: a typo must not silently realize nothing."""
        known = set(known)
        for site in self.sites:
            if site not in known:
                raise PreskError("E7001", f"{self.source}: site \"{site}\" is not a launch of this program")


@dataclass(frozen=True)
class Plan:
    realization: RealizationRecord
    layout: dict[str, dict[str, Any]] = field(default_factory=dict)
    profile: str | None = None
    source: str = "--plan"
    warns_of_spills: bool = True
    """Whether lowering warns of tiles that spill on this target (`psk-realize`'s `PlanWarning`).

    False for the plans the tuning layer makes to measure or price a point:
    the calibration and a full space try spilling tiles on purpose, and a
    user did not write them."""


def _read_json(path: str, what: str, code: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PreskError("E0001", f"cannot read the {what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise PreskError("E0001", f"the {what} {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise PreskError(code, f"{path}:{e.lineno}:{e.colno}: the {what} is not JSON: {e.msg}") from None


def _strip_at(arg: str) -> str:
    return arg[1:] if arg.startswith("@") else arg


def realization_record(spec: Any, source: str, base_dir: str = ".") -> RealizationRecord:
    """A realization from a uniform name, `@FILE`, or a record object."""
    if isinstance(spec, str) and spec in REALIZATIONS:
        return RealizationRecord(default=spec, source=source)
    if isinstance(spec, str):
        if not spec.startswith("@"):
            raise PreskError("E7001", f"{source}: a realization is f64, f32, bf16 or @FILE, not \"{spec}\"")
        path = os.path.join(base_dir, spec[1:])
        record = _read_json(path, "realization record", "E7001")
        if isinstance(record, str) and record.startswith("@"):
            # A file naming another file could name itself: a record file holds the record.
            raise PreskError("E7001", f"{path}: a realization record file holds a record or a uniform name, not {json.dumps(record)}")
        return realization_record(record, path, os.path.dirname(path))
    if not isinstance(spec, dict):
        raise PreskError("E7001", f"{source}: a realization is a name, @FILE or a record of sites, not {json.dumps(spec)}")
    for site, name in spec.items():
        if not isinstance(name, str) or name not in REALIZATIONS:
            raise PreskError("E7001", f"{source}: \"{site}\": a site's realization is f64, f32 or bf16, not {json.dumps(name)}")
    sites = {k: v for k, v in spec.items() if k != "default"}
    return RealizationRecord(default=spec.get("default", "f64"), sites=sites, source=source)


def parse_plan(data: Any, source: str, base_dir: str = ".") -> Plan:
    """Check a plan's shape (its nests are checked against the program by `psk-realize`)."""
    if not isinstance(data, dict):
        raise PreskError("E7002", f"{source}: a plan is a JSON object with {', '.join(PLAN_KEYS)}")
    if unknown := [k for k in data if k not in PLAN_KEYS]:
        raise PreskError("E7002", f"{source}: unknown plan key \"{unknown[0]}\" (a plan has {', '.join(PLAN_KEYS)})")
    if "realization" not in data:
        raise PreskError("E7002", f"{source}: a plan states its realization (\"realization\": \"f32\", say)")
    profile = data.get("profile")
    if "profile" in data and not isinstance(profile, str):
        raise PreskError("E7002", f"{source}: \"profile\" is the path of a machine profile, a string")
    layout = data.get("layout", {})
    if not isinstance(layout, dict):
        raise PreskError("E7002", f"{source}: \"layout\" is an object keyed by nest name")
    for nest, decisions in layout.items():
        if not isinstance(decisions, dict):
            raise PreskError("E7002", f"{source}: nest \"{nest}\": its layout is an object of decisions")
    record = realization_record(data["realization"], source, base_dir)
    return Plan(realization=record, layout=layout, profile=profile, source=source)


def read_plan(arg: str) -> Plan:
    """`--plan @P.json` (the `@` is optional)."""
    path = _strip_at(arg)
    return parse_plan(_read_json(path, "plan", "E7002"), path, os.path.dirname(path) or ".")


def plan_from_options(realize: str | None, plan: str | None) -> Plan:
    """The plan `--plan` or `--realize` give; `--realize R` is `{"realization": R}`, f64 by default."""
    if realize and plan:
        raise PreskError("E4001", "--plan gives the realization too: pass --plan or --realize, not both")
    if plan:
        return read_plan(plan)
    return Plan(realization=realization_record(realize or "f64", "--realize"))
