"""Scalar arithmetic: the `arith` and `math` ops, on scalars or (in vector loop bodies) on vectors.

Numerics: no fast-math flag anywhere (no contraction: the only fused
operation is an explicit `math.fma` → `llvm.fma`); `arith.maximumf` is
`llvm.maximum` (IEEE 754-2019: nan if either operand is nan, -0 < +0);
`math.sqrt` is `llvm.sqrt`; exp/log/tanh/erf are presk's polynomials
(`presk.lowering.llvm.math_calls`). No denormal flushing (the default,
IEEE, mode). Float conversions involving bf16 are in
`presk.lowering.llvm.bf16`.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from llvmlite import ir
from xdsl.dialects.builtin import BFloat16Type, Float32Type, Float64Type, FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Operation

from presk.lowering.llvm.base import TranslatorBase
from presk.lowering.llvm.bf16 import bf16_to_f32, f32_to_bf16, f64_to_f32_odd
from presk.lowering.llvm.errors import fail
from presk.lowering.llvm.irtypes import F32, F64, I1, I16, llvm_type, shaped, splat_constant
from presk.lowering.llvm.guarded_division import emit_guarded_divide
from presk.lowering.llvm.math_calls import MATH, emit_divide, emit_math
from presk.analysis import attr
from presk.dialects.psk_kernel import SUBNORMAL_NUMERATOR
from presk.lowering.llvm.target import intrinsic

__all__ = ["ScalarOps"]

_FCMP = {
    "oeq": (True, "=="), "ogt": (True, ">"), "oge": (True, ">="), "olt": (True, "<"),
    "ole": (True, "<="), "one": (True, "!="), "ord": (True, "ord"),
    "ueq": (False, "=="), "ugt": (False, ">"), "uge": (False, ">="), "ult": (False, "<"),
    "ule": (False, "<="), "une": (False, "!="), "uno": (False, "uno"),
}
_FCMP_NAMES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
               "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true"]
_ICMP = {
    "eq": (True, "=="), "ne": (True, "!="), "slt": (True, "<"), "sle": (True, "<="),
    "sgt": (True, ">"), "sge": (True, ">="), "ult": (False, "<"), "ule": (False, "<="),
    "ugt": (False, ">"), "uge": (False, ">="),
}
_ICMP_NAMES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
_BINARY_FLOAT = {"arith.addf": "fadd", "arith.subf": "fsub", "arith.mulf": "fmul", "arith.divf": "fdiv"}
_BINARY_INT = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul"}


def _predicate(op: Operation, names: list[str]) -> str:
    predicate = attr(op, "predicate")
    if not isinstance(predicate, IntegerAttr) or not 0 <= predicate.value.data < len(names):
        raise fail(None, f"{op.name} without a valid predicate")
    return names[predicate.value.data]


class ScalarOps(TranslatorBase):
    """`arith` and `math` ops: an operand that is a vector makes the others splat to its lanes."""

    def scalar_op(self, op: Operation) -> None:
        b = self.builder
        name = op.name
        if name == "arith.constant":
            self.values[op.results[0]] = self.constant(op)
        elif name == "arith.divf" and SUBNORMAL_NUMERATOR in op.attributes:
            x, y = self.operands(op)
            if isinstance(x.type, ir.VectorType):
                self.values[op.results[0]] = emit_guarded_divide(b, x, y)
            else:
                self.values[op.results[0]] = emit_divide(b, x, y)
        elif name in _BINARY_FLOAT:
            x, y = self.operands(op)
            self.values[op.results[0]] = getattr(b, _BINARY_FLOAT[name])(x, y)
        elif name in _BINARY_INT:
            x, y = self.operands(op)
            self.values[op.results[0]] = getattr(b, _BINARY_INT[name])(x, y)
        elif name == "arith.minsi":  # a shifted last block's start, or a k-block cut short at K's end
            x, y = self.operands(op)
            self.values[op.results[0]] = b.select(b.icmp_signed("<", x, y), x, y)
        elif name == "arith.negf":
            self.values[op.results[0]] = b.fneg(self.value(op.operands[0]))
        elif name in ("arith.maximumf", "arith.minimumf"):
            x, y = self.operands(op)
            which = "llvm.maximum" if name == "arith.maximumf" else "llvm.minimum"
            self.values[op.results[0]] = b.call(intrinsic(self.module, which, x.type, 2), [x, y])
        elif name == "arith.cmpf":
            x, y = self.operands(op)
            predicate = _predicate(op, _FCMP_NAMES)
            if predicate in ("false", "true"):
                self.values[op.results[0]] = splat_constant(I1, int(predicate == "true"), x)
            else:
                ordered, symbol = _FCMP[predicate]
                compare = b.fcmp_ordered if ordered else b.fcmp_unordered
                self.values[op.results[0]] = compare(symbol, x, y)
        elif name == "arith.cmpi":
            x, y = self.counter_lanes(op) if self.lanes else self.operands(op)
            signed, symbol = _ICMP[_predicate(op, _ICMP_NAMES)]
            compare = b.icmp_signed if signed else b.icmp_unsigned
            self.values[op.results[0]] = compare(symbol, x, y)
        elif name == "arith.select":
            c, x, y = (self.value(v) for v in op.operands)
            if isinstance(x.type, ir.VectorType) or isinstance(y.type, ir.VectorType):
                lanes = (x.type if isinstance(x.type, ir.VectorType) else y.type).count
                x, y = self.splat(x, lanes), self.splat(y, lanes)
            elif isinstance(c.type, ir.VectorType):
                x, y = self.splat(x, c.type.count), self.splat(y, c.type.count)
            self.values[op.results[0]] = b.select(c, x, y)
        elif name == "arith.extf":
            self.values[op.results[0]] = self.extf(op)
        elif name == "arith.truncf":
            self.values[op.results[0]] = self.truncf(op)
        elif name == "arith.index_cast":
            self.values[op.results[0]] = self.int_cast(self.value(op.operands[0]), op.results[0].type, signed=True)
        elif name == "arith.extui":
            x = self.value(op.operands[0])
            self.values[op.results[0]] = b.zext(x, shaped(llvm_type(op.results[0].type), x))
        elif name == "arith.extsi":
            x = self.value(op.operands[0])
            self.values[op.results[0]] = b.sext(x, shaped(llvm_type(op.results[0].type), x))
        elif name == "math.fma":
            x, y, z = self.operands(op)
            self.values[op.results[0]] = b.call(intrinsic(self.module, "llvm.fma", x.type, 3), [x, y, z])
        elif name == "math.absf":
            x = self.value(op.operands[0])
            self.values[op.results[0]] = b.call(intrinsic(self.module, "llvm.fabs", x.type, 1), [x])
        elif name in MATH:
            self.values[op.results[0]] = emit_math(b, MATH[name], self.value(op.operands[0]))
        else:
            raise fail(self.kernel, f"cannot translate '{name}' (not in the PSK-Kernel subset)")

    def constant(self, op: Operation) -> ir.Value:
        value_attr = attr(op, "value")
        t = op.results[0].type
        if isinstance(value_attr, FloatAttr):
            value = float(value_attr.value.data)
            if isinstance(t, BFloat16Type):  # rounded as ml_dtypes rounds it
                return I16(int(np.array([value], dtype=ml_dtypes.bfloat16).view(np.uint16)[0]))
            return F32(value) if isinstance(t, Float32Type) else F64(value)
        if isinstance(value_attr, IntegerAttr):
            ty = llvm_type(t)
            value = value_attr.value.data
            if isinstance(ty, ir.IntType) and ty.width == 1:
                return I1(value & 1)
            return ty(value)
        raise fail(self.kernel, f"unsupported constant {value_attr}")

    def extf(self, op: Operation) -> ir.Value:
        b = self.builder
        x = self.value(op.operands[0])
        source, target = op.operands[0].type, op.results[0].type
        if isinstance(source, BFloat16Type):
            x = bf16_to_f32(b, x)
            source = Float32Type()
        if isinstance(source, Float32Type) and isinstance(target, Float64Type):
            return b.fpext(x, shaped(F64, x))
        if type(source) is type(target):
            return x
        raise fail(self.kernel, f"arith.extf from {op.operands[0].type} to {target}")

    def truncf(self, op: Operation) -> ir.Value:
        b = self.builder
        x = self.value(op.operands[0])
        source, target = op.operands[0].type, op.results[0].type
        if isinstance(target, BFloat16Type):
            if isinstance(source, Float64Type):
                return f32_to_bf16(b, f64_to_f32_odd(b, x))
            if isinstance(source, Float32Type):
                return f32_to_bf16(b, x)
        elif isinstance(source, Float64Type) and isinstance(target, Float32Type):
            return b.fptrunc(x, shaped(F32, x))
        raise fail(self.kernel, f"arith.truncf from {source} to {target}")

    def int_cast(self, x: ir.Value, target: Attribute, signed: bool) -> ir.Value:
        ty = shaped(llvm_type(target), x)
        width = (x.type.element if isinstance(x.type, ir.VectorType) else x.type).width
        target_width = (ty.element if isinstance(ty, ir.VectorType) else ty).width
        if width == target_width:
            return x
        if width > target_width:
            return self.builder.trunc(x, ty)
        return self.builder.sext(x, ty) if signed else self.builder.zext(x, ty)
