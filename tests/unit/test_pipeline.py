"""Pass pipelines: MLIR's syntax to xDSL's, and the E3001/E3002 errors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from presk.cli.pipeline import build_pipeline, mlir_pipeline_to_xdsl, parse_pass_specs, pipeline_spec
from presk.diagnostics import PreskError


@dataclass(frozen=True)
class BindLike(ModulePass):
    name = "bind-like"
    dims: str = ""
    consts: str = ""
    level: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass


@dataclass(frozen=True)
class Plain(ModulePass):
    name = "plain"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass


AVAILABLE = {"bind-like": lambda: BindLike, "plain": lambda: Plain}


@pytest.mark.parametrize(
    ("mlir", "xdsl"),
    [
        ("builtin.module(a,b)", "a,b"),
        ("builtin.module( a , b{k=v} )", "a,b{k=v}"),
        ("any(a)", "a"),
        ("builtin.module(any(a,b))", "a,b"),
        ("builtin.module()", ""),
        ("", ""),
        ('builtin.module(psk-bind{dims="B=2,T=8" consts="D=64"})', 'psk-bind{dims="B=2,T=8" consts="D=64"}'),
        ('builtin.module(p{s="a(b),c"})', 'p{s="a(b),c"}'),
        ("builtin.module(p{ k=1 j=2 })", "p{k=1 j=2}"),
    ],
)
def test_mlir_pipeline_becomes_xdsl_spec(mlir: str, xdsl: str) -> None:
    assert mlir_pipeline_to_xdsl(mlir) == xdsl


@pytest.mark.parametrize(
    ("mlir", "fragment"),
    [
        ("builtin.module(func.func(cse))", "passes nested on 'func.func'"),
        ("builtin.module(a,,b)", "empty pass name"),
        ("builtin.module(a", "unbalanced"),
        # mlir-opt requires the anchor too.
        ("a,b", "anchored on the module: write 'builtin.module(a,b)'"),
        ("func.func(cse)", "passes nested on 'func.func'"),
    ],
)
def test_unrunnable_mlir_pipelines_are_e3002(mlir: str, fragment: str) -> None:
    with pytest.raises(PreskError) as caught:
        mlir_pipeline_to_xdsl(mlir)
    assert caught.value.code == "E3002" and fragment in caught.value.message


def test_p_takes_xdsl_s_list_or_mlir_opt_s_anchored_pipeline() -> None:
    """mlir-opt's `-p` is its `--pass-pipeline`; xdsl-opt's is a list. presk-opt's `-p` reads both."""
    assert pipeline_spec(["a,b{k=v}"], []) == "a,b{k=v}"
    assert pipeline_spec(['builtin.module(psk-bind{dims="B=2"}, psk-fuse)'], []) == 'psk-bind{dims="B=2"},psk-fuse'
    with pytest.raises(PreskError) as caught:
        pipeline_spec(["builtin.module(a"], [])
    assert caught.value.code == "E3002" and "unbalanced" in caught.value.message


def test_quoted_options_keep_commas_and_equals() -> None:
    (spec,) = parse_pass_specs('bind-like{dims="B=2,T=8" consts="D=64"}')
    assert spec.parameters == {"dims": ("B=2,T=8",), "consts": ("D=64",)}


def test_build_pipeline_instantiates_with_options() -> None:
    passes = build_pipeline(AVAILABLE, 'plain,bind-like{dims="B=2" level=3}')
    assert passes == (Plain(), BindLike(dims="B=2", level=3))


def test_unknown_pass_suggests_close_names() -> None:
    with pytest.raises(PreskError) as caught:
        build_pipeline(AVAILABLE, "bind-lik")
    assert caught.value.code == "E3001"
    assert caught.value.message == "unknown pass 'bind-lik'; did you mean 'bind-like'?"


@pytest.mark.parametrize("spec", ["bind-like{nope=1}", "bind-like{level=high}", "plain{x}"])
def test_bad_options_are_e3002_and_list_the_options(spec: str) -> None:
    with pytest.raises(PreskError) as caught:
        build_pipeline(AVAILABLE, spec)
    assert caught.value.code == "E3002"
    assert "bad options for pass" in caught.value.message


def test_bad_syntax_is_e3002() -> None:
    with pytest.raises(PreskError) as caught:
        build_pipeline(AVAILABLE, "plain{")
    assert caught.value.code == "E3002" and "bad pass pipeline 'plain{'" in caught.value.message


def test_pass_whose_module_fails_to_import_is_e3001() -> None:
    def broken() -> type[ModulePass]:
        raise ModuleNotFoundError("No module named 'nowhere'")

    with pytest.raises(PreskError) as caught:
        build_pipeline({"broken": broken}, "broken")
    assert caught.value.code == "E3001" and "could not be loaded" in caught.value.message
