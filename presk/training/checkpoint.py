"""`presk train --checkpoint DIR`: the training state after a step, saved so that a later run resumes it exactly.

A checkpoint is one `.npz`, `DIR/checkpoint.npz`: every leaf of the
parameters and of AdamW's two moments under its path (`params.blocks.attn.wq`,
`m.…`, `v.…`), in the type the step computes in (bf16 is stored as f32,
which holds it exactly), and one string array, `presk.train`, of JSON: the
number of steps done, the flags the next steps depend on, and the state of
the generator that draws the training windows. With those, step k + 1 of a
resumed run reads the same state and the same windows as step k + 1 of a run
that never stopped, so it computes the same bits.

It is written after every step to `checkpoint.npz.tmp` and then renamed over
the last one (`os.replace`, atomic on POSIX and Windows), so a run killed at
any moment leaves the checkpoint of its last finished step, never half of
one: it loses at most the step under way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from presk.diagnostics import PreskError
from presk.interp.inputs import ZIP_MAGICS

FILE = "checkpoint.npz"
META = "presk.train"
FORMAT = 1


@dataclass(frozen=True)
class Checkpoint:
    step: int
    """Steps finished: the run resumes at step + 1."""
    leaves: dict[str, np.ndarray]
    """The state's leaves by path: params.…, m.…, v.…."""
    flags: dict[str, Any]
    """What the steps computed depend on (data, seed, lr, betas, realization, ...), as the run that saved it had them."""
    position: dict[str, Any]
    """The training windows' generator state after step `step`."""
    history: list[list[Any]]
    """[step, loss, validation loss or None] of every step so far, for `--plot` after a resume."""


def prepare(directory: str) -> str:
    """Create `directory` if it is missing; its checkpoint's path. Refused before anything is compiled (E0001)."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise PreskError("E0001", f"--checkpoint {directory}: cannot create the directory: {error.strerror}") from None
    if not os.access(directory, os.W_OK):
        raise PreskError("E0001", f"--checkpoint {directory}: the directory is not writable")
    return os.path.join(directory, FILE)


def save(path: str, checkpoint: Checkpoint) -> None:
    """Write the checkpoint beside `path`, then rename it over `path`: the old one stays whole until then."""
    meta = {"format": FORMAT, "step": checkpoint.step, "flags": checkpoint.flags, "position": checkpoint.position,
            "history": checkpoint.history}  # fmt: skip
    arrays = {key: _storable(value) for key, value in checkpoint.leaves.items()}
    temporary = path + ".tmp"
    try:
        with open(temporary, "wb") as f:
            np.savez(f, **arrays, **{META: np.array(json.dumps(meta))})
        os.replace(temporary, path)
    except OSError as error:
        raise PreskError("E0001", f"cannot write the checkpoint {path}: {error.strerror}") from None


def load(path: str) -> Checkpoint | None:
    """The checkpoint at `path`, or None when there is none yet (E4003 naming the file when it is not one)."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            if f.read(4) not in ZIP_MAGICS:
                raise ValueError("not an .npz archive")
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        meta = json.loads(str(arrays.pop(META)[()]))
        if meta.get("format") != FORMAT:
            raise ValueError(f"format {meta.get('format')!r}, this presk reads format {FORMAT}")
        return Checkpoint(int(meta["step"]), arrays, dict(meta["flags"]), meta["position"], list(meta["history"]))
    except PreskError:
        raise
    except Exception as error:  # noqa: BLE001 - numpy, zipfile and json report a bad file in many ways
        raise PreskError("E4003", f"{path}: not a presk train checkpoint ({type(error).__name__}: {error})") from None


def check_flags(path: str, checkpoint: Checkpoint, flags: dict[str, Any]) -> None:
    """The run's flags are those the checkpoint was saved under (E4001 naming the first that differs).

    The steps after it would otherwise not be those of the run that saved
    it: another learning rate, stream, seed or realization computes other bits.
    """
    for name, value in flags.items():
        if checkpoint.flags.get(name) != value:
            raise PreskError("E4001", f"{path} was saved after step {checkpoint.step} of a run with {name} "
                             f"{_shown(checkpoint.flags.get(name))}, this run has {name} {_shown(value)}: resume with the "
                             "same flags, or train in another --checkpoint directory")  # fmt: skip


def check_leaves(path: str, checkpoint: Checkpoint, shapes: dict[str, tuple[int, ...]]) -> None:
    """The checkpoint holds exactly the program's state leaves, each of its shape (E4003 naming the leaf)."""
    for key, shape in shapes.items():
        if key not in checkpoint.leaves:
            raise PreskError("E4003", f"{path}: no leaf '{key}' (of shape {list(shape)}): the checkpoint is of "
                             "another program")  # fmt: skip
        saved = checkpoint.leaves[key].shape
        if saved != shape:
            raise PreskError("E4003", f"{path}: leaf '{key}' has shape {list(saved)}, the program's has "
                             f"{list(shape)}: the checkpoint is of another program")  # fmt: skip
    extra = sorted(set(checkpoint.leaves) - set(shapes))
    if extra:
        raise PreskError("E4003", f"{path}: leaf '{extra[0]}' is none of the program's: the checkpoint is of "
                         "another program")  # fmt: skip


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _storable(array: Any) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(np.float32) if array.dtype == ml_dtypes.bfloat16 else array
