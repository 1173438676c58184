"""`presk rank RESULTS.jsonl [--json] [--plot OUT.png]`: how well a profile's model orders the points autotune measured.

Thin over `presk.tuning.rank`; the file is `presk autotune --profile`'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from presk.diagnostics import PreskError
from presk.tuning.autotune import read_results
from presk.tuning.rank import as_json, figures, plot, report


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("rank", help="compare a profile's predictions with presk autotune's measured times")
    p.add_argument("results", metavar="RESULTS.jsonl", help="the file presk autotune --profile wrote")
    p.add_argument("--json", action="store_true", help="print the figures as JSON, one object per nest shape")
    p.add_argument("--plot", metavar="OUT.png", help="predicted against measured per nest, log-log (matplotlib)")
    p.add_argument("--u", type=float, help="the model's median relative error (default: the profile's, as recorded)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    try:
        open(args.results, "rb").close()
    except OSError as error:
        raise PreskError("E0001", f"cannot read the results file '{args.results}': {error.strerror}") from None
    if args.u is not None and not args.u >= 0:
        raise PreskError("E4001", f"--u {args.u}: expected a relative error, at least 0")
    nests = figures(read_results(args.results), args.u)
    if args.json:
        print(json.dumps(as_json(nests), indent=1))
    else:
        for line in report(nests):
            print(line)
    if args.plot:
        plot(nests, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0
