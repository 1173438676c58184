"""A persistent cache of the cost quantities of layout points, so that planning a program again is cheap.

Why. `presk plan` and `--plan auto` price thousands of layout points per
nest shape, and what costs is not the model (tens of microseconds a point)
but lowering each point to PSK-Kernel to read its quantities
(`presk.cost.quantities.kernel_terms`, tens of milliseconds a point): a
course GPT takes minutes. Those quantities do not depend on the profile's
constants, only on the nest shape, the point, the code that lowers and
measures it, and the machine it is lowered for. So they are kept on disk,
and a second plan of the same program (another run of `--plan auto`, a
refitted profile, another entry with the same nests) only evaluates the
model: the prices are the ones the lowering would give, to the bit, since
they are computed from the very same terms (JSON keeps every float exactly).

Keys. One file per nest shape under `$PRESK_CACHE_DIR/terms`, else
`$XDG_CACHE_HOME/presk/terms`, else `~/.cache/presk/terms`, named by a hash
of everything the terms depend on: the shape (the isolated module and its
storage types, `Isolated.key`), the code (a hash of presk's own sources and
xDSL's version, so that any change to the lowering or the quantities
invalidates every entry), the machine the points are lowered for (its key
and its workers, `PRESK_THREADS` included), and the cost model's machine
description and rules. Inside, one entry per point: each kernel's terms
with its launches, or the lowering's refusal (E7002); and the static
check's verdict per point (`psk-verify-layout`'s condition it breaks, or
none), which a warm plan would otherwise spend most of its time on.

`PRESK_TERMS_CACHE=off` turns it off. A file that cannot be read is
treated as empty and rewritten: it is a cache, never the only copy.
Writes go to a temporary file renamed over the old one, after merging what
another process may have written meanwhile. A file is touched when read,
and one untouched for `MAX_AGE_DAYS` is deleted when the cache is next
written: every change to presk starts new files (a shape of the course GPT
is about a megabyte), so the old ones must go.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from presk.cost.terms import KernelTerms, MachineDesc
from presk.diagnostics import PreskError
from presk.jit.engine import cache_subdir
from presk.target import Machine

__all__ = ["FORMAT", "OFF_ENV", "TermsCache", "code_version", "terms_dir"]

FORMAT = "presk-terms-cache"
VERSION = 1
OFF_ENV = "PRESK_TERMS_CACHE"
"""`off` (or `0`, `no`): plan without the cache, neither reading nor writing it."""
MAX_AGE_DAYS = 30
"""A file neither read nor written for this long is deleted (another version of presk, a shape planned once)."""

Entry = list[tuple[KernelTerms, int]] | PreskError
"""A point's terms: each kernel's with its launches per launch of the nest, or the lowering's E7002."""


def terms_dir() -> Path:
    """`$PRESK_CACHE_DIR/terms`, else `$XDG_CACHE_HOME/presk/terms`, else `~/.cache/presk/terms` (beside the
    kernel cache and the profiles)."""
    return cache_subdir("terms")


@cache
def code_version() -> str:
    """A hash of presk's Python sources and xDSL's version: what lowers a point and reads its terms.

    Coarse on purpose: a change anywhere in presk invalidates the cache,
    which costs one slow plan, where a missed dependency would cost wrong
    prices. Hashed once per process: the terms cache and the calibration's
    samples (`terms_code`) both ask for it."""
    import xdsl

    import presk

    digest = hashlib.sha256(f"xdsl {getattr(xdsl, '__version__', '?')}".encode())
    root = Path(presk.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass
class TermsCache:
    """The terms of (shape, point) pairs: those on disk, read per shape on first use, and those added."""

    folder: Path
    salt: str
    """The hash of everything but the shape and the point (see the module docstring)."""
    shapes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per shape key: the file's JSON, `points` (terms) and `checks` (verdicts), read from disk and added to."""
    added: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per shape key: the terms added since the last `save`."""
    added_checks: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per shape key: the verdicts added since the last `save`."""
    hits: int = 0

    @staticmethod
    def open(desc: MachineDesc, rules: frozenset[str], machine: Machine, layout_machine: Machine) -> TermsCache | None:
        """The cache for pricing with `desc` and `rules`, `machine` giving the workers of a kernel and
        `layout_machine` lowering it; None when `PRESK_TERMS_CACHE` turns it off."""
        if os.environ.get(OFF_ENV, "").strip().lower() in ("off", "0", "no", "false"):
            return None
        parts = [
            code_version(), machine.key(), str(machine.workers()), layout_machine.key(), str(layout_machine.workers()),
            json.dumps(desc.to_json(), sort_keys=True), ",".join(sorted(rules)),
        ]  # fmt: skip
        return TermsCache(terms_dir(), hashlib.sha256("\n".join(parts).encode()).hexdigest())

    def _file(self, shape: str) -> Path:
        name = hashlib.sha256(f"{self.salt}|{shape}".encode()).hexdigest()[:40]
        return self.folder / f"{name}.json"

    def _shape(self, shape: str) -> dict[str, Any]:
        data = self.shapes.get(shape)
        if data is None:
            path = self._file(shape)
            data = self.shapes[shape] = _read(path)
            if data["points"] or data["checks"]:
                try:
                    os.utime(path)  # in use: not old (`MAX_AGE_DAYS`)
                except OSError:
                    pass
        return data

    def _points(self, shape: str) -> dict[str, Any]:
        return self._shape(shape)["points"]  # type: ignore[no-any-return]

    def check(self, shape: str, point: str) -> str | None:
        """The static check's verdict on `point` at `shape`: the condition it breaks, `""` when it breaks
        none, None when not cached."""
        verdict = self._shape(shape)["checks"].get(point)
        return verdict if isinstance(verdict, str) else None

    def put_check(self, shape: str, point: str, verdict: str) -> None:
        self._shape(shape)["checks"][point] = verdict
        self.added_checks.setdefault(shape, {})[point] = verdict

    def get(self, shape: str, point: str) -> Entry | None:
        """The terms of `point` at `shape`, or None if they are not cached."""
        entry = self._points(shape).get(point)
        if entry is None:
            return None
        self.hits += 1
        if "refused" in entry:
            return PreskError("E7002", str(entry["refused"]))
        return [(KernelTerms.from_json(terms), int(count)) for terms, count in entry["kernels"]]

    def put(self, shape: str, point: str, value: Entry) -> None:
        entry = encode(value)
        self._points(shape)[point] = entry
        self.added.setdefault(shape, {})[point] = entry

    def put_encoded(self, shape: str, point: str, entry: dict[str, Any]) -> None:
        """`put` of an entry already in its JSON form (as a forked pricing process returns it)."""
        self._points(shape)[point] = entry
        self.added.setdefault(shape, {})[point] = entry

    def save(self) -> None:
        """Write the entries added, merged with what the files hold now; a folder that cannot be written to
        leaves the cache as it was (planning goes on without it)."""
        for shape in {*self.added, *self.added_checks}:
            path = self._file(shape)
            data = _read(path)
            data["points"].update(self.added.get(shape, {}))
            data["checks"].update(self.added_checks.get(shape, {}))
            temporary = None
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=path.stem, suffix=".tmp",
                                                 delete=False, encoding="utf-8") as stream:  # fmt: skip
                    temporary = stream.name
                    json.dump({"format": FORMAT, "version": VERSION, **data}, stream, separators=(",", ":"))
                os.replace(temporary, path)
            except OSError:
                if temporary is not None:
                    Path(temporary).unlink(missing_ok=True)
        if self.added or self.added_checks:
            _prune(self.folder)
        self.added, self.added_checks = {}, {}


def encode(value: Entry) -> dict[str, Any]:
    """A point's entry as JSON: its kernels' terms and launches, or the refusal's message."""
    if isinstance(value, PreskError):
        return {"refused": value.message}
    return {"kernels": [[terms.to_json(), count] for terms, count in value]}


def _prune(folder: Path) -> None:
    """Delete the files untouched for `MAX_AGE_DAYS` (and temporary files a killed write left as long)."""
    oldest = time.time() - MAX_AGE_DAYS * 86400
    try:
        paths = list(folder.iterdir())
    except OSError:
        return
    for path in paths:
        try:
            if path.suffix in (".json", ".tmp") and path.stat().st_mtime < oldest:
                path.unlink()
        except OSError:
            continue


def _read(path: Path) -> dict[str, Any]:
    """A shape's file as {"points": ..., "checks": ...}: empty ones if it is missing or unreadable."""
    empty: dict[str, Any] = {"points": {}, "checks": {}}
    try:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except (OSError, ValueError):
        return empty
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        return empty
    return {name: data[name] if isinstance(data.get(name), dict) else {} for name in empty}
