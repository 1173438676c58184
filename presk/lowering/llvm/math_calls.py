"""`math` dialect transcendentals, and divisions of subnormals: the one place that chooses their implementation.

exp/log/tanh/erf are presk's polynomials (`presk.lowering.mathlib`),
emitted inline, so they vectorise and give the kernel interpreter's bits
(LLVM's `llvm.exp` on vectors is scalarised into libm calls, which give
other bits); `math.sqrt` is `llvm.sqrt`, correctly rounded everywhere.
"""

from __future__ import annotations

from llvmlite import ir

from presk.lowering import mathlib
from presk.lowering.llvm.errors import fail

__all__ = ["MATH", "emit_divide", "emit_math"]

MATH = {"math.exp": "exp", "math.log": "log", "math.tanh": "tanh", "math.erf": "erf", "math.sqrt": "sqrt"}
"""The `math` ops `emit_math` implements, with their names there."""


def emit_math(builder: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """`math.<name>` (exp, log, tanh, erf, sqrt) of `x`: the one place that chooses the implementation.

    presk's own polynomials, inline (`presk.lowering.mathlib`): vectorisable,
    and bit-identical to the kernel interpreter.
    """
    emitter = mathlib.EMITTERS.get(name)
    if emitter is None:
        raise fail(None, f"no implementation of math.{name}")
    return emitter(builder, x)


def emit_divide(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """`a / b` for an `arith.divf` marked `psk_kernel.subnormal_numerator`: the IEEE quotient's bits,
    with no subnormal arithmetic in the lanes where `a` is subnormal (`presk.lowering.mathlib.emit_divide`)."""
    return mathlib.emit_divide(builder, a, b)
