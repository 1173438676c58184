"""psk-egraph-opt's extractions side by side on the corpus after differentiation, each chosen program priced alike.

    python bench/bench_egraph.py --profile P.json            # f32, the sizes below
    python bench/bench_egraph.py --profile P.json --realize f64

For every corpus program (its gradients generated, as `presk train` and
`--opt` see it), the pass runs with each pricing (operation counts, the
roofline, the fusion-aware roofline: docs/egraph.md §3) and each extraction
(DAG, tree). Every program written back is then priced by one yardstick, the
fusion-aware roofline of `--profile`, so that the columns compare programs
and not pricings. Printed: the yardstick's prediction of the program as
written and of each extraction's, the lets, the seconds saturation and
extraction took, and which extractions chose the same program.
"""

from __future__ import annotations

import argparse

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from presk.cli.program import load_program
from presk.ir.print import print_module
from presk.passes.egraph import optimize_module
from presk.passes.egraph_prices import RooflinePrices, profile_prices
from presk.passes.egraph_terms import FunctionGraph

CASES = [
    ("corpus/mlp.mlir", ["B=256"], []),
    ("corpus/attention.mlir", ["B=8", "T=256"], ["D=384", "H=6"]),
    ("corpus/minigpt.mlir", ["B=8", "T=64"], []),
    ("corpus/nlp/gpt.mlir", ["B=8", "T=256"], ["D=384", "H=6", "L=6", "C=256"]),
]
"""The programs and their sizes: the course GPT's, and sizes of the same order for the others."""


def predicted(module: ModuleOp, yardstick: RooflinePrices) -> float:
    """Seconds the yardstick predicts for every function of `module` as written."""
    functions = [op for op in module.body.block.ops if isinstance(op, func.FuncOp) and not op.is_declaration]
    return sum(FunctionGraph(fn, yardstick).cost_before for fn in functions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", required=True, metavar="P.json", help="the cost profile (presk bench --calibrate)")
    parser.add_argument("--realize", default="f32", choices=("f64", "f32", "bf16"), help="the types priced (default f32)")
    args = parser.parse_args()
    print("| program | pricing | extraction | predicted (fused roofline) | lets | saturation | extraction time | same program as |")
    print("|---|---|---|---|---|---|---|---|")
    for path, dims, consts in CASES:
        base = load_program(path, dims, consts)
        yardstick = profile_prices(args.profile, args.realize, base.env)
        label = f"`{path.removeprefix('corpus/')}` {' '.join(dims + consts)}"
        print(f"| {label} | as written | – | {predicted(base.parsed.module, yardstick) * 1e3:.4f} ms | | | | |")
        texts: dict[str, str] = {}
        for pricing in ("counts", "roofline", "fused"):
            for extraction in ("dag", "tree"):
                module = base.parsed.module.clone()
                prices = None
                if pricing != "counts":
                    prices = profile_prices(args.profile, args.realize, base.env, fused=pricing == "fused")
                reports = optimize_module(module, extraction=extraction, prices=prices)
                text = print_module(module, {})
                same = [k for k, v in texts.items() if v == text]
                texts[f"{pricing}/{extraction}"] = text
                lets = f"{sum(r.lets_before for r in reports)} → {sum(r.lets_after for r in reports)}"
                print(f"| | {pricing} | {extraction} | {predicted(module, yardstick) * 1e3:.4f} ms | {lets} | "
                      f"{sum(r.saturation_seconds for r in reports):.2f} s | "
                      f"{sum(r.extraction_seconds for r in reports):.3f} s | {same[0] if same else ''} |")  # fmt: skip


if __name__ == "__main__":
    main()
