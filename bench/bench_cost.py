"""How well a frozen cost profile ranks the kernels of programs it never saw, and what a prediction costs.

    python bench/bench_cost.py --profile P.json                  # the corpus table, f32 and f64
    python bench/bench_cost.py --profile P.json --dtypes f32 --rounds 5
    python bench/bench_cost.py --profile P.json --no-fuse         # every primitive its own kernel
    python bench/bench_cost.py --profile P.json --against Q.json  # two profiles on the same timings
    python bench/bench_cost.py --profile P.json --twice           # each timing against the other
    python bench/bench_cost.py --profile P.json --speed           # only the cost of one prediction

For every corpus entry below, in each type, `presk bench FILE --entry E
--profile P.json` times each kernel natively (the first launch dropped, the
median of the others) and prices it with the profile; the table gives
Spearman's rank correlation of the measured times against the three
predictors: operation counts (shape-blind), the work W alone, and the
model. The profile is fitted on the calibration space only
(`presk bench --calibrate P.json --space calib`), whose programs are GEMMs,
thin products and five small nests at their own shapes: none of these
entries or their shapes is in it, so the table is a test of the model,
not of its fit.

`--no-fuse` launches every primitive by itself (`presk bench --no-fuse`):
fusion leaves some entries with one or two kernels (the layer norm is one
kernel, the MLP two), where a rank correlation says nothing; unfused, each
entry has tens of kernels to rank, as the seed's table had.

`--against Q.json` compares two profiles (two fits, forms or rule sets) on
one measurement: each entry's kernels are timed once (as a calibration
times them: every launch, the first dropped, the median of at least 9
calls and 0.3 s) and priced by both. Two runs of the table above time the
kernels twice, and the kernels of a few microseconds move between runs by
more than two models differ (W alone, which no profile touches, moved by
up to 0.4 on the unfused layer norm): ranked on the same times, what
differs is the models.

`--twice` times each entry's kernels twice, one timing after the other, and
gives the model's Spearman against each and the two timings' against each
other: where the kernels are a few microseconds apart, the second figure
is the most any model could reach against such a timing.

`--speed` times, on a GEMM kernel of each register tile the calibration uses,
the three steps of pricing one layout point: lowering it (`presk.pipeline.lower`),
reading its terms (`presk.cost.quantities.kernel_terms`), and the model's
prediction from the terms (`presk.cost.models.predict_many`), medians of
repeated runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

ENTRIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("corpus/mlp.mlir", "mse", ("--dim", "B=4096")),
    ("corpus/layernorm.mlir", "LayerNorm.apply", ("--dim", "B=16", "--dim", "T=256")),
    ("corpus/attention.mlir", "SelfAttention.apply", ("--dim", "B=8", "--dim", "T=256")),
    ("corpus/minigpt.mlir", "loss", ("--dim", "B=8", "--dim", "T=64")),
    ("corpus/minigpt.mlir", "adamw.step", ("--dim", "B=8", "--dim", "T=64")),
    ("corpus/nlp/gpt.mlir", "loss", ("--dim", "B=8", "--dim", "T=256")),
    ("corpus/nlp/gpt.mlir", "adamw.step", ("--dim", "B=8", "--dim", "T=256")),
    ("corpus/nlp/gpt.mlir", "loss", ("--const", "D=384", "--const", "H=6", "--const", "L=6", "--const", "C=256",
                                    "--dim", "B=8", "--dim", "T=256")),
)  # fmt: skip
"""The corpus entries the profile is judged on: the corpus GPT at its constants and the course GPT's."""

SPEARMAN = re.compile(r"Spearman against the measured times: counts (\S+), work (\S+), model (\S+)")
PRICED = re.compile(r"@\S+: (\d+) kernels priced")


def judge(
    profile: str, path: str, entry: str, sizes: tuple[str, ...], dtype: str, rounds: int, fuse: bool = True
) -> tuple[int, list[str]]:
    from presk.cli.main import main as presk

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = presk(["bench", str(ROOT / path), "--entry", entry, *sizes, "--realize", dtype,
                      "--rounds", str(rounds), "--warmup", "1", "--profile", profile,
                      *([] if fuse else ["--no-fuse"])])  # fmt: skip
    text = out.getvalue()
    match, priced = SPEARMAN.search(text), PRICED.search(text)
    if code != 0 or match is None or priced is None:
        sys.exit(f"presk bench failed on {path} {entry} {dtype}:\n{text}")
    return int(priced.group(1)), list(match.groups())


def corpus_table(profile: str, dtypes: list[str], rounds: int, fuse: bool = True) -> None:
    print("| program | entry | sizes | type | kernels | counts | W | model |")
    print("|---|---|---|---|---|---|---|---|")
    for path, entry, sizes in ENTRIES:
        for dtype in dtypes:
            kernels, (counts, work, model) = judge(profile, path, entry, sizes, dtype, rounds, fuse)
            shown = " ".join(s for s in sizes if not s.startswith("--"))
            print(f"| {path} | {entry} | {shown} | {dtype} | {kernels} | {counts} | {work} | {model} |", flush=True)


def _timed_samples(profile: Any, path: str, entry: str, sizes: tuple[str, ...], dtype: str, runner: Any,
                   fuse: bool, timings: int) -> tuple[list[list[Any]], dict[str, Any]]:  # fmt: skip
    """The entry's kernels compiled once and timed `timings` times, as a calibration times them (every launch,
    the first dropped, the median of at least 9 calls and 0.3 s), their terms read with `profile`'s machine
    description and rules; and the kernels by name."""
    from presk.cli.backends import compile_entry
    from presk.cli.program import load_program, plan_of
    from presk.cli.source import read_input
    from presk.cost.terms import MachineDesc
    from presk.dialects.psk_kernel import KernelOp
    from presk.interp.inputs import make_inputs
    from presk.ir.calls import find_entry
    from presk.jit.executor import flatten_inputs
    from presk.target import target_machine
    from presk.tuning.calibration import MAX_CALLS, kernel_samples

    dims = [sizes[i + 1] for i in range(0, len(sizes), 2) if sizes[i] == "--dim"]
    consts = [sizes[i + 1] for i in range(0, len(sizes), 2) if sizes[i] == "--const"]
    program = load_program(read_input(str(ROOT / path)), dims, consts, entries=[entry])
    kernels = compile_entry(program, entry, plan_of(dtype, None), fuse=fuse)
    leaves = flatten_inputs(make_inputs(find_entry(program.parsed.module, entry), program.env, 0))
    desc = profile.machine_desc or MachineDesc.of(target_machine())
    runs = [kernel_samples(kernels, leaves, runner, desc, {}, min_calls=9, min_seconds=0.3, max_calls=MAX_CALLS,
                           rules=[",".join(sorted(profile.rules))]) for _ in range(timings)]  # fmt: skip
    named = {k.sym_name.data: k for k in kernels.body.block.ops if isinstance(k, KernelOp)}
    return runs, named


def _cells(figures: list[float]) -> str:
    return " | ".join("n/a" if np.isnan(f) else f"{f:.3f}" for f in figures)


def paired_table(profile: str, against: str, dtypes: list[str], fuse: bool = True) -> None:
    """The corpus table with a column per profile, both ranking one timing of each entry's kernels (`--against`)."""
    from presk.cli.backends import make_runner
    from presk.cost.fit import spearman
    from presk.cost.models import predict_many
    from presk.cost.profile import load_profile
    from presk.cost.quantities import kernel_terms
    from presk.cost.terms import MachineDesc
    from presk.target import target_machine

    profiles = [load_profile(profile), load_profile(against)]
    runner = make_runner("native", None)
    print(f"| program | entry | sizes | type | kernels | counts | W | {Path(profile).name} | {Path(against).name} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path, entry, sizes in ENTRIES:
        for dtype in dtypes:
            (samples,), named = _timed_samples(profiles[0], path, entry, sizes, dtype, runner, fuse, 1)
            measured = np.array([s.seconds for s in samples])
            figures = [spearman(np.array([s.counts for s in samples], dtype=float), measured),
                       spearman(np.array([next(iter(s.terms.values())).work for s in samples]), measured)]
            for i, p in enumerate(profiles):
                constants = p.layout or p.roofline
                assert constants is not None
                d = p.machine_desc or MachineDesc.of(target_machine())
                terms = ([next(iter(s.terms.values())) for s in samples] if i == 0  # read with its desc and rules
                         else [kernel_terms(named[s.extra["kernel"]], d, s.extra["workers"], frozenset(p.rules))
                               for s in samples])  # fmt: skip
                figures.append(spearman(predict_many(constants, terms), measured))
            shown = " ".join(s for s in sizes if not s.startswith("--"))
            print(f"| {path} | {entry} | {shown} | {dtype} | {len(samples)} | {_cells(figures)} |", flush=True)


def twice_table(profile: str, dtypes: list[str], fuse: bool = True) -> None:
    """Each entry's kernels timed twice (`--twice`): the model against each timing, and the timings against each
    other, the rank correlation the measurement itself resolves."""
    from presk.cli.backends import make_runner
    from presk.cost.fit import spearman
    from presk.cost.models import predict_many
    from presk.cost.profile import load_profile
    from presk.tuning.plan import profile_constants

    loaded = load_profile(profile)
    constants = profile_constants(loaded, profile)
    runner = make_runner("native", None)
    print("| program | entry | sizes | type | kernels | model, 1st timing | model, 2nd timing | 1st timing, 2nd |")
    print("|---|---|---|---|---|---|---|---|")
    for path, entry, sizes in ENTRIES:
        for dtype in dtypes:
            (first, second), _ = _timed_samples(loaded, path, entry, sizes, dtype, runner, fuse, 2)
            assert [s.extra["kernel"] for s in first] == [s.extra["kernel"] for s in second]
            times = [np.array([s.seconds for s in run]) for run in (first, second)]
            model = predict_many(constants, [next(iter(s.terms.values())) for s in first])
            figures = [spearman(model, times[0]), spearman(model, times[1]), spearman(times[0], times[1])]
            shown = " ".join(s for s in sizes if not s.startswith("--"))
            print(f"| {path} | {entry} | {shown} | {dtype} | {len(first)} | {_cells(figures)} |", flush=True)


def _median_seconds(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speed(profile_path: str, repeat: int) -> None:
    from presk import sizes
    from presk.cost.models import predict_many
    from presk.cost.profile import load_profile
    from presk.cost.quantities import kernel_terms
    from presk.dialects.psk_kernel import KernelOp
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.pipeline import lower
    from presk.plans import parse_plan
    from presk.target import target_machine
    from presk.tuning.calibration import _tile_ladder

    profile = load_profile(profile_path)
    constants = profile.layout or profile.roofline
    desc = profile.machine_desc
    assert constants is not None and desc is not None
    rules = frozenset(profile.rules)
    machine = target_machine()
    source = (ROOT / "bench" / "programs" / "gemm.mlir").read_text()
    module = parse_module(presk_context(), source, "gemm.mlir").module
    env = sizes.resolve(module, {}, {"N": 1024})
    lanes = machine.register_width("f32")
    print(f"| point (f32 GEMM, N = 1024) | lower | terms | predict |   (rules: {','.join(rules) or 'none'})")
    print("|---|---|---|---|")
    for tile in _tile_ladder(machine, "f32", 5):
        layout = {"tile": tile, "lanes": lanes, "kblock": 128, "order": "KIJ", "pack": True}
        plan = parse_plan({"realization": "f32", "layout": {"gemm/%0": layout}}, "bench_cost")
        kernels = lower(module, "gemm", env, plan)
        dot = next(op for op in kernels.walk() if isinstance(op, KernelOp) and op.sym_name.data == "dot")
        terms = kernel_terms(dot, desc, 1, rules)
        t_lower = _median_seconds(lambda: lower(module, "gemm", env, plan), max(3, repeat // 10))
        t_terms = _median_seconds(lambda: kernel_terms(dot, desc, 1, rules), repeat)
        t_predict = _median_seconds(lambda: predict_many(constants, [terms]), repeat)
        print(f"| {tile} in {lanes} lanes, k-block 128 KIJ, packed | {t_lower * 1e3:.1f} ms | {t_terms * 1e3:.2f} ms "
              f"| {t_predict * 1e6:.0f} µs |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True, help="a fitted profile (presk bench --calibrate ... --space calib)")
    parser.add_argument("--dtypes", default="f32,f64", help="comma-separated realizations (default f32,f64)")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls of each entry (default 5)")
    parser.add_argument("--no-fuse", action="store_true", help="launch every primitive by itself (presk bench --no-fuse)")
    parser.add_argument("--against", metavar="Q.json", help="a second profile, priced on the same timings")
    parser.add_argument("--twice", action="store_true",
                        help="time each entry's kernels twice: the model against each timing, and the two timings "
                             "against each other (what the measurement itself resolves)")
    parser.add_argument("--speed", action="store_true", help="only the cost of pricing one layout point")
    parser.add_argument("--repeat", type=int, default=50, help="repetitions of each --speed measurement")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.speed:
        speed(args.profile, args.repeat)
        return
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if args.against:
        paired_table(args.profile, args.against, dtypes, not args.no_fuse)
        return
    if args.twice:
        twice_table(args.profile, dtypes, not args.no_fuse)
        return
    corpus_table(args.profile, dtypes, args.rounds, not args.no_fuse)


if __name__ == "__main__":
    main()
