"""`psk-egraph-opt`: equality saturation of every PSK-Core function body on egglog.

One e-graph per function (`egraph_terms.FunctionGraph`), the rules of
`egraph_rules` run one iteration at a time under limits (iterations, nodes,
seconds: egglog-python has no node or time limit of its own), the cheapest
term of the results extracted over the DAG, priced by operation counts or by
a profile's roofline (`egraph_prices`), and written back as fresh lets.
Extraction from an e-graph a limit stopped is sound, since every node in it
is an exact rewrite of the original: the pass extracts anyway and reports
the stop reason.

A function the pass cannot take (a region inside, no typed term) or whose
rewrite would not verify is left exactly as it was, and its report says why;
the pass never half-rewrites. `optimize_module` returns the reports, one per
function, for a command to print (`presk dump --stage core-opt`);
`psk-egraph-opt{report=true}` prints them on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from presk.diagnostics import PreskError
from presk.passes import egraph_rules as R
from presk.passes.egraph_prices import Prices, profile_prices
from presk.passes.egraph_terms import FunctionGraph, Serialized, Unsupported, extract, write_back


@dataclass(frozen=True)
class Limits:
    """When saturation stops: the seed's 30 iterations, 20 000 nodes, 2 s (of CPU time, `_cpu_seconds`) per function."""

    iterations: int = 30
    nodes: int = 20_000
    seconds: float = 2.0


@dataclass
class FunctionReport:
    """What the pass did to one function."""

    function: str
    stop: str
    """`saturated`, `iteration limit`, `node limit`, `time limit`, or `left as it was: <why>`."""
    iterations: int = 0
    nodes: int = 0
    lets_before: int = 0
    lets_after: int = 0
    cost_before: float = 0.0
    cost_after: float = 0.0
    saturation_seconds: float = 0.0
    extraction_seconds: float = 0.0
    rewritten: bool = False
    pricing: str = "counts"
    """`counts` (the costs are operation counts), or `roofline`/`fused` (seconds a profile predicts)."""

    @property
    def hit_limit(self) -> bool:
        return self.stop.endswith("limit")

    def line(self) -> str:
        before, after = _cost(self.pricing, self.cost_before), _cost(self.pricing, self.cost_after)
        cost = f"{_cost_words(self.pricing)} {before} -> {after}"
        return (
            f"@{self.function}: {self.stop}, {self.iterations} iterations, {self.nodes} nodes, "
            f"lets {self.lets_before} -> {self.lets_after}, {cost}, "
            f"saturation {self.saturation_seconds:.3f} s, extraction {self.extraction_seconds:.3f} s"
        )


def _cost_words(pricing: str) -> str:
    return "cost" if pricing == "counts" else f"predicted ({pricing})"


def _cost(pricing: str, value: float) -> str:
    return f"{value:.2f}" if pricing == "counts" else f"{value * 1e6:.1f} us"


def format_reports(reports: list[FunctionReport]) -> str:
    """The report `psk-egraph-opt{report=true}` prints: one line a function, then a summary line."""
    lines = [r.line() for r in reports]
    rewritten = [r for r in reports if r.rewritten and (r.lets_after != r.lets_before or r.cost_after < r.cost_before)]
    limited = [r for r in reports if r.hit_limit]
    before = sum(r.lets_before for r in reports)
    after = sum(r.lets_after for r in reports)
    pricing = reports[0].pricing if reports else "counts"
    cost_before = _cost(pricing, sum(r.cost_before for r in reports))
    cost_after = _cost(pricing, sum(r.cost_after for r in reports))
    lines.append(
        f"psk-egraph-opt: {len(rewritten)} of {len(reports)} functions changed, lets {before} -> {after}, "
        f"{_cost_words(pricing)} {cost_before} -> {cost_after}, {len(limited)} stopped on a limit"
    )
    return "\n".join(lines)


_cpu_seconds = time.process_time
"""The clock of the time limit and of the report: the CPU time of this process (egglog's threads
included), not the wall's. A machine busy with other work then stops saturation after the same
iterations, and gives the same program, as an idle one."""


def saturate(graph: FunctionGraph, limits: Limits, families: tuple[str, ...] | None) -> tuple[str, int, int, float]:
    """Run the rules one iteration at a time until nothing changes or a limit is reached.

    Returns the stop reason, the iterations kept, the node count and the seconds taken. One
    iteration can multiply the e-graph (associativity around a zero class): the state before each
    iteration is pushed, and an iteration that crosses the node limit is undone, so that extraction
    never reads more than `limits.nodes` nodes. The clock is read after each iteration, so the last
    one may overrun the time limit by its own duration."""
    rules = R.build_ruleset(families)
    for extra in graph.extra_rules:
        rules.append(extra)
    egraph = graph.egraph
    start = _cpu_seconds()
    nodes = graph.node_count()
    for iteration in range(1, limits.iterations + 1):
        egraph.push()
        report = egraph.run(1, ruleset=rules)
        grown = graph.node_count()
        elapsed = _cpu_seconds() - start
        if grown > limits.nodes:
            egraph.pop()
            return "node limit", iteration - 1, nodes, _cpu_seconds() - start
        nodes = grown
        if not report.updated:
            return "saturated", iteration, nodes, elapsed
        if elapsed > limits.seconds:
            return "time limit", iteration, nodes, elapsed
    return "iteration limit", limits.iterations, nodes, _cpu_seconds() - start


def optimize_function(
    fn: func.FuncOp,
    limits: Limits,
    families: tuple[str, ...] | None = None,
    extraction: str = "dag",
    prices: Prices | None = None,
) -> FunctionReport:
    """Rewrite one function in place (through a clone that replaces it only once it verifies)."""
    name = fn.sym_name.data
    lets = len(list(fn.body.block.ops)) - 1
    prices = prices or Prices()
    report = FunctionReport(name, "left as it was", lets_before=lets, lets_after=lets, pricing=prices.name)
    rewriter = Rewriter()
    clone = fn.clone()
    try:
        graph = FunctionGraph(clone, prices)
        report.cost_before = report.cost_after = graph.cost_before
        stop, report.iterations, report.nodes, report.saturation_seconds = saturate(graph, limits, families)
        start = _cpu_seconds()
        ser = Serialized(graph)
        roots = [ser.mark_class[m] for m in graph.root_marks]
        extracted = extract(graph, ser, roots, extraction)
        report.extraction_seconds = _cpu_seconds() - start
        report.stop = stop
        if extracted.cost > graph.cost_before * (1 + 1e-9) + 1e-12:
            dearer = _cost(prices.name, extracted.cost)
            report.stop = f"{stop}; left as it was: the extracted term costs more ({dearer})"
            return report
        lets_after = write_back(graph, ser, extracted, roots)
        rewriter.insert_op(clone, InsertPoint.after(fn))
        try:
            clone.verify()
        except VerifyException as error:
            rewriter.erase_op(clone)
            report.stop = f"{stop}; left as it was: the rewrite does not verify ({error})"
            return report
        rewriter.erase_op(fn)
        report.lets_after = lets_after
        report.cost_after = extracted.cost
        report.rewritten = True
        return report
    except Unsupported as why:
        report.stop = f"left as it was: {why}"
        return report


def optimize_module(
    module: ModuleOp,
    limits: Limits = Limits(),
    families: tuple[str, ...] | None = None,
    extraction: str = "dag",
    prices: Prices | None = None,
    only: Collection[str] | None = None,
) -> list[FunctionReport]:
    """Every function with a body (those named in `only`, when given), in module order; the reports
    in the same order."""
    functions = [op for op in module.body.block.ops if isinstance(op, func.FuncOp) and not op.is_declaration
                 and (only is None or op.sym_name.data in only)]  # fmt: skip
    return [optimize_function(fn, limits, families, extraction, prices) for fn in functions]


@dataclass(frozen=True)
class EGraphOpt(ModulePass):
    """`psk-egraph-opt{iterations=30 nodes=20000 seconds=2.0 rules="algebra,..." extraction=dag report=false
    profile=P.json fusion=true realize=f64}`."""

    name = "psk-egraph-opt"

    iterations: int = 30
    nodes: int = 20_000
    seconds: float = 2.0
    rules: str = "all"
    """`all`, or a comma-separated list of families: algebra, reductions, structure, contraction."""
    report: bool = False
    """Print the per-function report on stderr."""
    extraction: str = "dag"
    """`dag` (a shared subterm paid once) or `tree` (the seed's: paid at each use)."""
    profile: str = ""
    """A cost profile (`presk bench --calibrate`): extraction priced in seconds by its roofline, at the
    module's bound sizes, instead of by operation counts."""
    fusion: bool = True
    """With a profile: elementwise nodes priced inside their fusion groups (no bytes, no launch)."""
    realize: str = "f64"
    """With a profile: the realization whose roofline and element size price the nodes."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        families: tuple[str, ...] | None = None
        if self.rules != "all":
            families = tuple(f.strip() for f in self.rules.split(",") if f.strip())
            unknown = [f for f in families if f not in R.FAMILIES]
            if unknown:
                known = ", ".join(R.FAMILIES)
                raise PreskError("E4001", f"no rule family '{unknown[0]}' (families: all, {known})")
        if self.extraction not in ("dag", "tree"):
            raise PreskError("E4001", f"no extraction '{self.extraction}' (dag or tree)")
        if self.iterations < 1 or self.nodes < 1 or self.seconds <= 0:
            raise PreskError("E4001", "iterations, nodes and seconds are positive")
        prices = profile_prices(self.profile, self.realize, fused=self.fusion) if self.profile else None
        limits = Limits(self.iterations, self.nodes, self.seconds)
        reports = optimize_module(op, limits, families, self.extraction, prices)
        if self.report:
            print(format_reports(reports), file=sys.stderr)
