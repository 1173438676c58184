"""`presk bench --calibrate P.json` and `presk bench --profile P.json`: measure kernels for a profile, or judge one.

`--calibrate` times every launch natively, appends one sample per kernel to
the profile (`P.samples.jsonl`, line by line, so an interrupted calibration
loses at most the point it was measuring) and fits the profile again. Its
samples are an entry's kernels (`presk bench FILE --entry E --calibrate P`)
or a calibration space (`--space calib`, `--space calib-small`,
`presk.tuning.calibration`), and a second call extends them.

`--ray` / `--ray-address` measure a space's points on a Ray cluster, in
batches, one worker pinned to each core (`presk.tuning.distributed`); the
samples of another machine kind of the cluster go to a profile of its own
beside P.json, fitted too.

`--profile` fits nothing: it times the entry's kernels, prices each with the
profile, and prints them side by side with Spearman's rank correlation of
the measured times against the three predictors (operation counts, W, the
model). It is how a frozen profile is judged on programs it never saw.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from presk.cli.refit import draw_fit, report
from presk.cost.fit import spearman
from presk.cost.models import explain
from presk.cost.profile import (
    Profile,
    append_samples,
    load_profile,
    parse_rules,
    refit_profile,
    rules_key,
    save_profile,
)
from presk.cost.terms import MachineDesc
from presk.diagnostics import PreskError
from presk.target import Machine, target_machine
from presk.cli.autotune import add_ray_arguments, cluster_of
from presk.tuning.calibration import Progress, kernel_samples, parse_budget, run_space, space
from presk.tuning.distributed import CALIBRATION_BATCH

__all__ = ["add_calibration_arguments", "calibrate_entry", "calibrate_space", "finish_calibration", "judge", "open_profile"]

PROFILE_ERROR = "E8001"

DEFAULT_RULES: tuple[str, ...] = ("sets", "shared")
"""The rules a new profile is fitted under: on the calibration of an Intel Xeon (docs/cost.md §6) `sets` and
`shared` lowered u from 28 % to 20 %, and `lines` and `overhead` changed it by less than a point."""


def add_calibration_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("cost profiles (docs/cost.md)")
    group.add_argument("--calibrate", metavar="P.json", help="append every kernel's measured time and terms to this "
                       "profile (created if absent), then fit its constants; `host` with --space: the host's own "
                       "profile of that space, which --plan auto uses (with --space calib, preferred once fitted)")  # fmt: skip
    group.add_argument("--space", choices=("calib", "calib-small"), help="with --calibrate, measure a calibration "
                       "space instead of FILE's entries: calib (about 20 min on 2 cores), calib-small (about 1 min)")  # fmt: skip
    group.add_argument("--space-types", default="f32,f64,bf16", metavar="T,...",
                       help="the machine types a space is measured in (default f32,f64,bf16)")  # fmt: skip
    group.add_argument("--budget", metavar="TIME", help="stop a calibration cleanly after this long (90s, 20m, 1.5h); "
                       "a later call resumes it")  # fmt: skip
    group.add_argument("--load-term", choices=("group", "machine", "none"), help="the fitted form's load term "
                       "(default: the profile's, else group)")  # fmt: skip
    group.add_argument("--combine", choices=("max", "sum", "pnorm"), help="how the fitted form combines its terms "
                       "(default: the profile's, else pnorm)")  # fmt: skip
    group.add_argument("--rules", metavar="R,...", help="the rules a new profile is fitted under (default: "
                       f"{','.join(DEFAULT_RULES)}; `presk refit --recost` changes them later)")  # fmt: skip
    group.add_argument("--plot", metavar="FIT.png", help="with --calibrate, draw the fitted profile: each model's "
                       "predictions against the measured times (as `presk refit --plot`)")  # fmt: skip
    group.add_argument("--profile", metavar="P.json", help="price every kernel with this profile and print the "
                       "predictions beside the measured times, with Spearman's rank correlation")  # fmt: skip
    add_ray_arguments(p, CALIBRATION_BATCH, ", with --calibrate P.json --space S")


def open_profile(path: str, machine: Machine, rules: str | None = None) -> Profile:
    """The profile at `path`, or a new empty one for `machine` under `rules` (default `DEFAULT_RULES`),
    written at once so that its samples have a home.

    Samples of another machine would fit constants that describe neither, so
    a profile measured elsewhere is refused (E8001) rather than extended."""
    if not Path(path).exists():
        chosen = parse_rules(rules) if rules is not None else DEFAULT_RULES
        return save_profile(Profile(machine.key(), MachineDesc.of(machine), rules=tuple(chosen)), path)
    if rules is not None:
        raise PreskError(PROFILE_ERROR, f"--rules names the rules of a new profile; {path} exists: "
                         f"`presk refit {path} --recost --rules {rules}` prices its samples under them")  # fmt: skip
    profile = load_profile(path)
    if profile.machine != machine.key():
        raise PreskError(
            PROFILE_ERROR,
            f"{path} was measured on another machine ({profile.machine}); this one is {machine.key()}: "
            "calibrate into a new profile",
        )
    return profile


def _desc(profile: Profile, machine: Machine) -> MachineDesc:
    return profile.machine_desc or MachineDesc.of(machine)


def calibrate_space(args: argparse.Namespace, runner: Any) -> bool:
    """Measure the points of `--space` that the profile does not hold yet, appending their samples; whether
    every point was measured (False: a budget stopped it, or points timed out or were lost on Ray)."""
    machine = target_machine()
    profile = open_profile(args.calibrate, machine, args.rules)
    types = [t.strip() for t in args.space_types.split(",") if t.strip()]
    unknown = [t for t in types if t not in ("f32", "f64", "bf16")]
    if unknown or not types:
        raise PreskError("E4001", f"--space-types {args.space_types}: expected types among f32, f64, bf16")
    points = space(args.space, machine, types)
    budget = parse_budget(args.budget) if args.budget else None
    cluster = cluster_of(args)
    if cluster is not None:
        with cluster:
            tally, others = cluster.calibrate(points, args.calibrate, profile, budget, sys.stderr)
        for line in tally.notes:
            print(line)
        print(f"{args.space}: measured {tally.measured} points on Ray, {tally.refused} refused by the layout checks "
              f"(E7002), {tally.skipped} measured before")  # fmt: skip
        if tally.stopped:
            print("the budget stopped it: the same command resumes it")
        if tally.timed_out:
            sys.stderr.write(f"presk: warning: {tally.timed_out} points timed out (see above): they have no samples; "
                             "the same command measures them again\n")  # fmt: skip
        if tally.lost:
            sys.stderr.write(f"presk: warning: {tally.lost} points were not measured: the workers that could measure "
                             "them died (see above); the same command measures them\n")  # fmt: skip
        for other in others:
            _fit_other_kind(args, other)
        return not (tally.stopped or tally.timed_out or tally.lost)
    done = {str(s.extra.get("key")) for s in profile.samples}
    progress = Progress(len(points), budget, f"{args.space}")
    try:
        measured, refused, stopped = run_space(points, done, runner, _desc(profile, machine),
                                               lambda samples: append_samples(args.calibrate, samples), progress)  # fmt: skip
    finally:
        progress.close()
    remaining = sum(1 for p in points if p.key not in done)
    print(f"{args.space}: measured {measured} points in {progress.elapsed():.0f} s, {refused} refused by the layout "
          f"checks (E7002), {len(points) - remaining - measured} measured before")  # fmt: skip
    if stopped:
        print(f"the budget stopped it with {remaining} points left: the same command resumes it")
    return not stopped


def _fit_other_kind(args: argparse.Namespace, path: Path) -> None:
    """Fit the profile of another machine kind a Ray calibration measured (`kind_profile_path`); a fit that
    cannot be made yet (too few samples) is a warning: more samples come with the next run."""
    try:
        profile = load_profile(path)
        save_profile(refit_profile(profile, load_term=args.load_term, combine=args.combine), path)
    except PreskError as error:
        sys.stderr.write(f"presk: warning: {path} (another machine kind of the cluster) was not fitted: "
                         f"{error.headline}\n")  # fmt: skip
        return
    print(f"wrote {path}: the profile of {profile.machine.split('|')[1]} ({profile.machine})")


def calibrate_entry(args: argparse.Namespace, entry: str, kernels: Any, leaves: Sequence[Any], runner: Any) -> None:
    """Append the samples of one entry's kernels (measured again if the profile holds them: they replace nothing,
    they add to the median a refit sees as another point)."""
    if args.ray or args.ray_address is not None or args.point_timeout is not None:
        raise PreskError("E4001", "--ray measures a calibration space: presk bench --calibrate P.json --space S --ray")
    machine = target_machine()
    profile = open_profile(args.calibrate, machine)
    describe = {"key": f"{args.file}:{entry}:{sorted(args.dim)}:{sorted(args.const)}:{args.realize}:{args.plan}",
                "entry": entry, "file": str(args.file)}  # fmt: skip
    samples = kernel_samples(kernels, leaves, runner, _desc(profile, machine), describe)
    append_samples(args.calibrate, samples)
    print(f"@{entry}: {len(samples)} kernels measured into {args.calibrate}")


def finish_calibration(args: argparse.Namespace) -> None:
    """Fit the profile on all its samples, write it, and print the constants, u and Spearman."""
    profile = load_profile(args.calibrate)
    fitted = refit_profile(profile, load_term=args.load_term, combine=args.combine)
    save_profile(fitted, args.calibrate)
    print(report(fitted))
    print(f"wrote {args.calibrate}")
    if args.plot:
        draw_fit(fitted, args.plot)


def judge(args: argparse.Namespace, entry: str, kernels: Any, leaves: Sequence[Any], runner: Any) -> dict[str, float]:
    """Time each kernel of `entry`, price it with `--profile`, print both and the three Spearman figures."""
    profile = load_profile(args.profile)
    machine = target_machine()
    key = rules_key(profile.rules)
    samples = kernel_samples(kernels, leaves, runner, _desc(profile, machine), {"entry": entry}, rules=[key])
    constants = profile.layout or profile.roofline
    if constants is None:
        raise PreskError(PROFILE_ERROR, f"{args.profile} has no fitted constants: run `presk refit` on it first")
    rows = []
    for sample in samples:
        terms = sample.terms[key]
        breakdown = explain(constants, terms)
        rows.append((sample, terms, breakdown.seconds, breakdown.binding))
    measured = np.array([s.seconds for s, *_ in rows])
    figures = {
        "counts": spearman(np.array([s.counts for s, *_ in rows], dtype=float), measured),
        "work": spearman(np.array([t.work for _, t, *_ in rows]), measured),
        "model": spearman(np.array([p for *_, p, _ in rows]), measured),
    }
    print(f"@{entry}: {len(rows)} kernels priced by {args.profile} (rules: {key or 'none'})")
    print("  | kernel | workers | measured µs | predicted µs | ratio | binding term |")
    print("  |---|---|---|---|---|---|")
    for sample, _terms, predicted, binding in sorted(rows, key=lambda r: -r[0].seconds):
        print(f"  | {sample.extra['kernel']} | {sample.extra['workers']} | {sample.seconds * 1e6:.2f} | "
              f"{predicted * 1e6:.2f} | {predicted / sample.seconds:.2f} | {binding} |")  # fmt: skip
    print("  Spearman against the measured times: " + ", ".join(
        f"{name} {'n/a' if math.isnan(value) else f'{value:.3f}'}" for name, value in figures.items()))  # fmt: skip
    return figures

