"""Reading PSK-Kernel ops: a property or attribute of an op, the integer an SSA value is constant at.

Shared by the kernel ABI (a split loop needs constant bounds), the plans of
the vectorised loops and the translation of `arith` ops, which all ask the
same two questions of xDSL ops.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue

__all__ = ["attr", "constant_int"]


def attr(op: Operation, name: str) -> Attribute | None:
    """A property or attribute of `op` (xDSL attributes can be falsy: test against None)."""
    value = op.properties.get(name)
    return value if value is not None else op.attributes.get(name)


def constant_int(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, Operation) and owner.name == "arith.constant":
        value_attr = attr(owner, "value")
        if isinstance(value_attr, IntegerAttr):
            return value_attr.value.data
    return None
