"""The corpus: every file parses, verifies and round-trips, and every entry computes
what an independent numpy implementation (`numpy_reference.py`) computes.

Each entry runs on the reference interpreter with random inputs from
`make_inputs` at small dimensions (B = 2, T = 4) and the file's own constants,
and is compared with numpy to a relative 1e-12. A few structural tests pin the
shapes the seeds rely on: the LayerNorm's x − μ with two readers, attention's
eins as contraction nests, and AdamW as one elementwise chain.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp

sys.path.insert(0, str(Path(__file__).parent))  # numpy_reference, whatever pytest's import mode

import numpy_reference as ref  # noqa: E402
from conftest import ROOT, load_with_aliases  # noqa: E402

from presk import sizes  # noqa: E402
from presk.dialects import psk_core as core  # noqa: E402
from presk.dialects.psk_core_types import RecordType, TupleType  # noqa: E402

CORPUS_FILES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "corpus").rglob("*.mlir"))

SMALL = {"B": 2, "T": 4}

RTOL = 1e-12
ATOL_SCALE = 1e-12
"""atol = ATOL_SCALE × the largest magnitude in the compared leaf.

The interpreter and numpy sum in different orders (tensordot/einsum against
`@`, a mean of squares against `var`). Either order errs by a few ulps of the
magnitudes it adds, not of the sum, so an element that cancels to near zero
(x − μ in a layer normalization, a logit close to 0, an AdamW update where
the decay and the step nearly cancel) can be off by far more than 1e-12 of
itself while being exact to 1e-15 of the leaf's scale. Measuring the absolute
error against the leaf's largest value, at the same 1e-12, accepts exactly
that and nothing coarser.
"""


# -- the cases ---------------------------------------------------------------


def _heads(env: dict[str, int]) -> int:
    return env["H"]


def _adam_inputs(inputs: list[Any]) -> list[Any]:
    """Realistic scalars for AdamW: step t = 5, learning rate 1e-3.

    make_inputs draws reals from N(0, 1); 1 − β2^t must be positive for the
    square root, as it is for every real step.
    """
    t = 5
    return [*inputs[:4], ref.ADAM_BETA1**t, ref.ADAM_BETA2**t, 1e-3]


@dataclass(frozen=True)
class Case:
    path: str
    entry: str
    reference: Callable[[list[Any], dict[str, int]], list[Any]]
    dims: dict[str, int] = field(default_factory=lambda: dict(SMALL))
    prepare: Callable[[list[Any]], list[Any]] = lambda inputs: inputs

    @property
    def id(self) -> str:
        dims = ",".join(f"{k}={v}" for k, v in self.dims.items())
        return f"{Path(self.path).name}:{self.entry}[{dims}]"


def _one(fn: Callable[..., Any]) -> Callable[[list[Any], dict[str, int]], list[Any]]:
    return lambda inputs, env: [fn(*inputs)]


def _with_heads(fn: Callable[..., Any]) -> Callable[[list[Any], dict[str, int]], list[Any]]:
    return lambda inputs, env: [fn(*inputs, _heads(env))]


_adam = lambda inputs, env: [ref.adamw_step(*inputs)]  # noqa: E731

CASES = [
    Case("corpus/mlp.mlir", "Linear.apply", _one(ref.linear)),
    Case("corpus/mlp.mlir", "Linear.apply_out", _one(ref.linear)),
    Case("corpus/mlp.mlir", "MLP.apply", _one(ref.mlp_apply)),
    Case("corpus/mlp.mlir", "mse", _one(ref.mse)),
    Case("corpus/layernorm.mlir", "LayerNorm.apply", _one(ref.layer_norm)),
    Case("corpus/attention.mlir", "SelfAttention.apply", _with_heads(ref.causal_self_attention)),
    Case("corpus/minigpt.mlir", "MiniGPT.apply", _with_heads(ref.minigpt_apply)),
    Case("corpus/minigpt.mlir", "loss", _with_heads(ref.minigpt_loss)),
    Case("corpus/minigpt.mlir", "Block.apply", _with_heads(ref.mini_block)),
    Case("corpus/minigpt.mlir", "LayerNorm.apply", _one(ref.layer_norm)),
    Case("corpus/minigpt.mlir", "SelfAttention.apply", _with_heads(ref.causal_self_attention)),
    Case("corpus/minigpt.mlir", "MLP.apply", _one(ref.mini_mlp)),
    Case("corpus/minigpt.mlir", "adamw.step", _adam, prepare=_adam_inputs),
    Case("corpus/nlp/gpt.mlir", "GPT.apply", _with_heads(ref.gpt_apply)),
    Case("corpus/nlp/gpt.mlir", "loss", _with_heads(ref.gpt_loss)),
    Case("corpus/nlp/gpt.mlir", "Block.apply", _with_heads(ref.gpt_block)),
    Case("corpus/nlp/gpt.mlir", "LayerNorm.apply", _one(ref.layer_norm)),
    Case("corpus/nlp/gpt.mlir", "SelfAttention.apply", _with_heads(ref.causal_self_attention)),
    Case("corpus/nlp/gpt.mlir", "MLP.apply", _one(ref.gpt_mlp)),
    Case("corpus/nlp/gpt.mlir", "Linear.apply", _one(ref.linear)),
    Case("corpus/nlp/gpt.mlir", "Linear.apply_out", _one(ref.linear)),
    Case("corpus/nlp/gpt.mlir", "adamw.step", _adam, prepare=_adam_inputs),
    # The seeds' configuration: the course GPT at B = 2, T = 32.
    Case("corpus/nlp/gpt.mlir", "loss", _with_heads(ref.gpt_loss), dims={"B": 2, "T": 32}),
    Case("corpus/nlp/gpt.mlir", "GPT.apply", _with_heads(ref.gpt_apply), dims={"B": 1, "T": 64}),
]


# -- helpers -------------------------------------------------------------------


def assert_tree_close(actual: Any, expected: Any, path: str = "result") -> None:
    """Compare interpreter output with numpy's, leaf by leaf, records in field order."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a record, got {type(actual).__name__}"
        assert list(actual) == list(expected), f"{path}: fields {list(actual)} != {list(expected)}"
        for key in expected:
            assert_tree_close(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple), f"{path}: expected a tuple, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"{path}: {len(actual)} elements != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_tree_close(a, e, f"{path}.{i}")
    else:
        a = np.asarray(actual, dtype=np.float64)
        e = np.asarray(expected, dtype=np.float64)
        assert a.shape == e.shape, f"{path}: shape {a.shape} != {e.shape}"
        assert np.all(np.isfinite(e)), f"{path}: the numpy reference is not finite"
        atol = ATOL_SCALE * float(np.max(np.abs(e))) if e.size else 0.0
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=atol, err_msg=path)


def functions(module: Any) -> dict[str, FuncOp]:
    return {op.sym_name.data: op for op in module.walk() if isinstance(op, FuncOp)}


def run_case(case: Case, bits: int | None = None, seed: int = 0) -> tuple[list[Any], list[Any]]:
    from presk.interp.inputs import make_inputs
    from presk.interp.reference import run_entry

    module, _ = load_with_aliases(case.path)
    env = sizes.resolve(module, {}, case.dims)
    inputs = case.prepare(make_inputs(functions(module)[case.entry], env, seed))
    got = run_entry(module, case.entry, inputs, env, bits=bits)
    return got, case.reference(inputs, env)


# -- every file parses, verifies and round-trips ----------------------------------


def test_the_corpus_has_its_files() -> None:
    assert CORPUS_FILES == [
        "corpus/attention.mlir",
        "corpus/layernorm.mlir",
        "corpus/minigpt.mlir",
        "corpus/mlp.mlir",
        "corpus/nlp/gpt.mlir",
    ]


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_file_round_trips(path: str) -> None:
    """Printing (with the file's aliases) and parsing again is a fixed point."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.parser import Parser

    from presk.ir.print import print_module

    module, aliases = load_with_aliases(path)
    text = print_module(module, aliases)
    ctx = Context()
    for dialect in (Builtin, Func, core.PSKCore):
        ctx.load_dialect(dialect)
    parser = Parser(ctx, text, path)
    again = parser.parse_module()
    again.verify()
    assert again.is_structurally_equivalent(module)
    assert print_module(again, dict(parser.attribute_aliases)) == text
    # Aliases keep the printed file readable: no tensor type is spelled out inside a function.
    body = text.split("builtin.module", 1)[1]
    assert "!psk_core.tensor<" not in body and "!psk_core.record<" not in body


GRADIENT_ENTRIES = {("corpus/nlp/gpt.mlir", "loss_grad")}
"""Checked against central differences of numpy's loss in test_autodiff.py::test_corpus_gradient_against_numpy."""


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_every_entry_has_a_numpy_reference(path: str) -> None:
    module, _ = load_with_aliases(path)
    covered = {c.entry for c in CASES if c.path == path} | {e for p, e in GRADIENT_ENTRIES if p == path}
    assert set(functions(module)) <= covered, f"no numpy reference for {set(functions(module)) - covered}"


# -- every entry agrees with numpy --------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_entry_matches_numpy(case: Case) -> None:
    got, expected = run_case(case)
    assert len(got) == len(expected)
    for i, (a, e) in enumerate(zip(got, expected)):
        assert_tree_close(a, e, f"{case.entry}#{i}")


@pytest.mark.parametrize("seed", [1, 2])
def test_gpt_loss_matches_numpy_on_other_inputs(seed: int) -> None:
    case = next(c for c in CASES if c.path.endswith("gpt.mlir") and c.entry == "loss")
    got, expected = run_case(case, seed=seed)
    assert_tree_close(got[0], expected[0], "loss")


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.path in ("corpus/mlp.mlir", "corpus/layernorm.mlir", "corpus/attention.mlir")],
    ids=lambda c: c.id,
)
def test_entry_at_128_bits_matches_numpy(case: Case) -> None:
    """The mpmath path of the interpreter on the small files (numpy stays the f64 oracle)."""
    got, expected = run_case(case, bits=128)
    for i, (a, e) in enumerate(zip(got, expected)):
        assert_tree_close(np.asarray(a, dtype=object).astype(np.float64), e, f"{case.entry}#{i}")


# -- the structure the seeds rely on ------------------------------------------------


def _users(value: Any) -> list[Any]:
    return [use.operation for use in value.uses]


@pytest.mark.parametrize(
    "path", ["corpus/layernorm.mlir", "corpus/minigpt.mlir", "corpus/nlp/gpt.mlir"]
)
def test_layernorm_reads_x_minus_mean_twice(path: str) -> None:
    """x − μ feeds both the variance and the division, so fusion cannot make it interior."""
    module, _ = load_with_aliases(path)
    ln = functions(module)["LayerNorm.apply"]
    (centered,) = [
        op for op in ln.walk() if isinstance(op, core.SubOp) and isinstance(op.rhs.owner, core.MeanOp)
    ]
    readers = _users(centered.result)
    assert sorted(type(r).__name__ for r in readers) == ["DivOp", "PowOp"]
    (square,) = [r for r in readers if isinstance(r, core.PowOp)]
    assert [type(r) for r in _users(square.result)] == [core.MeanOp]


@pytest.mark.parametrize(
    "path", ["corpus/attention.mlir", "corpus/minigpt.mlir", "corpus/nlp/gpt.mlir"]
)
def test_attention_eins_are_contraction_nests(path: str) -> None:
    """Scores and values: output = outer axes, then I, then J; one summed axis K."""
    module, _ = load_with_aliases(path)
    attention = functions(module)["SelfAttention.apply"]
    eins = [op for op in attention.walk() if isinstance(op, core.EinOp) and len(op.inputs) == 2]
    assert len(eins) == 2
    for op in eins:
        left, right = op.operand_labels
        out = op.result.type.names
        outer = [n for n in out if n in left and n in right]
        i_axes = [n for n in out if n in left and n not in right]
        j_axes = [n for n in out if n in right and n not in left]
        assert len(op.summed) == 1 and len(i_axes) == 1 and len(j_axes) == 1, op
        assert list(out) == [*outer, *i_axes, *j_axes], op
    scores, values = eins
    assert scores.result.type.names == ("batch", "heads", "seq", "seq2") and scores.summed == ("hd",)
    assert values.result.type.names == ("batch", "heads", "seq", "hd") and values.summed == ("seq2",)
    assert isinstance(_users(scores.result)[0], core.MulOp)
    (softmax,) = [op for op in attention.walk() if isinstance(op, core.SoftmaxOp)]
    assert softmax.mask is not None and isinstance(softmax.mask.owner, core.CausalMaskOp)


@pytest.mark.parametrize("path", ["corpus/minigpt.mlir", "corpus/nlp/gpt.mlir"])
def test_adamw_is_one_elementwise_chain(path: str) -> None:
    """Twenty-odd elementwise steps; no intermediate is read outside the chain.

    The only values leaving the chain are the results: the new parameters and
    the two moments (which the chain also reads, to form the update).
    """
    module, _ = load_with_aliases(path)
    step = functions(module)["adamw.step"]
    ops = list(step.body.block.ops)
    elementwise = [op for op in ops if isinstance(op, core.ELEMENTWISE_OPS)]
    assert len(elementwise) >= 20
    assert all(isinstance(op, (*core.ELEMENTWISE_OPS, core.ConstantOp)) for op in ops[:-2])
    tup, ret = ops[-2:]
    assert isinstance(tup, core.TupleOp) and isinstance(ret, ReturnOp)
    params_type = step.function_type.inputs.data[0]
    assert isinstance(params_type, RecordType)
    assert isinstance(tup.result.type, TupleType) and list(tup.result.type.element_types) == [params_type] * 3
    results = set(tup.elements)
    for op in elementwise:
        readers = _users(op.results[0])
        inside = [r for r in readers if isinstance(r, core.ELEMENTWISE_OPS)]
        if op.results[0] in results:
            assert len(readers) - len(inside) == 1  # the tuple
        else:
            assert readers and len(inside) == len(readers) == 1, f"{op.name} is read {len(readers)} times"
    # The whole chain is over the parameter tree, not per leaf.
    tree_steps = [op for op in elementwise if isinstance(op.results[0].type, RecordType)]
    assert len(tree_steps) >= 16


def test_gpt_is_the_seeds_configuration() -> None:
    """V = 92, D = 64, H = 2, L = 2; layers stacked and folded; helpers called by name."""
    module, _ = load_with_aliases("corpus/nlp/gpt.mlir")
    env = sizes.resolve(module, {}, {"B": 2, "T": 32})
    assert {k: env[k] for k in ("V", "D", "H", "L", "C", "F", "HD")} == {
        "V": 92, "D": 64, "H": 2, "L": 2, "C": 64, "F": 256, "HD": 32,
    }  # fmt: skip
    funcs = functions(module)
    (fold,) = [op for op in funcs["GPT.apply"].walk() if isinstance(op, core.FoldOp)]
    assert fold.callee.string_value() == "Block.apply"
    called = {op.callee.string_value() for f in funcs.values() for op in f.walk() if isinstance(op, CallOp)}
    assert called >= {"GPT.apply", "LayerNorm.apply", "SelfAttention.apply", "MLP.apply", "Linear.apply"}


def test_attention_follows_constant_overrides() -> None:
    """With --const D=32 --const H=4 the heads are 8 wide and the scale 1/√8 follows them."""
    from presk.interp.inputs import make_inputs
    from presk.interp.reference import run_entry

    module, _ = load_with_aliases("corpus/attention.mlir")
    env = sizes.resolve(module, {"D": 32, "H": 4}, {"B": 2, "T": 5})
    assert env["HD"] == 8
    inputs = make_inputs(functions(module)["SelfAttention.apply"], env, 3)
    (got,) = run_entry(module, "SelfAttention.apply", inputs, env)
    assert_tree_close(got, ref.causal_self_attention(*inputs, 4))
