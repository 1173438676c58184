"""Garbled corpus files get a located diagnostic and a non-zero exit, never a traceback.

Each mutation is one a user makes: a file cut short, a token deleted, a
result type that breaks the op's typing rule, an op name misspelt, a pass
name misspelt. The mutations are drawn from a fixed seed so a failure
reproduces; `presk-opt` runs in-process (the same `main` the console script
calls) so that a few hundred cases take seconds, not minutes.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
from pathlib import Path

import pytest

from presk.cli.opt import main as presk_opt

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for p in (ROOT / "corpus").rglob("*.mlir"))
PER_FILE = 50
LOCATED = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): error: (?P<code>E\d{4}): \S", re.M)
TOKEN = re.compile(r"%[\w.]+|@[\w.]+|![\w.]+|[\w.]+|\"[^\"]*\"|->|[:=,\[\](){}<>]")


def run_opt(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = presk_opt(argv)
        except SystemExit as e:  # argparse usage errors exit; anything else is a bug
            code = e.code if isinstance(e.code, int) else 1
    return code, err.getvalue() + out.getvalue()


def code_lines(text: str) -> list[int]:
    """Indices of lines that hold code (not comments or blank), inside a function body."""
    lines = text.splitlines()
    return [i for i, line in enumerate(lines) if re.match(r"\s+%\w+ = |\s+func\.return", line)]


def truncate(text: str, rng: random.Random) -> str:
    """Cut inside a line of a function body, so that function is always left open."""
    lines = text.splitlines(keepends=True)
    i = rng.choice(code_lines(text))
    return "".join(lines[:i]) + lines[i][: rng.randrange(len(lines[i]))]


def delete_token(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    i = rng.choice(code_lines(text))
    tokens = list(TOKEN.finditer(lines[i]))
    m = rng.choice(tokens)
    lines[i] = lines[i][: m.start()] + lines[i][m.end() :]
    return "".join(lines)


def wrong_type(text: str, rng: random.Random) -> str:
    """Replace an op's result type by another type of the program that is not the right one."""
    lines = text.splitlines(keepends=True)
    candidates = [i for i in code_lines(text) if " = psk_core." in lines[i] and " : " in lines[i]]
    i = rng.choice(candidates)
    head, _, old = lines[i].rstrip("\n").rpartition(" : ")
    others = sorted({ln.rstrip("\n").rpartition(" : ")[2] for ln in (lines[j] for j in candidates)} - {old})
    replacement = rng.choice(others) if others else "!psk_core.tensor<[nonsense: 3]>"
    lines[i] = f"{head} : {replacement}\n"
    return "".join(lines)


def unknown_op(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    i = rng.choice([i for i in code_lines(text) if "psk_core." in lines[i]])
    lines[i] = re.sub(r"psk_core\.(\w+)", r"psk_core.\1_typo", lines[i], count=1)
    return "".join(lines)


MUTATIONS = [truncate, delete_token, wrong_type, unknown_op]


def cases() -> list[tuple[Path, int]]:
    return [(path, k) for path in CORPUS for k in range(PER_FILE)]


def test_corpus_is_large_enough_for_the_fuzz() -> None:
    assert len(cases()) >= 200, f"only {len(cases())} mutations: the corpus is missing files"


@pytest.mark.parametrize("path,k", cases(), ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_garbled_file_is_a_located_error(path: Path, k: int, tmp_path: Path) -> None:
    rng = random.Random(f"{path.name}/{k}")
    mutation = MUTATIONS[k % len(MUTATIONS)]
    garbled = mutation(path.read_text(), rng)
    target = tmp_path / path.name
    target.write_text(garbled)
    code, output = run_opt([str(target)])
    assert "Traceback" not in output and "internal error" not in output, output
    assert code != 0, f"{mutation.__name__} left a valid program:\n{garbled}"
    m = LOCATED.search(output)
    assert m is not None, f"{mutation.__name__}: no located diagnostic in:\n{output}"
    assert m["file"] == str(target)
    assert 1 <= int(m["line"]) <= garbled.count("\n") + 1


def test_misspelt_pass_is_an_error_naming_the_pass() -> None:
    code, output = run_opt([str(CORPUS[0]), "-p", "psk-inlin"])
    assert code != 0
    assert "E3001" in output and "psk-inlin" in output and "psk-inline" in output
    assert "Traceback" not in output
