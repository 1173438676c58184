"""`presk plan FILE --entry E --profile P.json -o PLAN.json`: a layout per nest from the cost model, statically.

Thin over `presk.tuning.plan`: nothing is compiled or timed. The plan it
writes is what `--plan @PLAN.json` reads.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from presk.cli.program import add_input_arguments, add_size_arguments, program_of
from presk.cli.source import check_output
from presk.diagnostics import PreskError
from presk.tuning.plan import make_plan, plan_text, report
from presk.tuning.space import SPACES


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("plan", help="choose a layout for every nest of an entry from a cost profile (static)")
    add_input_arguments(p)
    p.add_argument("--entry", required=True, help="the function whose nests are planned")
    add_size_arguments(p)
    p.add_argument("--realize", metavar="R", default="f64",
                   help="the realization the plan states: f64 (default), f32, bf16 or @FILE")  # fmt: skip
    p.add_argument("--profile", required=True, metavar="P.json", help="the cost profile whose layout model prices the points")
    p.add_argument("-o", "--output", required=True, metavar="PLAN.json", help="where the plan is written")
    p.add_argument("--space", choices=SPACES, default="quick",
                   help="quick (default): tiles whose registers fit the target's; full: every tile and lane")  # fmt: skip
    p.add_argument("--plot", metavar="SPACE.png", help="draw, per nest, every priced point's predicted time over the "
                   "chosen one's, with the line at 1 + u (matplotlib)")  # fmt: skip
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    check_output(args.output)
    if args.plot:
        check_output(args.plot)
    program = program_of(args)
    result = make_plan(program.parsed.module, args.entry, program.env, args.realize, args.profile,
                       args.space, plan_dir=os.path.dirname(args.output))  # fmt: skip
    text = plan_text(result.plan)
    try:
        with open(args.output, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        raise PreskError("E0001", f"cannot write the plan '{args.output}': {error.strerror}") from None
    for line in report(result):
        print(line)
    print(f"wrote {args.output}")
    if args.plot:
        from presk.tuning.plan_plot import plot_choices

        plot_choices(result.choices, result.u, args.plot)
        print(f"drew {args.plot}")
    return 0
