"""`presk.ir.build.create` builds what the xDSL constructors build, for every op the lowering creates with it.

The kernel builder and `psk-vectorize` create their hot ops with
`Operation.create` and the properties each constructor sets. If an xDSL
upgrade gave a constructor another property (or another result type), the
lowered IR would differ from what the printer, the verifiers and the
translation expect; these tests name the op instead.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.dialects import arith, math, memref, vector
from xdsl.dialects.builtin import BFloat16Type, Float32Type, Float64Type, FloatAttr, IndexType, MemRefType, VectorType
from xdsl.ir import Block, Operation, SSAValue

from presk.lowering.kernel_builder import KernelBuilder, vector_broadcast, vector_extract, vector_fma, vector_load

F32, F64, BF16 = Float32Type(), Float64Type(), BFloat16Type()
V8 = VectorType(F32, [8])


def _same(built: Operation, expected: Operation) -> None:
    assert built.name == expected.name
    assert built.properties == expected.properties, built.name
    assert built.attributes == expected.attributes, built.name
    assert list(built.result_types) == list(expected.result_types), built.name
    assert list(built.operands) == list(expected.operands), built.name
    assert not built.regions and not expected.regions and not built.successors


def _last(block: Block) -> Operation:
    assert block.last_op is not None
    return block.last_op


@pytest.fixture
def values() -> tuple[KernelBuilder, Block, list[SSAValue]]:
    block = Block(arg_types=[MemRefType(F32, [4, 4]), IndexType(), IndexType(), F32, F64, BF16, V8])
    for op in (arith.CmpiOp(block.args[1], block.args[2], "eq"),):
        block.add_op(op)
    return KernelBuilder(block), block, [*block.args, block.ops.first.results[0]]  # type: ignore[union-attr]


CASES: dict[str, tuple[Callable[..., object], Callable[..., Operation]]] = {
    "load": (lambda kb, v: kb.load(v[0], [v[1], v[2]]), lambda v: memref.LoadOp.get(v[0], [v[1], v[2]])),
    "store": (lambda kb, v: kb.store(v[3], v[0], [v[1], v[2]]), lambda v: memref.StoreOp.get(v[3], v[0], [v[1], v[2]])),
    "fma": (lambda kb, v: kb.fma(v[3], v[3], v[3]), lambda v: math.FmaOp(v[3], v[3], v[3])),
    "addf": (lambda kb, v: kb.addf(v[4], v[4]), lambda v: arith.AddfOp(v[4], v[4])),
    "subf": (lambda kb, v: kb.subf(v[3], v[3]), lambda v: arith.SubfOp(v[3], v[3])),
    "mulf": (lambda kb, v: kb.mulf(v[3], v[3]), lambda v: arith.MulfOp(v[3], v[3])),
    "select": (lambda kb, v: kb.select(v[7], v[3], v[3]), lambda v: arith.SelectOp(v[7], v[3], v[3])),
    "extf": (lambda kb, v: kb.convert(v[5], F32), lambda v: arith.ExtFOp(v[5], F32)),
    "truncf": (lambda kb, v: kb.convert(v[3], BF16), lambda v: arith.TruncFOp(v[3], BF16)),
    "muli": (lambda kb, v: kb.offset(v[1], 6, 0), lambda v: arith.MuliOp(v[1], v[2])),
    "addi": (lambda kb, v: kb.offset(v[1], 1, v[2]), lambda v: arith.AddiOp(v[1], v[2])),
    "minsi": (lambda kb, v: kb.min_index(v[1], v[2]), lambda v: arith.MinSIOp(v[1], v[2])),
    "real": (lambda kb, v: kb.real(0.0, F64), lambda v: arith.ConstantOp(FloatAttr(0.0, F64))),
    "vector.load": (lambda kb, v: kb.add(vector_load(v[0], [v[1], v[2]], V8)), lambda v: vector.LoadOp(v[0], [v[1], v[2]], V8)),
    "vector.broadcast": (lambda kb, v: kb.add(vector_broadcast(v[3], V8)), lambda v: vector.BroadcastOp(v[3], V8)),
    "vector.fma": (lambda kb, v: kb.add(vector_fma(v[6], v[6], v[6])), lambda v: vector.FMAOp(v[6], v[6], v[6])),
    "vector.extract": (lambda kb, v: kb.add(vector_extract(v[6], 3)), lambda v: vector.ExtractOp(v[6], [3], F32)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fast_op_is_the_constructors(name: str, values: tuple[KernelBuilder, Block, list[SSAValue]]) -> None:
    kb, block, v = values
    build, construct = CASES[name]
    build(kb, v)
    built = _last(block)
    expected = construct(v)
    if name == "muli":  # its constant operand: the builder's own index constant
        expected = arith.MuliOp(v[1], built.operands[1])
    _same(built, expected)


def test_index_constants_are_the_constructors(values: tuple[KernelBuilder, Block, list[SSAValue]]) -> None:
    kb, _, _ = values
    constant = kb.index(7).owner
    assert isinstance(constant, Operation)
    _same(constant, arith.ConstantOp.from_int_and_width(7, IndexType()))
