"""`--plan auto` on `presk run` and `presk bench`: a plan chosen statically from this machine's cost profile.

The profile is `--profile P.json`, else `$PRESK_PROFILE`, else the host's
own, cached beside the kernel cache (`profiles/` under `$PRESK_CACHE_DIR`,
else `~/.cache/presk/profiles/`, one file per machine key). Of the host's
own, a full calibration (`presk bench --calibrate host --space calib`,
about 20 minutes, kept beside the small one) is preferred once it is
fitted: on the course GPT its plans ran 6–10 % faster than the small
space's (docs/plans.md). A host without either gets the small one
calibrated on first use: the small calibration space, about a
minute on two cores, with its progress bar; the command says so. It is
fitted in whichever of the nine forms fits its samples best (least u), as
is a profile relowered after presk changed; one timed before the
calibration's window (`presk.tuning.calibration.TIMING_WINDOW`) is
measured again. The plan
is then `presk plan`'s (`presk.tuning.plan.make_plan`): a layout per
contraction and softmax nest of the entry, priced by the layout model,
nothing compiled or timed; `--save-plan PLAN.json` keeps it.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from presk.cli.calibrate import open_profile
from presk.cli.program import AUTO, Program
from presk.cli.source import check_output
from presk.cost.profile import Profile, append_samples, load_profile, refit_profile, samples_path, save_profile
from presk.cost.terms import MachineDesc
from presk.diagnostics import PreskError
from presk.jit.engine import cache_subdir
from presk.jit.native import NativeRunner
from presk.plans import Plan, parse_plan
from presk.target import Machine, target_machine
from presk.tuning.calibration import (
    Point, Progress, coarsely_timed, relowered, run_space, space, stale_samples, terms_code,
)  # fmt: skip
from presk.tuning.plan import make_plan, plan_text
from presk.tuning.tuned import host_tuned

__all__ = [
    "AUTO", "FIRST_USE_SPACE", "FULL_SPACE", "HOST", "PROFILE_ENV", "auto_plan", "calibration_path", "host_profile_path",
    "resolve_profile",
]  # fmt: skip

PROFILE_ENV = "PRESK_PROFILE"
"""Names the cost profile `--plan auto` uses when `--profile` does not."""
FIRST_USE_SPACE = "calib-small"
FULL_SPACE = "calib"
HOST = "host"
"""`--calibrate host`: the host's own profile of the space measured, the one `--plan auto` finds."""


def host_profile_path(machine: Machine, kind: str = FIRST_USE_SPACE) -> Path:
    """Where this machine's own profile of calibration space `kind` is kept: one file per machine key, so a home
    shared by machines holds each; the full space's beside the first use's, never mixed with it (their samples
    fitted together ranked the course GPT's nests as badly as the small space's alone, docs/plans.md)."""
    suffix = "" if kind == FIRST_USE_SPACE else f".{kind}"
    return cache_subdir("profiles") / f"{machine.file_stem()}{suffix}.json"


def calibration_path(named: str, space_kind: str | None, machine: Machine) -> str:
    """The profile `--calibrate` names: a path, or `host` with `--space`, the host's own of that space (its
    folder created, as the calibration writes the profile at once)."""
    if named != HOST:
        return named
    if space_kind is None:
        raise PreskError("E4001", "--calibrate host names the host's profile of a calibration space: give --space "
                         f"{FULL_SPACE} (what --plan auto prefers) or --space {FIRST_USE_SPACE}")  # fmt: skip
    path = host_profile_path(machine, space_kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path)


def calibrate_first_use(path: Path, machine: Machine, err: TextIO) -> None:
    """Measure `FIRST_USE_SPACE` into `path` and fit it: the profile `--plan auto` needs and the host lacks."""
    err.write(f"presk: no cost profile for this machine yet: measuring one ({FIRST_USE_SPACE}, about a minute), "
              f"kept in {path}\n")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = open_profile(str(path), machine)
    _measure_first_use_space(path, profile, space(FIRST_USE_SPACE, machine), err)
    save_profile(refit_profile(load_profile(path), best_form=True), path)


def _measure_first_use_space(path: Path, profile: Profile, points: list[Point], err: TextIO) -> tuple[int, int]:
    """Measure the `points` of `FIRST_USE_SPACE` that `profile` (kept at `path`) holds no sample of;
    (measured, refused)."""
    done = {str(s.extra.get("key")) for s in profile.samples}
    progress = Progress(len(points), label=FIRST_USE_SPACE, stream=err)
    with NativeRunner() as runner:
        try:
            measured, refused, _ = run_space(points, done, runner, profile.machine_desc,
                                             lambda s: append_samples(path, s), progress)  # fmt: skip
        finally:
            progress.close()
    return measured, refused


def complete_first_use(path: Path, profile: Profile, machine: Machine, err: TextIO) -> Profile:
    """Measure the points of `FIRST_USE_SPACE` a host profile measured by another presk lacks; the profile
    with their samples (`profile` itself when nothing was measured).

    A version of presk may add points to the space (the thin product that
    identifies the page walks' rate, docs/cost.md §6.14), and constants
    fitted without them price what those points are there to show by
    whatever else the samples hold. So when the profile is stale (and only
    then: points the layout checks refuse have no sample, and are tried
    again once per version), its missing points are measured before it is
    relowered and refitted: seconds, once."""
    if not stale_samples(profile.samples):
        return profile
    done = {str(s.extra.get("key")) for s in profile.samples}
    points = space(FIRST_USE_SPACE, machine)
    missing = sum(1 for p in points if p.key not in done)
    if not missing:
        return profile
    err.write(f"presk: {path} holds no sample of {missing} of the {len(points)} points of this presk's "
              f"{FIRST_USE_SPACE}: measuring them\n")  # fmt: skip
    measured, refused = _measure_first_use_space(path, profile, points, err)
    err.write(f"presk: measured {measured} of them ({refused} refused by the layout checks)\n")
    return load_profile(path)


def resolve_profile(explicit: str | None, machine: Machine, err: TextIO) -> str:
    """The profile `--plan auto` prices with (see the module docstring), calibrated first if the host has none."""
    if explicit:
        return explicit
    named = os.environ.get(PROFILE_ENV, "").strip()
    if named:
        return named
    full = host_profile_path(machine, FULL_SPACE)
    if full.exists():
        profile = load_profile(full)
        if profile.layout is not None:
            relower_if_stale(full, profile, MachineDesc.of(machine), err)
            return str(full)
    path = host_profile_path(machine)
    profile = load_profile(path) if path.exists() else None
    if profile is not None and coarsely_timed(profile.samples):
        err.write(f"presk: {path} was timed by an earlier presk (medians of at most 25 calls, whose noise was most "
                  "of its u): measuring it again\n")  # fmt: skip
        for stale in (path, samples_path(path)):
            stale.unlink(missing_ok=True)
        profile = None
    if profile is None or profile.layout is None:
        calibrate_first_use(path, machine, err)
    else:
        relower_if_stale(path, complete_first_use(path, profile, machine, err), MachineDesc.of(machine), err)
    return str(path)


def relower_if_stale(path: Path, profile: Profile, host: MachineDesc, err: TextIO) -> None:
    """Read the host profile's samples' terms again and refit it, when another presk read them.

    The constants were fitted to those terms, and the plan prices points with
    the terms this presk reads: after a change to the lowering or the
    quantities they disagree. Nothing is timed again, so this takes the
    lowering of the calibration's points (some seconds), once per version.
    The profile is presk's own, made from `host`, this presk's description of
    the machine: where another presk described it otherwise (a constant such
    as `fma_chains` that a version changed), it takes this one's. A profile
    whose description a user edits is one named by `--profile`.
    """
    stale = stale_samples(profile.samples)
    if not stale or profile.machine_desc is None:
        return
    described = "" if profile.machine_desc == host else ", against this presk's description of the machine"
    err.write(f"presk: {stale} samples of {path} were priced by another version of presk: "
              f"pricing them again{described} (nothing is timed) and refitting\n")  # fmt: skip
    fresh, _ = relowered(replace(profile, machine_desc=host), err)
    save_profile(refit_profile(fresh, best_form=True), path)


def auto_plan(
    program: Program,
    entry: str,
    realization: str | None,
    profile: str | None,
    save_plan: str | None,
    err: TextIO | None = None,
) -> Plan:
    """The plan `--plan auto` runs `entry` under: `realization` (default f64) and the layouts the model chooses."""
    err = err or sys.stderr
    if save_plan:
        check_output(save_plan)
    machine = target_machine()
    profile_path = resolve_profile(profile, machine, err)
    start = time.perf_counter()
    tuned_file, tuned = host_tuned(machine)
    result = make_plan(program.parsed.module, entry, program.env, realization or "f64", profile_path,
                       warn=err, plan_dir=os.path.dirname(save_plan) if save_plan else ".", tuned=tuned)  # fmt: skip
    seconds = time.perf_counter() - start
    saved = ""
    if save_plan:
        try:
            Path(save_plan).write_text(plan_text(result.plan), encoding="utf-8")
        except OSError as error:
            raise PreskError("E0001", f"cannot write the plan '{save_plan}': {error.strerror}") from None
        saved = f", saved to {save_plan}"
    cached = f", {result.stored} from the terms cache" if result.stored else ""
    err.write(f"--plan auto: @{entry}: {len(result.choices)} nests planned with {profile_path} in {seconds:.1f} s"
              f" ({result.lowered} points priced{cached}){saved}\n")  # fmt: skip
    applied = [tuned[c.nest.key] for c in result.choices if c.measured_s is not None]
    if applied:
        older = sum(1 for line in applied if line.code != terms_code())
        by = f", {older} of them by another version of presk" if older else ""
        err.write(f"--plan auto: {len(applied)} of the {len(result.choices)} nests take the layout presk autotune "
                  f"measured best here ({tuned_file}{by})\n")  # fmt: skip
    refused = [c.nest.site for c in result.choices if c.measured_s is None and c.nest.key in tuned]
    if refused:
        err.write(f"--plan auto: note: the layout presk autotune kept for {', '.join(refused)} is refused by the "
                  f"layout checks here ({tuned_file}): the model's pick instead\n")  # fmt: skip
    return parse_plan(result.plan, "--plan auto")
