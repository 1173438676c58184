"""`presk rank RESULTS.jsonl [--profile P.json] [--json] [--plot OUT.png]`: how well a model orders measured points.

Thin over `presk.tuning.rank`; the file is `presk autotune`'s, the model the
one it recorded (`presk autotune --profile`) or, with `--profile`, another
profile's, its predictions priced here.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from presk.diagnostics import PreskError
from presk.tuning.autotune import read_results
from presk.tuning.rank import as_json, figures, plot, priced_under, report


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("rank", help="compare a profile's predictions with presk autotune's measured times")
    p.add_argument("results", metavar="RESULTS.jsonl", help="the file presk autotune --profile wrote")
    p.add_argument("--json", action="store_true", help="print the figures as JSON, one object per nest shape")
    p.add_argument("--plot", metavar="OUT.png", help="predicted against measured per nest, log-log (matplotlib)")
    p.add_argument("--profile", metavar="P.json", help="judge this profile's model instead of the one the file "
                   "recorded: every point measured on this machine priced again here, statically, from the nests "
                   "the file keeps")  # fmt: skip
    p.add_argument("--whole-space", action="store_true", help="with --profile, also price every point of each "
                   "shape's space, to say whether the profile's own pick was measured")  # fmt: skip
    p.add_argument("--u", type=float, help="the model's median relative error (default: the profile's)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    try:
        open(args.results, "rb").close()
    except OSError as error:
        raise PreskError("E0001", f"cannot read the results file '{args.results}': {error.strerror}") from None
    if args.u is not None and not args.u >= 0:
        raise PreskError("E4001", f"--u {args.u}: expected a relative error, at least 0")
    records = read_results(args.results)
    u = args.u
    if args.whole_space and args.profile is None:
        raise PreskError("E4001", "--whole-space goes with --profile: the file's own prices are its whole spaces'")
    if args.profile is not None:
        repriced = priced_under(records, args.profile, args.results, whole_space=args.whole_space)
        records, u = repriced.records, args.u if args.u is not None else repriced.u
        note = sys.stderr if args.json else sys.stdout
        spaces = f" (and the spaces' {repriced.space_points})" if args.whole_space else ""
        print(f"predictions of {args.profile} (u = {u:.3g}): {repriced.points} points priced here{spaces} in "
              f"{repriced.seconds:.1f} s", file=note)  # fmt: skip
        if repriced.refused:
            print(f"  {repriced.refused} points refused by its lowering: left out", file=note)
        if repriced.other_machines:
            print(f"  lines measured on another machine left out ({', '.join(repriced.other_machines)}): rank "
                  "them there", file=note)  # fmt: skip
    nests = figures(records, u)
    if args.json:
        print(json.dumps(as_json(nests), indent=1))
    else:
        for line in report(nests):
            print(line)
    if args.plot:
        plot(nests, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0
