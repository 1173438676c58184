"""`presk train`'s data and initialisation, without compiling anything: character vocabularies, the built-in
standard-library corpus, the validation split and its fixed windows, the windows' position, GPT-2's rule."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from presk.diagnostics import PreskError
from presk.interp.inputs import GPT2_STD, gpt2_init, make_inputs
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.sizes import resolve
from presk.training.chars import fit_vocabulary, stdlib_text
from presk.training.streams import TokenWindows, load_stream, split, validation_batches

ROOT = Path(__file__).resolve().parents[2]


def test_a_vocabulary_that_fits_gives_every_character_its_id() -> None:
    vocabulary, shared = fit_vocabulary("banana!", 8)
    assert vocabulary.chars == "!abn" and vocabulary.rare is None and shared == 0.0
    assert vocabulary.encode("banana!").tolist() == [2, 1, 3, 1, 3, 1, 0]


def test_more_characters_than_ids_share_the_last_id() -> None:
    text = "aaaabbbccd" + "xyz"  # a, b, c keep ids; d, x, y, z (once each) share id 3
    vocabulary, shared = fit_vocabulary(text, 4)
    assert vocabulary.chars == "abc" and vocabulary.rare == 3
    assert vocabulary.encode(text).tolist() == [0] * 4 + [1] * 3 + [2] * 2 + [3] * 4
    assert shared == pytest.approx(4 / len(text))


def test_the_stdlib_corpus_is_prose_fixed_for_one_python() -> None:
    text = stdlib_text()
    assert text == stdlib_text()  # the same text every time: a run is reproducible
    assert len(text) > 100_000 and "Return" in text
    vocabulary, shared = fit_vocabulary(text, 92)  # the corpus GPT's V
    tokens = vocabulary.encode(text)
    assert tokens.min() >= 0 and tokens.max() < 92
    assert shared < 0.01  # the characters without their own id are rare


def test_a_text_file_is_split_and_windows_lie_in_their_part(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("abcdefghij" * 20, encoding="utf-8")
    stream = load_stream(f"text:{path}", 16, 8, 0)
    assert len(stream.train) == 180 and len(stream.validation) == 20  # the last tenth validates
    assert "200 characters, 10 distinct" in stream.description
    windows = TokenWindows(stream.train, 4, 8, 0)
    ids, targets = windows.next()
    assert ids.shape == targets.shape == (4, 8) and (targets[:, :-1] == ids[:, 1:]).all()
    assert ((targets - ids) % 10 == 1).all()  # the next character of the text


def test_the_windows_position_resumes_the_same_draws() -> None:
    tokens = np.arange(1000)
    first = TokenWindows(tokens, 3, 5, 7)
    first.next()
    saved = first.position
    expected = [first.next()[0] for _ in range(3)]
    second = TokenWindows(tokens, 3, 5, 7)
    second.position = saved
    assert all((second.next()[0] == e).all() for e in expected)


def test_validation_windows_are_fixed_and_cover_the_split() -> None:
    tokens = np.arange(200)
    batches = validation_batches(tokens, 2, 8, 4)
    again = validation_batches(tokens, 2, 8, 4)
    assert len(batches) == 4 and all((a[0] == b[0]).all() for a, b in zip(batches, again))
    starts = [int(ids[i, 0]) for ids, _ in batches for i in range(2)]
    assert starts[0] == 0 and starts[-1] == 200 - 9  # first and last windows at the ends of the split


@pytest.mark.parametrize(
    "spec,pattern",
    [
        ("text:{tmp}/missing.txt", "cannot read text"),
        ("text:{tmp}/latin1.txt", "not UTF-8 text"),
        ("text:{tmp}/short.txt", r"split into 18 to train on and 2 to validate; each needs a window of 9"),
    ],
)
def test_bad_text_is_refused(tmp_path: Path, spec: str, pattern: str) -> None:
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1") * 50)
    (tmp_path / "short.txt").write_text("x" * 20, encoding="utf-8")
    with pytest.raises(PreskError, match=pattern) as error:
        load_stream(spec.format(tmp=tmp_path), 16, 8, 0)
    assert error.value.code == "E4003"


def test_split_refuses_a_stream_too_short_for_a_validation_window() -> None:
    with pytest.raises(PreskError, match="each needs a window of 33"):
        split(np.arange(100), 32, "x.npz")


@pytest.mark.parametrize(
    "path,rank,init",
    [
        ("params.tok_emb", 2, "gpt2-normal"),
        ("params.blocks.attn.wq", 3, "gpt2-normal"),  # stacked over the layers
        ("params.blocks.ln1.g", 2, "ones"),  # a stacked gain has two axes: its name decides
        ("params.ln_f.g", 1, "ones"),
        ("params.blocks.mlp.fc.b", 2, "zeros"),
        ("params.fc1.bias", 1, "zeros"),
        ("params.offset", 1, "zeros"),  # a vector by another name: a bias
        ("params.head", 2, "gpt2-normal"),
    ],
)
def test_gpt2_rule(path: str, rank: int, init: str) -> None:
    assert gpt2_init(path, rank) == init


def test_gpt2_init_of_the_corpus_gpt() -> None:
    """Every weight matrix and table has std 0.02, every gain is 1 and every bias 0, stacked or not."""
    parsed = parse_module(presk_context(), (ROOT / "corpus" / "nlp" / "gpt.mlir").read_text(), "gpt.mlir")
    env = resolve(parsed.module, {}, {"B": 2, "T": 8})
    loss = next(op for op in parsed.module.walk() if getattr(op, "sym_name", None) and op.sym_name.data == "loss")
    params = make_inputs(loss, env, 0, {0: "gpt2"})[0]
    assert (params["ln_f"]["g"] == 1).all() and (params["blocks"]["ln2"]["g"] == 1).all()
    assert (params["blocks"]["mlp"]["fc"]["b"] == 0).all() and (params["ln_f"]["b"] == 0).all()
    for table in (
        params["tok_emb"],
        params["head"],
        params["blocks"]["attn"]["wq"],
        params["blocks"]["mlp"]["proj"]["w"],
    ):
        assert abs(table.std() - GPT2_STD) < 0.1 * GPT2_STD and abs(table.mean()) < 0.1 * GPT2_STD
    normal = make_inputs(loss, env, 0)[0]  # without the override: N(0, 1), as presk run generates it
    assert abs(normal["tok_emb"].std() - 1) < 0.1 and not (normal["ln_f"]["g"] == 1).all()
    assert math.isclose(float(params["tok_emb"][0, 0]), float(normal["tok_emb"][0, 0]) * GPT2_STD)  # one stream
