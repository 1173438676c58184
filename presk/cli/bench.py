"""`presk bench`: time an entry's kernels: medians per call, per kernel, and the host's share.

Each entry is lowered once, called `--warmup` times, then timed over
`--rounds` calls; the figure is the median (the machine is shared and
noisy, so one call says little). A second series of calls times every
launch by itself, so the table shows where
the time goes: each kernel's launches, its median time per entry call and
its share, and what is left outside the kernels (the host program:
allocation, views, argument checks and calls), per launch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

from presk.cli.auto_plan import FULL_SPACE, HOST, auto_plan, calibration_path
from presk.cli.backends import add_backend_arguments, compile_entry, make_runner
from presk.cli.calibrate import (
    add_calibration_arguments,
    calibrate_entry,
    calibrate_space,
    finish_calibration,
    judge,
    open_profile,
)
from presk.cli.program import (
    AUTO,
    add_auto_plan_arguments,
    add_input_arguments,
    add_realize_arguments,
    add_size_arguments,
    entries_of,
    load_program,
    opt_of,
    pipeline_of,
    plan_of,
    seed,
)
from presk.cli.source import check_output, read_input
from presk.cost.profile import load_profile
from presk.diagnostics import PreskError
from presk.interp.inputs import make_inputs
from presk.ir.calls import find_entry
from presk.jit.executor import HostProgram, flatten_inputs
from presk.jit.timed import TimedRunner
from presk.target import target_machine


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("bench", help="time an entry's kernels (medians per call and per kernel)")
    add_input_arguments(p, required=False)
    p.add_argument("--entry", action="append", default=[], help="a function to time (repeatable; required with FILE)")
    add_size_arguments(p)
    add_realize_arguments(p)
    add_backend_arguments(p, default="native")
    p.add_argument("--rounds", type=int, default=21, help="timed calls per entry (default 21); the median is reported")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the generated inputs")
    add_calibration_arguments(p)
    add_auto_plan_arguments(p, profile=False)
    p.set_defaults(handler=main)


def _progress(done: int, total: int, what: str) -> None:
    if sys.stderr.isatty():
        bar = "#" * (done * 30 // total)
        sys.stderr.write(f"\r  {what} [{bar:<30}] {done}/{total}")
        if done == total:
            sys.stderr.write("\r" + " " * (45 + len(what)) + "\r")
        sys.stderr.flush()


def main(args: argparse.Namespace) -> int:
    if args.rounds < 1 or args.warmup < 0:
        raise PreskError("E4001", "--rounds is at least 1 and --warmup at least 0")
    if args.plot is not None:
        if args.calibrate is None:
            raise PreskError("E4001", "--plot draws a calibration's fit: give it with --calibrate P.json")
        check_output(args.plot)
    if args.space is not None:
        return _calibrate_space(args)
    if args.file is None or not args.entry:
        raise PreskError("E4001", "presk bench needs FILE and --entry E (or --calibrate P.json --space calib)")
    if args.budget is not None or args.space_types != "f32,f64,bf16":
        raise PreskError("E4001", "--budget and --space-types go with --calibrate P.json --space ...")
    if args.calibrate is None and (args.ray or args.ray_address is not None or args.point_timeout is not None):
        raise PreskError("E4001", "--ray measures a calibration space: presk bench --calibrate P.json --space S --ray")
    auto = args.plan == AUTO
    if args.save_plan and not auto:
        raise PreskError("E4001", "--save-plan goes with --plan auto")
    plan = plan_of(args.realize, None if auto else args.plan) or plan_of("f64", None)
    passes = pipeline_of(args)
    if args.calibrate is not None:
        args.calibrate = calibration_path(args.calibrate, args.space, target_machine())
        open_profile(args.calibrate, target_machine(), args.rules)
    source = read_input(args.file)
    try:
        program = load_program(source, args.dim, args.const, passes, opt=opt_of(args), entries=entries_of(args))
    except PreskError as error:
        raise error.located(source.name) from None
    runner = make_runner(args.backend, args.threads)
    for entry in args.entry:
        func = find_entry(program.parsed.module, entry)
        leaves = flatten_inputs(make_inputs(func, program.env, args.seed))
        if auto:
            plan = auto_plan(program, entry, args.realize, args.profile, args.save_plan)
        kernels = compile_entry(program, entry, plan, fuse=not args.no_fuse, donate=args.donate)
        host = HostProgram(kernels, runner)
        # Converted once, as a training loop holds its arrays: the timed calls convert nothing.
        leaves = host.prepare_inputs(leaves)
        for _ in range(args.warmup):
            host(leaves)
        times = []
        for r in range(args.rounds):
            start = time.perf_counter()
            host(leaves)
            times.append(time.perf_counter() - start)
            _progress(r + 1, 2 * args.rounds, entry)
        timed = TimedRunner(runner)
        instrumented = HostProgram(kernels, timed)
        leaves = instrumented.prepare_inputs(leaves)
        outside = []
        for r in range(args.rounds):
            inside = timed.total_seconds
            start = time.perf_counter()
            instrumented(leaves)
            outside.append(time.perf_counter() - start - (timed.total_seconds - inside))
            _progress(args.rounds + r + 1, 2 * args.rounds, entry)
        report(entry, args, host, times, timed.samples, outside)
        if args.calibrate is not None:
            calibrate_entry(args, entry, kernels, leaves, runner)
        if args.profile is not None:
            judge(args, entry, kernels, leaves, runner)
    if args.calibrate is not None:
        finish_calibration(args)
    return 0


def _calibrate_space(args: argparse.Namespace) -> int:
    if args.calibrate is None:
        raise PreskError("E4001", "--space names what --calibrate P.json measures: give both")
    if args.file is not None or args.entry:
        raise PreskError("E4001", "--space measures the calibration programs: give no FILE or --entry with it")
    if args.backend != "native":
        raise PreskError("E4001", "a calibration times native kernels: --backend native")
    host = args.calibrate == HOST
    args.calibrate = calibration_path(args.calibrate, args.space, target_machine())
    complete = calibrate_space(args, make_runner(args.backend, args.threads))
    if host and not complete and not load_profile(args.calibrate).layout:
        # Fitted on part of the space, the host's profile would be what --plan auto prices with: it waits.
        then = ("--plan auto prices with the small calibration until then" if args.space == FULL_SPACE
                else "--plan auto measures the rest when it next needs it")  # fmt: skip
        print(f"{args.calibrate} is not fitted until its space is measured whole: {then}")
        if args.plot:
            print(f"{args.plot} not drawn: there is no fit to draw yet")
        return 0
    finish_calibration(args)
    return 0


def report(
    entry: str, args: argparse.Namespace, host: HostProgram, times: list[float], samples: dict[str, list[float]],
    outside_calls: list[float],
) -> None:
    """The call's median, the host's own time, and each kernel's time per call.

    The host's time is measured within each timed call (the call's time less
    its launches'), its median over the calls: the difference of two
    medians taken over different calls would carry their noise, not the
    host's cost.
    """
    median = statistics.median(times)
    rounds = args.rounds
    launches_by_kernel: dict[str, int] = defaultdict(int)
    sites: dict[str, str] = {}
    for step in host.steps:
        if hasattr(step, "call"):
            launches_by_kernel[step.name] += 1  # type: ignore[union-attr]
            sites[step.name] = step.site  # type: ignore[union-attr]
    # Per call of the entry: the median of a kernel's per-call totals.
    per_kernel = {
        name: statistics.median(sum(xs[i * n : (i + 1) * n]) for i in range(rounds))
        for name, xs in samples.items()
        for n in [launches_by_kernel[name]]
    }
    outside = max(statistics.median(outside_calls), 0.0)
    launches = host.launch_count
    print(f"@{entry}: {args.backend} backend, {launches} launch{'' if launches == 1 else 'es'}, median of {rounds} calls "
          f"{median * 1e3:.3f} ms (quartiles {_q(times)})")  # fmt: skip
    if host.donated:
        print(f"  donated (results written over them): {', '.join(host.donated_paths)}")
    print(f"  outside kernels: {outside * 1e3:.3f} ms ({outside / median:.0%}), "
          f"{outside / max(launches, 1) * 1e6:.1f} µs per launch")  # fmt: skip
    print("  | kernel | site | launches | ms per call | share |")
    print("  |---|---|---|---|---|")
    for name, t in sorted(per_kernel.items(), key=lambda kv: -kv[1]):
        print(f"  | {name} | {sites[name]} | {launches_by_kernel[name]} | {t * 1e3:.4f} | {t / median:.1%} |")


def _q(xs: list[float]) -> str:
    if len(xs) < 4:
        return "n/a"
    q = statistics.quantiles(xs, n=4)
    return f"{q[0] * 1e3:.3f}–{q[2] * 1e3:.3f} ms"
