"""Shared fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute

from presk.ir.context import presk_context
from presk.ir.parse import parse_module

ROOT = Path(__file__).resolve().parents[2]


@cache
def _parse(path: str) -> tuple[ModuleOp, dict[str, Attribute]]:
    parsed = parse_module(presk_context(), Path(path).read_text(), path)
    parsed.verify()
    return parsed.module, parsed.aliases


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
