"""Running PSK-Realize on the reference interpreter, honouring each site's realization.

A site (a group or a nest) reads its inputs from memory, converts them to its
arithmetic type, evaluates its members in that type (a value inside a group
never leaves it), and rounds its root to its storage type where it reaches
memory: f64 and f32 exactly as numpy rounds, bf16 to nearest even through
ml_dtypes (a bf16 value is kept as the f32 holding it, since the arithmetic
of a bf16 site is f32). A site with no realization (before `psk-realize`)
runs in the interpreter's own number system, f64 or mpmath.

This is what makes a partition part of what a program computes in bf16: a
group keeps its intermediates in f32 where separate launches would round
each of them to bf16.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from presk.interp.bf16 import f64_to_f32_odd
from presk.dialects.psk_realize import DEFAULT_ATTRIBUTE, GroupOp, NestOp, SiteOp

ARITH_DTYPES: dict[str, type[np.floating]] = {"f64": np.float64, "f32": np.float32}


def to_arith(value: Any, arith: str) -> Any:
    """`value` (a tree of tensors and reals) in the arithmetic type; index tensors unchanged."""
    dtype = ARITH_DTYPES[arith]
    if isinstance(value, dict):
        return {k: to_arith(v, arith) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(to_arith(v, arith) for v in value)
    if isinstance(value, np.ndarray):
        return value if value.dtype.kind in "iub" else value.astype(dtype, copy=False)
    if isinstance(value, float | np.floating | int) and not isinstance(value, bool):
        return dtype(value)
    return value


def to_storage(value: Any, storage: str) -> Any:
    """`value` rounded to the storage type: what reaches memory. bf16 rounds to nearest even."""
    if isinstance(value, dict):
        return {k: to_storage(v, storage) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(to_storage(v, storage) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iub":
        return value
    if storage == "bf16":
        with np.errstate(invalid="ignore"):  # NaN stays NaN
            rounded = f64_to_f32_odd(np.asarray(value)).astype(ml_dtypes.bfloat16).astype(np.float32)
        return rounded if isinstance(value, np.ndarray) else rounded[()]
    return to_arith(value, storage)


@register_impls
class PSKRealizeFunctions(InterpreterFunctions):
    """Groups and nests: their members in the site's arithmetic type, the root rounded to storage."""

    def _run_site(self, interp: Interpreter, op: SiteOp) -> tuple[Any, ...]:
        realization = op.realization
        for member in op.members:
            inputs = interp.get_values(member.operands)
            if realization is not None:
                inputs = tuple(to_arith(v, realization.arith_name) for v in inputs)
            results = interp.run_op(member, inputs)
            if realization is not None:
                results = tuple(to_arith(v, realization.arith_name) for v in results)
            interp.set_values(zip(member.results, results))
        (root,) = interp.get_values((op.root,))
        return (to_storage(root, realization.storage_name) if realization is not None else root,)

    @impl(GroupOp)
    def run_group(self, interp: Interpreter, op: GroupOp, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return self._run_site(interp, op)

    @impl(NestOp)
    def run_nest(self, interp: Interpreter, op: NestOp, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return self._run_site(interp, op)


def argument_storage(module: ModuleOp) -> str | None:
    """The storage type arguments are rounded to when they enter memory, if the program is realized."""
    attr = module.attributes.get(DEFAULT_ATTRIBUTE)
    return attr.data if isinstance(attr, StringAttr) else None
