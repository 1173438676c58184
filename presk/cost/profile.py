"""A cost profile: one machine's calibration samples and the constants fitted to them.

A profile is two files side by side:

* `P.json`, rewritten whole (atomically: a temporary file renamed over it)
  at every fit: the format and its version, the machine (`Machine.key()`)
  and `machine_desc` (which the user may edit), the model form and the
  rules the samples are priced under, the fitted constants of the layout
  model and the roofline (a constant no sample binds is written `"value":
  null, "status": "not identified"`), u, the Spearman figures, the
  nine-form comparison when computed;
* `P.samples.jsonl`, only ever appended to, one sample per line: the
  calibration adds each point as it is measured (`append_samples`: one
  write and an fsync), so an interrupted run loses at most the point being
  written, and appending costs the same at the 3000th point as at the
  first. A last line cut short by a crash is ignored when read and cut
  off by the next append.

A sample holds its `KernelTerms` under every rule set it was priced with
(`terms`, keyed by `rules_key`: `""` for no rules, else the sorted rules
joined by commas), so `refit_profile(..., rules=...)` prices the samples
again without lowering anything. Its `kernel`, `entry`, `point` and any
other key are kept as written and never read.

Refitting writes `P.json` only; the samples file is rewritten only when
the profile is saved under another name (`presk refit -o`), so a refit
running beside a calibration loses none of its points.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from presk.cost.fit import FormScore, compare_fits, fit_layout, fit_roofline, spearman
from presk.cost.models import LAYOUT, PROFILE_ERROR, ROOFLINE, Constants, Form, predict_many
from presk.cost.terms import OPTIONAL_TERMS, RULES, KernelTerms, MachineDesc
from presk.diagnostics import PreskError
from presk.records import append_records, read_records

__all__ = [
    "FORMAT",
    "VERSION",
    "Profile",
    "Sample",
    "append_samples",
    "fit_samples",
    "load_profile",
    "parse_rules",
    "predict",
    "read_samples",
    "refit_profile",
    "rules_key",
    "samples_path",
    "save_profile",
]

FORMAT = "presk-cost-profile"
VERSION = 1

_TERM_FLOATS = ("work", "bytes", "loads", "spill", "q_l2", "q_l3", "q_mem")
_TERM_INTS = ("workers", "lanes")
_KNOWN_KEYS = frozenset({"format", "version", "machine", "machine_desc", "samples_file", "model", "constants",
                         "fitted_samples", "u", "u_roofline", "spearman", "comparison", "samples"})  # fmt: skip


def _error(message: str) -> PreskError:
    return PreskError(PROFILE_ERROR, message)


# -- rule sets ----------------------------------------------------------------


def parse_rules(text: str | Iterable[str]) -> tuple[str, ...]:
    """The rules of `lines,overhead` (or an iterable of names), sorted; E8001 for an unknown one."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    for name in names:
        if name not in RULES:
            raise _error(f"unknown rule '{name}': the rules are {', '.join(RULES)}")
    return tuple(sorted(set(names)))


def rules_key(rules: Iterable[str]) -> str:
    """The key a sample's terms are stored under for these rules: sorted, comma-joined, "" for none."""
    return ",".join(parse_rules(list(rules)))


# -- samples ------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One measured kernel launch: its terms under each rule set, and its time."""

    terms: dict[str, KernelTerms]
    seconds: float
    """The median of the timed launches."""
    quartiles: tuple[float, ...] | None = None
    counts: float | None = None
    """A static operation count: the 'operation counts' predictor the models are compared with."""
    extra: dict[str, Any] = field(default_factory=dict)
    """`kernel`, `entry`, `point` and anything else the calibration wrote, kept verbatim."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        data["terms"] = {key: terms.to_json() for key, terms in self.terms.items()}
        data["seconds"] = self.seconds
        data["quartiles"] = None if self.quartiles is None else list(self.quartiles)
        data["counts"] = self.counts
        return data

    @staticmethod
    def from_json(data: Any) -> Sample:
        """A sample, or ValueError saying what is wrong with `data`."""
        if not isinstance(data, dict):
            raise ValueError(f"a sample is a JSON object, not {type(data).__name__}")
        raw = data.get("terms")
        if not isinstance(raw, dict) or not raw:
            raise ValueError("a sample needs 'terms': an object of rule set -> kernel terms")
        terms = {}
        for key, value in raw.items():
            try:
                canonical = rules_key(key.split(","))
            except PreskError as error:
                raise ValueError(f"terms under '{key}': {error.message}") from None
            terms[canonical] = _terms_from_json(value, key)
        seconds = _number(data.get("seconds"), "seconds")
        if not seconds > 0:
            raise ValueError(f"'seconds' is a positive time, not {seconds}")
        quartiles = data.get("quartiles")
        if quartiles is not None:
            if not isinstance(quartiles, list):
                raise ValueError("'quartiles' is a list of seconds")
            quartiles = tuple(_number(q, "quartiles") for q in quartiles)
        counts = data.get("counts")
        counts = None if counts is None else _number(counts, "counts")
        extra = {k: v for k, v in data.items() if k not in ("terms", "seconds", "quartiles", "counts")}
        return Sample(terms, seconds, quartiles, counts, extra)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"'{what}' is a finite number, not {json.dumps(value)}")
    return float(value)


def _is_machine_type(name: Any) -> bool:
    """A kernel's group type: a float realization, or the integers a mask or an index range writes."""
    return name in ("f64", "f32", "bf16") or (isinstance(name, str) and name[:1] == "i" and name[1:].isdecimal())


def _terms_from_json(data: Any, key: str) -> KernelTerms:
    where = f"terms under '{key}'"
    if not isinstance(data, dict):
        raise ValueError(f"{where} are a JSON object")
    missing = [name for name in KernelTerms.__dataclass_fields__ if name not in data and name not in OPTIONAL_TERMS]
    if missing:
        raise ValueError(f"{where} lack {', '.join(missing)}")
    values: dict[str, Any] = {name: _number(data[name], f"{where}: {name}") for name in _TERM_FLOATS}
    for name in _TERM_INTS:
        number = _number(data[name], f"{where}: {name}")
        if number != int(number) or number < 1:
            raise ValueError(f"{where}: '{name}' is a positive integer, not {data[name]}")
        values[name] = int(number)
    if not _is_machine_type(data["dtype"]):
        raise ValueError(f"{where}: 'dtype' is f64, f32, bf16 or an integer type such as i64, not {json.dumps(data['dtype'])}")
    values["dtype"] = data["dtype"]
    for name in OPTIONAL_TERMS:
        if name in data:
            values[name] = _number(data[name], f"{where}: {name}")
    return KernelTerms(**values)


def samples_path(path: str | Path) -> Path:
    """`P.json` -> `P.samples.jsonl`, beside it."""
    path = Path(path)
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(stem + ".samples.jsonl")


def append_samples(path: str | Path, samples: Sequence[Sample]) -> None:
    """Append samples to the profile at `path` (its samples file), durably, one line each (`presk.records`)."""
    append_records(samples_path(path), [sample.to_json() for sample in samples], "the samples file")


def read_samples(path: str | Path) -> list[Sample]:
    """The samples of the profile at `path`: none when its samples file does not exist."""
    target = samples_path(path)
    samples = []
    for number, data in read_records(target, "the samples file", PROFILE_ERROR):
        try:
            samples.append(Sample.from_json(data))
        except ValueError as error:
            raise _error(f"{target}:{number}: {error}") from None
    return samples


# -- profiles -----------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    machine: str
    """`Machine.key()` of the machine measured."""
    machine_desc: MachineDesc | None
    form: Form = field(default_factory=Form)
    rules: tuple[str, ...] = ()
    layout: Constants | None = None
    roofline: Constants | None = None
    u: float | None = None
    u_roofline: float | None = None
    spearman: dict[str, float | None] = field(default_factory=dict)
    """Spearman's ρ of measured times against each predictor: `counts`, `work`, `model`."""
    comparison: tuple[FormScore, ...] | None = None
    fitted_samples: int | None = None
    samples: tuple[Sample, ...] = ()
    samples_file: Path | None = field(default=None, compare=False)
    """The samples file `samples` were read from whole (None: they came from elsewhere)."""


def load_profile(path: str | Path) -> Profile:
    """The profile at `path` and its samples; E0001 when unreadable, E8001 when malformed."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise PreskError("E0001", f"cannot open profile '{path}': no such file") from None
    except IsADirectoryError:
        raise PreskError("E0001", f"cannot read profile '{path}': it is a directory") from None
    except OSError as error:
        raise PreskError("E0001", f"cannot read profile '{path}': {error.strerror}") from None
    except UnicodeDecodeError:
        raise _error(f"{path}: not a cost profile: it is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        hint = ""
        if error.msg == "Extra data" and error.colno == 1:  # one JSON object a line: samples or autotune's results
            hint = ("; it holds a JSON value a line, as a profile's samples file (P.samples.jsonl) or presk "
                    "autotune's results do: give the profile P.json")  # fmt: skip
        raise _error(f"{path}: not a cost profile: invalid JSON at line {error.lineno} column {error.colno} "
                     f"({error.msg}){hint}") from None  # fmt: skip
    if not isinstance(data, dict):
        raise _error(f"{path}: not a cost profile: the file holds a JSON {type(data).__name__}, not an object")
    if "format" in data and data["format"] != FORMAT:
        raise _error(f"{path}: not a cost profile: its format is {json.dumps(data['format'])}, not \"{FORMAT}\"")
    if not _KNOWN_KEYS & (data.keys() - {"version"}):
        raise _error(f"{path}: not a cost profile: it has none of the keys format, machine, model, constants, samples")
    version = data.get("version", 0)
    try:
        profile = _profile_from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError, PreskError) as error:
        reason = f"missing key {error}" if isinstance(error, KeyError) else error.message if isinstance(error, PreskError) else str(error)
        note = "" if version == VERSION else f" (the file is format version {version}; this presk reads version {VERSION})"
        raise _error(f"{path}: {reason}{note}") from None
    embedded = profile.samples
    stored = read_samples(path)
    return replace(profile, samples=embedded + tuple(stored), samples_file=None if embedded else samples_path(path))


def _profile_from_json(data: dict[str, Any]) -> Profile:
    desc = data.get("machine_desc")
    model = data.get("model") or {}
    if not isinstance(model, dict):
        raise ValueError("'model' is an object")
    q = model.get("q")
    form = Form(model.get("load_term", "group"), model.get("combine", "pnorm"), None if q is None else _number(q, "model: q"))
    try:
        rules = parse_rules(model.get("rules", ()))
    except PreskError as error:
        raise ValueError(f"model: {error.message}") from None
    constants = data.get("constants") or {}
    if not isinstance(constants, dict):
        raise ValueError("'constants' is an object")
    layout = _constants_from_json(constants.get("layout"), LAYOUT, form)
    roofline = _constants_from_json(constants.get("roofline"), ROOFLINE, Form())
    raw_samples = data.get("samples") or []
    if not isinstance(raw_samples, list):
        raise ValueError("'samples', when in the profile itself, is a list")
    samples = []
    for i, raw in enumerate(raw_samples):
        try:
            samples.append(Sample.from_json(raw))
        except ValueError as error:
            raise ValueError(f"sample {i}: {error}") from None
    comparison = data.get("comparison")
    return Profile(
        machine=str(data.get("machine", "")),
        machine_desc=None if desc is None else MachineDesc.from_json(desc),
        form=form,
        rules=rules,
        layout=layout,
        roofline=roofline,
        u=_optional_number(data.get("u"), "u"),
        u_roofline=_optional_number(data.get("u_roofline"), "u_roofline"),
        spearman={str(k): _optional_number(v, f"spearman: {k}") for k, v in (data.get("spearman") or {}).items()},
        comparison=None if comparison is None else tuple(_score_from_json(s) for s in comparison),
        fitted_samples=None if data.get("fitted_samples") is None else int(data["fitted_samples"]),
        samples=tuple(samples),
    )


def _optional_number(value: Any, what: str) -> float | None:
    return None if value is None else _number(value, what)


def _constants_from_json(data: Any, kind: str, form: Form) -> Constants | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"constants: '{kind}' is an object of name -> {{value}}")
    values: dict[str, float] = {}
    unidentified = set()
    for name, entry in data.items():
        if not isinstance(entry, dict) or "value" not in entry:
            raise ValueError(f"constants: {kind} '{name}' is an object with a 'value'")
        if entry["value"] is not None:
            values[name] = _number(entry["value"], f"{kind} constant {name}")
            continue
        unidentified.add(name)
        used = entry.get("fit_value")
        if used is not None:
            values[name] = _number(used, f"{kind} constant {name}: fit_value")
        elif name in ("lambda", "spawn"):
            values[name] = 0.0
        else:
            values[name] = math.inf
    if kind == LAYOUT and form.combine == "pnorm" and form.q is None:
        raise ValueError("the layout model combines by p-norm but 'model' has no q")
    return Constants(kind, values, form, frozenset(unidentified))


def _score_from_json(data: Any) -> FormScore:
    q, objective = data.get("q"), data.get("objective")
    form = Form(data["load_term"], data["combine"], None if q is None else _number(q, "comparison: q"))
    return FormScore(form, _number(data["u"], "comparison: u"), math.nan if objective is None else _number(objective, "comparison: objective"))


def _constants_to_json(constants: Constants | None) -> dict[str, Any] | None:
    if constants is None:
        return None
    out: dict[str, Any] = {}
    for name in sorted(constants.values, key=_constant_order):
        value = constants.values[name]
        if name in constants.unidentified:
            out[name] = {"value": None, "status": "not identified", "fit_value": value if math.isfinite(value) else None}
        else:
            out[name] = {"value": value}
    return out


def _constant_order(name: str) -> tuple[int, str]:
    order = (
        "lambda", "spawn", "beta", "beta_l2", "beta_l3", "beta_l2_scattered", "beta_l3_scattered", "beta_l2_written",
        "beta_mem", "rho", "tau_f64", "tau_f32", "tau_bf16", "omega_walk",
    )  # fmt: skip
    return (order.index(name), "") if name in order else (len(order), name)


def _json_number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def profile_to_json(profile: Profile, path: Path) -> dict[str, Any]:
    comparison = None
    if profile.comparison is not None:
        comparison = [{"load_term": s.form.load_term, "combine": s.form.combine, "q": s.form.q,
                       "u": _json_number(s.u), "objective": _json_number(s.objective)} for s in profile.comparison]  # fmt: skip
    return {
        "format": FORMAT,
        "version": VERSION,
        "machine": profile.machine,
        "machine_desc": None if profile.machine_desc is None else profile.machine_desc.to_json(),
        "samples_file": samples_path(path).name,
        "model": {"load_term": profile.form.load_term, "combine": profile.form.combine, "q": profile.form.q,
                  "rules": list(profile.rules)},  # fmt: skip
        "fitted_samples": profile.fitted_samples,
        "u": _json_number(profile.u),
        "u_roofline": _json_number(profile.u_roofline),
        "spearman": {k: _json_number(v) for k, v in profile.spearman.items()},
        "constants": {"layout": _constants_to_json(profile.layout), "roofline": _constants_to_json(profile.roofline)},
        "comparison": comparison,
    }


def save_profile(profile: Profile, path: str | Path) -> Profile:
    """Write `P.json` atomically; the samples too when they are not already `P.samples.jsonl`.

    Returns the profile as now stored (its samples file is `path`'s).
    """
    path = Path(path)
    _write_atomic(path, json.dumps(profile_to_json(profile, path), indent=1, allow_nan=False) + "\n")
    target = samples_path(path)
    if profile.samples_file is None or not _same_file(profile.samples_file, target):
        body = "".join(json.dumps(s.to_json(), allow_nan=False) + "\n" for s in profile.samples)
        _write_atomic(target, body)
    return replace(profile, samples_file=target)


def _same_file(a: Path, b: Path) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _mode_for(path: Path) -> int:
    """The file's own mode when it exists, else what `open` would give it: a temporary file is private."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _write_atomic(path: Path, text: str) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise PreskError("E0001", f"cannot write '{path}': {error.strerror}") from None
    try:
        os.chmod(temporary, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except OSError as error:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise PreskError("E0001", f"cannot write '{path}': {error.strerror}") from None


# -- fitting and predicting ---------------------------------------------------


def fit_samples(profile: Profile, rules: Iterable[str] | None = None) -> list[tuple[KernelTerms, float]]:
    """(terms under `rules`, seconds) of every sample; E8001 when there are none or some lack those terms."""
    rules = profile.rules if rules is None else parse_rules(list(rules))
    key = rules_key(rules)
    if not profile.samples:
        raise _error("the profile has no samples: measure some with `presk bench --calibrate` first")
    lacking = [i for i, s in enumerate(profile.samples) if key not in s.terms]
    if lacking:
        have = sorted({k for s in profile.samples for k in s.terms}, key=lambda k: (len(k), k))
        raise _error(
            f"{len(lacking)} of {len(profile.samples)} samples (the first: {lacking[0]}) have no terms for the rules "
            f"'{key or 'none'}'; the samples are priced under: {', '.join(repr(k or 'none') for k in have)}"
        )
    return [(s.terms[key], s.seconds) for s in profile.samples]


def refit_profile(
    profile: Profile,
    load_term: str | None = None,
    combine: str | None = None,
    rules: Iterable[str] | None = None,
    compare_forms: bool = False,
    best_form: bool = False,
) -> Profile:
    """Fit the form (default: the profile's) on the samples priced under `rules`; u and Spearman anew.

    q is always searched again; the comparison is kept only when computed
    here (an older one may describe other samples or rules). `best_form`
    compares the nine forms and fits the one of least u, whatever
    `load_term` and `combine` say: which form fits best differs from machine
    to machine and calibration to calibration (docs/cost.md §6.7), and u is
    the only judge of it the samples give.
    """
    rules = profile.rules if rules is None else parse_rules(list(rules))
    samples = fit_samples(profile, rules)
    fits = compare_fits(samples) if compare_forms or best_form else []
    comparison = tuple(score for score, _ in fits) if fits else None
    if best_form:
        chosen = min(fits, key=lambda pair: pair[0].u)[0].form
        load_term, combine = chosen.load_term, chosen.combine
    form = Form(load_term or profile.form.load_term, combine or profile.form.combine)
    # The comparison fitted the chosen form already (the same call): its fit is the layout model's.
    same = [fit for score, fit in fits if (score.form.load_term, score.form.combine) == (form.load_term, form.combine)]
    layout = same[0] if same else fit_layout(samples, form)
    roofline = fit_roofline(samples)
    seconds = np.array([t for _, t in samples])
    counts = [s.counts for s in profile.samples]
    figures: dict[str, float | None] = {
        "counts": None if any(c is None for c in counts) else spearman(np.array(counts, dtype=float), seconds),
        "work": spearman(np.array([terms.work for terms, _ in samples]), seconds),
        "model": spearman(layout.predicted, seconds),
    }
    return replace(
        profile,
        form=layout.constants.form,
        rules=rules,
        layout=layout.constants,
        roofline=roofline.constants,
        u=layout.u,
        u_roofline=roofline.u,
        spearman={k: None if v is None or math.isnan(v) else v for k, v in figures.items()},
        comparison=comparison,
        fitted_samples=len(samples),
    )


def predict(profile: Profile, terms: KernelTerms) -> float:
    """Seconds the profile predicts: the layout model's, or the roofline's when it has only that."""
    constants = profile.layout or profile.roofline
    if constants is None:
        raise _error("the profile has no fitted constants: run `presk refit` on it first")
    return float(predict_many(constants, [terms])[0])
