"""Token streams for `presk train`: where the tokens come from, the validation split, the windows a step reads.

`--data` names the stream:

* `synthetic` (the default): a Markov chain from `--seed` in which every
  token has two successors, equally likely, so a model that learns gets
  towards ln 2 a token and one that learns nothing stays near ln V;
* `stdlib`: the characters of docstrings of the Python standard library
  (`presk.training.chars`), nothing downloaded;
* `text:PATH`: the characters of a UTF-8 file;
* `FILE.npz`: its 1-D integer array `tokens`, each below V.

Every stream is split the same way: its last `VALIDATION_SHARE` is the
validation split, which no training window reads. A step reads `B` windows of
`T + 1` tokens of the training split at offsets drawn from a generator seeded
with `[seed, 2]` (ids the first `T`, targets the last `T`); the validation
loss is the mean loss over fixed windows spread evenly over the validation
split, so two evaluations of one set of parameters read the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from presk.diagnostics import PreskError
from presk.interp.inputs import read_npz
from presk.training.chars import fit_vocabulary, read_text, stdlib_text

SYNTHETIC_TOKENS = 4096
"""Length of the default synthetic stream: windows at random offsets rarely repeat over a short run."""

VALIDATION_SHARE = 0.1
"""The end of every stream held out for the validation loss."""

TEXT_PREFIX = "text:"


@dataclass(frozen=True)
class Stream:
    """A token stream split in two, and a line that says what it is."""

    train: np.ndarray
    validation: np.ndarray
    description: str


def load_stream(spec: str, vocab: int, seq: int, seed: int) -> Stream:
    """The stream `--data spec` names, in ids below `vocab`, split; each part long enough for a window (E4003)."""
    if spec == "synthetic":
        tokens, what = synthetic_tokens(vocab, SYNTHETIC_TOKENS, seed), "a synthetic Markov chain (entropy ln 2)"
    elif spec == "stdlib" or spec.startswith(TEXT_PREFIX):
        text = stdlib_text() if spec == "stdlib" else read_text(spec[len(TEXT_PREFIX) :])
        if not text:
            raise PreskError("E4003", f"{spec[len(TEXT_PREFIX):]}: the text is empty")
        vocabulary, shared = fit_vocabulary(text, vocab)
        tokens = vocabulary.encode(text)
        distinct = len(set(text))
        what = f"{'standard-library docstrings' if spec == 'stdlib' else spec[len(TEXT_PREFIX):]}: {len(text):,} characters, {distinct} distinct"
        if vocabulary.rare is not None:
            what += f"; the {vocab - 1} most frequent have an id, the {distinct - vocab + 1} others share id {vocabulary.rare} ({shared:.2%} of the text)"
    else:
        tokens = read_tokens(spec, vocab, seq)
        what = f"{spec}: {len(tokens):,} tokens"
    train, validation = split(tokens, seq, spec)
    return Stream(train, validation, f"{what}; {len(train):,} to train on, {len(validation):,} to validate")


def split(tokens: np.ndarray, seq: int, spec: str) -> tuple[np.ndarray, np.ndarray]:
    """The stream without its last `VALIDATION_SHARE`, and that share; each must hold a window of `seq + 1`."""
    cut = len(tokens) - int(round(len(tokens) * VALIDATION_SHARE))
    train, validation = tokens[:cut], tokens[cut:]
    if min(len(train), len(validation)) <= seq:
        raise PreskError("E4003", f"--data {spec}: {len(tokens)} tokens split into {len(train)} to train on and "
                         f"{len(validation)} to validate; each needs a window of {seq + 1}")  # fmt: skip
    return train, validation


class TokenWindows:
    """Next-token windows of a token stream, at offsets drawn from a seeded generator."""

    def __init__(self, tokens: np.ndarray, batch: int, seq: int, seed: int) -> None:
        self.tokens, self.batch, self.seq = tokens, batch, seq
        self.rng = np.random.default_rng([seed, 2])

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        offsets = self.rng.integers(0, len(self.tokens) - self.seq, size=self.batch)
        return windows(self.tokens, offsets, self.seq)

    @property
    def position(self) -> dict[str, Any]:
        """The generator's state: where the next step's windows come from (a checkpoint keeps it)."""
        return self.rng.bit_generator.state

    @position.setter
    def position(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state


def validation_batches(tokens: np.ndarray, batch: int, seq: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` batches of windows at offsets spread evenly over `tokens`: the same every evaluation."""
    offsets = np.linspace(0, len(tokens) - seq - 1, count * batch).round().astype(np.int64)
    return [windows(tokens, offsets[i * batch : (i + 1) * batch], seq) for i in range(count)]


def windows(tokens: np.ndarray, offsets: np.ndarray, seq: int) -> tuple[np.ndarray, np.ndarray]:
    """ids and targets of the windows of `seq + 1` tokens at `offsets`."""
    window = tokens[offsets[:, None] + np.arange(seq + 1)]
    return np.ascontiguousarray(window[:, :-1]), np.ascontiguousarray(window[:, 1:])


def synthetic_tokens(vocab: int, length: int, seed: int) -> np.ndarray:
    """A Markov chain over `vocab` tokens in which each token has two successors, equally likely.

    It has structure to learn (its entropy is ln 2 a token), fixed by the seed.
    """
    rng = np.random.default_rng([seed, 1])
    successors = rng.integers(0, vocab, size=(vocab, 2))
    choices = rng.integers(0, 2, size=length)
    tokens = np.empty(length, dtype=np.int64)
    tokens[0] = rng.integers(0, vocab)
    for i in range(1, length):
        tokens[i] = successors[tokens[i - 1], choices[i]]
    return tokens


def read_tokens(path: str, vocab: int, seq: int) -> np.ndarray:
    """`tokens` of an `.npz`: 1-D integers in [0, vocab), more than `seq` of them (E4003 naming the file)."""
    archive = read_npz(path)
    if "tokens" not in archive:
        raise PreskError("E4003", f"{path}: no array 'tokens' (it holds {', '.join(archive) or 'nothing'})")
    tokens = archive["tokens"]
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise PreskError(
            "E4003", f"{path}: 'tokens' is a 1-D integer array, not {tokens.dtype} of shape {list(tokens.shape)}"
        )
    if len(tokens) <= seq:
        raise PreskError("E4003", f"{path}: {len(tokens)} tokens; a window needs {seq + 1}")
    if tokens.min() < 0 or tokens.max() >= vocab:
        raise PreskError(
            "E4003", f"{path}: tokens lie in [{tokens.min()}, {tokens.max()}], the vocabulary is [0, {vocab})"
        )
    return tokens.astype(np.int64)
