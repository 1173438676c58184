"""`psk-egraph-opt` against its oracle, the reference interpreter.

* Every function of every corpus file (the GPT at small constants), and the
  corpus losses' gradients after `psk-autodiff`, go through the pass within its
  limits, verify, and compute what they computed before on the same inputs.
  A function the pass left as it was must give the same bits. A rewritten one
  is compared in f64 leaf by leaf to 1e-12 of the leaf's largest magnitude:
  each rule is exact over ℝ, so the two programs differ only in the rounding
  of the few operations a rule moves (x·(1/r) against x/r, a factor taken out
  of a sum), a few ulps of the magnitudes involved, which the softmax and
  the normalizations carry at most a few hundred times (test_corpus's
  argument and scale); a wrong rule is off by O(1).
* A hypothesis property test writes random expressions over two tensors and a
  real, rewrites them, and compares the two programs in mpmath at 128 bits to
  2⁻¹⁰⁰ of each result's largest magnitude: 28 bits of margin for the
  roundings a rewrite moves, and none for a rule that is not exact.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

sys.path.insert(0, str(Path(__file__).parent))

from conftest import ROOT, load_with_aliases  # noqa: E402

from presk import sizes  # noqa: E402
from presk.diagnostics import PreskError  # noqa: E402
from presk.dialects.psk_core_autodiff import GradientRequestOp  # noqa: E402
from presk.interp.inputs import make_inputs  # noqa: E402
from presk.interp.reference import run_entry  # noqa: E402
from presk.ir.calls import find_entry  # noqa: E402
from presk.ir.context import presk_context  # noqa: E402
from presk.ir.parse import parse_module  # noqa: E402
from presk.ir.print import print_module  # noqa: E402
from presk.passes.bind import BindSizes  # noqa: E402
from presk.passes.egraph import EGraphOpt, Limits, format_reports, optimize_module  # noqa: E402
from presk.passes.egraph_prices import RooflinePrices, profile_prices  # noqa: E402
from presk.passes.egraph_rules import rule_names  # noqa: E402
from presk.cost.models import Constants  # noqa: E402
from presk.cost.profile import Profile, save_profile  # noqa: E402

SMALL = {"B": 2, "T": 4}
CONSTS: dict[str, dict[str, int]] = {"corpus/nlp/gpt.mlir": {"D": 16, "V": 16, "C": 16}}
CORPUS_FILES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "corpus").rglob("*.mlir"))
RTOL_F64 = 1e-12


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for k in value for leaf in leaves(value[k])]
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def functions(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.body.block.ops if isinstance(op, func.FuncOp) and not op.is_declaration]


def assert_same(before: list[Any], after: list[Any], bitwise: bool, rtol: float, where: str) -> None:
    for n, (b, a) in enumerate(zip(leaves(before), leaves(after), strict=True)):
        b, a = np.asarray(b), np.asarray(a)
        assert b.shape == a.shape, f"{where} leaf {n}: shape {a.shape}, was {b.shape}"
        if bitwise:
            assert np.array_equal(b.view(np.uint8) if b.dtype == np.float64 else b, a.view(np.uint8) if a.dtype == np.float64 else a), (
                f"{where} leaf {n}: not rewritten, yet its bits changed"
            )
            continue
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if b.size else 0.0
        assert err <= rtol * max(scale, np.finfo(float).tiny), f"{where} leaf {n}: error {err:g} at scale {scale:g}"


def check_module(module: ModuleOp, env: dict[str, int], label: str) -> list[Any]:
    """Run every function before and after the pass; return the reports."""
    before_text = print_module(module, {})
    optimized = module.clone()
    reports = optimize_module(optimized)
    optimized.verify()
    printed = print_module(optimized, {})
    reparsed = parse_module(presk_context(), printed, f"{label}.opt.mlir")
    reparsed.verify()
    assert print_module(reparsed.module, {}) == printed, "the rewritten program does not print back to itself"
    by_name = {r.function: r for r in reports}
    limits = Limits()
    for fn in functions(module):
        name = fn.sym_name.data
        report = by_name[name]
        assert "left as it was" not in report.stop, f"{label} @{name}: {report.stop}"
        assert report.iterations <= limits.iterations
        if report.stop == "saturated":
            assert report.nodes <= limits.nodes
        if any(isinstance(a.type, type(None)) for a in fn.args) or any(
            isinstance(op, GradientRequestOp) for op in fn.walk()
        ):
            continue  # a gradient request runs once psk-autodiff expanded it: test_gradients_after_autodiff_*
        inputs = make_inputs(fn, env, seed=7)
        want = run_entry(module, name, inputs, env)
        got = run_entry(optimized, name, inputs, env)
        assert_same(want, got, not report.rewritten, RTOL_F64, f"{label} @{name}")
    assert print_module(module, {}) == before_text, "the pass changed the module it was given a clone of"
    return reports


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_corpus_functions_keep_their_outputs(path: str) -> None:
    """Every function of the file, through the pass: within its limits, verified, same outputs."""
    module, _ = load_with_aliases(path)
    env = sizes.resolve(module, CONSTS.get(path, {}), SMALL)
    check_module(module, env, path)


GRADIENTS = {
    "mlp": ("corpus/mlp.mlir", "mse", "MLP", "!X", "!Y", {"B": 2}, {"D_IN": 3, "D_HID": 4, "D_OUT": 2}),
    "minigpt": ("corpus/minigpt.mlir", "loss", "Mini", "!Ids", "!Ids", {"B": 2, "T": 3}, {"D": 4, "H": 2, "V": 5, "C": 4, "L": 2}),
    "gpt": ("corpus/nlp/gpt.mlir", "loss", "GPT", "!Ids", "!Ids", {"B": 2, "T": 3}, {"D": 4, "H": 2, "V": 5, "C": 4, "L": 2}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_after_autodiff_keep_their_values(name: str) -> None:
    """The corpus losses' gradients (psk-autodiff's .fwd/.bwd functions): same values, no function
    costs more, and the MLP's gradient costs less (GELU's derivative, which MLP.apply.fwd computes:
    -0.5·(h·h) as a power)."""
    from presk.passes.autodiff import AutoDiff

    path, entry, params, a_t, b_t, dims, consts = GRADIENTS[name]
    text = (ROOT / path).read_text() + f"""
func.func @grad_{entry}(%p: !{params}, %a: {a_t}, %b: {b_t}) -> !{params} {{
  %0 = psk_core.grad @{entry}(%p, %a, %b) wrt [0] : !{params}
  func.return %0 : !{params}
}}
"""
    parsed = parse_module(presk_context(), text, f"{name}_grad.mlir")
    module = parsed.module
    BindSizes(dims=",".join(f"{k}={v}" for k, v in dims.items()),
              consts=",".join(f"{k}={v}" for k, v in consts.items())).apply(presk_context(), module)  # fmt: skip
    AutoDiff().apply(presk_context(), module)
    reports = check_module(module, {}, name)
    assert all(r.cost_after <= r.cost_before + 1e-9 for r in reports), format_reports(reports)
    if name == "mlp":
        assert sum(r.cost_after for r in reports) < sum(r.cost_before for r in reports), format_reports(reports)


@pytest.mark.parametrize("path", ["corpus/minigpt.mlir", "corpus/attention.mlir"])
def test_dag_extraction_never_costs_more_than_tree(path: str) -> None:
    """Both extractions report the DAG cost of what they write back; the DAG-aware one is never
    dearer (on the corpus they pick the same programs; tests/filecheck/egraph/extraction.mlir is a
    program where they differ)."""
    module, _ = load_with_aliases(path)
    dag = optimize_module(module.clone())
    tree = optimize_module(module.clone(), extraction="tree")
    for d, t in zip(dag, tree, strict=True):
        assert d.cost_after <= t.cost_after + 1e-9, (d.line(), t.line())


def test_attention_scale_moves_to_the_queries() -> None:
    """(Σ q k)·(1/√hd) becomes Σ (q/√hd) k: the division acts on the queries, not the scores."""
    module, _ = load_with_aliases("corpus/attention.mlir")
    module = module.clone()
    (report,) = optimize_module(module)
    fn = find_entry(module, "SelfAttention.apply")
    divs = [op for op in fn.walk() if op.name == "psk_core.div"]
    assert len(divs) == 1 and divs[0].result.type.names == ("batch", "heads", "seq", "hd")
    assert report.cost_after < report.cost_before and report.lets_after == report.lets_before - 2


def _fixed_prices(env: dict[str, int], fused: bool = True) -> RooflinePrices:
    """A machine of 10 G weighted operations/s, 20 GB/s and 1 µs a launch (the choices below depend only on sizes)."""
    return RooflinePrices(launch=1e-6, pi=1e10, beta=2e10, element_bytes=8, env=env, fused=fused)


@pytest.mark.parametrize(("seq", "scaled"), [(16, ("batch", "heads", "seq", "hd")), (4, ("batch", "heads", "seq", "seq2"))])
def test_profile_prices_scale_the_smaller_operand(seq: int, scaled: tuple[str, ...]) -> None:
    """Priced by a roofline, the scale 1/√hd goes to whichever of queries [.., seq, hd] and scores
    [.., seq, seq2] is smaller (hd = 8: the queries at seq 16, the scores, as written, at seq 4);
    operation counts cannot see sizes and scale the queries at both."""
    module, _ = load_with_aliases("corpus/attention.mlir")
    env = sizes.resolve(module, {}, {"B": 2, "T": seq})
    for prices, want in ((_fixed_prices(env), scaled), (_fixed_prices(env, fused=False), scaled),
                         (None, ("batch", "heads", "seq", "hd"))):  # fmt: skip
        clone = module.clone()
        (report,) = optimize_module(clone, prices=prices)
        divs = [op for op in find_entry(clone, "SelfAttention.apply").walk() if op.name == "psk_core.div"]
        assert len(divs) == 1 and divs[0].result.type.names == want, (prices, report.line())
        assert report.cost_after <= report.cost_before
        assert report.pricing == (prices.name if prices else "counts")


def test_profile_prices_in_seconds_from_a_profile(tmp_path: Path) -> None:
    """`psk-egraph-opt{profile=...}` reads λ, β and the widest lanes' π of the realization from the profile's
    roofline; the report prices in predicted microseconds; a size left unbound is said, not guessed."""
    roofline = Constants("roofline", {"lambda": 1e-6, "beta": 2e10, "pi[f64/l1]": 1e9, "pi[f64/l8]": 1e10,
                                      "pi[f32/l16]": 3e10})  # fmt: skip
    path = tmp_path / "p.json"
    save_profile(Profile("host|cpu", None, roofline=roofline), path)
    prices = profile_prices(str(path), "f64", {"T": 4})
    assert (prices.launch, prices.pi, prices.beta, prices.element_bytes, prices.fused) == (1e-6, 1e10, 2e10, 8, True)
    assert profile_prices(str(path), "f32").pi == 3e10
    with pytest.raises(PreskError, match="measured no bf16 kernel"):
        profile_prices(str(path), "bf16")
    module, aliases = load_with_aliases("corpus/attention.mlir")
    bound = module.clone()
    BindSizes(dims="B=2,T=16").apply(presk_context(), bound)
    (report,) = optimize_module(bound, prices=profile_prices(str(path)))
    assert report.rewritten and " us -> " in report.line() and "predicted (fused)" in report.line()
    # By hand: the scale moves from the scores (2·2·16·16 products) to the queries (2·2·16·8 divisions), and
    # the real 1/√hd goes: 513 fused operations fewer at 1e10/s, give or take the lets' token prices (1e-12).
    assert report.cost_before - report.cost_after == pytest.approx(513 / 1e10, abs=2e-11)
    (unbound,) = optimize_module(module.clone(), prices=profile_prices(str(path)))
    assert not unbound.rewritten and "'B' is not" in unbound.stop
    bound2 = module.clone()
    BindSizes(dims="B=2,T=16").apply(presk_context(), bound2)
    EGraphOpt(profile=str(path)).apply(presk_context(), bound2)
    assert print_module(bound2, aliases) == print_module(bound, aliases)


def test_limits_stop_and_extract_anyway() -> None:
    """adamw.step does not saturate in one iteration: stopped there, it is still extracted and correct."""
    module, _ = load_with_aliases("corpus/minigpt.mlir")
    module = module.clone()
    reports = optimize_module(module, Limits(iterations=2))
    step = next(r for r in reports if r.function == "adamw.step")
    assert step.stop == "iteration limit" and step.iterations == 2 and step.hit_limit
    tiny = optimize_module(module.clone(), Limits(nodes=50))
    assert next(r for r in tiny if r.function == "adamw.step").stop == "node limit"
    assert "stopped on a limit" in format_reports(reports)


def test_time_limit_is_read_after_each_iteration() -> None:
    module, _ = load_with_aliases("corpus/attention.mlir")
    (report,) = optimize_module(module.clone(), Limits(seconds=1e-9))
    assert report.stop == "time limit" and report.iterations == 1 and report.rewritten


def test_a_body_it_cannot_take_is_left_as_it_was() -> None:
    """After psk-fuse a body holds psk_realize regions (groups, nests): left exactly as it was, and said."""
    from presk.passes.fuse import FuseElementwise

    module, _ = load_with_aliases("corpus/layernorm.mlir")
    module = module.clone()
    FuseElementwise().apply(presk_context(), module)
    before = print_module(module, {})
    (report,) = optimize_module(module)
    assert report.stop.startswith("left as it was: 'psk_realize.") and report.stop.endswith("holds a region"), report.stop
    assert not report.rewritten and print_module(module, {}) == before


def test_bad_options_are_reported() -> None:
    module, _ = load_with_aliases("corpus/mlp.mlir")
    with pytest.raises(PreskError, match="no rule family 'algebr'"):
        EGraphOpt(rules="algebr").apply(presk_context(), module.clone())
    with pytest.raises(PreskError, match="positive"):
        EGraphOpt(iterations=0).apply(presk_context(), module.clone())
    with pytest.raises(PreskError, match="no extraction 'graph'"):
        EGraphOpt(extraction="graph").apply(presk_context(), module.clone())


def test_rule_table_is_documented() -> None:
    """docs/egraph.md lists every rule by its name."""
    doc = (ROOT / "docs" / "egraph.md").read_text()
    missing = [name for name in rule_names() if f"`{name.replace(' <->', '')}`" not in doc]
    assert not missing, missing


# -- the property test -----------------------------------------------------------------

X = "!psk_core.tensor<[a: 3, b: 2]>"
V = "!psk_core.tensor<[a: 3]>"
REAL = "!psk_core.real"
BITS = 128
TOL = mpmath.mpf(2) ** -100


class Program:
    """Lets of one function over %x, %y : X and %s : real, written as they are drawn."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def let(self, rhs: str, t: str) -> str:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"  {name} = {rhs} : {t}")
        return name


def draw_expr(draw: Any, p: Program, kind: str, depth: int) -> str:
    """A random expression of `kind` ('X' tensor or 'R' real) as lets of `p`; its value's name."""
    t = X if kind == "X" else REAL
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        if kind == "X":
            return draw(st.sampled_from(["%x", "%y"]))
        choice = draw(st.sampled_from(["%s", "0.0", "1.0", "0.5", "2.0"]))
        return choice if choice == "%s" else p.let(f"psk_core.constant {choice}", REAL)
    sub = lambda k: draw_expr(draw, p, k, depth - 1)  # noqa: E731
    form = draw(st.sampled_from(
        ["add", "sub", "mul", "scale", "neg", "exp", "logexp", "pow", "divexp", "sqrtsq", "reduce", "reduce", "sum_to", "bcast"]
    ))  # fmt: skip
    if form in ("add", "sub", "mul"):
        return p.let(f"psk_core.{form} {sub(kind)}, {sub(kind)}", t)
    if form == "scale":
        return p.let(f"psk_core.mul {sub('R')}, {sub(kind)}", t)
    if form == "neg":
        return p.let(f"psk_core.neg {sub(kind)}", t)
    if form == "exp":
        return p.let(f"psk_core.exp {sub(kind)}", t)
    if form == "logexp":
        return p.let(f"psk_core.log {p.let(f'psk_core.exp {sub(kind)}', t)}", t)
    if form == "pow":
        return p.let(f"psk_core.pow {sub(kind)}, {draw(st.integers(1, 3))}", t)
    if form == "divexp":
        return p.let(f"psk_core.div {sub(kind)}, {p.let(f'psk_core.exp {sub(kind)}', t)}", t)
    if form == "sqrtsq":
        positive = p.let(f"psk_core.exp {sub(kind)}", t)
        root = p.let(f"psk_core.sqrt {positive}", t)
        return p.let(f"psk_core.mul {root}, {root}", t)
    if form == "reduce":
        op = draw(st.sampled_from(["sum", "mean"]))
        # the operand is often what the reduction rules look for: a scaled, divided or negated tensor
        inner = draw(st.sampled_from(["any", "scale", "div", "neg"]))
        arg = sub("X")
        if inner == "scale":
            arg = p.let(f"psk_core.mul {sub('R')}, {arg}", X)
        elif inner == "div":
            divisor = p.let(f"psk_core.exp {sub('R')}", REAL)  # never zero
            arg = p.let(f"psk_core.div {arg}, {divisor}", X)
        elif inner == "neg":
            arg = p.let(f"psk_core.neg {arg}", X)
        if kind == "R":
            return p.let(f"psk_core.{op} {arg} [a, b]", REAL)
        row = p.let(f"psk_core.{op} {arg} [b]", V)
        return p.let(f"psk_core.broadcast_like {row}, %x", X)
    if form == "sum_to":
        return p.let(f"psk_core.sum_to {sub('X')}, {'%x' if kind == 'X' else '%s'}", t)
    return p.let(f"psk_core.broadcast_like {sub(kind)}, {'%x' if kind == 'X' else '%s'}", t)


@st.composite
def programs(draw: Any) -> str:
    p = Program()
    kind = draw(st.sampled_from(["X", "X", "R"]))
    result = draw_expr(draw, p, kind, 3)
    t = X if kind == "X" else REAL
    body = "\n".join(p.lines)
    return f"func.func @f(%x: {X}, %y: {X}, %s: {REAL}) -> {t} {{\n{body}\n  func.return {result} : {t}\n}}\n"


def with_every_value(text: str) -> str:
    """The function of `text` returning, instead of its result, the tuple of every let and its result."""
    lines = text.splitlines()
    names, types = [], []
    for line in lines:
        if " = psk_core." in line and " : " in line:
            names.append(line.split("=", 1)[0].strip())
            types.append(line.rsplit(" : ", 1)[1].strip())
    t = f"!psk_core.tuple<{', '.join(types)}>"
    out = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("func.func @f("):
            line = line[: line.rindex("->")] + f"-> {t} {{"
        elif stripped.startswith("func.return"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}%every = psk_core.tuple {', '.join(names)} : {t}")
            line = f"{indent}func.return %every : {t}"
        out.append(line)
    return "\n".join(out)


def largest_value(text: str, inputs: list[Any]) -> Any:
    """The largest magnitude among the inputs and every value the function of `text` computes."""
    module = parse_module(presk_context(), with_every_value(text), "every.mlir").module
    (values,) = run_entry(module, "f", inputs, {}, bits=BITS)
    with mpmath.workprec(BITS):
        flat = [v for leaf in [*leaves(values), *inputs] for v in np.asarray(leaf, dtype=object).ravel()]
        return max(abs(mpmath.mpf(v)) for v in flat)


@settings(max_examples=128, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_expressions_rewrite_exactly(text: str) -> None:
    """Tolerance: 2⁻¹⁰⁰ of the largest magnitude either program computes on the way. A rule exact
    over ℝ changes only roundings at 128 bits, each within 2⁻¹²⁸ of a value the program holds, so
    an exact cancellation (x − log(exp x)) is 0 on one side and a rounding on the other; a wrong rule
    errs by O(its operands). Limits: 4 000 nodes and 0.5 s, so that 128 cases stay within a minute
    (the limits themselves are tested on the corpus)."""
    parsed = parse_module(presk_context(), text, "random.mlir")
    parsed.verify()
    module = parsed.module
    rng = np.random.default_rng(len(text))
    inputs = [rng.standard_normal((3, 2)) * 0.5, rng.standard_normal((3, 2)) * 0.5, float(rng.standard_normal())]
    (want,) = run_entry(module, "f", inputs, {}, bits=BITS)
    rewritten = module.clone()
    (report,) = optimize_module(rewritten, Limits(nodes=4000, seconds=0.5))
    rewritten.verify()
    assert "left as it was" not in report.stop, report.stop
    (got,) = run_entry(rewritten, "f", inputs, {}, bits=BITS)
    after = print_module(rewritten, {})
    w = np.asarray(want, dtype=object).ravel()
    g = np.asarray(got, dtype=object).ravel()
    with mpmath.workprec(BITS):
        scale = max(largest_value(text, inputs), largest_value(after, inputs))
        err = max(abs(a - b) for a, b in zip(w, g))
        assert err <= TOL * scale, f"error {mpmath.nstr(err, 5)} at scale {mpmath.nstr(scale, 5)}\n{text}\n{after}"
