"""Creating upstream ops on the lowering's hot path, without xDSL's generic constructor.

Why: an IRDL op's `__init__` matches its operands, results and properties
against the op's definition (`irdl_op_init`, which builds an argument list
per operand and result definition), 25–35 µs an op on the AMD EPYC Zen 3
it was measured on; `Operation.create` takes them as given, in about 10. A register tile's
lowering emits hundreds of ops per kernel (a [6, 16] tile under a k-block:
some 500 scalar ops, which `psk-vectorize` then rewrites), and `presk plan`
lowers thousands of points: constructing ops is most of what that costs.

`create(op_type, operands, result_types, properties)` builds the op its
constructor builds, property for property, as long as the caller passes
the properties that constructor sets: `tests/unit/test_ir_build.py` checks
each use against its constructor, so an xDSL upgrade that adds a property
fails there rather than in a golden.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from xdsl.dialects import arith
from xdsl.ir import Attribute, Operation, SSAValue

__all__ = ["NO_FASTMATH", "NO_OVERFLOW", "create"]

NO_FASTMATH = arith.FastMathFlagsAttr("none")
"""The `fastmath` property the float ops' constructors set by default: no flag (presk's arithmetic is exact)."""
NO_OVERFLOW = arith.IntegerOverflowAttr("none")
"""The `overflowFlags` property the integer ops' constructors set by default."""

OpT = TypeVar("OpT", bound=Operation)


def create(
    op_type: type[OpT],
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute] = (),
    properties: Mapping[str, Attribute] | None = None,
) -> OpT:
    """An `op_type` with these operands, results and properties, and nothing else (no attributes, regions
    or successors)."""
    return op_type.create(operands=operands, result_types=result_types, properties=properties or {})
