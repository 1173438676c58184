"""Shared fixtures of the unit tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute

from presk import pipeline
from presk.cli.collector import collect_less_often
from presk.jit.codegen import JOBS_ENV
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.plans import Plan
from presk.tuning.tuned import TUNED_ENV

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    collect_less_often()  # the commands' thresholds: the tests lower and drop IR as they do
    # Kernels compiled in this process, not by worker processes (presk.jit.codegen), unless a test asks:
    # the suite's own workers keep every core busy, and started for each program the compile workers
    # only added their start-up (test_backends_exact, test_cli_train and test_autodiff: 80 s → 94 s on
    # 2 cores). tests/unit/jit/test_codegen.py runs them.
    os.environ.setdefault(JOBS_ENV, "1")
    config.addinivalue_line(
        "markers",
        "target: the outcome depends on the target's register widths (lanes, vector code): `make test` runs "
        "these tests a second time lowered for x86-64-v3 (AVX2), the Makefile's NARROW_TARGET",
    )


LONGEST_FILES = (
    "test_layout_points.py", "test_cli_calibrate.py", "test_cli_train.py", "test_backends_exact.py",
    "test_ray_tuning.py", "test_cli_opt.py", "test_egraph.py", "test_plan_check_dumps.py", "test_fuse_slices.py",
    "test_perf_kernels.py", "test_tile_remainders.py", "test_autodiff.py", "test_fuse_launches.py",
)  # fmt: skip
"""The test files that take longest (about 20 s to 2 min each on 2 cores), longest first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, each file's tests in their own order.

    `make test` hands whole files to its pytest-xdist workers in collection
    order (`--dist loadfile --no-loadscope-reorder`): started first, the long
    files end with the short ones around them, where started last one of them
    would run alone while the other core idles."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# A sweep of one test keeps no layout for another test's `--plan auto` (`presk.tuning.tuned`): the tests of
# the tuned layouts turn them on with a file of their own.
os.environ[TUNED_ENV] = "off"


FIRST = 5
"""Points of each nest's space a narrowed sweep measures (beside the default): `narrow`."""


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each nest's space cut to its first `FIRST` points, its smallest tiles, so that a sweep takes seconds."""
    from presk.tuning import autotune

    legal = autotune.legal_points
    monkeypatch.setattr(autotune, "legal_points", lambda nest, machine, space: (legal(nest, machine, space)[0][:FIRST], {}))


@pytest.fixture(scope="session", autouse=True)
def run_kernel_cache() -> Iterator[Path]:
    """One kernel cache for the whole run: `PRESK_CACHE_DIR` when set (`make test` shares one with
    lit), else a temporary folder. A kernel compiled by one test is loaded by the others, also in
    the `presk` processes tests start, and the user's own cache is neither read nor filled."""
    given = os.environ.get("PRESK_CACHE_DIR")
    if given:
        yield Path(given)
        return
    folder = Path(tempfile.mkdtemp(prefix="presk-test-kernels-"))
    os.environ["PRESK_CACHE_DIR"] = str(folder)
    try:
        yield folder
    finally:
        os.environ.pop("PRESK_CACHE_DIR", None)
        shutil.rmtree(folder, ignore_errors=True)


_LOWERED: dict[tuple[object, ...], ModuleOp] = {}


@pytest.fixture
def memoized_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' lowering (`presk.cli.backends.lower`) answered from a memo kept by this worker.

    The CLI tests run one program on every backend, and train it again with
    other flags: each run lowered the same entry afresh, 0.5-1 s apiece. The
    key is all that `presk.pipeline.lower` reads (the program's text, the
    entry, the sizes, the plan, the fusion flags, the target); a copy is
    returned, since the commands rewrite their kernels further. Only for
    tests that patch nothing the lowering calls.
    """
    import presk.cli.backends

    def lower(module: ModuleOp, entry: str, env: dict[str, int], plan: Plan, *flags: bool | None) -> ModuleOp:
        key = (str(module), entry, tuple(sorted(env.items())), repr(plan), flags, os.environ.get("PRESK_TARGET"))
        if key not in _LOWERED:
            _LOWERED[key] = pipeline.lower(module, entry, env, plan, *flags)
        return _LOWERED[key].clone()

    monkeypatch.setattr(presk.cli.backends, "lower", lower)


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
