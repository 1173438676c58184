"""Inputs of an entry function: generated from a seed, or read from `.npz`, and always checked.

Keys of an `.npz` are argument names with record fields and tuple indices
joined by dots (`params.blocks.ln1.g`), the same keys `--output` writes.
An argument attribute `{psk_core.init = "positive"}` asks for values in
[0.5, 1.5) (for example AdamW's second moment, which a square root reads);
`"gpt2"` asks for GPT-2's initialisation, decided leaf by leaf (`gpt2_init`),
so that a model's loss starts near ln V rather than far above it.

A real or tensor takes real floating-point or integer values and an index
tensor integers. Every other dtype is refused rather than converted: numpy
would drop a complex array's imaginary part, read booleans as 0 and 1 and
parse strings as numbers, so a wrong file would run and give a wrong loss.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute

from presk.diagnostics import PreskError
from presk.dialects.psk_core_types import IndexTensorType, RealType, RecordType, Size, TensorType, TupleType, describe, leaves

INIT_ATTR = "psk_core.init"
INITS = ("normal", "positive", "zeros", "ones", "gpt2")
GPT2_STD = 0.02
"""GPT-2's standard deviation for weight matrices and embedding tables."""
GPT2_GAINS = ("g", "gain", "gamma", "scale")
"""Leaf names GPT-2's rule reads as normalisation gains: ones."""
GPT2_BIASES = ("b", "bias", "beta")
"""Leaf names GPT-2's rule reads as biases (and normalisation shifts): zeros."""
REAL_KINDS = "fiu"
INDEX_KINDS = "iu"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
NPY_MAGIC = b"\x93NUMPY"
DTYPE_KINDS = {  # numpy dtype kinds, as an error message names them
    "b": "booleans",
    "c": "complex numbers",
    "f": "floating-point values",
    "U": "strings",
    "S": "byte strings",
    "O": "Python objects",
    "M": "dates",
    "m": "time deltas",
    "V": "records",
}


def argument_names(func: FuncOp) -> list[str]:
    block = func.body.blocks.first
    args = block.args if block is not None else ()
    return [a.name_hint or f"arg{i}" for i, a in enumerate(args)] or [
        f"arg{i}" for i in range(len(func.function_type.inputs))
    ]


def _init_of(func: FuncOp, i: int) -> str:
    attrs = func.arg_attrs.data[i].data if func.arg_attrs is not None else {}
    init = attrs.get(INIT_ATTR)
    if init is None:
        return "normal"
    if not isinstance(init, StringAttr) or init.data not in INITS:
        raise PreskError("E4003", f"argument {i} of @{func.sym_name.data}: {INIT_ATTR} is one of {', '.join(INITS)}")
    return init.data


def bound_shape(t: TensorType | IndexTensorType, env: Mapping[str, int], where: str) -> tuple[int, ...]:
    return tuple(bind(s, env, where) for s in t.sizes)


def bind(size: Size, env: Mapping[str, int], where: str) -> int:
    if isinstance(size, int):
        return size
    if size not in env:
        raise PreskError("E4002", f"{where}: size '{size}' is not bound; pass --dim {size}=N")
    return env[size]


def make_inputs(
    func: FuncOp, env: Mapping[str, int], seed: int = 0, inits: Mapping[int, str] | None = None
) -> list[Any]:
    """Random inputs for every argument, reproducible from `seed`.

    `inits` overrides the `psk_core.init` of the arguments it names by
    position (`presk train --init` sets the parameters' this way).
    """
    rng = np.random.default_rng(seed)
    names = argument_names(func)
    chosen = {i: _init_of(func, i) for i in range(len(func.function_type.inputs))} | dict(inits or {})
    for i, init in chosen.items():
        if init not in INITS:
            raise PreskError("E4003", f"argument {i} of @{func.sym_name.data}: an init is one of {', '.join(INITS)}")
    check_memory(func, env)
    return [_generate(t, env, rng, chosen[i], names[i]) for i, t in enumerate(func.function_type.inputs.data)]


def physical_memory() -> int:
    """Bytes of memory the machine has (0 where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def check_memory(func: FuncOp, env: Mapping[str, int]) -> None:
    """E4006 before anything is allocated when the entry's arguments alone, as generated (8 bytes an element),
    would take more memory than the machine has: numpy would fail on the first of them with a MemoryError,
    or with a ValueError where the element count overflows its index type, neither of which names the sizes."""
    total = 0
    for i, t in enumerate(func.function_type.inputs.data):
        total += 8 * sum(_elements(leaf, env, f"argument {i}") for _, leaf in leaves(t))
    memory = physical_memory()
    if memory and total > memory:
        sizes = ", ".join(f"{name}={value}" for name, value in sorted(env.items()))
        raise PreskError("E4006", f"the arguments of @{func.sym_name.data}{f' at {sizes}' if sizes else ''} take "
                                  f"{_bytes(total)}, more than this machine's {_bytes(memory)} of memory")  # fmt: skip


def _elements(t: Attribute, env: Mapping[str, int], where: str) -> int:
    if isinstance(t, (TensorType, IndexTensorType)):
        return math.prod(bound_shape(t, env, where))
    return 1


def _bytes(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def gpt2_init(path: str, rank: int) -> str:
    """GPT-2's initialisation of one leaf, decided by its name (the last part of its path), then its rank.

    A gain (`g`, `gain`, `gamma`, `scale`) is "ones" and a bias (`b`, `bias`,
    `beta`) "zeros", whatever their rank, since stacked layers give a
    LayerNorm's gain a leading layer axis; any other leaf of two axes or more
    (a weight matrix, an embedding table, stacked or not) is "gpt2-normal",
    N(0, 0.02^2); one of fewer is a bias by another name, "zeros".
    """
    name = path.rsplit(".", 1)[-1]
    if name in GPT2_GAINS:
        return "ones"
    if name in GPT2_BIASES:
        return "zeros"
    return "gpt2-normal" if rank >= 2 else "zeros"


def _generate(t: Attribute, env: Mapping[str, int], rng: np.random.Generator, init: str, path: str) -> Any:
    if isinstance(t, RecordType):
        return {n: _generate(ft, env, rng, init, f"{path}.{n}") for n, ft in t.fields}
    if isinstance(t, TupleType):
        return tuple(_generate(et, env, rng, init, f"{path}.{i}") for i, et in enumerate(t.element_types.data))
    if isinstance(t, IndexTensorType):
        return rng.integers(0, bind(t.range, env, path), size=bound_shape(t, env, path), dtype=np.int64)
    shape = bound_shape(t, env, path) if isinstance(t, TensorType) else ()
    if init == "gpt2":
        init = gpt2_init(path, len(shape))
    if init == "gpt2-normal":
        data = rng.standard_normal(size=shape) * GPT2_STD
    elif init == "zeros":
        data = np.zeros(shape)
    elif init == "ones":
        data = np.ones(shape)
    elif init == "positive":
        data = rng.uniform(0.5, 1.5, size=shape)
    else:
        data = rng.standard_normal(size=shape)
    return float(data) if isinstance(t, RealType) else data


def load_inputs(path: str, func: FuncOp, env: Mapping[str, int]) -> list[Any]:
    """Read an entry's arguments from an `.npz`, checking every key, shape, dtype and index range.

    Every refusal of the file's content names the file, since the location of
    the error is the program's.
    """
    archive = read_npz(path)
    try:
        names = argument_names(func)
        values = [_collect(archive, t, name) for t, name in zip(func.function_type.inputs.data, names)]
        if archive:
            raise PreskError("E4003", f"keys {', '.join(sorted(archive))} match no argument of @{func.sym_name.data}")
        check_inputs(func, values, env)
    except PreskError as error:
        if error.code != "E4003":
            raise
        raise replace(error, message=f"{path}: {error.message}") from None
    return values


def read_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of the archive, read in full so that a damaged one is refused before anything runs (E4003
    naming the file: an inputs file, or `presk train --data`'s tokens).

    `allow_pickle` stays off: an input file must not run code.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
            if not magic.startswith(ZIP_MAGICS):
                raise PreskError("E4003", f"{path}: {_not_npz(magic)}; write one with numpy.savez")
            f.seek(0)
            archive: dict[str, Any] = {}
            key: str | None = None
            try:
                with np.load(f, allow_pickle=False) as npz:
                    for key in npz.files:
                        archive[key] = npz[key]
            except Exception as e:  # noqa: BLE001 - only numpy, zipfile and a decompressor run here
                raise PreskError("E4003", f"{path}: {_damaged(e, key)}") from None
    except OSError as e:
        raise PreskError("E4003", f"{path}: cannot read it: {e.strerror or e}") from None
    for key, value in archive.items():
        if not isinstance(value, np.ndarray):
            raise PreskError("E4003", f"{path}: member '{key}' is not a .npy array")
    return archive


def _not_npz(magic: bytes) -> str:
    if not magic:
        return "the file is empty, not an .npz archive"
    if magic == NPY_MAGIC:
        return "holds a single .npy array, not an .npz archive of named arrays"
    return "not an .npz archive (a zip of .npy arrays)"


def _damaged(error: Exception, key: str | None) -> str:
    where = "the archive" if key is None else f"array '{key}'"
    if isinstance(error, ValueError) and "allow_pickle" in str(error):
        return f"{where} holds Python objects, which only unpickling reads; save numbers"
    return f"{where} is damaged or truncated ({type(error).__name__}: {error})"


def _collect(archive: dict[str, np.ndarray], t: Attribute, key: str) -> Any:
    if isinstance(t, RecordType):
        return {n: _collect(archive, ft, f"{key}.{n}") for n, ft in t.fields}
    if isinstance(t, TupleType):
        return tuple(_collect(archive, et, f"{key}.{i}") for i, et in enumerate(t.element_types.data))
    if key not in archive:
        raise PreskError("E4003", f"has no array '{key}' ({describe(t)})")
    return archive.pop(key)


def check_inputs(func: FuncOp, values: Sequence[Any], env: Mapping[str, int]) -> None:
    """Every argument's shape matches its bound type and every index is in range."""
    names = argument_names(func)
    for t, v, name in zip(func.function_type.inputs.data, values, names):
        _check(t, v, env, name)


def _check(t: Attribute, v: Any, env: Mapping[str, int], path: str) -> None:
    if isinstance(t, RecordType):
        for n, ft in t.fields:
            _check(ft, v[n], env, f"{path}.{n}")
    elif isinstance(t, TupleType):
        for i, et in enumerate(t.element_types.data):
            _check(et, v[i], env, f"{path}.{i}")
    elif isinstance(t, RealType):
        if np.ndim(v) != 0:
            raise PreskError("E4003", f"input '{path}' is a real, got an array of shape {np.shape(v)}")
        _check_dtype(t, v, path, REAL_KINDS, "real floating-point or integer values")
    else:
        assert isinstance(t, TensorType | IndexTensorType)
        want = bound_shape(t, env, path)
        if np.shape(v) != want:
            raise PreskError("E4003", f"input '{path}' ({describe(t)}) must have shape {want}, got {np.shape(v)}")
        if isinstance(t, IndexTensorType):
            bound = bind(t.range, env, path)
            a = _check_dtype(t, v, path, INDEX_KINDS, f"integer indices in [0, {bound})")
            if a.size and (a.min() < 0 or a.max() >= bound):
                raise PreskError("E4003", f"input '{path}' holds indices in [0, {bound}); got values outside it")
        else:
            _check_dtype(t, v, path, REAL_KINDS, "real floating-point or integer values")


def _check_dtype(t: Attribute, v: Any, path: str, kinds: str, expected: str) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype.kind not in kinds:
        got = DTYPE_KINDS.get(a.dtype.kind, "values")
        raise PreskError("E4003", f"input '{path}' ({describe(t)}) takes {expected}, got {got} (dtype {a.dtype})")
    return a
