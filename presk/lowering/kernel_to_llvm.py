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

Two kinds of loop are vectorised here rather than left to LLVM (only in the
variant with disjoint buffers; the other keeps every loop as written):

- Running sums (`ordered_sums`). LLVM does not vectorise a float sum without
  reassociation, which the numerics policy forbids (sums in increasing index
  order), so a row's sum is a chain of dependent scalar additions, and the
  exponentials of a softmax feeding it are computed one at a time. A serial
  loop whose running values are all `acc + term` (the blocked rows of
  `presk.lowering.softmax` and `nests.emit_reduction`: one sum per row of a
  block) runs `lanes` iterations at a time: the terms are computed as vectors
  along the loop (16 exponentials of one row in one zmm), the block of
  vectors is transposed in registers (perfect shuffles), and column i is
  added to the vector of running sums (lane j: row j) in order, so every
  row still receives its terms one by one in increasing order. A loop whose
  terms are transcendentals also prefetches the next block (`prefetch`).
- Streaming stores (`streaming`). In a kernel over more than
  `STREAMING_BYTES` (the last-level cache), the innermost parallel loop's
  stores become aligned non-temporal vector stores, after a peel that aligns
  them, saving the read for ownership of every line written; the kernel
  ends with a fence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    VectorType,
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
    if any(op.name in ("memref.store", "vector.store") for op in kernel.body.block.ops):
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
        if op.name in ("memref.store", "vector.store"):
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
    if isinstance(t, VectorType):
        shape = t.get_shape()
        if len(shape) != 1 or isinstance(t.element_type, BFloat16Type):
            raise _fail(None, f"no LLVM type for {t} (vectors are one-dimensional, of f32, f64 or integers)")
        return ir.VectorType(_llvm_type(t.element_type), shape[0])
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


def _shaped(element: ir.Type, like: ir.Value) -> ir.Type:
    """`element`, or a vector of it with as many lanes as `like` has (scalar code and vector code alike)."""
    return ir.VectorType(element, like.type.count) if isinstance(like.type, ir.VectorType) else element


def _splat_constant(element: ir.Type, value: int | float, like: ir.Value) -> ir.Constant:
    ty = _shaped(element, like)
    return ir.Constant(ty, [value] * ty.count if isinstance(ty, ir.VectorType) else value)


def bf16_to_f32(builder: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """Exact: the bf16 pattern is the high half of the f32 one (scalar or vector)."""
    wide = builder.zext(bits, _shaped(I32, bits))
    return builder.bitcast(builder.shl(wide, _splat_constant(I32, 16, bits)), _shaped(F32, bits))


def f32_to_bf16(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even on the bit pattern; every nan becomes `sign | 0x7fc0` (ml_dtypes)."""

    def k(v: int) -> ir.Constant:
        return _splat_constant(I32, v, x)

    b = builder.bitcast(x, _shaped(I32, x))
    high = builder.lshr(b, k(16))
    odd = builder.and_(high, k(1))
    rounded = builder.lshr(builder.add(builder.add(b, k(0x7FFF)), odd), k(16))
    nan = builder.or_(builder.and_(high, k(0x8000)), k(0x7FC0))
    is_nan = builder.fcmp_unordered("uno", x, x)
    return builder.trunc(builder.select(is_nan, nan, rounded), _shaped(I16, x))


def f64_to_f32_odd(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 → f32 rounded *to odd*: the truncation toward zero, with its last bit set when inexact.

    Nan stays nan (the comparisons are false); a value beyond the f32 range
    gives 0x7f7fffff with its sign, which a later bf16 rounding takes to inf.
    """
    fabs = _intrinsic(builder.module, "llvm.fabs", x.type, 1)
    t = builder.fptrunc(x, _shaped(F32, x))
    tb = builder.bitcast(t, _shaped(I32, x))
    back = builder.fpext(t, x.type)
    inexact = builder.fcmp_ordered("!=", back, x)
    away = builder.fcmp_ordered(">", builder.call(fabs, [back]), builder.call(fabs, [x]))
    toward_zero = builder.select(away, builder.sub(tb, _splat_constant(I32, 1, x)), tb)
    odd = builder.or_(toward_zero, _splat_constant(I32, 1, x))
    return builder.bitcast(builder.select(inexact, odd, tb), _shaped(F32, x))


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


# --------------------------------------------------------------------------- running sums in vectors


@dataclass(frozen=True)
class OrderedSums:
    """How `ordered_sums` vectorises one loop of running sums."""

    lanes: int
    """Iterations per block: the terms are `<lanes x T>` vectors along the loop."""
    group: int
    """Sums per running vector: `lanes` is a multiple of it."""
    adds: frozenset[Operation]
    """The `arith.addf` of each running value (done on the transposed columns instead)."""
    terms: tuple[SSAValue, ...]
    """What each iteration adds to each running value, in the order of the loop's results."""
    vector_loads: frozenset[Operation]
    """Loads of `lanes` consecutive elements (the others read one element, the same in every lane)."""


PREFETCH_BYTES = 32 << 10
"""How far ahead a vector loop of running sums prefetches (into L2: L1 holds the block being worked on):
two blocks of 16 rows of 1 KiB."""

STREAMING_BYTES = 32 << 20
"""Buffers of a kernel, in bytes, beyond which its stores go around the caches (`streaming`): this
machine's last level cache (32 MiB of L3)."""

_ELEMENTWISE = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf", "arith.maximumf", "arith.minimumf",
    "arith.cmpf", "arith.select", "arith.extf", "arith.truncf", "math.fma", "math.absf", "math.sqrt",
    "math.exp", "math.log", "math.tanh", "math.erf", "arith.extui", "arith.cmpi",
})  # fmt: skip


def _row_major_strides(t: MemRefType) -> list[int]:
    strides, running = [], 1
    for size in reversed(t.get_shape()):
        strides.append(running)
        running *= size
    return strides[::-1]


def _vector_body(
    loop: scf.ForOp, skip: Sequence[Operation], accs: Sequence[SSAValue]
) -> tuple[dict[SSAValue, str], frozenset[Operation], frozenset[Operation]] | None:
    """Whether the loop's body (but `skip`) runs as vectors along the loop: (kinds, vector loads, stores), or None.

    Kinds: "u" the same in every iteration, "a" an index affine in the
    induction variable (its step per iteration in `slope`), "v" varying
    otherwise (a vector). Allowed: elementwise arithmetic, index arithmetic
    affine in the induction variable, loads and stores at consecutive
    addresses along it (a load may also read one address), no buffer both
    loaded and stored, no nested loop, no use of `accs` but in `skip`.
    """
    block = loop.body.block
    iv = block.args[0]
    terminator = block.last_op
    kinds: dict[SSAValue, str] = {iv: "a"}
    slope: dict[SSAValue, int] = {iv: 1}
    constants: dict[SSAValue, int] = {}
    loaded: set[SSAValue] = set()
    stored: set[SSAValue] = set()
    vector_loads: set[Operation] = set()
    stores: set[Operation] = set()

    def kind(v: SSAValue) -> str:
        if v in accs:
            return "acc"
        return kinds.get(v, "u" if v.owner is not loop and not _inside(v, block) else "?")

    def linear_slope(indices: Sequence[SSAValue], t: MemRefType) -> int | None:
        total = 0
        for index, stride in zip(indices, _row_major_strides(t)):
            k = kind(index)
            if k == "v" or k == "?":
                return None
            total += slope.get(index, 0) * stride
        return total

    for op in block.ops:
        if op is terminator or op in skip:
            continue
        if op.regions:
            return None
        operand_kinds = [kind(v) for v in op.operands]
        if "acc" in operand_kinds or "?" in operand_kinds:
            return None
        name = op.name
        if name == "arith.constant":
            kinds[op.results[0]] = "u"
            value = _constant_int(op.results[0])
            if value is not None:
                constants[op.results[0]] = value
        elif name in ("arith.addi", "arith.subi", "arith.muli", "arith.index_cast"):
            if "v" in operand_kinds:
                if name != "arith.index_cast":
                    return None
                kinds[op.results[0]] = "v"
            elif "a" not in operand_kinds:
                kinds[op.results[0]] = "u"
            elif name == "arith.index_cast":
                kinds[op.results[0]], slope[op.results[0]] = "a", slope[op.operands[0]]
            elif name in ("arith.addi", "arith.subi"):
                x, y = (slope.get(v, 0) for v in op.operands)
                kinds[op.results[0]], slope[op.results[0]] = "a", x + y if name == "arith.addi" else x - y
            else:
                x, y = op.operands
                if kind(x) == "u" and x in constants:
                    kinds[op.results[0]], slope[op.results[0]] = "a", constants[x] * slope[y]
                elif kind(y) == "u" and y in constants:
                    kinds[op.results[0]], slope[op.results[0]] = "a", constants[y] * slope[x]
                else:
                    return None
        elif name == "memref.load":
            buffer, *indices = op.operands
            step_of = linear_slope(indices, buffer.type)
            if step_of is None:
                return None
            loaded.add(buffer)
            if step_of == 0:
                kinds[op.results[0]] = "u"
            elif step_of == 1:
                kinds[op.results[0]] = "v"
                vector_loads.add(op)
            else:
                return None
        elif name == "memref.store":
            value, buffer, *indices = op.operands
            if kind(value) != "v" or linear_slope(indices, buffer.type) != 1:
                return None
            stored.add(buffer)
            stores.add(op)
        elif name in _ELEMENTWISE:
            if "a" in operand_kinds:
                return None
            kinds[op.results[0]] = "v" if "v" in operand_kinds else "u"
        else:
            return None
    if loaded & stored:
        return None
    return kinds, frozenset(vector_loads), frozenset(stores)


def ordered_sums(loop: scf.ForOp, machine: Machine) -> OrderedSums | None:
    """A plan to run a loop of running sums `lanes` iterations at a time, or None.

    The loop: serial, constant bounds with step 1, every running value a
    float of one type updated once per iteration by `acc + term` (or
    `term + acc`) where no term depends on a running value; the rest of
    the body vectorisable along the loop (`_vector_body`). Then iterations
    are independent except for the sums, and every sum still receives its
    terms one at a time in increasing order: the same bits. What changes is
    that the terms are computed in vectors (`exp` in zmm registers) and that
    several sums (rows of a block, see `presk.lowering.softmax`) advance
    together in the lanes of one vector after a register transpose.
    """
    if PARALLEL in loop.attributes or not loop.iter_args:
        return None
    count, first, step = trip_count(loop), _constant_int(loop.lb), _constant_int(loop.step)
    if count is None or first is None or step != 1:
        return None
    block = loop.body.block
    accs = list(block.args[1:])
    element = accs[0].type
    if not all(a.type == element for a in accs) or not isinstance(element, Float32Type | Float64Type):
        return None
    bits = 32 if isinstance(element, Float32Type) else 64
    widest = max(machine.vector_bits // bits, 1)
    if widest < 2:
        return None
    group = 1
    while group * 2 <= min(len(accs), widest) and len(accs) % (group * 2) == 0:
        group *= 2
    lanes = max(group, min(widest, 256 // bits))
    if count < lanes:
        return None
    terminator = block.last_op
    if not isinstance(terminator, scf.YieldOp):
        return None
    adds: list[Operation] = []
    terms: list[SSAValue] = []
    for acc, y in zip(accs, terminator.operands):
        owner = y.owner
        if not isinstance(owner, Operation) or owner.name != "arith.addf" or owner.parent_block() is not block:
            return None
        a, b = owner.operands
        term = b if a is acc else a if b is acc else None
        if term is None or term is acc or not acc.has_one_use() or not y.has_one_use():
            return None
        adds.append(owner)
        terms.append(term)
    body = _vector_body(loop, adds, accs)
    if body is None:
        return None
    kinds, vector_loads, _stores = body
    if any(kinds.get(t, "u") not in ("u", "v") for t in terms):
        return None
    return OrderedSums(lanes, group, frozenset(adds), tuple(terms), vector_loads)


@dataclass(frozen=True)
class Streaming:
    """How `streaming` vectorises a parallel innermost loop that writes memory it will not read again soon."""

    lanes: int
    vector_loads: frozenset[Operation]
    stores: tuple[Operation, ...]
    """Stored with non-temporal vector stores, `lanes` elements (64 bytes) each, once aligned."""


def streaming(loop: scf.ForOp, machine: Machine, kernel_bytes: int) -> Streaming | None:
    """A plan to run a parallel loop as aligned vectors with non-temporal stores, or None.

    For a kernel touching more than `STREAMING_BYTES` (more than the last
    level cache holds: its outputs will be read back from memory anyway), a
    plain store first reads each line it writes (read for ownership); a
    non-temporal store of a whole 64-byte line does not, which cuts an
    elementwise kernel's traffic from reads + 2 x writes to reads + writes.
    LLVM emits non-temporal vector stores only when it knows them aligned, so
    the translation peels iterations until the stores are (see
    `_Translator.streaming_loop`). The stores' element types must all be one
    type of 4 or 8 bytes (so that one peel aligns every store stream).
    """
    if kernel_bytes <= STREAMING_BYTES or machine.vector_bits < 512:
        return None
    if PARALLEL not in loop.attributes or loop.iter_args or _constant_int(loop.step) != 1:
        return None
    body = _vector_body(loop, (), ())
    if body is None:
        return None
    _kinds, vector_loads, stores = body
    if not stores:
        return None
    elements = {op.operands[1].type.element_type for op in stores}  # type: ignore[attr-defined]
    if len(elements) != 1:
        return None
    (element,) = elements
    if not isinstance(element, Float32Type | Float64Type):
        return None
    ordered = tuple(op for op in loop.body.block.ops if op in stores)
    if any(op.name != "arith.constant" and not op.name.startswith("arith.") for op in _index_closure(loop, ordered)):
        return None
    return Streaming(64 // _element_size(element), vector_loads, ordered)


def _index_closure(loop: scf.ForOp, stores: Sequence[Operation]) -> list[Operation]:
    """The ops of the loop body that the stores' indices depend on, in program order."""
    block = loop.body.block
    needed: set[Operation] = set()
    work = [v for op in stores for v in op.operands[2:]]
    while work:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, Operation) and owner.parent_block() is block and owner not in needed:
            needed.add(owner)
            work.extend(owner.operands)
    return [op for op in block.ops if op in needed]


def _inside(v: SSAValue, block: Block) -> bool:
    """Whether `v` is defined in `block` (or a block nested in it)."""
    owner = v.owner
    at = owner if isinstance(owner, Block) else owner.parent_block()
    while at is not None:
        if at is block:
            return True
        parent = at.parent_op()
        at = parent.parent_block() if parent is not None else None
    return False


def _lanes_of(builder: ir.IRBuilder, x: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes `[start, start + count)` of vector `x` (a scalar when count is 1; `x` itself when all)."""
    if count == 1:
        return builder.extract_element(x, I32(start))
    if start == 0 and count == x.type.count:
        return x
    mask = ir.Constant(ir.VectorType(I32, count), list(range(start, start + count)))
    return builder.shuffle_vector(x, x, mask)


def transpose(builder: ir.IRBuilder, rows: Sequence[ir.Value]) -> list[ir.Value]:
    """The columns of a square of `n` vectors of `n` lanes (`n` a power of two): column i, lane j = rows[j][i].

    Perfect shuffles: log2(n) rounds, each interleaving row i with row
    i + n/2 (their low halves, then their high halves). One scalar (n = 1)
    is its own column.
    """
    n = len(rows)
    rows = list(rows)
    if n == 1:
        return rows
    half = n // 2
    low = ir.Constant(ir.VectorType(I32, n), [x for p in range(half) for x in (p, n + p)])
    high = ir.Constant(ir.VectorType(I32, n), [x for p in range(half, n) for x in (p, n + p)])
    for _ in range(n.bit_length() - 1):
        shuffled = []
        for i in range(half):
            a, b = rows[i], rows[i + half]
            shuffled += [builder.shuffle_vector(a, b, low), builder.shuffle_vector(a, b, high)]
        rows = shuffled
    return rows


class _Translator:
    def __init__(self, module: ir.Module, kernel: KernelOp, machine: Machine, assume_disjoint: bool) -> None:
        self.module = module
        self.kernel = kernel
        self.machine = machine
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
        self.vector_loads: set[Operation] = set()
        """Loads that read `lanes` consecutive elements (inside a vectorised loop body)."""
        self.lanes = 0
        """The vector width of the loop body being translated in vector form (0: scalar code)."""
        self.streaming_stores: set[Operation] = set()
        """Stores of whole aligned lines that bypass the caches (`streaming`)."""
        self.kernel_bytes = sum(buffer_bytes(t) for t in kernel.buffers)
        self.fenced = False
        self.prefetching = False

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

    def splat(self, x: ir.Value, lanes: int) -> ir.Value:
        """`x` in every lane of a `<lanes x T>` vector (a vector stays as it is)."""
        if isinstance(x.type, ir.VectorType):
            return x
        if isinstance(x, ir.Constant):
            return ir.Constant(ir.VectorType(x.type, lanes), [x] * lanes)
        b = self.builder
        one = b.insert_element(ir.Constant(ir.VectorType(x.type, 1), ir.Undefined), x, I32(0))
        return b.shuffle_vector(one, one, ir.Constant(ir.VectorType(I32, lanes), [0] * lanes))

    def operands(self, op: Operation) -> list[ir.Value]:
        """The op's operands, scalars broadcast when another operand is a vector (vector loop bodies)."""
        values = [self.value(v) for v in op.operands]
        lanes = max((x.type.count for x in values if isinstance(x.type, ir.VectorType)), default=0)
        if lanes:
            values = [self.splat(x, lanes) for x in values]
        return values

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
        if self.fenced:
            # Non-temporal stores are weakly ordered: complete them before another
            # thread (or kernel) reads the buffers. `fence seq_cst` is an mfence.
            b.fence("seq_cst")
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
            x, y = self.operands(op)
            self.values[op.results[0]] = getattr(b, _BINARY_FLOAT[name])(x, y)
        elif name in _BINARY_INT:
            x, y = self.operands(op)
            self.values[op.results[0]] = getattr(b, _BINARY_INT[name])(x, y)
        elif name == "arith.negf":
            self.values[op.results[0]] = b.fneg(self.value(op.operands[0]))
        elif name in ("arith.maximumf", "arith.minimumf"):
            x, y = self.operands(op)
            which = "llvm.maximum" if name == "arith.maximumf" else "llvm.minimum"
            self.values[op.results[0]] = b.call(_intrinsic(self.module, which, x.type, 2), [x, y])
        elif name == "arith.cmpf":
            x, y = self.operands(op)
            predicate = _predicate(op, _FCMP_NAMES)
            if predicate in ("false", "true"):
                self.values[op.results[0]] = _splat_constant(I1, int(predicate == "true"), x)
            else:
                ordered, symbol = _FCMP[predicate]
                compare = b.fcmp_ordered if ordered else b.fcmp_unordered
                self.values[op.results[0]] = compare(symbol, x, y)
        elif name == "arith.cmpi":
            x, y = self.operands(op)
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
            self.values[op.results[0]] = b.zext(x, _shaped(_llvm_type(op.results[0].type), x))
        elif name == "arith.extsi":
            x = self.value(op.operands[0])
            self.values[op.results[0]] = b.sext(x, _shaped(_llvm_type(op.results[0].type), x))
        elif name == "math.fma":
            x, y, z = self.operands(op)
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
            element = _llvm_type(t.element_type)
            if op in self.vector_loads:
                element = ir.VectorType(element, self.lanes)
                self.prefetch(pointer, write=False)
            loaded = b.load(pointer, typ=element, align=_element_size(t.element_type))
            self.scope(loaded, buffer)
            self.values[op.results[0]] = loaded
        elif name == "memref.store":
            value, buffer, *indices = op.operands
            t = buffer.type
            pointer = self.address(buffer, indices)
            if op in self.streaming_stores:
                stored = b.store(self.value(value), pointer, align=64)
                stored.set_metadata("nontemporal", self._metadata(I32(1)))
            else:
                if self.lanes:
                    self.prefetch(pointer, write=True)
                stored = b.store(self.value(value), pointer, align=_element_size(t.element_type))
            self.scope(stored, buffer)
        elif name.startswith("vector."):
            self.vector_op(op)
        elif name == "scf.for":
            assert isinstance(op, scf.ForOp)
            self.loop(op)
        elif name == "scf.yield":
            raise _fail(self.kernel, "scf.yield outside a loop body")
        else:
            raise _fail(self.kernel, f"cannot translate '{name}' (not in the PSK-Kernel subset)")

    def vector_op(self, op: Operation) -> None:
        """The `vector` ops of `psk-vectorize` (one-dimensional vectors of lanes).

        Loads and stores are of consecutive elements along a buffer's last
        axis, aligned to the element (like the scalar accesses); `vector.fma`
        is `llvm.fma` on vectors: one rounding per lane, the scalar fma's bits.
        """
        b = self.builder
        name = op.name
        if name == "vector.broadcast":
            t = op.results[0].type
            assert isinstance(t, VectorType)
            self.values[op.results[0]] = self.splat(self.value(op.operands[0]), t.get_shape()[0])
        elif name == "vector.load":
            buffer, *indices = op.operands
            t = buffer.type
            assert isinstance(t, MemRefType)
            pointer = self.address(buffer, indices)
            loaded = b.load(pointer, typ=_llvm_type(op.results[0].type), align=_element_size(t.element_type))
            self.scope(loaded, buffer)
            self.values[op.results[0]] = loaded
        elif name == "vector.store":
            value, buffer, *indices = op.operands
            t = buffer.type
            assert isinstance(t, MemRefType)
            pointer = self.address(buffer, indices)
            stored = b.store(self.value(value), pointer, align=_element_size(t.element_type))
            self.scope(stored, buffer)
        elif name == "vector.fma":
            x, y, z = (self.value(v) for v in op.operands)
            self.values[op.results[0]] = b.call(_intrinsic(self.module, "llvm.fma", x.type, 3), [x, y, z])
        elif name in ("vector.extract", "vector.insert"):
            positions = op.properties["static_position"].get_values()  # type: ignore[attr-defined]
            if len(positions) != 1 or len(op.operands) != (1 if name == "vector.extract" else 2):
                raise _fail(self.kernel, f"{name} with positions {positions} (one static lane is supported)")
            lane = I32(positions[0])
            if name == "vector.extract":
                self.values[op.results[0]] = b.extract_element(self.value(op.operands[0]), lane)
            else:
                source, dest = (self.value(v) for v in op.operands)
                self.values[op.results[0]] = b.insert_element(dest, source, lane)
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
            return b.fpext(x, _shaped(F64, x))
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
            return b.fptrunc(x, _shaped(F32, x))
        raise _fail(self.kernel, f"arith.truncf from {source} to {target}")

    def int_cast(self, x: ir.Value, target: Attribute, signed: bool) -> ir.Value:
        ty = _shaped(_llvm_type(target), x)
        width = (x.type.element if isinstance(x.type, ir.VectorType) else x.type).width
        target_width = (ty.element if isinstance(ty, ir.VectorType) else ty).width
        if width == target_width:
            return x
        if width > target_width:
            return self.builder.trunc(x, ty)
        return self.builder.sext(x, ty) if signed else self.builder.zext(x, ty)

    def address(self, buffer: SSAValue, indices: Sequence[SSAValue], inbounds: bool = True) -> ir.Value:
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
        flags = ["nuw", "nsw"] if inbounds else []
        linear = self.value(indices[0])
        for size, index in zip(shape[1:], indices[1:]):
            linear = b.add(b.mul(linear, I64(size), flags=flags), self.value(index), flags=flags)
        return b.gep(base, [linear], inbounds=inbounds, source_etype=_llvm_type(t.element_type))

    def prefetch(self, pointer: ir.Value, write: bool) -> None:
        """Ask for the line `PREFETCH_BYTES` ahead of `pointer` (vector loops of running sums only).

        Such a loop works on a block of rows held in L1 (`presk.lowering.softmax`);
        when its terms are transcendentals it is compute-bound, it leaves the
        memory system idle, and the hardware prefetchers, which follow misses,
        idle with it. Touching the next block's lines there overlaps its misses
        with this block's arithmetic (softmax [24576, 256]: 7.0 → 5.7 ms on one
        thread). A plain streaming sum is better left to the hardware (a mean
        over rows of 768: 0.74 → 1.05 ms with prefetches), so only loops with a
        transcendental prefetch. A prefetch never faults, so running past a
        buffer's end is harmless (and the address is formed without `inbounds`).
        """
        if not self.prefetching:
            return
        b = self.builder
        ahead = b.gep(pointer, [I64(PREFETCH_BYTES)], source_etype=ir.IntType(8))
        fn = self.module.globals.get("llvm.prefetch.p0")
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]), "llvm.prefetch.p0")
        b.call(fn, [ahead, I32(int(write)), I32(2), I32(1)])  # locality 2: into L2, not L1

    def scope(self, access: ir.Instruction, buffer: SSAValue) -> None:
        scopes = self.scopes[self.buffers[buffer]]
        if scopes is not None:
            access.set_metadata("alias.scope", scopes[0])
            access.set_metadata("noalias", scopes[1])

    # ---- loops

    def loop(self, op: scf.ForOp) -> None:
        lb, ub, step = (self.value(v) for v in (op.lb, op.ub, op.step))
        if op is self.split:
            lb, ub = self.split_bounds(op, lb, ub, step)
        inits = [self.value(v) for v in op.iter_args]
        vectorise = self.assume_disjoint and not self.lanes
        plan = ordered_sums(op, self.machine) if vectorise else None
        stream = streaming(op, self.machine, self.kernel_bytes) if vectorise and plan is None else None
        if plan is not None:
            results = self.ordered_sum_loop(op, plan, lb, ub, inits)
        elif stream is not None:
            self.streaming_loop(op, stream, lb, ub, step)
            results = []
        else:
            results = self.scalar_loop(op, lb, ub, step, inits)
        for result, value in zip(op.results, results):
            self.values[result] = value

    def scalar_loop(
        self, op: scf.ForOp, lb: ir.Value, ub: ir.Value, step: ir.Value, inits: Sequence[ir.Value]
    ) -> list[ir.Value]:
        """The loop as it is written: a guarded do-while loop; returns its results."""
        b = self.builder
        self.loop_number += 1
        label = f"loop{self.loop_number}"
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
        results = []
        for init, value in zip(inits, yielded):
            if guarded:
                phi = b.phi(init.type)
                phi.add_incoming(init, before)
                phi.add_incoming(value, latch)
                results.append(phi)
            else:
                results.append(value)
        return results

    def ordered_sum_loop(
        self, op: scf.ForOp, plan: OrderedSums, lb: ir.Value, ub: ir.Value, inits: Sequence[ir.Value]
    ) -> list[ir.Value]:
        """A loop of running sums with `plan.lanes` iterations at a time (see `ordered_sums`).

        Each block of iterations computes every sum's terms as vectors along
        the loop, transposes them (lane j of column i: sum j's term at
        iteration i), and adds the columns to the sums in order; the last
        iterations (fewer than a block) run as written.
        """
        b = self.builder
        lanes, group = plan.lanes, plan.group
        first, count = _constant_int(op.lb), trip_count(op)
        assert first is not None and count is not None
        whole = count - count % lanes
        self.loop_number += 1
        label = f"loop{self.loop_number}.sums"
        element = inits[0].type
        starts = []
        for g in range(0, len(inits), group):
            if group == 1:
                starts.append(inits[g])
                continue
            start = ir.Constant(ir.VectorType(element, group), ir.Undefined)
            for j in range(group):
                start = b.insert_element(start, inits[g + j], I32(j))
            starts.append(start)
        before = b.block
        body = self.fn.append_basic_block(f"{label}.body")
        exit_ = self.fn.append_basic_block(f"{label}.exit")
        b.branch(body)  # whole >= lanes: at least one block
        b.position_at_end(body)
        iv = b.phi(I64, name=f"{label}.i")
        iv.add_incoming(lb, before)
        sums: list[ir.Value] = []  # one running vector (or scalar) per group of `group` sums
        phis = []
        for start in starts:
            phi = b.phi(start.type)
            phi.add_incoming(start, before)
            phis.append(phi)
            sums.append(phi)

        block = op.body.block
        self.values[block.args[0]] = iv
        self.vector_loads = set(plan.vector_loads)
        self.lanes = lanes
        self.prefetching = any(inner.name in _MATH and inner.name != "math.sqrt" for inner in block.ops)
        try:
            for inner in block.ops:
                if inner is block.last_op or inner in plan.adds:
                    continue
                self.op(inner)
            terms = [self.splat(self.value(t), lanes) for t in plan.terms]
        finally:
            self.vector_loads = set()
            self.lanes = 0
            self.prefetching = False
        for n, g in enumerate(range(0, len(terms), group)):
            rows = terms[g : g + group]
            for chunk in range(0, lanes, group):
                columns = transpose(b, [_lanes_of(b, r, chunk, group) for r in rows])
                for column in columns:
                    sums[n] = b.fadd(sums[n], column)
        latch = b.block
        following = b.add(iv, I64(lanes), name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, I64(first + whole)), body, exit_)
        iv.add_incoming(following, latch)
        for phi, value in zip(phis, sums):
            phi.add_incoming(value, latch)
        self.fn.blocks.remove(exit_)
        self.fn.blocks.append(exit_)
        b.position_at_end(exit_)
        totals: list[ir.Value] = []
        for value in sums:
            if group == 1:
                totals.append(value)
            else:
                totals.extend(b.extract_element(value, I32(j)) for j in range(group))
        if whole == count:
            return totals
        step = self.value(op.step)
        return self.scalar_loop(op, I64(first + whole), ub, step, totals)

    def streaming_loop(self, op: scf.ForOp, plan: Streaming, lb: ir.Value, ub: ir.Value, step: ir.Value) -> None:
        """A parallel loop with aligned non-temporal vector stores (see `streaming`).

        Iterations `[lb, mid)` run as written until the first store's address
        is 64-byte aligned (every store's then is, when their addresses agree
        modulo 64, which is checked: else all run as written); `[mid, end)`
        as vectors of `lanes` iterations, loads unaligned, stores aligned and
        non-temporal; `[end, ub)` as written.
        """
        b = self.builder
        lanes = plan.lanes
        block = op.body.block
        iv = block.args[0]
        self.values[iv] = lb
        for inner in _index_closure(op, plan.stores):
            self.op(inner)
        # The addresses at `lb` (formed without `inbounds`: with no iteration, `lb` may be past the end).
        starts = [b.ptrtoint(self.address(s.operands[1], s.operands[2:], inbounds=False), I64) for s in plan.stores]
        together = I1(1)
        for start in starts[1:]:
            same = b.icmp_unsigned("==", b.and_(b.sub(start, starts[0]), I64(63)), I64(0))
            together = b.and_(together, same)
        size = _element_size(plan.stores[0].operands[1].type.element_type)  # type: ignore[attr-defined]
        count = b.select(b.icmp_signed(">", ub, lb), b.sub(ub, lb), I64(0))
        peel = b.lshr(b.and_(b.sub(I64(0), starts[0]), I64(63)), I64(size.bit_length() - 1))
        peel = b.select(together, b.select(b.icmp_signed("<", peel, count), peel, count), count)
        mid = b.add(lb, peel)
        rest = b.sub(count, peel)
        end = b.add(mid, b.sub(rest, b.and_(rest, I64(lanes - 1))))
        self.scalar_loop(op, lb, mid, step, [])

        b = self.builder
        self.loop_number += 1
        label = f"loop{self.loop_number}.stream"
        before = b.block
        body = self.fn.append_basic_block(f"{label}.body")
        exit_ = self.fn.append_basic_block(f"{label}.exit")
        b.cbranch(b.icmp_signed("<", mid, end), body, exit_)
        b.position_at_end(body)
        index = b.phi(I64, name=f"{label}.i")
        index.add_incoming(mid, before)
        self.values[iv] = index
        self.vector_loads = set(plan.vector_loads)
        self.streaming_stores = set(plan.stores)
        self.lanes = lanes
        try:
            for inner in block.ops:
                if inner is not block.last_op:
                    self.op(inner)
        finally:
            self.vector_loads = set()
            self.streaming_stores = set()
            self.lanes = 0
        latch = b.block
        following = b.add(index, I64(lanes), name=f"{label}.next", flags=["nuw", "nsw"])
        b.cbranch(b.icmp_signed("<", following, end), body, exit_)
        index.add_incoming(following, latch)
        self.fn.blocks.remove(exit_)
        self.fn.blocks.append(exit_)
        b.position_at_end(exit_)
        self.fenced = True
        self.scalar_loop(op, end, ub, step, [])

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
