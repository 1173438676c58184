"""The alias-preserving printer: used aliases only, by name, and a fixed point."""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.dialects.memref import MemRef

from presk.ir.parse import parse_module
from presk.ir.print import print_module


@pytest.fixture
def ctx() -> Context:
    context = Context()
    for dialect in (Builtin, Func, Arith, MemRef):
        context.load_dialect(dialect)
    return context


def _print(ctx: Context, text: str) -> str:
    parsed = parse_module(ctx, text, "t.mlir")
    return print_module(parsed.module, parsed.aliases)


PROGRAM = """\
!i = i32
!dead = f16
!v = tensor<4x!i>
!alsoi = i32
#m = affine_map<(d0) -> (d0)>
func.func @f(%a: !i, %t: tensor<4xi32>) -> !i {
  %c = arith.constant 1 : i32
  %0 = arith.addi %a, %c : !alsoi
  %m = memref.alloc() : memref<8xi32>
  func.return %0 : !i
}
"""


def test_used_aliases_then_module(ctx: Context) -> None:
    printed = _print(ctx, PROGRAM)
    header, body = printed.split("\n\n", 1)
    assert header.splitlines() == ["!i = i32", "!v = tensor<4x!i>"]
    assert "func.func @f(%a: !i, %t: !v) -> !i {" in body
    assert "%c = arith.constant 1 : !i" in body
    assert "memref<8x!i>" in body
    assert "!dead" not in printed and "!alsoi" not in printed and "#m" not in printed
    assert printed.endswith("}\n")


def test_printing_is_a_fixed_point(ctx: Context) -> None:
    once = _print(ctx, PROGRAM)
    assert _print(ctx, once) == once


def test_an_alias_needed_only_by_another_alias_is_printed(ctx: Context) -> None:
    printed = _print(ctx, "!e = f32\n!t = tensor<2x!e>\nfunc.func @f(%x: !t) { func.return }\n")
    assert printed.startswith("!e = f32\n!t = tensor<2x!e>\n\n")
    assert "%x: !t" in printed


def test_without_aliases_the_module_is_printed_plainly(ctx: Context) -> None:
    assert _print(ctx, "func.func @f() { func.return }\n").startswith("builtin.module {")


def test_attribute_aliases(ctx: Context) -> None:
    text = '#s = "tag"\nfunc.func @f() attributes {k = #s, n = "other"} { func.return }\n'
    printed = _print(ctx, text)
    assert printed.startswith('#s = "tag"\n\n')
    assert 'k = #s, n = "other"' in printed
    assert _print(ctx, printed) == printed
