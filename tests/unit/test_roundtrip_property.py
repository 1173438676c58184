"""Random well-typed PSK-Core programs print, re-parse and evaluate to the same values.

Programs are drawn as a sequence of lets over a pool of named axes, each
let chosen among the primitives whose typing rule the current values
admit, so every drawn program is well typed by construction (the verifier
is asserted, not assumed). Printing must be a fixed point after one round,
and the re-parsed program must compute the same bits, NaNs included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presk import sizes
from presk.dialects.psk_core import format_float
from presk.interp.inputs import make_inputs
from presk.interp.reference import run_entry
from presk.interp.values import leaf_items
from presk.ir.calls import find_entry
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.ir.print import print_module

AXES = {"a": 2, "b": 3, "c": 4, "d": 3}
CONSTANTS = [0.5, -1.25, 0.1, 1e-300, -2.5e17, 3.0, 1.0000000000000002]


def tensor(axes: tuple[str, ...]) -> str:
    if not axes:
        return "!psk_core.real"
    return "!psk_core.tensor<[" + ", ".join(f"{n}: {AXES[n]}" for n in axes) + "]>"


def subsequence(small: tuple[str, ...], big: tuple[str, ...]) -> bool:
    it = iter(big)
    return all(any(s == b for b in it) for s in small)


@dataclass
class ProgramBuilder:
    args: list[tuple[str, ...]]
    lines: list[str] = field(default_factory=list)
    values: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.values = [(f"%arg{i}", axes) for i, axes in enumerate(self.args)]

    def let(self, rhs: str, axes: tuple[str, ...]) -> None:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"    {name} = {rhs} : {tensor(axes)}")
        self.values.append((name, axes))

    def text(self) -> str:
        result, axes = self.values[-1]
        params = ", ".join(f"%arg{i}: {tensor(a)}" for i, a in enumerate(self.args))
        body = "\n".join(self.lines)
        return (
            f"func.func @f({params}) -> {tensor(axes)} {{\n{body}\n"
            f"    func.return {result} : {tensor(axes)}\n}}\n"
        )


axis_lists = st.lists(st.sampled_from(sorted(AXES)), min_size=1, max_size=3, unique=True).map(tuple)


@st.composite
def programs(draw: st.DrawFn) -> str:
    builder = ProgramBuilder(draw(st.lists(axis_lists, min_size=1, max_size=3)))
    for _ in range(draw(st.integers(1, 12))):
        name, axes = draw(st.sampled_from(builder.values))
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "softmax", "pow", "const", "dot", "ein"]))
        if kind == "unary":
            op = draw(st.sampled_from(["neg", "exp", "log", "sqrt", "tanh", "erf", "gelu"]))
            builder.let(f"psk_core.{op} {name}", axes)
        elif kind == "binary":
            partners = [(n, a) for n, a in builder.values if subsequence(a, axes) or subsequence(axes, a)]
            other, oaxes = draw(st.sampled_from(partners))
            op = draw(st.sampled_from(["add", "sub", "mul", "div", "max"]))
            big = axes if subsequence(oaxes, axes) else oaxes
            lhs, rhs = draw(st.permutations([name, other]))
            builder.let(f"psk_core.{op} {lhs}, {rhs}", big)
        elif kind == "reduce" and axes:
            over = draw(st.lists(st.sampled_from(axes), min_size=1, unique=True))
            op = draw(st.sampled_from(["sum", "mean", "reduce_max"]))
            builder.let(f"psk_core.{op} {name} [{', '.join(over)}]", tuple(a for a in axes if a not in over))
        elif kind == "softmax" and axes:
            builder.let(f"psk_core.softmax {name} [{draw(st.sampled_from(axes))}]", axes)
        elif kind == "pow":
            builder.let(f"psk_core.pow {name}, {draw(st.integers(1, 4))}", axes)
        elif kind == "const":
            builder.let(f"psk_core.constant {format_float(draw(st.sampled_from(CONSTANTS)))}", ())
        elif kind == "dot" and axes:
            rights = [(n, a) for n, a in builder.values if a and AXES[a[0]] == AXES[axes[-1]]]
            rights = [(n, a) for n, a in rights if len(set(axes[:-1] + a[1:])) == len(axes[:-1] + a[1:])]
            if rights:
                other, oaxes = draw(st.sampled_from(rights))
                builder.let(f"psk_core.dot {name}, {other}", axes[:-1] + oaxes[1:])
        elif kind == "ein" and len(axes) >= 2:
            out = tuple(draw(st.permutations(axes)))[: draw(st.integers(1, len(axes)))]
            labels = ", ".join(axes)
            builder.let(f"psk_core.ein {name}[{labels}]", out)
    return builder.text()


def evaluate(text: str) -> list:
    parsed = parse_module(presk_context(), text, "prop.mlir")
    parsed.verify()
    env = sizes.resolve(parsed.module)
    inputs = make_inputs(find_entry(parsed.module, "f"), env, seed=7)
    with np.errstate(all="ignore"):
        return run_entry(parsed.module, "f", inputs, env)


def bits(values: list) -> list[bytes]:
    return [np.asarray(leaf, dtype=np.float64).tobytes() for v in values for _, leaf in leaf_items(v)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_print_reparse_evaluate_is_identity(text: str) -> None:
    ctx = presk_context()
    first = parse_module(ctx, text, "prop.mlir")
    first.verify()
    printed = print_module(first.module, first.aliases)
    second = parse_module(presk_context(), printed, "printed.mlir")
    second.verify()
    assert print_module(second.module, second.aliases) == printed
    assert bits(evaluate(text)) == bits(evaluate(printed))
