"""Shared fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.ir import Attribute
from xdsl.parser import Parser

ROOT = Path(__file__).resolve().parents[2]


@cache
def _parse(path: str) -> tuple[ModuleOp, dict[str, Attribute]]:
    from presk.dialects.psk_core import PSKCore

    ctx = Context()
    for dialect in (Builtin, Func, PSKCore):
        ctx.load_dialect(dialect)
    parser = Parser(ctx, Path(path).read_text(), path)
    module = parser.parse_module()
    module.verify()
    return module, dict(parser.attribute_aliases)


def load_with_aliases(path: str | Path) -> tuple[ModuleOp, dict[str, Attribute]]:
    """Parse and verify an IR file (relative paths are from the repository root).

    Returns the module and the file's type aliases. Cached: callers must not
    mutate the module (clone it first).
    """
    path = Path(path)
    return _parse(str(path if path.is_absolute() else ROOT / path))


@pytest.fixture
def load() -> Callable[[str | Path], ModuleOp]:
    """`load(path)`: the verified module of an IR file."""
    return lambda path: load_with_aliases(path)[0]
