"""PSK-Kernel to LLVM IR (`llvmlite.ir`), one function per kernel, like mlir-translate.

Every kernel becomes a function of the kernel ABI (`presk.jit.engine`):

    define void @name(ptr %args, i64 %lo, i64 %hi)

`%args` holds the buffers' base pointers in the kernel's buffer order. The
kernel's *split loop* (`split_loop`: its outermost `scf.for` when that loop is
the only loop at the top of the body, is marked `psk_kernel.parallel`, yields
nothing, and no store sits beside it) runs its iterations `[lo, hi)`, clamped
to `[0, trip count)`; the ops around it run in every call (they are constants,
index arithmetic and loads). A kernel without a split loop has one iteration:
it runs entirely when `lo <= 0 < hi`, so the executor calls it with (0, 1).
`launch_iterations(kernel)` is that `n`: the executor's `[0, n)`.

How the IR is shaped, and why:

- Loops are guarded do-while loops (`lb < ub` tested once, then a body whose
  latch increments the induction variable with `add nuw nsw` and tests it):
  the rotated form LLVM's loop passes expect, with a canonical induction
  variable (a phi from `lb` by a constant step), and `iter_args` as header
  phis; a loop's results are exit phis merging the initial values (loop not
  entered) and the last yields. With constant bounds the guard folds away.
- A buffer access is `getelementptr inbounds T, ptr %base, i64 %linear` with
  the row-major linear index `((i0*d1 + i1)*d2 + i2)...` formed with
  `nuw nsw` (an in-bounds index of a static shape cannot wrap; an
  out-of-bounds one is undefined behaviour anyway); loads and stores are
  aligned to the element size (what `check_buffers` guarantees). Base
  pointers are loaded from `%args` with `!noundef !nonnull !align
  !dereferenceable(bytes of the buffer)`: the shape is checked before every
  call, and dereferenceability lets LLVM speculate loads out of selects.
- Aliasing. LLVM cannot see that two buffers are distinct (they are loaded
  from a table), so without help every store may clobber every load and the
  vectoriser needs run-time overlap checks. `noalias` function parameters
  do not apply (the pointers are not parameters), so each buffer gets its own
  alias scope (`!alias.scope` on its accesses, `!noalias` on every other
  buffer's): scoped noalias metadata, what inlining a `noalias` parameter
  produces. This is valid when no *written* buffer overlaps any other buffer
  of the launch; read-only buffers may overlap each other freely (LLVM only
  uses no-alias facts to move accesses across stores). presk's host programs
  never pass an output together with a view of the same allocation, and the
  native runner checks it at every new set of arrays: when a written buffer
  overlaps another one it runs the variant translated with
  `assume_disjoint=False` (no scopes) on one thread, which computes what the
  sequential loop nest computes.
- Numerics: no fast-math flag anywhere (no contraction: the only fused
  operation is an explicit `math.fma` → `llvm.fma`); `arith.maximumf` is
  `llvm.maximum` (IEEE 754-2019: nan if either operand is nan, -0 < +0);
  `math.sqrt` is `llvm.sqrt`; exp/log/tanh/erf are presk's polynomials
  (`presk.lowering.mathlib`), emitted inline, so they vectorise and give the
  kernel interpreter's bits. No denormal flushing (the default, IEEE, mode).
- bf16 is `i16` in memory and in registers (never LLVM's `bfloat`: x86's
  `vcvtneps2bf16` flushes subnormal inputs). Extending is `zext` to i32,
  `shl 16`, `bitcast` to float; truncating f32 rounds to nearest even on the
  bit pattern (`(b + 0x7fff + ((b >> 16) & 1)) >> 16`) and turns every nan
  into `sign | 0x7fc0`, as `ml_dtypes.bfloat16` does. f64 → bf16 is one
  IEEE rounding (`arith.truncf`'s meaning, and the kernel interpreter's
  `truncate_f64_to_bf16`): f64 is rounded to f32 *to odd* first, which makes
  the second rounding exact (24 >= 8 + 2 bits). ml_dtypes itself rounds
  f64 → f32 → bf16 to nearest twice (1 + 2**-8 + 2**-30 gives it 1, not
  1 + 2**-7), so it is not the reference for that conversion.
- Function attributes give LLVM the host CPU (`"target-cpu"`,
  `"target-features"` from `Machine`) and, with AVX-512,
  `"prefer-vector-width"="512"`, without which the loop vectoriser stops at
  256-bit vectors on this CPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import ml_dtypes
import numpy as np
from llvmlite import ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from presk.cost.machine import Machine, host_machine
from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import PARALLEL, KernelOp
from presk.lowering import mathlib

__all__ = [
    "buffer_bytes",
    "launch_iterations",
    "split_loop",
    "translate_kernel",
    "translate_module",
    "trip_count",
    "written_buffers",
]

I1 = ir.IntType(1)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])


def _fail(kernel: KernelOp | None, message: str) -> PreskError:
    where = f"kernel '{kernel.sym_name.data}': " if kernel is not None else ""
    return PreskError("E5001", f"native compilation failed: {where}{message}")


# --------------------------------------------------------------------------- analysis


def _attr(op: Operation, name: str) -> Attribute | None:
    """A property or attribute of `op` (xDSL attributes can be falsy: test against None)."""
    value = op.properties.get(name)
    return value if value is not None else op.attributes.get(name)


def _constant_int(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, Operation) and owner.name == "arith.constant":
        attr = _attr(owner, "value")
        if isinstance(attr, IntegerAttr):
            return attr.value.data
    return None


def trip_count(loop: scf.ForOp) -> int | None:
    """Iterations of an `scf.for` with constant bounds (None if a bound is not a constant)."""
    lb, ub, step = (_constant_int(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -((lb - ub) // step))


def split_loop(kernel: KernelOp) -> scf.ForOp | None:
    """The loop whose iterations `[lo, hi)` a call runs, or None (the kernel is one iteration).

    The only `scf.for` at the top of the body, marked parallel, without results,
    with constant bounds, and with no store beside it (a store outside the
    loop would run in every chunk).
    """
    loops = [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1:
        return None
    loop = loops[0]
    if PARALLEL not in loop.attributes or loop.results or trip_count(loop) is None:
        return None
    if any(op.name == "memref.store" for op in kernel.body.block.ops):
        return None
    return loop


def launch_iterations(kernel: KernelOp) -> int:
    """`n`: the executor runs the kernel over `[0, n)` (the split loop's trip count, else 1)."""
    loop = split_loop(kernel)
    if loop is None:
        return 1
    count = trip_count(loop)
    assert count is not None
    return count


def written_buffers(kernel: KernelOp) -> frozenset[int]:
    """Indices of the buffers the kernel stores to (its outputs)."""
    args = kernel.body.block.args
    written: set[int] = set()
    for op in kernel.walk():
        if op.name == "memref.store":
            target = op.operands[1]
            if target in args:
                written.add(args.index(target))
    return frozenset(written)


def _element_size(element: Attribute) -> int:
    if isinstance(element, Float64Type):
        return 8
    if isinstance(element, Float32Type):
        return 4
    if isinstance(element, BFloat16Type):
        return 2
    if isinstance(element, IndexType):
        return 8
    if isinstance(element, IntegerType) and element.width.data in (8, 16, 32, 64):
        return element.width.data // 8
    raise _fail(None, f"no buffers of {element} (f64, f32, bf16 and i64 are supported)")


def buffer_bytes(t: MemRefType) -> int:
    """Size of a row-major buffer of type `t` in bytes."""
    count = 1
    for size in t.get_shape():
        count *= size
    return count * _element_size(t.element_type)


# --------------------------------------------------------------------------- types


def _llvm_type(t: Attribute) -> ir.Type:
    if isinstance(t, Float64Type):
        return F64
    if isinstance(t, Float32Type):
        return F32
    if isinstance(t, BFloat16Type):
        return I16  # bf16 lives as its bit pattern; arithmetic happens in f32
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    raise _fail(None, f"no LLVM type for {t}")


class _FunctionAttributes(ir.FunctionAttributes):
    """llvmlite's function attributes plus `"key"="value"` string attributes."""

    def __init__(self, strings: dict[str, str], flags: Iterable[str] = ()) -> None:
        self.strings = dict(strings)
        super().__init__(flags)

    def __bool__(self) -> bool:
        return bool(self.strings) or super().__len__() > 0

    def _to_list(self, ret_type: ir.Type) -> list[str]:
        return [*super()._to_list(ret_type), *(f'"{k}"="{v}"' for k, v in self.strings.items())]


def target_attributes(machine: Machine) -> dict[str, str]:
    """The string function attributes that make LLVM generate code for `machine`."""
    attrs = {"target-cpu": machine.cpu_name, "target-features": machine.feature_string()}
    if machine.vector_bits >= 512:
        attrs["prefer-vector-width"] = "512"
    return attrs


def _intrinsic(module: ir.Module, name: str, ty: ir.Type, arity: int) -> ir.Function:
    """An overloaded float intrinsic (`llvm.fma.f32`), declared once; same naming as mathlib's."""
    suffix = f"v{ty.count}{ty.element.intrinsic_name}" if isinstance(ty, ir.VectorType) else ty.intrinsic_name
    full = f"{name}.{suffix}"
    existing = module.globals.get(full)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, ir.FunctionType(ty, [ty] * arity), full)


def emit_math(builder: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """`math.<name>` (exp, log, tanh, erf, sqrt) of `x`: the one place that chooses the implementation.

    presk's own polynomials, inline (`presk.lowering.mathlib`): vectorisable,
    and bit-identical to the kernel interpreter.
    """
    emitter = mathlib.EMITTERS.get(name)
    if emitter is None:
        raise _fail(None, f"no implementation of math.{name}")
    return emitter(builder, x)


# --------------------------------------------------------------------------- bf16


def bf16_to_f32(builder: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """Exact: the bf16 pattern is the high half of the f32 one."""
    return builder.bitcast(builder.shl(builder.zext(bits, I32), I32(16)), F32)


def f32_to_bf16(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even on the bit pattern; every nan becomes `sign | 0x7fc0` (ml_dtypes)."""
    b = builder.bitcast(x, I32)
    high = builder.lshr(b, I32(16))
    odd = builder.and_(high, I32(1))
    rounded = builder.lshr(builder.add(builder.add(b, I32(0x7FFF)), odd), I32(16))
    nan = builder.or_(builder.and_(high, I32(0x8000)), I32(0x7FC0))
    is_nan = builder.fcmp_unordered("uno", x, x)
    return builder.trunc(builder.select(is_nan, nan, rounded), I16)


def f64_to_f32_odd(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 → f32 rounded *to odd*: the truncation toward zero, with its last bit set when inexact.

    Nan stays nan (the comparisons are false); a value beyond the f32 range
    gives 0x7f7fffff with its sign, which a later bf16 rounding takes to inf.
    """
    fabs = _intrinsic(builder.module, "llvm.fabs", F64, 1)
    t = builder.fptrunc(x, F32)
    tb = builder.bitcast(t, I32)
    back = builder.fpext(t, F64)
    inexact = builder.fcmp_ordered("!=", back, x)
    away = builder.fcmp_ordered(">", builder.call(fabs, [back]), builder.call(fabs, [x]))
    toward_zero = builder.select(away, builder.sub(tb, I32(1)), tb)
    return builder.bitcast(builder.select(inexact, builder.or_(toward_zero, I32(1)), tb), F32)


# --------------------------------------------------------------------------- translation

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
_MATH = {"math.exp": "exp", "math.log": "log", "math.tanh": "tanh", "math.erf": "erf", "math.sqrt": "sqrt"}


def _predicate(op: Operation, names: list[str]) -> str:
    attr = _attr(op, "predicate")
    if not isinstance(attr, IntegerAttr) or not 0 <= attr.value.data < len(names):
        raise _fail(None, f"{op.name} without a valid predicate")
    return names[attr.value.data]


class _Translator:
    def __init__(self, module: ir.Module, kernel: KernelOp, machine: Machine, assume_disjoint: bool) -> None:
        self.module = module
        self.kernel = kernel
        self.name = kernel.sym_name.data
        self.fn = ir.Function(module, KERNEL_TYPE, self.name)
        self.fn.attributes = _FunctionAttributes(target_attributes(machine), ["nounwind", "norecurse"])
        self.fn.args[0].name, self.fn.args[1].name, self.fn.args[2].name = "args", "lo", "hi"
        self.builder = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.values: dict[SSAValue, ir.Value] = {}
        self.buffers: dict[SSAValue, int] = {arg: i for i, arg in enumerate(kernel.body.block.args)}
        self.bases: list[ir.Value] = []
        self.scopes: list[tuple[ir.MDValue, ir.MDValue] | None] = []
        self.assume_disjoint = assume_disjoint
        self.split = split_loop(kernel)
        self.loop_number = 0

    # ---- setup

    def _metadata(self, *operands: object) -> ir.MDValue:
        return self.module.add_metadata(list(operands))

    def _load_bases(self) -> None:
        b = self.builder
        args = self.fn.args[0]
        types = self.kernel.buffers
        for i, t in enumerate(types):
            if any(size < 0 for size in t.get_shape()) or not isinstance(t.layout, NoneAttr):
                raise _fail(self.kernel, f"buffer {i} is {t}; kernels take static-shape row-major buffers")
            slot = b.gep(args, [I64(i)], inbounds=True, source_etype=PTR)
            base = b.load(slot, name=f"buf{i}", typ=PTR, align=8)
            size = buffer_bytes(t)
            base.set_metadata("noundef", self._metadata())
            base.set_metadata("align", self._metadata(I64(_element_size(t.element_type))))
            if size > 0:
                base.set_metadata("nonnull", self._metadata())
                base.set_metadata("dereferenceable", self._metadata(I64(size)))
            self.bases.append(base)
        written = written_buffers(self.kernel)
        if not self.assume_disjoint or len(types) < 2 or not written:
            self.scopes = [None] * len(types)
            return
        domain = self._metadata(ir.MetaDataString(self.module, f"presk.{self.name}"))
        scopes = [
            self._metadata(ir.MetaDataString(self.module, f"presk.{self.name}.buffer{i}"), domain)
            for i in range(len(types))
        ]
        self.scopes = [
            (self._metadata(scopes[i]), self._metadata(*(s for j, s in enumerate(scopes) if j != i)))
            for i in range(len(types))
        ]

    # ---- values

    def value(self, v: SSAValue) -> ir.Value:
        try:
            return self.values[v]
        except KeyError:
            raise _fail(self.kernel, f"value {v} is used but not translated (a buffer used as a value?)") from None

    def translate(self) -> ir.Function:
        self._load_bases()
        b = self.builder
        zero = I64(0)
        lo, hi = self.fn.args[1], self.fn.args[2]
        if self.split is None:
            # One iteration: run when 0 is in [lo, hi).
            run = b.and_(b.icmp_signed("<=", lo, zero), b.icmp_signed(">", hi, zero))
            body, done = self.fn.append_basic_block("run"), self.fn.append_basic_block("done")
            b.cbranch(run, body, done)
            b.position_at_end(body)
            self.block(self.kernel.body.block)
            b.branch(done)
            b.position_at_end(done)
        else:
            self.block(self.kernel.body.block)
        b.ret_void()
        return self.fn

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        b = self.builder
        name = op.name
        if name == "arith.constant":
            self.values[op.results[0]] = self.constant(op)
        elif name in _BINARY_FLOAT:
            x, y = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = getattr(b, _BINARY_FLOAT[name])(x, y)
        elif name in _BINARY_INT:
            x, y = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = getattr(b, _BINARY_INT[name])(x, y)
        elif name == "arith.negf":
            self.values[op.results[0]] = b.fneg(self.value(op.operands[0]))
        elif name in ("arith.maximumf", "arith.minimumf"):
            x, y = (self.value(v) for v in op.operands)
            which = "llvm.maximum" if name == "arith.maximumf" else "llvm.minimum"
            self.values[op.results[0]] = b.call(_intrinsic(self.module, which, x.type, 2), [x, y])
        elif name == "arith.cmpf":
            x, y = (self.value(v) for v in op.operands)
            predicate = _predicate(op, _FCMP_NAMES)
            if predicate in ("false", "true"):
                self.values[op.results[0]] = I1(int(predicate == "true"))
            else:
                ordered, symbol = _FCMP[predicate]
                compare = b.fcmp_ordered if ordered else b.fcmp_unordered
                self.values[op.results[0]] = compare(symbol, x, y)
        elif name == "arith.cmpi":
            x, y = (self.value(v) for v in op.operands)
            signed, symbol = _ICMP[_predicate(op, _ICMP_NAMES)]
            compare = b.icmp_signed if signed else b.icmp_unsigned
            self.values[op.results[0]] = compare(symbol, x, y)
        elif name == "arith.select":
            c, x, y = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = b.select(c, x, y)
        elif name == "arith.extf":
            self.values[op.results[0]] = self.extf(op)
        elif name == "arith.truncf":
            self.values[op.results[0]] = self.truncf(op)
        elif name == "arith.index_cast":
            self.values[op.results[0]] = self.int_cast(self.value(op.operands[0]), op.results[0].type, signed=True)
        elif name == "arith.extui":
            self.values[op.results[0]] = b.zext(self.value(op.operands[0]), _llvm_type(op.results[0].type))
        elif name == "arith.extsi":
            self.values[op.results[0]] = b.sext(self.value(op.operands[0]), _llvm_type(op.results[0].type))
        elif name == "math.fma":
            x, y, z = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = b.call(_intrinsic(self.module, "llvm.fma", x.type, 3), [x, y, z])
        elif name == "math.absf":
            x = self.value(op.operands[0])
            self.values[op.results[0]] = b.call(_intrinsic(self.module, "llvm.fabs", x.type, 1), [x])
        elif name in _MATH:
            self.values[op.results[0]] = emit_math(b, _MATH[name], self.value(op.operands[0]))
        elif name == "memref.load":
            buffer, *indices = op.operands
            t = buffer.type
            pointer = self.address(buffer, indices)
            loaded = b.load(pointer, typ=_llvm_type(t.element_type), align=_element_size(t.element_type))
            self.scope(loaded, buffer)
            self.values[op.results[0]] = loaded
        elif name == "memref.store":
            value, buffer, *indices = op.operands
            t = buffer.type
            pointer = self.address(buffer, indices)
            stored = b.store(self.value(value), pointer, align=_element_size(t.element_type))
            self.scope(stored, buffer)
        elif name == "scf.for":
            assert isinstance(op, scf.ForOp)
            self.loop(op)
        elif name == "scf.yield":
            raise _fail(self.kernel, "scf.yield outside a loop body")
        else:
            raise _fail(self.kernel, f"cannot translate '{name}' (not in the PSK-Kernel subset)")

    def constant(self, op: Operation) -> ir.Value:
        attr = _attr(op, "value")
        t = op.results[0].type
        if isinstance(attr, FloatAttr):
            value = float(attr.value.data)
            if isinstance(t, BFloat16Type):  # rounded as ml_dtypes rounds it
                return I16(int(np.array([value], dtype=ml_dtypes.bfloat16).view(np.uint16)[0]))
            return F32(value) if isinstance(t, Float32Type) else F64(value)
        if isinstance(attr, IntegerAttr):
            ty = _llvm_type(t)
            value = attr.value.data
            if isinstance(ty, ir.IntType) and ty.width == 1:
                return I1(value & 1)
            return ty(value)
        raise _fail(self.kernel, f"unsupported constant {attr}")

    def extf(self, op: Operation) -> ir.Value:
        b = self.builder
        x = self.value(op.operands[0])
        source, target = op.operands[0].type, op.results[0].type
        if isinstance(source, BFloat16Type):
            x = bf16_to_f32(b, x)
            source = Float32Type()
        if isinstance(source, Float32Type) and isinstance(target, Float64Type):
            return b.fpext(x, F64)
        if type(source) is type(target):
            return x
        raise _fail(self.kernel, f"arith.extf from {op.operands[0].type} to {target}")

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
            return b.fptrunc(x, F32)
        raise _fail(self.kernel, f"arith.truncf from {source} to {target}")

    def int_cast(self, x: ir.Value, target: Attribute, signed: bool) -> ir.Value:
        ty = _llvm_type(target)
        if x.type.width == ty.width:
            return x
        if x.type.width > ty.width:
            return self.builder.trunc(x, ty)
        return self.builder.sext(x, ty) if signed else self.builder.zext(x, ty)

    def address(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> ir.Value:
        b = self.builder
        if buffer not in self.buffers:
            raise _fail(self.kernel, "a memref access to something other than a kernel argument")
        t = buffer.type
        assert isinstance(t, MemRefType)
        base = self.bases[self.buffers[buffer]]
        shape = t.get_shape()
        if len(indices) != len(shape):
            raise _fail(self.kernel, f"{len(indices)} indices into {t}")
        if not shape:
            return base
        linear = self.value(indices[0])
        for size, index in zip(shape[1:], indices[1:]):
            linear = b.add(b.mul(linear, I64(size), flags=["nuw", "nsw"]), self.value(index), flags=["nuw", "nsw"])
        return b.gep(base, [linear], inbounds=True, source_etype=_llvm_type(t.element_type))

    def scope(self, access: ir.Instruction, buffer: SSAValue) -> None:
        scopes = self.scopes[self.buffers[buffer]]
        if scopes is not None:
            access.set_metadata("alias.scope", scopes[0])
            access.set_metadata("noalias", scopes[1])

    def loop(self, op: scf.ForOp) -> None:
        b = self.builder
        self.loop_number += 1
        label = f"loop{self.loop_number}"
        lb, ub, step = (self.value(v) for v in (op.lb, op.ub, op.step))
        if op is self.split:
            lb, ub = self.split_bounds(op, lb, ub, step)
        inits = [self.value(v) for v in op.iter_args]
        before = b.block
        body = self.fn.append_basic_block(f"{label}.body")
        exit_ = self.fn.append_basic_block(f"{label}.exit")
        guarded = not (isinstance(lb, ir.Constant) and isinstance(ub, ir.Constant) and lb.constant < ub.constant)
        if not guarded:
            b.branch(body)  # constant bounds, at least one iteration
        else:
            b.cbranch(b.icmp_signed("<", lb, ub), body, exit_)

        b.position_at_end(body)
        iv = b.phi(I64, name=f"{label}.i")
        iv.add_incoming(lb, before)
        carried = []
        for init in inits:
            phi = b.phi(init.type)
            phi.add_incoming(init, before)
            carried.append(phi)
        block = op.body.block
        self.values[block.args[0]] = iv
        for arg, phi in zip(block.args[1:], carried):
            self.values[arg] = phi
        ops = list(block.ops)
        terminator = ops[-1] if ops and ops[-1].name == "scf.yield" else None
        for inner in ops if terminator is None else ops[:-1]:
            self.op(inner)
        yielded = [self.value(v) for v in terminator.operands] if terminator is not None else []
        if len(yielded) != len(inits):
            raise _fail(self.kernel, f"a loop with {len(inits)} iter_args yields {len(yielded)} values")
        latch = b.block
        following = b.add(iv, step, name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, ub), body, exit_)
        iv.add_incoming(following, latch)
        for phi, value in zip(carried, yielded):
            phi.add_incoming(value, latch)

        self.fn.blocks.remove(exit_)  # after the body's blocks: the IR reads in program order
        self.fn.blocks.append(exit_)
        b.position_at_end(exit_)
        for result, init, value in zip(op.results, inits, yielded):
            if guarded:
                phi = b.phi(init.type)
                phi.add_incoming(init, before)
                phi.add_incoming(value, latch)
                self.values[result] = phi
            else:
                self.values[result] = value

    def split_bounds(self, op: scf.ForOp, lb: ir.Value, ub: ir.Value, step: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The induction values of iterations `[max(lo, 0), min(hi, n))` of the split loop."""
        b = self.builder
        n = trip_count(op)
        first_value, step_value, last_value = (_constant_int(v) for v in (op.lb, op.step, op.ub))
        assert n is not None and first_value is not None and step_value is not None and last_value is not None
        lo, hi = self.fn.args[1], self.fn.args[2]
        first = b.select(b.icmp_signed(">", lo, I64(0)), lo, I64(0), name="first")
        last = b.select(b.icmp_signed("<", hi, I64(n)), hi, I64(n), name="last")

        def induction(k: ir.Value, name: str) -> ir.Value:  # lb + k * step
            if step_value != 1:
                k = b.mul(k, step, flags=["nsw"])
            return k if first_value == 0 else b.add(lb, k, name=name, flags=["nsw"])

        start, end = induction(first, "start"), induction(last, "end")
        if first_value + n * step_value != last_value:  # the last step overshoots ub
            end = b.select(b.icmp_signed("<", end, ub), end, ub, name="end")
        return start, end


def _new_module(name: str, machine: Machine) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = machine.triple
    return module


def translate_kernel(kernel: KernelOp, machine: Machine | None = None, *, assume_disjoint: bool = True) -> str:
    """LLVM IR text of a module holding `kernel` as one function of the kernel ABI.

    `assume_disjoint=False` leaves out the per-buffer alias scopes: the variant
    for launches where a written buffer overlaps another buffer.
    """
    machine = machine if machine is not None else host_machine()
    module = _new_module(f"presk.{kernel.sym_name.data}", machine)
    _Translator(module, kernel, machine, assume_disjoint).translate()
    return str(module)


def translate_module(module: ModuleOp, machine: Machine | None = None) -> str:
    """LLVM IR of every kernel of a PSK-Kernel module, in order (`presk dump --stage llvm`)."""
    machine = machine if machine is not None else host_machine()
    out = _new_module("presk", machine)
    for op in module.body.block.ops:
        if isinstance(op, KernelOp):
            _Translator(out, op, machine, True).translate()
    return str(out)
