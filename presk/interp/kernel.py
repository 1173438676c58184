"""The kernel interpreter: PSK-Kernel run on numpy buffers, bit for bit as native code.

Built on xDSL's interpreter framework (one `@impl` per upstream op a kernel
body uses). A kernel runs IN PLACE on the buffers it is given: its stores
write into them. Arithmetic is the machine types' exactly: an f64 value is
float64, an f32 value float32 (numpy's float32 ufuncs are IEEE operations,
so each result is rounded once, as the native instruction does), a bf16
buffer holds `ml_dtypes.bfloat16` and its loads are widened exactly, its
stores rounded to nearest even; `math.fma` rounds once (`presk.interp.fma`),
the transcendentals are presk's own polynomials (`presk.interp.mathlib`).
No value may change type silently: every float op checks its result's
dtype against its MLIR type.

Vectorised interpretation
-------------------------
Interpreting op by op, element by element would take minutes for a small
GPT. Instead the interpreter runs many iterations of a loop at once:

* A loop marked `psk_kernel.parallel` runs ONCE, its induction variable
  bound to `arange(lb, ub, step)` laid along a numpy axis of its own. Every
  value is then a numpy array broadcast over the active axes (or a scalar,
  when it does not vary). The layout is fixed per kernel: a vector loop at
  vector-nesting depth d (the number of vector loops around it) owns axis d
  of `rank` axes, and every array value has exactly `rank` dimensions, so
  broadcasting always lines up. A load with index arrays is a gather (fancy
  indexing), a store a scatter; the iterations of a parallel loop never
  touch the same element (by construction of the kernels), and a store
  whose value varies along an axis its indices do not is refused. The
  exception is a loop of strip-mined blocks (`psk-split` under a serial
  loop): the loops inside it take their bounds from its counter, so it runs
  block by block, as a serial loop.

* A loop without the attribute runs iteration by iteration in increasing
  order, threading its `iter_args`; each iteration is vectorised over the
  enclosing axes. As an optimisation (`hoist=True`, the default) the part
  of its body that depends neither on its running values nor on memory the
  loop writes (loads, index arithmetic, `exp` of a loaded value, even whole
  inner loops) is evaluated once for all iterations, with the induction
  variable as an array on the loop's own axis (it is then a vector loop
  too); each serial iteration reads its slice of those values and runs only
  the rest, in order. The same operations on the same operands give the
  same bits, so this changes speed, not results (`hoist=False` runs the
  plain semantics, and the tests hold the two to each other). It is what
  makes a row loop whose every step calls `exp` cost one polynomial
  evaluation instead of one per element. Within the serial rest, a run of
  independent ops of one expensive kind (the m*n fmas of a register tile)
  is evaluated as one call on stacked operands. Hoisting is off for a call
  whose buffers overlap in memory.

`psk_kernel.workers` (a split among threads) changes nothing here: the
iterations of a parallel loop are run at once either way.

Index values are Python ints (serial induction variables, constants) or
int64 arrays; an index read from data (`arith.index_cast` of a loaded i64)
is bounds-checked before it is used, as are indices whose range a static
interval analysis cannot prove inside the buffer (E4003).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects import arith, math, memref, scf, vector
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
    VectorType,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from presk.analysis import sets_inner_bounds, written_buffers
from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import PARALLEL, KernelOp, ScratchOp
from presk.interp.bf16 import truncate_f64_to_bf16
from presk.interp.fma import fma

__all__ = ["KernelFunctions", "KernelInterpreter", "dtype_of", "ieee_maximum", "truncate_f64_to_bf16"]

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def _element_dtype(t: Attribute) -> np.dtype | None:
    """The numpy dtype of a scalar MLIR type; None for `index` (Python int or int64 array)."""
    if isinstance(t, Float64Type):
        return F64
    if isinstance(t, Float32Type):
        return F32
    if isinstance(t, BFloat16Type):
        return BF16
    if isinstance(t, IntegerType):
        width = t.width.data
        if width == 64:
            return I64
        if width == 1:
            return BOOL
    if isinstance(t, IndexType):
        return None
    raise PreskError("E3003", f"the kernel interpreter has no numpy type for {t}")


def dtype_of(memref_type: Attribute) -> np.dtype:
    """The numpy dtype of a buffer: float64, float32, ml_dtypes.bfloat16 or int64 (one mapping: the
    native executor uses it too)."""
    element = memref_type.element_type if isinstance(memref_type, MemRefType) else memref_type
    dtype = _element_dtype(element)
    if dtype is None or dtype == BOOL:
        raise PreskError("E3003", f"no buffer dtype for {element} (buffers hold f64, f32, bf16 or i64)")
    return dtype


# --------------------------------------------------------------------------
# Exact scalar semantics that numpy does not give directly.


def ieee_maximum(a: Any, b: Any) -> Any:
    """IEEE 754-2019 maximum (`arith.maximumf`): nan if either is nan, and +0 > -0.

    np.maximum propagates nan but leaves the order of +0 and -0 to the
    implementation; equal operands are resolved here explicitly.
    """
    if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        if a > b:
            return a
        if b > a:
            return b
        if a == b:
            return b if np.signbit(a) else a
        return a + b  # a nan: stays nan (quiet), in the operands' type
    tie = a == b
    return np.where(tie, np.where(np.signbit(a), b, a), np.maximum(a, b))


def _cast(x: Any, dtype: np.dtype) -> Any:
    """Exact widening or IEEE narrowing (round to nearest even) of a scalar or array."""
    if isinstance(x, np.ndarray):
        return x.astype(dtype)
    return np.asarray(x).astype(dtype)[()]


def _compare_unsigned(a: Any, b: Any, fn: Callable[[Any, Any], Any]) -> Any:
    ua = np.asarray(a, dtype=I64).view(np.uint64)
    ub = np.asarray(b, dtype=I64).view(np.uint64)
    out = fn(ua, ub)
    return out[()] if out.ndim == 0 else out


def _unordered(a: Any, b: Any) -> Any:
    return np.isnan(a) | np.isnan(b)


_CMPF: dict[str, Callable[[Any, Any], Any]] = {
    "false": lambda a, b: np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool)[()],
    "oeq": operator.eq,
    "ogt": operator.gt,
    "oge": operator.ge,
    "olt": operator.lt,
    "ole": operator.le,
    "one": lambda a, b: (a < b) | (a > b),
    "ord": lambda a, b: ~_unordered(a, b),
    "ueq": lambda a, b: ~((a < b) | (a > b)),
    "ugt": lambda a, b: ~(a <= b),
    "uge": lambda a, b: ~(a < b),
    "ult": lambda a, b: ~(a >= b),
    "ule": lambda a, b: ~(a > b),
    "une": operator.ne,
    "uno": _unordered,
    "true": lambda a, b: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), dtype=bool)[()],
}

_CMPI: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "slt": operator.lt,
    "sle": operator.le,
    "sgt": operator.gt,
    "sge": operator.ge,
    "ult": lambda a, b: _compare_unsigned(a, b, operator.lt),
    "ule": lambda a, b: _compare_unsigned(a, b, operator.le),
    "ugt": lambda a, b: _compare_unsigned(a, b, operator.gt),
    "uge": lambda a, b: _compare_unsigned(a, b, operator.ge),
}


def _math_functions() -> dict[str, Callable[[Any], Any]]:
    """presk's transcendentals on numpy arrays, bit-identical to the native polynomials.

    The ONE place that binds `math.exp/log/tanh/erf`; imported lazily.
    """
    from presk.interp import mathlib

    return {"exp": mathlib.exp, "log": mathlib.log, "tanh": mathlib.tanh, "erf": mathlib.erf}


# --------------------------------------------------------------------------
# The plan of one kernel: what is decided once, before any call.


@dataclass(frozen=True)
class _Hoist:
    """The split of a serial loop's body: `before` runs once for all iterations, `serial` per iteration."""

    before: tuple[Operation, ...]
    serial: tuple[Operation | tuple[Operation, ...], ...]
    """In order; a tuple is a batch of independent ops of one kind, evaluated in one call."""
    crossing: tuple[SSAValue, ...]
    """Values of `before` that `serial` (or the yield) reads: sliced per iteration."""
    yielded: tuple[SSAValue, ...]


@dataclass(frozen=True)
class _Loop:
    parallel: bool
    axis: int | None
    """The loop's numpy axis, if it is ever run vectorised (parallel, or hoisted)."""
    hoist: _Hoist | None


@dataclass
class _Plan:
    kernel: KernelOp
    name: str
    shapes: list[tuple[int, ...]]
    dtypes: list[np.dtype]
    stored: set[int]
    """Indices of the buffers the kernel writes."""
    rank: int = 0
    loops: dict[Operation, _Loop] = field(default_factory=dict)
    result_dtypes: dict[Operation, np.dtype | None] = field(default_factory=dict)
    constants: dict[Operation, Any] = field(default_factory=dict)
    checks: dict[Operation, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    """Per load/store: (index position, extent) of the indices checked at run time."""
    buffer_names: dict[SSAValue, str] = field(default_factory=dict)


_SUPPORTED: tuple[type[Operation], ...] = (
    arith.ConstantOp, arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp, arith.MaximumfOp,
    arith.CmpfOp, arith.CmpiOp, arith.SelectOp, arith.ExtFOp, arith.TruncFOp, arith.IndexCastOp, arith.ExtUIOp,
    arith.MuliOp, arith.AddiOp, arith.MinSIOp, math.FmaOp, math.SqrtOp, math.ExpOp, math.LogOp, math.TanhOp, math.ErfOp,
    memref.LoadOp, memref.StoreOp, scf.ForOp, scf.YieldOp, ScratchOp,
    vector.LoadOp, vector.StoreOp, vector.BroadcastOp, vector.FMAOp, vector.ExtractOp, vector.InsertOp,
    vector.ShuffleOp,
)  # fmt: skip

_STORES = (memref.StoreOp, vector.StoreOp)
_LOADS = (memref.LoadOp, vector.LoadOp)


def _stored_buffer(op: Operation) -> SSAValue:
    return op.memref if isinstance(op, memref.StoreOp) else op.base  # type: ignore[attr-defined, return-value]


def _loaded_buffer(op: Operation) -> SSAValue:
    return op.memref if isinstance(op, memref.LoadOp) else op.base  # type: ignore[attr-defined, return-value]


def _lanes(t: Attribute) -> int:
    """The lanes of a one-dimensional vector type."""
    assert isinstance(t, VectorType)
    return t.get_shape()[0]


def _unsupported(plan_name: str, what: str) -> PreskError:
    return PreskError("E3003", f"kernel @{plan_name}: the kernel interpreter cannot run {what}")


def _prepare(kernel: KernelOp) -> _Plan:
    name = kernel.sym_name.data
    block = kernel.body.block
    buffers = [a.type for a in block.args]
    for i, t in enumerate(buffers):
        if not isinstance(t, MemRefType):
            raise _unsupported(name, f"argument {i} of type {t} (kernels take buffers)")
    plan = _Plan(
        kernel,
        name,
        shapes=[tuple(t.get_shape()) for t in buffers],  # type: ignore[union-attr]
        dtypes=[dtype_of(t) for t in buffers],
        stored=set(written_buffers(kernel)),
        buffer_names={a: f"buffer {a.index} ({a.type})" for a in block.args},
    )
    for op in kernel.body.walk():
        if not isinstance(op, _SUPPORTED):
            raise _unsupported(name, op.name)
        for v in (*op.operands, *op.results):
            if isinstance(v.type, VectorType):
                if len(v.type.get_shape()) != 1 or not isinstance(v.type.element_type, Float64Type | Float32Type):
                    raise _unsupported(name, f"{op.name} on values of type {v.type}")
            elif not isinstance(v.type, MemRefType):
                if not isinstance(v.type, Float64Type | Float32Type | BFloat16Type | IndexType | IntegerType):
                    raise _unsupported(name, f"{op.name} on values of type {v.type}")
                _element_dtype(v.type)  # raises on integer widths other than i1 and i64
            elif any(n < 0 for n in v.type.get_shape()):
                raise _unsupported(name, f"a buffer of dynamic shape {v.type}")
        if op.results:
            t = op.results[0].type
            if isinstance(t, VectorType):
                t = t.element_type
            plan.result_dtypes[op] = None if isinstance(t, MemRefType) else _element_dtype(t)
        if isinstance(op, arith.ConstantOp):
            plan.constants[op] = _constant(name, op)
        elif isinstance(op, ScratchOp):
            plan.buffer_names[op.result] = f"the kernel's scratch ({op.result.type})"
    _assign_axes(plan, block, 0)
    _plan_bounds_checks(plan)
    return plan


def _constant(name: str, op: arith.ConstantOp) -> Any:
    value, t = op.value, op.result.type
    if isinstance(t, IndexType) and isinstance(value, IntegerAttr):
        return int(value.value.data)
    dtype = _element_dtype(t)
    if isinstance(value, IntegerAttr) and dtype in (I64, BOOL):
        return dtype.type(value.value.data)  # type: ignore[union-attr]
    if isinstance(value, FloatAttr) and dtype in (F64, F32, BF16):
        number = float(value.value.data)
        if dtype == BF16:
            return truncate_f64_to_bf16(number)
        return np.asarray(number).astype(dtype)[()]  # rounded to nearest even, as LLVM rounds a literal
    raise _unsupported(name, f"the constant {value} : {t}")


def _assign_axes(plan: _Plan, block: Block, depth: int) -> None:
    for op in block.ops:
        if isinstance(op, scf.ForOp):
            # A loop of strip-mined blocks runs block by block: each block's loop has bounds of its own.
            parallel = PARALLEL in op.attributes and not sets_inner_bounds(op)
            if parallel and op.iter_args:
                raise _unsupported(plan.name, "a parallel loop with running values (iter_args)")
            hoist = None if parallel else _split_serial(op)
            vector = parallel or hoist is not None
            plan.loops[op] = _Loop(parallel, depth if vector else None, hoist)
            if vector:
                plan.rank = max(plan.rank, depth + 1)
            _assign_axes(plan, op.body.block, depth + 1 if vector else depth)


def _split_serial(loop: scf.ForOp) -> _Hoist | None:
    """The ops of a serial loop's body that need neither its running values nor what it stores."""
    body = loop.body.block
    iv = body.args[0]
    stored = {_stored_buffer(op) for op in loop.walk() if isinstance(op, _STORES)}
    local: set[SSAValue] = set(body.args)
    for op in body.ops:
        local.update(op.results)
    ready: set[SSAValue] = {iv}
    before: list[Operation] = []
    serial: list[Operation] = []
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    for op in body.ops:
        if op is terminator:
            continue
        if _independent(op, stored, local, ready):
            before.append(op)
            ready.update(op.results)
        else:
            serial.append(op)
    if all(isinstance(op, arith.ConstantOp) for op in before):
        return None
    hoisted = {v for op in before for v in op.results}
    crossing: list[SSAValue] = []
    for op in [*serial, terminator]:
        for inner in op.walk():
            for v in inner.operands:
                if v in hoisted and v not in crossing:
                    crossing.append(v)
    return _Hoist(tuple(before), _batches(serial), tuple(crossing), tuple(terminator.operands))


_BATCHABLE = (math.FmaOp, vector.FMAOp, math.ExpOp, math.LogOp, math.TanhOp, math.ErfOp)
"""Ops whose evaluation costs far more than stacking their operands (emulated fma, polynomials)."""


def _batches(ops: Sequence[Operation]) -> tuple[Operation | tuple[Operation, ...], ...]:
    """Runs of consecutive, mutually independent expensive ops of one kind and type become one step.

    The tiled contraction's k loop updates m*n accumulators with one fma each:
    one call on the stacked operands computes the same elementwise results.
    """
    steps: list[Operation | tuple[Operation, ...]] = []
    i = 0
    while i < len(ops):
        op = ops[i]
        group = [op]
        if isinstance(op, _BATCHABLE):
            produced = set(op.results)
            while i + len(group) < len(ops):
                nxt = ops[i + len(group)]
                if type(nxt) is not type(op) or nxt.results[0].type != op.results[0].type:
                    break
                if any(v in produced for v in nxt.operands):
                    break
                group.append(nxt)
                produced.update(nxt.results)
        steps.append(tuple(group) if len(group) > 1 else op)
        i += len(group)
    return tuple(steps)


def _independent(op: Operation, stored: set[SSAValue], local: set[SSAValue], ready: set[SSAValue]) -> bool:
    for inner in op.walk():
        if isinstance(inner, _STORES):
            return False
        if isinstance(inner, _LOADS) and _loaded_buffer(inner) in stored:
            return False
        for v in inner.operands:
            if v in local and v not in ready:
                return False
    return True


def _plan_bounds_checks(plan: _Plan) -> None:
    """Intervals of index values; an index not provably inside its axis is checked at run time."""
    ranges: dict[SSAValue, tuple[int, int]] = {}
    for op in plan.kernel.body.walk():
        if isinstance(op, arith.ConstantOp) and isinstance(plan.constants[op], int | np.integer):
            v = int(plan.constants[op])
            ranges[op.result] = (v, v)
        elif isinstance(op, scf.ForOp):
            lb, ub, step = (ranges.get(v) for v in (op.lb, op.ub, op.step))
            if lb and ub and step and lb[0] == lb[1] and ub[0] == ub[1] and step[0] == step[1] and step[0] > 0:
                last = lb[0] + max(0, (ub[0] - lb[0] - 1) // step[0]) * step[0]
                ranges[op.body.block.args[0]] = (lb[0], max(lb[0], last))
            elif lb and ub and step and step[0] > 0:
                # Computed bounds (a k-block cut short at K's end): the variable lies in [min lb, max ub).
                ranges[op.body.block.args[0]] = (lb[0], max(lb[0], ub[1] - 1))
        elif isinstance(op, arith.AddiOp | arith.MuliOp):
            a, b = ranges.get(op.lhs), ranges.get(op.rhs)
            if a and b:
                if isinstance(op, arith.AddiOp):
                    ranges[op.result] = (a[0] + b[0], a[1] + b[1])
                else:
                    corners = [x * y for x in a for y in b]
                    ranges[op.result] = (min(corners), max(corners))
        elif isinstance(op, arith.MinSIOp):
            a, b = ranges.get(op.lhs), ranges.get(op.rhs)
            if a and b:
                ranges[op.result] = (min(a[0], b[0]), min(a[1], b[1]))
        elif isinstance(op, arith.IndexCastOp) and op.input in ranges:
            ranges[op.result] = ranges[op.input]
        elif isinstance(op, _LOADS + _STORES):
            buffer = _loaded_buffer(op) if isinstance(op, _LOADS) else _stored_buffer(op)
            shape = list(buffer.type.get_shape())  # type: ignore[attr-defined]
            if len(op.indices) != len(shape):
                raise _unsupported(plan.name, f"a {op.name} with {len(op.indices)} indices into {buffer.type}")
            if isinstance(op, vector.LoadOp | vector.StoreOp):
                # L consecutive elements from the last index: it must leave room for L - 1 more.
                lanes = _lanes(op.result.type if isinstance(op, vector.LoadOp) else op.vector.type)
                shape[-1] -= lanes - 1
            checks = tuple(
                (pos, n) for pos, (v, n) in enumerate(zip(op.indices, shape))
                if not (v in ranges and 0 <= ranges[v][0] and ranges[v][1] < n)
            )  # fmt: skip
            if checks:
                plan.checks[op] = checks


# --------------------------------------------------------------------------
# The implementations.


@register_impls
class KernelFunctions(InterpreterFunctions):
    """The ops of a kernel body on numpy values laid out by `plan` (one kernel)."""

    def __init__(self, plan: _Plan, hoist: bool = True) -> None:
        self.plan = plan
        self.hoist = hoist
        self._math: dict[str, Callable[[Any], Any]] | None = None

    # -- helpers ---------------------------------------------------------------

    def _typed(self, op: Operation, value: Any) -> tuple[Any]:
        """The result, after checking it kept its MLIR type (no silent float64)."""
        want = self.plan.result_dtypes[op]
        got = getattr(value, "dtype", None)
        if got != want:
            raise TypeError(f"kernel @{self.plan.name}: {op.name} produced {got}, its type is {want}")
        return (value,)

    def _where(self, op: Operation) -> str:
        return f"kernel @{self.plan.name}, {op.name}"

    def _check_indices(self, op: Operation, buffer: SSAValue, indices: Sequence[Any]) -> None:
        for pos, n in self.plan.checks[op]:
            i = indices[pos]
            if isinstance(i, np.ndarray):
                if i.size == 0:
                    continue
                lo, hi = int(i.min()), int(i.max())
            else:
                lo = hi = int(i)
            if lo < 0 or hi >= n:
                bad = lo if lo < 0 else hi
                raise PreskError(
                    "E4003",
                    f"{self._where(op)}: index {bad} is outside axis {pos} (size {n}) of "
                    f"{self.plan.buffer_names.get(buffer, 'a buffer')}",
                )

    def _axis_iv(self, axis: int, lb: int, ub: int, step: int) -> np.ndarray:
        shape = [1] * self.plan.rank
        iv = np.arange(lb, ub, step, dtype=np.int64)
        shape[axis] = iv.size
        return iv.reshape(shape)

    @staticmethod
    def _bounds(op: scf.ForOp, lb: Any, ub: Any, step: Any) -> tuple[int, int, int]:
        # A bound computed in a hoisted serial loop arrives as its iteration's slice: one element.
        lb, ub, step = (x.reshape(()) if isinstance(x, np.ndarray) and x.size == 1 else x for x in (lb, ub, step))
        try:
            bounds = operator.index(lb), operator.index(ub), operator.index(step)
        except TypeError:
            raise TypeError(f"{op.name}: loop bounds must not vary across vectorised iterations") from None
        if bounds[2] <= 0:
            raise ValueError(f"{op.name}: step {bounds[2]} is not positive")
        return bounds

    # -- constants and arithmetic ------------------------------------------------

    @impl(arith.ConstantOp)
    def run_constant(self, interp: Interpreter, op: arith.ConstantOp, args: PythonValues) -> PythonValues:
        return (self.plan.constants[op],)

    @impl(arith.AddfOp)
    def run_addf(self, interp: Interpreter, op: arith.AddfOp, args: PythonValues) -> PythonValues:
        return self._typed(op, args[0] + args[1])

    @impl(arith.SubfOp)
    def run_subf(self, interp: Interpreter, op: arith.SubfOp, args: PythonValues) -> PythonValues:
        return self._typed(op, args[0] - args[1])

    @impl(arith.MulfOp)
    def run_mulf(self, interp: Interpreter, op: arith.MulfOp, args: PythonValues) -> PythonValues:
        return self._typed(op, args[0] * args[1])

    @impl(arith.DivfOp)
    def run_divf(self, interp: Interpreter, op: arith.DivfOp, args: PythonValues) -> PythonValues:
        return self._typed(op, args[0] / args[1])

    @impl(arith.NegfOp)
    def run_negf(self, interp: Interpreter, op: arith.NegfOp, args: PythonValues) -> PythonValues:
        return self._typed(op, -args[0])

    @impl(arith.MaximumfOp)
    def run_maximumf(self, interp: Interpreter, op: arith.MaximumfOp, args: PythonValues) -> PythonValues:
        return self._typed(op, ieee_maximum(args[0], args[1]))

    @impl(arith.CmpfOp)
    def run_cmpf(self, interp: Interpreter, op: arith.CmpfOp, args: PythonValues) -> PythonValues:
        predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        result = _CMPF[predicate](args[0], args[1])
        return self._typed(op, result if isinstance(result, np.ndarray) else np.bool_(result))

    @impl(arith.CmpiOp)
    def run_cmpi(self, interp: Interpreter, op: arith.CmpiOp, args: PythonValues) -> PythonValues:
        predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        result = _CMPI[predicate](args[0], args[1])
        return self._typed(op, result if isinstance(result, np.ndarray) else np.bool_(result))

    @impl(arith.SelectOp)
    def run_select(self, interp: Interpreter, op: arith.SelectOp, args: PythonValues) -> PythonValues:
        cond, a, b = args
        if isinstance(cond, np.ndarray) and isinstance(op.result.type, VectorType):
            value = self._vector(np.where(cond[..., None], a, b))
        elif isinstance(cond, np.ndarray):
            value = np.where(cond, a, b)
            if value.ndim == 0:
                value = value[()]
        else:
            value = a if cond else b
        if self.plan.result_dtypes[op] is None:  # index values: ints or int64 arrays
            return (value,)
        return self._typed(op, value)

    @impl(arith.ExtFOp)
    def run_extf(self, interp: Interpreter, op: arith.ExtFOp, args: PythonValues) -> PythonValues:
        return self._typed(op, _cast(args[0], self.plan.result_dtypes[op]))  # type: ignore[arg-type]

    @impl(arith.TruncFOp)
    def run_truncf(self, interp: Interpreter, op: arith.TruncFOp, args: PythonValues) -> PythonValues:
        (x,) = args
        want = self.plan.result_dtypes[op]
        if want == BF16 and x.dtype == F64:
            return self._typed(op, truncate_f64_to_bf16(x))
        return self._typed(op, _cast(x, want))  # type: ignore[arg-type]

    @impl(arith.IndexCastOp)
    def run_index_cast(self, interp: Interpreter, op: arith.IndexCastOp, args: PythonValues) -> PythonValues:
        (x,) = args
        if isinstance(x, np.ndarray):
            return (x.astype(I64, copy=False),)
        return (np.int64(x) if self.plan.result_dtypes[op] == I64 else int(x),)

    @impl(arith.ExtUIOp)
    def run_extui(self, interp: Interpreter, op: arith.ExtUIOp, args: PythonValues) -> PythonValues:
        return self._typed(op, _cast(args[0], I64))

    @impl(arith.MuliOp)
    def run_muli(self, interp: Interpreter, op: arith.MuliOp, args: PythonValues) -> PythonValues:
        return (args[0] * args[1],)

    @impl(arith.AddiOp)
    def run_addi(self, interp: Interpreter, op: arith.AddiOp, args: PythonValues) -> PythonValues:
        return (args[0] + args[1],)

    @impl(arith.MinSIOp)
    def run_minsi(self, interp: Interpreter, op: arith.MinSIOp, args: PythonValues) -> PythonValues:
        a, b = args
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return (np.minimum(a, b),)
        return (min(a, b),)

    # -- math --------------------------------------------------------------------

    @impl(math.FmaOp)
    def run_fma(self, interp: Interpreter, op: math.FmaOp, args: PythonValues) -> PythonValues:
        return self._typed(op, fma(*args))  # one rounding, emulated exactly

    @impl(math.SqrtOp)
    def run_sqrt(self, interp: Interpreter, op: math.SqrtOp, args: PythonValues) -> PythonValues:
        return self._typed(op, np.sqrt(args[0]))

    def _transcendental(self, name: str, op: Operation, x: Any) -> PythonValues:
        if self._math is None:
            self._math = _math_functions()
        return self._typed(op, self._math[name](x))

    @impl(math.ExpOp)
    def run_exp(self, interp: Interpreter, op: math.ExpOp, args: PythonValues) -> PythonValues:
        return self._transcendental("exp", op, args[0])

    @impl(math.LogOp)
    def run_log(self, interp: Interpreter, op: math.LogOp, args: PythonValues) -> PythonValues:
        return self._transcendental("log", op, args[0])

    @impl(math.TanhOp)
    def run_tanh(self, interp: Interpreter, op: math.TanhOp, args: PythonValues) -> PythonValues:
        return self._transcendental("tanh", op, args[0])

    @impl(math.ErfOp)
    def run_erf(self, interp: Interpreter, op: math.ErfOp, args: PythonValues) -> PythonValues:
        return self._transcendental("erf", op, args[0])

    # -- memory ------------------------------------------------------------------

    @impl(ScratchOp)
    def run_scratch(self, interp: Interpreter, op: ScratchOp, args: PythonValues) -> PythonValues:
        """The whole buffer: what native code folds onto one block of rows is the same memory here."""
        return (np.empty(op.result.type.get_shape(), dtype_of(op.result.type)),)  # type: ignore[attr-defined]

    @impl(memref.LoadOp)
    def run_load(self, interp: Interpreter, op: memref.LoadOp, args: PythonValues) -> PythonValues:
        buffer, *indices = args
        if op in self.plan.checks:
            self._check_indices(op, op.memref, indices)
        return (buffer[tuple(indices)],)  # a gather (a copy) or a scalar: never a view

    @impl(memref.StoreOp)
    def run_store(self, interp: Interpreter, op: memref.StoreOp, args: PythonValues) -> PythonValues:
        value, buffer, *indices = args
        if getattr(value, "dtype", None) != buffer.dtype:
            raise TypeError(f"{self._where(op)}: storing {getattr(value, 'dtype', type(value))} into {buffer.dtype}")
        if op in self.plan.checks:
            self._check_indices(op, op.memref, indices)
        where = tuple(indices)
        if isinstance(value, np.ndarray):
            target = np.broadcast_shapes(*(np.shape(i) for i in indices)) if indices else ()
            if value.shape != target:
                try:
                    fits = np.broadcast_shapes(target, value.shape) == target
                except ValueError:
                    fits = False
                if not fits:
                    if value.size == 1 and not target:
                        value = value.reshape(())
                    else:
                        raise PreskError(
                            "E3003",
                            f"{self._where(op)}: a value of shape {value.shape} stored at indices of shape {target}: "
                            "iterations of a parallel loop would write the same element",
                        )
        buffer[where] = value
        return ()

    # -- vectors (psk-vectorize) ---------------------------------------------------
    #
    # A vector value is an array whose last axis holds its lanes, after the
    # `rank` axes of the vectorised loops (always rank + 1 dimensions, so that
    # slicing a loop's axis never touches the lanes).

    def _vector(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        want = self.plan.rank + 1
        return x.reshape((1,) * (want - x.ndim) + x.shape) if x.ndim < want else x

    def _lane_indices(self, indices: Sequence[Any], lanes: int) -> tuple[Any, ...]:
        """Index arrays addressing `lanes` consecutive elements along the last axis."""
        spread = [np.asarray(i)[..., None] for i in indices]
        spread[-1] = spread[-1] + np.arange(lanes, dtype=np.int64)
        return tuple(spread)

    @impl(vector.BroadcastOp)
    def run_broadcast(self, interp: Interpreter, op: vector.BroadcastOp, args: PythonValues) -> PythonValues:
        (x,) = args
        lanes = _lanes(op.vector.type)
        value = np.repeat(np.asarray(x)[..., None], lanes, axis=-1)
        return self._typed(op, self._vector(value))

    @impl(vector.LoadOp)
    def run_vector_load(self, interp: Interpreter, op: vector.LoadOp, args: PythonValues) -> PythonValues:
        buffer, *indices = args
        if op in self.plan.checks:
            self._check_indices(op, op.base, indices)
        return self._typed(op, self._vector(buffer[self._lane_indices(indices, _lanes(op.result.type))]))

    @impl(vector.StoreOp)
    def run_vector_store(self, interp: Interpreter, op: vector.StoreOp, args: PythonValues) -> PythonValues:
        value, buffer, *indices = args
        if getattr(value, "dtype", None) != buffer.dtype:
            raise TypeError(f"{self._where(op)}: storing {getattr(value, 'dtype', type(value))} into {buffer.dtype}")
        if op in self.plan.checks:
            self._check_indices(op, op.base, indices)
        where = self._lane_indices(indices, _lanes(op.vector.type))
        target = np.broadcast_shapes(*(np.shape(i) for i in where))
        value = np.asarray(value)
        while value.ndim > len(target) and value.shape[0] == 1:
            value = value[0]
        try:
            fits = np.broadcast_shapes(target, value.shape) == target
        except ValueError:
            fits = False
        if not fits:
            raise PreskError(
                "E3003",
                f"{self._where(op)}: a vector of shape {value.shape} stored at indices of shape {target}: "
                "iterations of a parallel loop would write the same element",
            )
        buffer[where] = value
        return ()

    @impl(vector.FMAOp)
    def run_vector_fma(self, interp: Interpreter, op: vector.FMAOp, args: PythonValues) -> PythonValues:
        return self._typed(op, self._vector(fma(*args)))  # lane by lane, the scalar fma's one rounding

    @impl(vector.ExtractOp)
    def run_vector_extract(self, interp: Interpreter, op: vector.ExtractOp, args: PythonValues) -> PythonValues:
        (lane,) = op.static_position.get_values()
        value = np.asarray(args[0])[..., lane]
        return self._typed(op, value[()] if value.ndim == 0 else value)

    @impl(vector.InsertOp)
    def run_vector_insert(self, interp: Interpreter, op: vector.InsertOp, args: PythonValues) -> PythonValues:
        source, dest = args
        (lane,) = op.static_position.get_values()
        dest, source = self._vector(dest), self._vector(np.asarray(source)[..., None])
        shape = np.broadcast_shapes(dest.shape, source.shape)
        value = np.array(np.broadcast_to(dest, shape))
        value[..., lane] = np.broadcast_to(source, shape)[..., lane]
        return self._typed(op, value)

    @impl(vector.ShuffleOp)
    def run_vector_shuffle(self, interp: Interpreter, op: vector.ShuffleOp, args: PythonValues) -> PythonValues:
        a, b = np.broadcast_arrays(self._vector(args[0]), self._vector(args[1]))
        return self._typed(op, np.concatenate([a, b], axis=-1)[..., list(op.mask.get_values())])

    # -- loops -------------------------------------------------------------------

    @impl(scf.ForOp)
    def run_for(self, interp: Interpreter, op: scf.ForOp, args: PythonValues) -> PythonValues:
        lb, ub, step = self._bounds(op, *args[:3])
        values = tuple(args[3:])
        loop = self.plan.loops[op]
        if loop.parallel:
            if ub > lb:
                interp.run_ssacfg_region(op.body, (self._axis_iv(loop.axis, lb, ub, step),), "parallel")  # type: ignore[arg-type]
            return ()
        if ub <= lb:
            return values
        if loop.hoist is None or not self.hoist:
            for i in range(lb, ub, step):
                values = interp.run_ssacfg_region(op.body, (i, *values), "serial")
            return values
        return self._run_hoisted(interp, op, loop, lb, ub, step, values)

    def _run_hoisted(
        self, interp: Interpreter, op: scf.ForOp, loop: _Loop, lb: int, ub: int, step: int, values: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        hoist = loop.hoist
        assert hoist is not None and loop.axis is not None
        block = op.body.block
        interp.push_scope("hoisted")
        try:
            interp.set_values([(block.args[0], self._axis_iv(loop.axis, lb, ub, step))])
            _run_ops(interp, hoist.before)
            full = interp.get_values(hoist.crossing)
            prefix = (slice(None),) * loop.axis
            axis = loop.axis
            for n, i in enumerate(range(lb, ub, step)):
                at = (*prefix, slice(n, n + 1))
                interp.push_scope("serial")
                try:
                    interp.set_values(zip(block.args, (i, *values)))
                    interp.set_values(
                        (v, x[at] if isinstance(x, np.ndarray) and x.ndim > axis and x.shape[axis] != 1 else x)
                        for v, x in zip(hoist.crossing, full)
                    )
                    _run_ops(interp, hoist.serial)
                    values = interp.get_values(hoist.yielded)
                finally:
                    interp.pop_scope()
        finally:
            interp.pop_scope()
        return values

    @impl_terminator(scf.YieldOp)
    def run_yield(
        self, interp: Interpreter, op: scf.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    def run_kernel(self, interp: Interpreter, buffers: Sequence[np.ndarray]) -> None:
        """The kernel's body on its buffers (in place)."""
        with np.errstate(all="ignore"):  # lanes a select discards may overflow: native code does not trap either
            interp.run_ssacfg_region(self.plan.kernel.body, tuple(buffers), self.plan.name)


def _run_ops(interp: Interpreter, ops: Sequence[Operation | tuple[Operation, ...]]) -> None:
    for op in ops:
        if isinstance(op, tuple):
            _run_batch(interp, op)
        else:
            interp.set_values(zip(op.results, interp.run_op(op, interp.get_values(op.operands))))


def _run_batch(interp: Interpreter, ops: tuple[Operation, ...]) -> None:
    """Independent elementwise ops of one kind, stacked along a new leading axis and run as one.

    Only when every member has the same result shape, so that no value
    comes out broadcast along an axis it does not vary on.
    """
    operands = [interp.get_values(op.operands) for op in ops]
    # The members' broadcast shapes, which must agree; read once per distinct pattern of operand shapes (a
    # tile's members share one or two: its scalars beside its vectors, a hoisted value beside the loop's).
    patterns = {tuple(getattr(v, "shape", ()) for v in values) for values in operands}
    shapes = {_broadcast_shape(pattern) for pattern in patterns}
    if len(shapes) != 1:
        _run_ops(interp, ops)
        return
    (shape,) = shapes
    stacked = []
    for k in range(len(operands[0])):
        column = np.empty((len(ops), *shape), dtype=operands[0][k].dtype)
        for j, values in enumerate(operands):
            column[j] = values[k]  # broadcasts; same dtype, so exact
        stacked.append(column)
    (out,) = interp.run_op(ops[0], tuple(stacked))
    interp.set_values((op.results[0], out[j]) for j, op in enumerate(ops))


def _broadcast_shape(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """numpy's broadcast shape of `shapes`, without its call where they are one shape and scalars (the usual case)."""
    distinct = set(shapes)
    distinct.discard(())
    if len(distinct) <= 1:
        return distinct.pop() if distinct else ()
    return np.broadcast_shapes(*distinct)


# --------------------------------------------------------------------------
# The public interface.


_EMPTY_MODULE: ModuleOp | None = None


def _module() -> ModuleOp:
    global _EMPTY_MODULE
    if _EMPTY_MODULE is None:
        _EMPTY_MODULE = ModuleOp([])
    return _EMPTY_MODULE


class KernelInterpreter:
    """Runs `psk_kernel.kernel`s on numpy buffers, in place, exactly as the native backend.

    `runner(kernel)` prepares a kernel once (its loop layout, hoisting plan
    and bounds checks) and returns a function of the buffers, in the
    kernel's argument order. Each call builds its own xDSL `Interpreter`,
    so runners may be called from several threads (on disjoint outputs).
    """

    def __init__(self, hoist: bool = True) -> None:
        self.hoist = hoist

    def runner(self, kernel: KernelOp) -> Callable[[Sequence[np.ndarray]], None]:
        plan = _prepare(kernel)
        hoist = self.hoist

        def run(buffers: Sequence[np.ndarray]) -> None:
            _check_buffers(plan, buffers)
            interp = Interpreter(_module())
            functions = KernelFunctions(plan, hoist and not _overlapping(plan, buffers))
            interp.register_implementations(functions)
            try:
                functions.run_kernel(interp, buffers)
            except PreskError as error:
                if hasattr(error, "__notes__"):  # xDSL's per-op notes print the whole module
                    del error.__notes__
                raise

        return run

    def run(self, kernel: KernelOp, buffers: Sequence[np.ndarray]) -> None:
        """Prepare and run once."""
        self.runner(kernel)(buffers)


def _check_buffers(plan: _Plan, buffers: Sequence[np.ndarray]) -> None:
    if len(buffers) != len(plan.shapes):
        raise PreskError("E4003", f"kernel @{plan.name} takes {len(plan.shapes)} buffers, got {len(buffers)}")
    for i, (b, shape, dtype) in enumerate(zip(buffers, plan.shapes, plan.dtypes)):
        where = f"kernel @{plan.name}, buffer {i}"
        if not isinstance(b, np.ndarray):
            raise PreskError("E4003", f"{where}: expected a numpy array, got {type(b).__name__}")
        if b.shape != shape or b.dtype != dtype:
            raise PreskError(
                "E4003", f"{where}: expected shape {list(shape)} of {dtype}, got shape {list(b.shape)} of {b.dtype}"
            )
        if i in plan.stored and not b.flags.writeable:
            raise PreskError("E4003", f"{where}: the kernel writes it, but the array is read-only")


def _overlapping(plan: _Plan, buffers: Sequence[np.ndarray]) -> bool:
    """Whether a buffer the kernel writes may share memory with another (hoisting is then unsafe)."""
    for i in plan.stored:
        for j, other in enumerate(buffers):
            if j != i and np.may_share_memory(buffers[i], other):
                return True
    return False
