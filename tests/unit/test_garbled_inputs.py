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
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xdsl.utils.mlir_lexer import MLIRLexer

from presk.cli.opt import main as presk_opt
from presk.ir import lexer_patch

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


# Inputs that stress the lexer and parser by their size or shape: a string
# literal left open, very long lines and names, huge integers, deep nesting,
# many aliases. Each must parse or give a located error, in time linear in
# its size: xDSL 0.74 alone hangs on the first, and ends in an internal error
# on the integers and the nesting (presk/ir/lexer_patch.py, parse_module).

STRAY_QUOTE = 'func.fun">c @MLP.apply('

HEAD = "!R = !psk_core.real\n"
USE_T = "func.func @f(%x: !t) -> !t {\n  func.return %x : !t\n}\n"


def fn(body: str, args: str = "%x: !R", result: str = "!R") -> str:
    return f"func.func @f({args}) -> {result} {{\n{body}}}\n"


def test_linear_string_pattern_is_installed() -> None:
    """Checked first, so that a lost patch fails here rather than hanging the tests below."""
    assert lexer_patch.APPLIED
    assert MLIRLexer._unescaped_characters_regex.pattern == lexer_patch.LINEAR_PATTERN


def test_an_unexpected_string_pattern_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    other = re.compile(r'"[^"\n]*"')
    monkeypatch.setattr(MLIRLexer, "_unescaped_characters_regex", other)
    assert not lexer_patch.apply()
    assert MLIRLexer._unescaped_characters_regex is other


STRING_EXAMPLES = [
    '""',
    '"abc"',
    '"a b\tc"',
    '"\\""',
    '"\\\\"',
    '"\\n\\t"',
    '"\\0A\\ff\\7e"',
    '"caf\u00e9 \u2203"',
    '"ab" tail"',
    '"a\\\\" tail"',
    '"\\"',  # the quote is escaped: unclosed
    '"abc',
    '"abc\n"',
    '"a\vb"',
    '"a\fb"',
    '"\\x41"',  # \x is not an escape
    '"\\g"',
    '"\\0"',
    '"\\0g"',
    '"\\',
    '"',
]


def random_literals(count: int) -> list[str]:
    """Short strings over the characters that matter to the pattern, from a fixed seed."""
    rng = random.Random("string-literals")
    alphabet = ['"', "\\", "a", " ", "n", "t", "0", "F", "g", "x", "\n", "\v", "\f", "\u00e9"]
    return ['"' + "".join(rng.choices(alphabet, k=rng.randrange(12))) for _ in range(count)]


def test_linear_string_pattern_matches_what_xdsl_matches() -> None:
    xdsl, linear = re.compile(lexer_patch.XDSL_PATTERN), re.compile(lexer_patch.LINEAR_PATTERN)
    for text in STRING_EXAMPLES + random_literals(3000):
        for pos in (0, 1):
            old, new = xdsl.match(text, pos), linear.match(text, pos)
            assert (old and old.span()) == (new and new.span()), repr(text)


def test_unclosed_string_fails_fast_in_the_lexer() -> None:
    assert MLIRLexer._unescaped_characters_regex.pattern == lexer_patch.LINEAR_PATTERN  # else this would hang
    start = time.perf_counter()
    assert MLIRLexer._unescaped_characters_regex.match('"' + "a" * 1_000_000 + "\n") is None
    assert time.perf_counter() - start < 0.5


def test_stray_quote_in_the_corpus_is_a_located_error(tmp_path: Path) -> None:
    """One stray quote in a corpus file, through the installed `presk-opt`; the timeout turns a hang into a failure."""
    text = (ROOT / "corpus" / "mlp.mlir").read_text()
    assert text.count("func.func @MLP.apply(") == 1
    target = tmp_path / "mlp.mlir"
    target.write_text(text.replace("func.func @MLP.apply(", STRAY_QUOTE))
    tool = Path(sys.executable).parent / "presk-opt"
    command = [str(tool)] if tool.exists() else [sys.executable, "-m", "presk.cli.opt"]
    result = subprocess.run([*command, str(target)], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(f"{target}:39:9: error: E1001: "), result.stderr


def test_unclosed_string_of_10000_characters_is_a_located_error_within_a_second(tmp_path: Path) -> None:
    assert MLIRLexer._unescaped_characters_regex.pattern == lexer_patch.LINEAR_PATTERN  # else this would hang
    target = tmp_path / "open.mlir"
    target.write_text(HEAD + fn('  %0 = psk_core.field %x["' + "a" * 10_000 + "\n  func.return %x : !R\n"))
    start = time.perf_counter()
    code, output = run_opt([str(target)])
    assert time.perf_counter() - start < 1.0
    assert code == 1 and "Traceback" not in output
    m = LOCATED.search(output)
    assert m is not None and (m["file"], m["line"], m["col"]) == (str(target), "3", "26"), output


def ops_on_one_line(n: int) -> str:
    ops = " ".join(f"%{i + 1} = psk_core.add %{i}, %{i} : !R" for i in range(1, n))
    return HEAD + f"func.func @f(%x: !R) -> !R {{ %1 = psk_core.neg %x : !R {ops} func.return %{n} : !R }}\n"


# name -> (the input, whether it parses, a phrase its error says).
# Each takes well under a second; 5 s leaves room for a loaded machine,
# while a quadratic cost at these sizes would take far longer.
LARGE_INPUTS: dict[str, tuple[str, bool, str]] = {
    "unclosed string, 10^6 chars": (
        HEAD + fn('  %0 = psk_core.field %x["' + "a" * 1_000_000 + "\n  func.return %x : !R\n"),
        False,
        "closing string literal",
    ),
    "closed string, 10^6 chars": (
        HEAD + fn("  func.return %x : !R\n").replace("{\n", 'attributes {s = "' + "a" * 1_000_000 + '"} {\n', 1),
        True,
        "",
    ),
    "comment line, 10^6 chars": (HEAD + "// " + "x" * 1_000_000 + "\n" + fn("  func.return %x : !R\n"), True, ""),
    "function name, 10^5 chars": (HEAD + fn("  func.return %x : !R\n").replace("@f", "@f" + "a" * 100_000), True, ""),
    "value name, 10^5 chars": (
        HEAD + fn("  func.return %x" + "a" * 100_000 + " : !R\n", args="%x" + "a" * 100_000 + ": !R"),
        True,
        "",
    ),
    "alias name, 10^5 chars": (
        "!R" + "a" * 100_000 + " = !psk_core.real\n" + fn("  func.return %x : !R\n").replace("!R", "!R" + "a" * 100_000),
        True,
        "",
    ),
    "unknown op name, 10^5 chars": (
        HEAD + fn("  %0 = psk_core.a" + "d" * 100_000 + " %x, %x : !R\n  func.return %0 : !R\n"),
        False,
        "is not registered",
    ),
    "decimal integer, 10^5 digits": (HEAD + "psk_core.const_dim @D = " + "9" * 100_000 + "\n", False, "too large"),
    "hexadecimal integer, 10^5 digits": (
        HEAD + "psk_core.const_dim @D = 0x" + "f" * 100_000 + "\n",
        False,
        "too large",
    ),
    "hexadecimal integer in a type, 10^5 digits": (
        "!t = !psk_core.tensor<[batch: 0x" + "f" * 100_000 + "]>\n" + USE_T,
        False,
        "too large",
    ),
    "1000 nested tuple types": ("!t = " + "tuple<" * 1000 + "i32" + ">" * 1000 + "\n" + USE_T, False, "nesting"),
    "1000 nested parentheses": ("!t = " + "(" * 1000 + "i32" + ")" * 1000 + "\n" + USE_T, False, "nesting"),
    "1000 nested function types": ("!t = " + "() -> (" * 1000 + "i32" + ")" * 1000 + "\n" + USE_T, False, "nesting"),
    "1000 nested records": (
        "!t = " + "!psk_core.record<a: " * 1000 + "!psk_core.real" + ">" * 1000 + "\n" + USE_T,
        False,
        "nesting",
    ),
    "1000 nested arrays, unclosed": ("#a = " + "[" * 1000 + "\n", False, "nesting"),
    "1000 nested regions": ('"test.op"() ({\n' * 1000 + "}) : () -> ()\n" * 1000, False, "nesting"),
    "5000 aliases": (
        "".join(f"!a_{i} = !psk_core.real\n" for i in range(5000)) + fn("  func.return %x : !a_0\n", "%x: !a_0", "!a_0"),
        True,
        "",
    ),
    "a chain of 5000 aliases": (
        "!a_0 = !psk_core.real\n"
        + "".join(f"!a_{i} = !a_{i - 1}\n" for i in range(1, 5000))
        + fn("  func.return %x : !a_4999\n", "%x: !a_4999", "!a_4999"),
        True,
        "",
    ),
    "2000 operations on one line": (ops_on_one_line(2000), True, ""),
}


@pytest.mark.parametrize("name", list(LARGE_INPUTS))
def test_large_input_parses_or_is_a_located_error_in_linear_time(name: str, tmp_path: Path) -> None:
    text, parses, phrase = LARGE_INPUTS[name]
    target = tmp_path / "large.mlir"
    target.write_text(text)
    start = time.perf_counter()
    code, output = run_opt([str(target)])
    elapsed = time.perf_counter() - start
    assert "Traceback" not in output and "internal error" not in output and "RecursionError" not in output
    assert elapsed < 5.0, f"{name}: {elapsed:.1f} s"
    if parses:
        assert code == 0, output[:500]
        return
    assert code == 1
    m = LOCATED.search(output)
    assert m is not None, output[:500]
    assert m["file"] == str(target) and 1 <= int(m["line"]) <= text.count("\n") + 1
    assert phrase in output[m.start() :].partition("\n")[0], output[:500]


@pytest.mark.parametrize(
    "literal,parses",
    [("9" * 4300, True), ("9" * 4301, False), (hex(10**4300 - 1), True), (hex(10**4300), False)],
    ids=["4300 digits", "4301 digits", "hex below 10^4300", "hex 10^4300"],
)
def test_integer_literal_limit_is_exact(literal: str, parses: bool, tmp_path: Path) -> None:
    """Python converts at most 4300 decimal digits to or from text; one more is a located error at the literal.
    A literal that parses reaches the verifier, which refuses a size above 2^40 at its declaration."""
    target = tmp_path / "int.mlir"
    target.write_text(HEAD + f"psk_core.const_dim @D = {literal}\n")
    code, output = run_opt([str(target)])
    assert "internal error" not in output
    if parses:
        assert code == 1 and output.startswith(f"{target}:2:1: error: E2001: constant size @D is "), output[:300]
        assert output.partition("\n")[0].endswith("; sizes are at most 2^40 = 1099511627776"), output[:300]
    else:
        assert code == 1 and output.startswith(f"{target}:2:25: error: E1001: integer literal too large"), output[:300]
