"""`psk-vectorize`'s clean-up, `erase_unused`, erases what xDSL's `dce` erases: the same module afterwards.

It reaches `dce`'s fixpoint in one reverse walk (an op's users come after
it), so a chain of dead ops, a dead loop and dead code nested in a live loop
must all go in that one walk, and nothing with an effect or a use may.
"""

from __future__ import annotations

from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import Float32Type, FloatAttr, IndexType, MemRefType, ModuleOp
from xdsl.ir import Block, Region
from xdsl.transforms.dead_code_elimination import dce

from presk.passes.vectorize import erase_unused

F32 = Float32Type()


def _loop(lower: arith.ConstantOp, upper: arith.ConstantOp, step: arith.ConstantOp, body: list) -> scf.ForOp:
    block = Block(arg_types=[IndexType()])
    block.add_ops([*body(block.args[0]), scf.YieldOp()])
    return scf.ForOp(lower.result, upper.result, step.result, [], block)


def _module() -> ModuleOp:
    """A function storing one value in a loop, with dead code around it, inside it and of its own."""
    block = Block(arg_types=[MemRefType(F32, [4])])
    buffer = block.args[0]
    zero, four, one = (arith.ConstantOp.from_int_and_width(n, IndexType()) for n in (0, 4, 1))
    x = arith.ConstantOp(FloatAttr(2.0, F32))
    dead_a = arith.ConstantOp(FloatAttr(3.0, F32))  # a dead chain: a, a + a, (a + a) · x
    dead_b = arith.AddfOp(dead_a.result, dead_a.result)
    dead_c = arith.MulfOp(dead_b.result, x.result)
    live = _loop(zero, four, one, lambda i: [
        (load := memref.LoadOp.get(buffer, [i])),
        (unused := arith.AddfOp(load.res, x.result)),  # dead inside a live loop, and what only it reads
        arith.MulfOp(unused.result, unused.result),
        (total := arith.AddfOp(load.res, load.res)),
        memref.StoreOp.get(total.result, buffer, [i]),
    ])  # fmt: skip
    dead_loop = _loop(zero, four, one, lambda i: [arith.AddiOp(i, i)])  # pure, no results: dead
    block.add_ops([zero, four, one, x, dead_a, dead_b, dead_c, live, dead_loop, func.ReturnOp()])
    function = func.FuncOp("f", ([buffer.type], []), Region(block))
    return ModuleOp([function])


def test_erase_unused_leaves_the_module_xdsl_dce_leaves() -> None:
    ours, theirs = _module(), _module()
    before = len(list(ours.walk()))
    erase_unused(ours)
    dce(theirs)
    assert str(ours) == str(theirs)
    text = str(ours)
    assert len(list(ours.walk())) < before
    assert "3.0" not in text and text.count("scf.for") == 1 and "arith.addi" not in text
    assert text.count("arith.addf") == 1 and "arith.mulf" not in text and "memref.store" in text
