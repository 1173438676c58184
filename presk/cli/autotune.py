"""`presk autotune FILE --entry E -o RESULTS.jsonl`: every layout point of an entry's nests, compiled and timed.

Thin over `presk.tuning.autotune`. It appends one line per point measured
to RESULTS.jsonl (a second call resumes), writes the plan of the best
measured points (`--plan-out`), and fails if any point gave other bits than
its nest's default layout. `--ray` / `--ray-address` measure on a Ray
cluster instead of in this process (`presk.tuning.distributed`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from presk.cli.program import add_input_arguments, add_size_arguments, program_of
from presk.cli.source import check_output
from presk.diagnostics import PreskError
from presk.target import target_machine
from presk.tuning.autotune import autotune, report
from presk.tuning.calibration import parse_budget, terms_code
from presk.tuning.distributed import AUTOTUNE_BATCH, POINT_TIMEOUT_S, TIMEOUT_PREDICTIONS, Cluster
from presk.tuning.plan import plan_text
from presk.tuning.space import SPACES
from presk.tuning.tuned import record_tuned, tuned_lines, tuned_off, tuned_path


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("autotune", help="compile and time every layout point of an entry's nests (resumable)")
    add_input_arguments(p)
    p.add_argument("--entry", required=True, help="the function whose nests are measured")
    add_size_arguments(p)
    p.add_argument("--realize", metavar="R", default="f64",
                   help="the realization measured and stated by the plan: f64 (default), f32, bf16 or @FILE")  # fmt: skip
    p.add_argument("-o", "--output", required=True, metavar="RESULTS.jsonl",
                   help="one line per point measured, appended as it is measured; a second call skips them")  # fmt: skip
    p.add_argument("--plan-out", metavar="PLAN.json", help="write the plan of the best measured points")
    p.add_argument("--profile", metavar="P.json", help="price every point with this profile's model and record "
                   "the prediction beside the measurement (presk rank compares them)")  # fmt: skip
    p.add_argument("--candidates", action="store_true",
                   help="with --profile, measure only the points predicted within 1 + u of the model's best")  # fmt: skip
    p.add_argument("--each-order", action="store_true",
                   help="with --candidates, also measure the model's best point of every loop order, so that a "
                        "bias of the model against one order cannot hide it")  # fmt: skip
    p.add_argument("--space", choices=SPACES, default="quick",
                   help="quick (default): tiles whose registers fit the target's; full: every tile and lane")  # fmt: skip
    p.add_argument("--budget", metavar="TIME", help="stop cleanly between points after this long (90s, 20m, 1.5h)")
    p.add_argument("--nests", metavar="SITE,...", help="only these nests (site names, as presk plan prints them)")
    add_ray_arguments(p, AUTOTUNE_BATCH)
    p.set_defaults(handler=main)


def add_ray_arguments(p: Any, batch: int, scope: str = "") -> None:
    """`--ray`, `--ray-address`, `--ray-batch`: shared by `presk autotune` and `presk bench --calibrate`
    (`scope` says what they go with)."""
    group = p.add_argument_group(f"measuring on Ray{scope} (docs/plans.md, \"Distributed measurement on Ray\")")
    group.add_argument("--ray", action="store_true", help="measure on a local Ray cluster started for the run: one "
                       "worker pinned to each core, batches of points (needs Ray: pip install 'presk[ray]')")  # fmt: skip
    group.add_argument("--ray-address", metavar="ADDR", help="measure on the Ray cluster at ADDR (or auto: the one "
                       "`ray start --head` started here) instead: one worker pinned to each CPU of each node")  # fmt: skip
    group.add_argument("--ray-batch", type=int, metavar="N", help=f"points per batch a worker measures "
                       f"(default {batch}); a killed run loses at most the batches in flight")  # fmt: skip
    group.add_argument("--point-timeout", metavar="TIME", help="a point still running after this long (90s, 20m; "
                       "counted from when its worker starts it) is recorded as timed out, never chosen, and its "
                       f"worker replaced (default {POINT_TIMEOUT_S:g} s + {TIMEOUT_PREDICTIONS:g} × its predicted "
                       "time)")  # fmt: skip


def cluster_of(args: argparse.Namespace) -> Cluster | None:
    """The Ray cluster `--ray` / `--ray-address` ask for (not started yet: it starts on first use), or None."""
    if not args.ray and args.ray_address is None:
        for given, flag in ((args.ray_batch, "--ray-batch"), (args.point_timeout, "--point-timeout")):
            if given is not None:
                raise PreskError("E4001", f"{flag} goes with --ray or --ray-address")
        return None
    timeout = parse_budget(args.point_timeout, "--point-timeout") if args.point_timeout is not None else None
    return Cluster(args.ray_address, args.ray_batch, point_timeout_s=timeout)


def main(args: argparse.Namespace) -> int:
    if args.plan_out:
        check_output(args.plan_out)
    program = program_of(args)
    budget = parse_budget(args.budget) if args.budget else None
    sites = [s.strip() for s in args.nests.split(",") if s.strip()] if args.nests else None
    plan_dir = os.path.dirname(args.plan_out) if args.plan_out else "."
    with contextlib.ExitStack() as stack:
        cluster = cluster_of(args)
        if cluster is not None:
            stack.enter_context(cluster)
        result = autotune(program.parsed.module, args.entry, program.env, args.realize, args.output, args.profile,
                          args.candidates, args.space, budget, sites, plan_dir=plan_dir, cluster=cluster,
                          each_order=args.each_order)  # fmt: skip
    for line in report(result):
        print(line)
    if not tuned_off():
        path = tuned_path(target_machine())
        try:
            kept = record_tuned(path, tuned_lines(result, terms_code()))
        except PreskError as error:  # the sweep and its results file stand: only --plan auto goes without them
            sys.stderr.write(f"presk autotune: warning: the best layouts are not kept for --plan auto: {error}\n")
        else:
            if kept:
                print(f"kept the best measured layout of {kept} nests for --plan auto on this machine: {path}")
    if args.plan_out:
        try:
            with open(args.plan_out, "w", encoding="utf-8") as stream:
                stream.write(plan_text(result.plan))
        except OSError as error:
            raise PreskError("E0001", f"cannot write the plan '{args.plan_out}': {error.strerror}") from None
        print(f"wrote {args.plan_out}")
    if result.differ:
        sys.stderr.write(f"presk autotune: {len(result.differ)} points gave other bits than their nest's default "
                         f"layout (a bug of the lowering; `\"bits\": \"differ\"` in {args.output}):\n")  # fmt: skip
        for r in result.differ:
            sys.stderr.write(f"  {r['site']} ({r['shape']}): {r['point']}\n")
        return 1
    if result.timed_out:
        sys.stderr.write(f"presk autotune: warning: {result.timed_out} points timed out (see above); they are "
                         f"recorded in {args.output} and never chosen\n")  # fmt: skip
    if result.lost:
        sys.stderr.write(f"presk autotune: {result.lost} points were not measured: the workers that could measure "
                         "them died (see the warnings above); the same command measures them\n")  # fmt: skip
        return 1
    return 0
