"""Building kernel bodies: loops, loads, stores and scalar arithmetic in upstream ops.

One small builder that every nest's lowering uses, so that a loop is always
an `scf.for` over index constants ending in `scf.yield`, a parallel loop
always carries `psk_kernel.parallel`, and conversions between a buffer's
storage type and the kernel's arithmetic type are always the same two ops.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects import arith, math, memref, scf, vector
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    DenseArrayBase,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    UnitAttr,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from presk.dialects.psk_kernel import PARALLEL, SUBNORMAL_NUMERATOR
from presk.ir.build import NO_FASTMATH, NO_OVERFLOW, create

FLOAT_TYPES: dict[str, Attribute] = {"f64": Float64Type(), "f32": Float32Type(), "bf16": BFloat16Type()}
INDEX_ELEMENT = i64
"""Index tensors are buffers of i64."""
_INDEX = IndexType()


def float_type(name: str) -> Attribute:
    return FLOAT_TYPES[name]


# -- vector ops, built once per use -------------------------------------------------


def vector_load(buffer: SSAValue, indices: Sequence[SSAValue], vt: VectorType) -> vector.LoadOp:
    """`vector.load`: `vt`'s lanes of consecutive elements along the buffer's last axis, from `indices` on."""
    return create(vector.LoadOp, (buffer, *indices), (vt,))


def vector_broadcast(scalar: SSAValue, vt: VectorType) -> vector.BroadcastOp:
    return create(vector.BroadcastOp, (scalar,), (vt,))


def vector_fma(a: SSAValue, b: SSAValue, c: SSAValue) -> vector.FMAOp:
    return create(vector.FMAOp, (a, b, c), (c.type,))


def vector_extract(source: SSAValue, lane: int) -> vector.ExtractOp:
    """Lane `lane` of a one-dimensional vector, at a static position."""
    assert isinstance(source.type, VectorType)
    return create(vector.ExtractOp, (source,), (source.type.element_type,), {"static_position": _position(lane)})


@functools.cache
def vector_type(element: Attribute, lanes: int) -> VectorType:
    """`vector<lanes x element>`, built once: a type's construction verifies its parameters, and a tile's
    vectorisation asks for the same one at every group."""
    return VectorType(element, [lanes])


@functools.cache
def _position(lane: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [lane])


@dataclass
class Loop:
    """An open `scf.for`: its induction variable, its running values, and what it yields."""

    op: scf.ForOp
    iv: SSAValue
    args: list[SSAValue]
    yields: list[SSAValue] = field(default_factory=list)

    @property
    def results(self) -> list[SSAValue]:
        return list(self.op.results)


class KernelBuilder:
    """Appends ops to a kernel body, one block at a time.

    The ops a register tile repeats (loads, stores, fmas, the index and
    element arithmetic, constants) are built with `presk.ir.build.create`,
    a third of the cost of their constructors: a tile emits hundreds.
    """

    def __init__(self, block: Block) -> None:
        self.entry = block
        self.block = block
        self._index_constants: dict[int, SSAValue] = {}
        self._last_constant: Operation | None = None

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    # -- constants -----------------------------------------------------------

    def index(self, n: int) -> SSAValue:
        """An index constant, created once per kernel at the top of its body, where it dominates every use."""
        if n not in self._index_constants:
            op = create(arith.ConstantOp, (), (_INDEX,), {"value": IntegerAttr(n, _INDEX)})
            if self._last_constant is not None:
                self.entry.insert_op_after(op, self._last_constant)
            elif self.entry.first_op is not None:
                self.entry.insert_op_before(op, self.entry.first_op)
            else:
                self.entry.add_op(op)
            self._last_constant = op
            self._index_constants[n] = op.result
        return self._index_constants[n]

    def real(self, value: float, t: Attribute) -> SSAValue:
        return self.add(create(arith.ConstantOp, (), (t,), {"value": FloatAttr(value, t)}))  # type: ignore[arg-type]

    def integer(self, value: int, t: IntegerType = INDEX_ELEMENT) -> SSAValue:
        return self.add(arith.ConstantOp.from_int_and_width(value, t))

    # -- memory ----------------------------------------------------------------

    def load(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
        assert isinstance(buffer.type, MemRefType)
        return self.add(create(memref.LoadOp, (buffer, *indices), (buffer.type.element_type,)))

    def store(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.add(create(memref.StoreOp, (value, buffer, *indices)))

    def vector_load(self, buffer: SSAValue, indices: Sequence[SSAValue], lanes: int) -> SSAValue:
        """`lanes` consecutive elements along the buffer's last axis, from `indices` on."""
        assert isinstance(buffer.type, MemRefType)
        return self.add(vector_load(buffer, indices, vector_type(buffer.type.element_type, lanes)))

    def vector_store(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.add(vector.StoreOp(value, buffer, list(indices)))

    def shuffle(self, a: SSAValue, b: SSAValue, mask: Sequence[int]) -> SSAValue:
        """Lanes of a then b (numbered 0 … 2L − 1), picked by `mask`: data moved, no arithmetic."""
        mask_attr = DenseArrayBase.from_list(i64, list(mask))
        return self.add(vector.ShuffleOp(a, b, mask_attr, result_type=a.type))

    def convert(self, value: SSAValue, to: Attribute) -> SSAValue:
        """Between float types: `extf` widens exactly, `truncf` rounds to nearest even."""
        if value.type == to:
            return value
        assert isinstance(value.type, AnyFloat) and isinstance(to, AnyFloat), (value.type, to)
        if value.type.bitwidth < to.bitwidth:
            return self.add(create(arith.ExtFOp, (value,), (to,)))
        return self.add(create(arith.TruncFOp, (value,), (to,)))

    def load_real(self, buffer: SSAValue, indices: Sequence[SSAValue], arith_type: Attribute) -> SSAValue:
        return self.convert(self.load(buffer, indices), arith_type)

    def store_real(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
        assert isinstance(buffer.type, MemRefType)
        self.store(self.convert(value, buffer.type.element_type), buffer, indices)

    # -- arithmetic --------------------------------------------------------------

    def addf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(create(arith.AddfOp, (a, b), (a.type,), {"fastmath": NO_FASTMATH}))

    def subf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(create(arith.SubfOp, (a, b), (a.type,), {"fastmath": NO_FASTMATH}))

    def mulf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(create(arith.MulfOp, (a, b), (a.type,), {"fastmath": NO_FASTMATH}))

    def divf(self, a: SSAValue, b: SSAValue, subnormal_numerator: bool = False) -> SSAValue:
        """a / b; `subnormal_numerator` marks a division whose numerator is often subnormal (`SUBNORMAL_NUMERATOR`)."""
        op = arith.DivfOp(a, b)
        if subnormal_numerator:
            op.attributes[SUBNORMAL_NUMERATOR] = UnitAttr()
        return self.add(op)

    def maxf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(arith.MaximumfOp(a, b))

    def fma(self, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
        return self.add(create(math.FmaOp, (a, b, c), (a.type,), {"fastmath": NO_FASTMATH}))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(create(arith.SelectOp, (cond, a, b), (a.type,)))

    def cmpf(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return self.add(arith.CmpfOp(a, b, predicate))

    def nonzero(self, value: SSAValue) -> SSAValue:
        """An index-tensor element as a condition (i1)."""
        zero = self.integer(0, value.type)  # type: ignore[arg-type]
        return self.add(arith.CmpiOp(value, zero, "ne"))

    def index_of(self, value: SSAValue) -> SSAValue:
        return self.add(arith.IndexCastOp(value, IndexType()))

    def to_i64(self, index: SSAValue) -> SSAValue:
        return self.add(arith.IndexCastOp(index, i64))

    def offset(self, base: SSAValue, scale: int, inner: int | SSAValue) -> SSAValue:
        """`base * scale + inner` on indices (a tile's row or column)."""
        scaled = base if scale == 1 else self._index_op(arith.MuliOp, base, self.index(scale))
        if isinstance(inner, int):
            return scaled if inner == 0 else self._index_op(arith.AddiOp, scaled, self.index(inner))
        return self._index_op(arith.AddiOp, scaled, inner)

    def _index_op(self, op_type: type[arith.AddiOp | arith.MuliOp], a: SSAValue, b: SSAValue) -> SSAValue:
        return self.add(create(op_type, (a, b), (a.type,), {"overflowFlags": NO_OVERFLOW}))

    def min_index(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """The smaller of two indices (`arith.minsi`): a last block shifted back to end at its axis's end."""
        return self.add(create(arith.MinSIOp, (a, b), (a.type,)))

    def bool_to_i64(self, cond: SSAValue) -> SSAValue:
        assert cond.type == i1
        return self.add(arith.ExtUIOp(cond, i64))

    # -- loops -------------------------------------------------------------------

    @contextmanager
    def loop(self, count: int, parallel: bool = False, inits: Sequence[SSAValue] = ()) -> Iterator[Loop]:
        """`for iv in [0, count)`: the body is built inside the `with`; set `loop.yields` for running values."""
        with self.span(self.index(0), self.index(count), inits, parallel) as state:
            yield state

    @contextmanager
    def span(
        self, lower: SSAValue, upper: SSAValue, inits: Sequence[SSAValue] = (), parallel: bool = False
    ) -> Iterator[Loop]:
        """`for iv in [lower, upper)`, its bounds constants or computed (a k-block cut short at K's end)."""
        body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        op = scf.ForOp(lower, upper, self.index(1), list(inits), body)
        if parallel:
            op.attributes[PARALLEL] = UnitAttr()
        self.add(op)
        outer = self.block
        self.block = body
        state = Loop(op, body.args[0], list(body.args[1:]))
        try:
            yield state
        finally:
            self.block.add_op(scf.YieldOp(*state.yields))
            self.block = outer

    @contextmanager
    def nest(self, counts: Sequence[int], parallel: bool = True) -> Iterator[list[SSAValue]]:
        """Perfectly nested loops over `counts`, outermost first; yields their induction variables."""
        ivs: list[SSAValue] = []
        stack = []
        try:
            for n in counts:
                ctx = self.loop(n, parallel)
                stack.append(ctx)
                ivs.append(ctx.__enter__().iv)
            yield ivs
        finally:
            for ctx in reversed(stack):
                ctx.__exit__(None, None, None)

    def math(self, name: str, x: SSAValue) -> SSAValue:
        ops = {"exp": math.ExpOp, "log": math.LogOp, "sqrt": math.SqrtOp, "tanh": math.TanhOp, "erf": math.ErfOp}
        return self.add(ops[name](x))
