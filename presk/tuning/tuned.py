"""The layouts `presk autotune` measured best, kept per machine, so that `--plan auto` runs them.

A static plan is a prediction; a sweep is a measurement. The layout model's
pick is within its error u of the best point of a nest, and on some
machines that is 10–20 % of a nest's time (docs/plans.md). TVM keeps its
tuning logs and compiles with the best record of each workload
(`ApplyHistoryBest`); presk does the same with its sweeps:

* A `presk autotune` run that measured every point it set out to (not
  stopped by its budget, no point lost with a worker, no point with other
  bits) appends, for each nest, its best measured point to this machine's
  file: `tuned/<cpu>-<hash of the machine key>.jsonl` under the presk cache
  (`presk.jit.engine.cache_subdir`), one JSON line per nest.
* `--plan auto` (`presk.tuning.plan.make_plan`) takes a nest's tuned point
  in place of the model's pick wherever the nest was measured here: the same
  `Nest.key` (each shape's isolated module and storage, with its launches
  per run), and the point still legal at every shape. Which program the
  nest came from does not matter, as a TVM workload's does not.
* A later line for the same nest replaces an earlier one: the last sweep is
  the one the user asked for last.

Every layout computes the default's bits, so a tuned point's speed may
have changed since it was measured but its results cannot: a point
measured by another version of presk is still used, and `--plan auto`
says how many were.
`PRESK_TUNED` names another file; `off` neither keeps nor applies tuned layouts
(the test suite runs so, that no test's sweep changes another's plan).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from presk.diagnostics import PreskError
from presk.jit.engine import cache_subdir
from presk.records import append_records, read_records
from presk.target import Machine
from presk.tuning.autotune import AutotuneResult
from presk.tuning.space import Point

__all__ = [
    "TUNED_ENV", "TUNED_ERROR", "Tuned", "host_tuned", "read_tuned", "record_tuned", "tuned_lines", "tuned_off",
    "tuned_path",
]  # fmt: skip

TUNED_ENV = "PRESK_TUNED"
"""Names the tuned layouts file `--plan auto` reads instead of this machine's; `off`: none."""
TUNED_ERROR = "E8001"
"""A tuned layouts file that is not one is an error about the tuning layer's files, as a results file is."""
_OFF = ("off", "none", "0", "no", "false")
_WHAT = "the tuned layouts file"


@dataclass(frozen=True)
class Tuned:
    """One nest's best measured point, as a line of the file holds it."""

    nest_key: str
    site: str
    """The site the nest was measured as (for the reader; the key is what matches)."""
    point: Point
    seconds: float
    """Measured seconds per run of the entry it was measured in: each shape's median times its launches."""
    default_s: float | None
    measured: int
    """Points measured at every shape of the nest, the default included."""
    code: str
    """The presk that measured it (`presk.tuning.terms_cache.code_version`, 16 hex digits)."""

    def to_json(self) -> dict[str, Any]:
        return {"nest_key": self.nest_key, "site": self.site, "point": self.point, "seconds": self.seconds,
                "default_s": self.default_s, "measured": self.measured, "code": self.code}  # fmt: skip


def tuned_path(machine: Machine) -> Path:
    """`$PRESK_TUNED` when it names a file, else this machine's file under the presk cache."""
    named = os.environ.get(TUNED_ENV, "").strip()
    if named and named.lower() not in _OFF:
        return Path(named)
    return cache_subdir("tuned") / f"{machine.file_stem()}.jsonl"


def host_tuned(machine: Machine) -> tuple[Path | None, dict[str, Tuned]]:
    """The file `--plan auto` reads on `machine` and its lines by nest key; (None, {}) under `PRESK_TUNED=off`."""
    if tuned_off():
        return None, {}
    path = tuned_path(machine)
    return path, read_tuned(path)


def tuned_off() -> bool:
    """`PRESK_TUNED=off`: `presk autotune` keeps nothing, and `--plan auto` prices every nest with the model."""
    return os.environ.get(TUNED_ENV, "").strip().lower() in _OFF


def tuned_lines(result: AutotuneResult, code: str) -> list[Tuned]:
    """The lines a finished sweep keeps: each nest's best measured point, when the sweep measured all it set
    out to (none when its budget stopped it, a worker's death lost points, or a point gave other bits)."""
    if result.stopped or result.lost or result.differ:
        return []
    return [Tuned(o.nest.key, o.nest.site, o.best, o.best_s, o.default_s, o.measured, code)
            for o in result.outcomes if o.best is not None and o.best_s]  # fmt: skip


def record_tuned(path: Path, lines: Iterable[Tuned]) -> int:
    """Append `lines` to the file at `path` (its folder made if need be); how many."""
    records = [line.to_json() for line in lines]
    if records:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise PreskError("E0001", f"cannot make the folder of {_WHAT} '{path}': {error.strerror}") from None
        append_records(path, records, _WHAT)
    return len(records)


def read_tuned(path: Path) -> dict[str, Tuned]:
    """The latest line of each nest in the file at `path` (none when it does not exist)."""
    latest: dict[str, Tuned] = {}
    for number, data in read_records(path, _WHAT, TUNED_ERROR):
        line = _tuned(data)
        if line is None:
            raise PreskError(TUNED_ERROR, f"{path}:{number}: not a line of {_WHAT} (presk autotune writes them; "
                             "delete the file to start again)")  # fmt: skip
        latest[line.nest_key] = line
    return latest


def _tuned(data: Any) -> Tuned | None:
    if not isinstance(data, Mapping):
        return None
    try:
        point, seconds, default_s = data["point"], data["seconds"], data["default_s"]
        line = Tuned(str(data["nest_key"]), str(data["site"]), point, float(seconds),
                     None if default_s is None else float(default_s), int(data["measured"]), str(data["code"]))  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(point, dict) or not line.seconds > 0:
        return None
    return line
