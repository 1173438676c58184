"""docs/tutorial.md, followed word for word, builds examples/plugin and works (issue 14, fault 3).

The tutorial shows every file of the plugin whole, each after a
`<!-- file: PATH -->` marker (PATH inside `examples/plugin/`); scratch files
the reader writes are marked `<!-- write: PATH -->`. This test checks that
the marked blocks are exactly the plugin's files, and all of them; runs
every Python block as written, each in a fresh interpreter (so none may
lean on another's imports); and replays every `console` session in a copy
of the plugin's folder, comparing each command's output with the one the
tutorial shows (a `...` line stands for any lines).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
PLUGIN = ROOT / "examples" / "plugin"
BIN = Path(sys.executable).parent

_BLOCK = re.compile(r"(?:^<!-- (?P<kind>file|write): (?P<path>\S+) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    kind: str | None
    path: str | None
    line: int


def blocks() -> list[Block]:
    text = TUTORIAL.read_text(encoding="utf-8")
    return [
        Block(m.group("lang"), m.group("body"), m.group("kind"), m.group("path"), text.count("\n", 0, m.start()) + 1)
        for m in _BLOCK.finditer(text)
    ]


def plugin_files() -> set[str]:
    """The files a reader writes: the package, its metadata and its tests (not build or lit output)."""
    skipped = {"Output", "__pycache__", ".lit_test_times.txt", "README.md"}
    return {
        str(path.relative_to(PLUGIN))
        for path in PLUGIN.rglob("*")
        if path.is_file()
        and not skipped & set(path.relative_to(PLUGIN).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    }


def test_the_tutorial_shows_every_file_of_the_plugin_as_it_is() -> None:
    shown = {block.path: block for block in blocks() if block.kind == "file"}
    assert set(shown) == plugin_files()
    for path, block in shown.items():
        assert block.body == (PLUGIN / path).read_text(encoding="utf-8"), f"docs/tutorial.md:{block.line}: {path} differs"


PYTHON_BLOCKS = [block for block in blocks() if block.lang == "python" and not str(block.path).endswith("lit.cfg.py")]
"""A `lit.cfg.py` runs inside lit, which gives it `config`: the `lit -sv tests` session runs it."""


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"line{block.line}" for block in PYTHON_BLOCKS])
def test_every_python_block_runs_as_written(block: Block) -> None:
    result = subprocess.run([sys.executable, "-c", block.body], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"docs/tutorial.md:{block.line}:\n{result.stderr}"


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Whether `actual` is `expected` with each `...` line standing for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(_matches(expected[1:], actual[start:]) for start in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and _matches(expected[1:], actual[1:])


def _commands(session: str) -> list[tuple[str, list[str]]]:
    commands: list[tuple[str, list[str]]] = []
    for line in session.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    return commands


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin's folder as a reader has it after §6 (the package itself is installed)."""
    folder = tmp_path_factory.mktemp("my-plugin")
    shutil.copytree(PLUGIN / "tests", folder / "tests", ignore=shutil.ignore_patterns("Output", ".lit_test_times.txt"))
    for block in blocks():
        if block.kind == "write":
            (folder / str(block.path)).write_text(block.body, encoding="utf-8")
    return folder


SESSIONS = [block for block in blocks() if block.lang == "console"]


@pytest.mark.parametrize("session", SESSIONS, ids=[f"line{block.line}" for block in SESSIONS])
def test_every_console_session_prints_what_the_tutorial_shows(session: Block, folder: Path) -> None:
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    for command, expected in _commands(session.body):
        result = subprocess.run(
            ["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        actual = (result.stdout + result.stderr).splitlines()
        assert _matches(expected, actual), (
            f"docs/tutorial.md:{session.line}: $ {command}\nexpected:\n" + "\n".join(expected) + "\ngot:\n" + "\n".join(actual)
        )


def test_the_matcher_can_fail() -> None:
    assert _matches(["a", "...", "c"], ["a", "b", "b", "c"])
    assert not _matches(["a", "...", "c"], ["a", "b"])
    assert not _matches(["a"], ["a", "b"])
