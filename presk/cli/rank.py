"""`presk rank RESULTS.jsonl ... [--profile P.json ...] [--json] [--plot OUT.png]`: how well a model orders measured points.

Thin over `presk.tuning.rank`; the file is `presk autotune`'s, the model the
one it recorded (`presk autotune --profile`) or, with `--profile`, another
profile's, its predictions priced here; with several, side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from presk.cli.source import check_output
from presk.diagnostics import PreskError
from presk.tuning.autotune import read_results
from presk.tuning.rank import as_json, figures, plot, pooled, priced_under, report, side_by_side


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("rank", help="compare a profile's predictions with presk autotune's measured times")
    p.add_argument("results", metavar="RESULTS.jsonl", nargs="+", help="the files presk autotune wrote (several: "
                   "their shapes ranked together, each shape in one file)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON, one object per nest shape "
                   "(with several --profile, one per profile: its pooled figures and its nests)")
    p.add_argument("--plot", metavar="OUT.png", help="predicted against measured per nest, log-log (matplotlib)")
    p.add_argument("--profile", metavar="P.json", action="append", help="judge this profile's model instead of "
                   "the one the file recorded: every point measured on this machine priced again here, statically, "
                   "from the nests the file keeps; given several times, the profiles side by side")  # fmt: skip
    p.add_argument("--whole-space", action="store_true", help="with --profile, also price every point of each "
                   "shape's space, to say whether the profile's own pick was measured")  # fmt: skip
    p.add_argument("--u", type=float, help="the model's median relative error (default: the profile's)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.u is not None and not args.u >= 0:
        raise PreskError("E4001", f"--u {args.u}: expected a relative error, at least 0")
    files = _read_files(args.results)
    records = [r for _, lines in files for r in lines]
    profiles = args.profile or []
    if args.whole_space and not profiles:
        raise PreskError("E4001", "--whole-space goes with --profile: the file's own prices are its whole spaces'")
    if len(profiles) > 1 and args.plot:
        raise PreskError("E4001", "--plot draws one model's predictions: give one --profile with it")
    if args.plot:
        check_output(args.plot)  # before the pricing a --profile asks for
    note = sys.stderr if args.json else sys.stdout
    if len(profiles) > 1:
        judged = [(path, figures(*_priced(files, path, args, note))) for path in profiles]
        if args.json:
            print(json.dumps([{"profile": path, "pooled": pooled(nests), "nests": as_json(nests)}
                              for path, nests in judged], indent=1))  # fmt: skip
        else:
            for line in side_by_side(judged):
                print(line)
        return 0
    u = args.u
    if profiles:
        records, u = _priced(files, profiles[0], args, note)
    nests = figures(records, u)
    if not nests:
        raise PreskError("E4001", "no measured point has a prediction: give --profile P.json to price them (or "
                         "measure with presk autotune ... --profile P.json)")  # fmt: skip
    if args.json:
        print(json.dumps(as_json(nests), indent=1))
    else:
        for line in report(nests):
            print(line)
    if args.plot:
        plot(nests, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _read_files(paths: list[str]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each file's records; a shape measured in two of them is refused (their points would mix as one's)."""
    files = []
    seen: dict[tuple[str, str], str] = {}
    for path in paths:
        if paths.count(path) > 1:
            raise PreskError("E4001", f"the results file '{path}' is given {paths.count(path)} times")
        try:
            open(path, "rb").close()
        except OSError as error:
            raise PreskError("E0001", f"cannot read the results file '{path}': {error.strerror}") from None
        lines = read_results(path)
        if not any(r.get("record", "point") == "point" for r in lines):
            raise PreskError("E8001", f"{path}: the results file holds no measured point (presk autotune ... -o "
                             f"{path} writes them)")  # fmt: skip
        for r in lines:
            if r.get("record", "point") == "point":
                first = seen.setdefault((r["machine"], r["shape_key"]), path)
                if first != path:
                    raise PreskError("E4001", f"{r['site']} ({r.get('shape', '')}) was measured in {first} and in "
                                     f"{path}: rank the two apart")  # fmt: skip
        files.append((path, lines))
    return files


def _priced(files: list[tuple[str, list[dict[str, Any]]]], path: str, args: argparse.Namespace,
            note: Any) -> tuple[list[dict[str, Any]], float]:  # fmt: skip
    """The files' records priced under `path` and the u to judge them with, what was priced said on `note`."""
    repriced = priced_under(files, path, whole_space=args.whole_space)
    u = args.u if args.u is not None else repriced.u
    spaces = f" (and the spaces' {repriced.space_points})" if args.whole_space else ""
    print(f"predictions of {path} (u = {u:.3g}): {repriced.points} points priced here{spaces} in "
          f"{repriced.seconds:.1f} s", file=note)  # fmt: skip
    if repriced.refused:
        print(f"  {repriced.refused} points refused by its lowering: left out", file=note)
    if repriced.other_machines:
        print(f"  lines measured on another machine left out ({', '.join(repriced.other_machines)}): rank "
              "them there", file=note)  # fmt: skip
    return repriced.records, u
