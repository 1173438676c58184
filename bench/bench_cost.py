"""How well a frozen cost profile ranks the kernels of programs it never saw, and what a prediction costs.

    python bench/bench_cost.py --profile P.json                  # the corpus table, f32 and f64
    python bench/bench_cost.py --profile P.json --dtypes f32 --rounds 5
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


def judge(profile: str, path: str, entry: str, sizes: tuple[str, ...], dtype: str, rounds: int) -> tuple[int, list[str]]:
    from presk.cli.main import main as presk

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = presk(["bench", str(ROOT / path), "--entry", entry, *sizes, "--realize", dtype,
                      "--rounds", str(rounds), "--warmup", "1", "--profile", profile])  # fmt: skip
    text = out.getvalue()
    match, priced = SPEARMAN.search(text), PRICED.search(text)
    if code != 0 or match is None or priced is None:
        sys.exit(f"presk bench failed on {path} {entry} {dtype}:\n{text}")
    return int(priced.group(1)), list(match.groups())


def corpus_table(profile: str, dtypes: list[str], rounds: int) -> None:
    print("| program | entry | sizes | type | kernels | counts | W | model |")
    print("|---|---|---|---|---|---|---|---|")
    for path, entry, sizes in ENTRIES:
        for dtype in dtypes:
            kernels, (counts, work, model) = judge(profile, path, entry, sizes, dtype, rounds)
            shown = " ".join(s for s in sizes if not s.startswith("--"))
            print(f"| {path} | {entry} | {shown} | {dtype} | {kernels} | {counts} | {work} | {model} |", flush=True)


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
    parser.add_argument("--speed", action="store_true", help="only the cost of pricing one layout point")
    parser.add_argument("--repeat", type=int, default=50, help="repetitions of each --speed measurement")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.speed:
        speed(args.profile, args.repeat)
        return
    corpus_table(args.profile, [d.strip() for d in args.dtypes.split(",") if d.strip()], args.rounds)


if __name__ == "__main__":
    main()
