"""Run-time values of PSK-Core and the by-name alignment of tensors.

A real is a Python number (float or mpf); a tensor an ndarray whose axes
follow its type; an index tensor an int64 ndarray; a record a dict in field
order; a tuple a tuple. Broadcasting is by axis name, so aligning an operand
to a result means inserting unit axes where it lacks the result's axes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Attribute

from presk.dialects.psk_core_types import IndexTensorType, RecordType, TensorType, TupleType


def align(value: Any, value_type: Attribute, target_names: Sequence[str]) -> Any:
    """View `value` with a unit axis for every target axis it lacks (its axes are a subsequence)."""
    if not isinstance(value_type, TensorType | IndexTensorType):
        return value
    names = value_type.names
    if tuple(names) == tuple(target_names):
        return value
    shape = [value.shape[names.index(n)] if n in names else 1 for n in target_names]
    return np.reshape(value, shape)


def tree_map(fn: Callable[..., Any], types: Sequence[Attribute], values: Sequence[Any], result_type: Attribute) -> Any:
    """Apply a leaf function across trees of one structure (reals broadcast into every leaf)."""
    if isinstance(result_type, RecordType):
        return {
            name: tree_map(fn, [_child_type(t, name, i) for t in types], [_child(v, t, name, i) for v, t in zip(values, types)], ft)
            for i, (name, ft) in enumerate(result_type.fields)
        }
    if isinstance(result_type, TupleType):
        return tuple(
            tree_map(fn, [_child_type(t, None, i) for t in types], [_child(v, t, None, i) for v, t in zip(values, types)], et)
            for i, et in enumerate(result_type.element_types.data)
        )
    return fn(types, values, result_type)


def _child_type(t: Attribute, name: str | None, i: int) -> Attribute:
    if isinstance(t, RecordType):
        return t.field_types.data[i]
    if isinstance(t, TupleType):
        return t.element_types.data[i]
    return t


def _child(v: Any, t: Attribute, name: str | None, i: int) -> Any:
    if isinstance(t, RecordType):
        return v[name]
    if isinstance(t, TupleType):
        return v[i]
    return v


def leaf_items(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Flatten a value to (dotted path, leaf): the keys of `.npz` files."""
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in leaf_items(v, f"{prefix}{k}.")]
    if isinstance(value, tuple):
        return [item for i, v in enumerate(value) for item in leaf_items(v, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), value)]
