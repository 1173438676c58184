"""Fixtures of the JIT tests: engines never touch the user's kernel cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from presk.jit.engine import JitEngine


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the default cache at a temporary directory, for any engine a test forgets to."""
    cache = tmp_path / "default-cache"
    monkeypatch.setenv("PRESK_CACHE_DIR", str(cache))
    monkeypatch.delenv("PRESK_THREADS", raising=False)
    return cache


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "kernels"


@pytest.fixture
def engine(cache_dir: Path) -> JitEngine:
    return JitEngine(cache_dir=cache_dir)
