"""Character-level text as tokens: a corpus that ships with Python, and a vocabulary fitted to a model's V.

`presk train --data stdlib` trains on the docstrings of a fixed list of
standard-library modules (and of their public functions and classes), read
with `inspect` from the interpreter that runs presk: nothing is downloaded,
and the text is the same on every run of one Python (it changes with the
Python version, as the docstrings do). `--data text:PATH` reads a UTF-8 file.

The model's ids lie in [0, V). When the text has more distinct characters
than V, the V - 1 most frequent keep an id each and every other character
shares the last one (`rare`): a corpus is never refused for one stray
character, and the share of the text mapped to the shared id is reported,
so a vocabulary too small for the text shows. Ids are given in code-point
order of the characters kept, the shared id last.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np

from presk.diagnostics import PreskError

STDLIB_MODULES = (
    "argparse", "bisect", "calendar", "collections", "contextlib", "dataclasses", "datetime", "decimal",
    "difflib", "enum", "fractions", "functools", "heapq", "itertools", "json", "math", "operator", "os",
    "pathlib", "random", "re", "shutil", "statistics", "string", "textwrap", "typing",
)  # fmt: skip
"""Modules whose docstrings make the built-in corpus: prose about code, about 190 000 characters."""


@dataclass(frozen=True)
class Vocabulary:
    """Characters to ids in [0, size): `chars[i]` has id i; `rare` (or None) is the id the others share."""

    chars: str
    rare: int | None
    size: int

    def encode(self, text: str) -> np.ndarray:
        ids = {c: i for i, c in enumerate(self.chars)}
        other = self.rare if self.rare is not None else -1
        tokens = np.fromiter((ids.get(c, other) for c in text), dtype=np.int64, count=len(text))
        assert tokens.min(initial=0) >= 0, "a character without an id: the vocabulary was not fitted to this text"
        return tokens


def fit_vocabulary(text: str, size: int) -> tuple[Vocabulary, float]:
    """The vocabulary of `text` in `size` ids, and the share of the text mapped to the shared id (0 when none is)."""
    counts = Counter(text)
    if len(counts) <= size:
        return Vocabulary("".join(sorted(counts)), None, size), 0.0
    if size < 2:
        raise PreskError("E4003", f"a vocabulary of {size} id cannot tell characters apart")
    # Most frequent first, ties by code point, so the choice is the same on every run.
    kept = sorted(c for c, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: size - 1])
    mapped = sum(n for c, n in counts.items() if c not in set(kept))
    return Vocabulary("".join(kept), size - 1, size), mapped / len(text)


def stdlib_text() -> str:
    """The docstrings of `STDLIB_MODULES` and of their public functions and classes, each once, in a fixed order."""
    seen: set[str] = set()
    parts: list[str] = []
    with warnings.catch_warnings():  # typing's deprecated aliases (typing.io) warn when read
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in STDLIB_MODULES:
            module = importlib.import_module(name)
            for obj in [module] + [getattr(module, a) for a in sorted(dir(module)) if not a.startswith("_")]:
                if obj is not module and not (
                    inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)
                ):
                    continue
                doc = inspect.getdoc(obj)
                if doc and doc not in seen:
                    seen.add(doc)
                    parts.append(doc)
    return "\n\n".join(parts)


def read_text(path: str) -> str:
    """A UTF-8 text file (E4003 naming it when it is not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as error:
        raise PreskError("E4003", f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise PreskError("E4003", f"{path}: cannot read text: {error.strerror or error}") from None
