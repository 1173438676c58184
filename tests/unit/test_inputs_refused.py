"""`presk run --inputs` refuses a file it cannot read faithfully, on every backend, with an E4003 naming it.

Each bad file is one a user can write by mistake: a save cut short, the
wrong kind of file, or arrays numpy would convert without a word (complex
numbers lose their imaginary part, booleans become 0 and 1, strings are
parsed as numbers). The inputs are read before a backend is chosen, so the
refusal is the same on the interpreter, the kernel interpreter and native
code; the valid file beside them runs on all three, so a refusal is the
mutation's doing.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main as presk
from presk.cli.program import load_program
from presk.interp.inputs import argument_names, make_inputs
from presk.interp.values import leaf_items
from presk.ir.calls import find_entry

ROOT = Path(__file__).resolve().parents[2]
GPT = str(ROOT / "corpus" / "nlp" / "gpt.mlir")
SIZES = ["--dim", "B=1", "--dim", "T=4"]
BACKENDS = ["interp", "kernel", "native"]
Arrays = dict[str, np.ndarray]


def run(*argv: str) -> tuple[int, str, list[warnings.WarningMessage]]:
    err = io.StringIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = presk(list(argv))
    return status, err.getvalue(), caught


def valid_arrays(entry: str) -> Arrays:
    program = load_program(GPT, [s for s in SIZES if s != "--dim"], [])
    func = find_entry(program.parsed.module, entry)
    values = make_inputs(func, program.env, seed=0)
    return {
        path: np.asarray(leaf)
        for name, value in zip(argument_names(func), values)
        for path, leaf in leaf_items(value, f"{name}.")
    }


def npz_bytes(arrays: Arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def with_array(key: str, convert: Callable[[np.ndarray], np.ndarray]) -> Callable[[Arrays], bytes]:
    return lambda arrays: npz_bytes({**arrays, key: convert(arrays[key])})


def damaged(arrays: Arrays) -> bytes:
    """A byte changed inside an array's data: the archive's checksum no longer matches."""
    data = bytearray(npz_bytes(arrays))
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


def single_npy(arrays: Arrays) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, arrays["params.tok_emb"])
    return buffer.getvalue()


# (entry, name, what the file holds, what the message says about it)
CASES: list[tuple[str, str, Callable[[Arrays], bytes], str]] = [
    ("loss", "empty", lambda arrays: b"", r"the file is empty, not an \.npz archive"),
    ("loss", "truncated", lambda arrays: npz_bytes(arrays)[: len(npz_bytes(arrays)) // 2],
     r"the archive is damaged or truncated \(BadZipFile"),
    ("loss", "damaged", damaged, r"array '[\w.]+' is damaged or truncated"),
    ("loss", "random_bytes", lambda arrays: np.random.default_rng(0).bytes(4096),
     r"not an \.npz archive \(a zip of \.npy arrays\)"),
    ("loss", "single_npy", single_npy, r"holds a single \.npy array, not an \.npz archive"),
    ("loss", "object_array", with_array("params.tok_emb", lambda a: a.astype(object)),
     r"array 'params\.tok_emb' holds Python objects"),
    ("loss", "string_array", with_array("params.tok_emb", lambda a: a.astype(str)),
     r"input 'params\.tok_emb' \(tensor\[.*\]\) takes real floating-point or integer values, got strings"),
    ("loss", "complex_tensor", with_array("params.tok_emb", lambda a: a + 1j),
     r"input 'params\.tok_emb' \(tensor\[.*\]\) takes real floating-point or integer values, got complex numbers"),
    ("loss", "bool_tensor", with_array("params.tok_emb", lambda a: a > 0),
     r"input 'params\.tok_emb' \(tensor\[.*\]\) takes real floating-point or integer values, got booleans"),
    ("loss", "bool_indices", with_array("ids", lambda a: a > 0),
     r"input 'ids' \(index\[.*\] < V\) takes integer indices in \[0, 92\), got booleans"),
    ("loss", "float_indices", with_array("ids", lambda a: a.astype(np.float64)),
     r"input 'ids' \(index\[.*\] < V\) takes integer indices in \[0, 92\), got floating-point values"),
    ("adamw.step", "complex_real", with_array("lr", lambda a: a + 0.5j),
     r"input 'lr' \(real\) takes real floating-point or integer values, got complex numbers"),
]  # fmt: skip

_arrays: dict[str, Arrays] = {}


def arrays_of(entry: str) -> Arrays:
    if entry not in _arrays:
        _arrays[entry] = valid_arrays(entry)
    return _arrays[entry]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_valid_file_runs(backend: str, tmp_path: Path) -> None:
    path = tmp_path / "X.npz"
    path.write_bytes(npz_bytes(arrays_of("loss")))
    status, err, _ = run("run", GPT, "--entry", "loss", *SIZES, "--backend", backend, "--inputs", str(path))
    assert status == 0, err


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("entry,name,make,pattern", CASES, ids=[case[1] for case in CASES])
def test_bad_file_is_refused_with_e4003(
    entry: str, name: str, make: Callable[[Arrays], bytes], pattern: str, backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "X.npz"
    path.write_bytes(make(arrays_of(entry)))
    status, err, caught = run("run", GPT, "--entry", entry, *SIZES, "--backend", backend, "--inputs", str(path))
    assert status == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert re.search(rf"error: E4003: {re.escape(str(path))}: {pattern}", err), err
    assert not [w for w in caught if issubclass(w.category, np.exceptions.ComplexWarning)]


def test_integer_and_narrow_float_arrays_are_still_accepted(tmp_path: Path) -> None:
    arrays = arrays_of("loss")
    path = tmp_path / "X.npz"
    converted = {"params.tok_emb": arrays["params.tok_emb"].astype(np.float32), "ids": arrays["ids"].astype(np.uint8)}
    path.write_bytes(npz_bytes({**arrays, "params.head": np.round(arrays["params.head"]).astype(np.int32), **converted}))
    status, err, _ = run("run", GPT, "--entry", "loss", *SIZES, "--inputs", str(path))
    assert status == 0, err
