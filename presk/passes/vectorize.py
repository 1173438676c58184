"""`psk-vectorize`: a tiled contraction's register tile as explicit vector code (PSK-Kernel).

A tiled contraction (`presk.lowering.contraction`) whose column-block loop
carries `psk_kernel.lanes = L` (L > 1) holds m·n scalar running sums per
tile; per k it loads m elements of operand 0 and n consecutive elements of
operand 1 and updates every sum with one `math.fma`. This pass rewrites that
tile into upstream `vector` ops, lanes across the tile's columns, never
across k:

    per k:  a_r  = broadcast(A[row r, k])                     (m broadcasts)
            b_g  = vector.load B[k, col g·L .. g·L+L-1]        (n/L loads)
            acc[r, g] = vector.fma(a_r, b_g, acc[r, g])        (m·n/L fmas)

so every output element receives the same chain as in the scalar code: one
correctly rounded fma per k, in increasing k, from the same initial value.
Lane l of accumulator (r, g) is exactly the scalar sum r·n + g·L + l.

Two patterns, then a clean-up:

1. `VectorizeTileSums` (on the `scf.for` carrying the lanes): finds the
   k loop whose body is the fma grid (and, with a k-block whose loop stays
   in registers, the k-block loop around it, which passes the sums through
   unchanged), checks that each group of L consecutive sums shares its
   operand-0 value and reads operand 1 at L consecutive addresses, and
   rebuilds the loop(s) with m·n/L vector running values. Their initial
   values are packed (below); each old scalar result becomes a
   `vector.extract` of its lane, so the code after the loops is still
   correct as it is.
2. `VectorizeTileStores` (on a `memref.store` inside such a loop): L stores
   at consecutive addresses whose values pack into a vector become one
   `vector.store`. Packing follows the values up: lanes 0..L-1 of one
   vector are that vector; L equal values (or equal constants, or loads of
   one address) are a broadcast; L loads at consecutive addresses are a
   `vector.load` (placed at the first load, so it sees the same memory);
   L ops of one kind (`addf`, `subf`, `mulf`, `select` on one condition,
   `extf`, `truncf`) are that op on the packed operands. This covers the
   epilogue's add (an operand along J is a vector load, one constant along
   J a broadcast), its select on the last k-block, and the running sums kept
   in the output between k-blocks (their initial `select(first, 0, out)` is
   packed the same way).

Pure scalar ops left without uses are erased at the end.

bf16 has no lanes (condition 4; the machine description lists none), so its
tile, with the round trip through bf16 of the epilogue, stays scalar; the
row-wise form has no tile and stays scalar too. The register widths come
from `presk.target`: a lanes attribute that is not a register width of
this machine for the element type is refused (E7002, condition 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects import arith, math, memref, scf, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from presk.target import Machine, target_machine
from presk.ir.locations import error_at
from presk.analysis import constant_int
from presk.lowering.contraction import LANES
from presk.lowering.kernel_builder import vector_broadcast, vector_extract, vector_fma, vector_load, vector_type
from presk.passes.kernel_layout import kernels, refuse, stated

_DTYPES: dict[type, str] = {Float64Type: "f64", Float32Type: "f32", BFloat16Type: "bf16"}


# --------------------------------------------------------------------------- addresses


def _key(v: SSAValue, memo: dict[SSAValue, Any]) -> Any:
    """A structural key of an index value: equal keys, equal values (pure index arithmetic).

    `memo` keeps the keys found during one comparison: a tile's accesses
    share their row and column indices.
    """
    known = memo.get(v)
    if known is not None:
        return known
    owner = v.owner
    constant = constant_int(v)
    if constant is not None:
        key: Any = ("c", constant)
    elif type(owner) is arith.AddiOp or type(owner) is arith.MuliOp:
        lhs, rhs = owner.operands  # type: ignore[union-attr]
        key = (owner.name, _key(lhs, memo), _key(rhs, memo))  # type: ignore[union-attr]
    else:
        key = ("v", id(v))
    memo[v] = key
    return key


def _affine(v: SSAValue, memo: dict[SSAValue, Any]) -> tuple[Any, int]:
    """`v` as (key of a base, constant offset): `x + 3` is (key(x), 3), a constant c is (None, c)."""
    owner = v.owner
    constant = constant_int(v)
    if constant is not None:
        return None, constant
    if type(owner) is arith.AddiOp:
        lhs, rhs = owner.operands
        for a, b in ((lhs, rhs), (rhs, lhs)):
            offset = constant_int(b)
            if offset is not None:
                base, inner = _affine(a, memo)
                return base, inner + offset
    return _key(v, memo), 0


def _contiguous(t: Attribute) -> bool:
    return isinstance(t, MemRefType) and isinstance(t.layout, NoneAttr) and t.get_shape()


def _buffer_and_indices(op: memref.LoadOp | memref.StoreOp) -> tuple[SSAValue, Sequence[SSAValue]]:
    operands = op.operands
    return (operands[0], operands[1:]) if type(op) is memref.LoadOp else (operands[1], operands[2:])


def _address_offsets(ops: Sequence[memref.LoadOp | memref.StoreOp]) -> list[int] | None:
    """The offsets along the last axis of accesses to one buffer that agree on every other index."""
    buffer, indices = _buffer_and_indices(ops[0])
    if not _contiguous(buffer.type):
        return None
    memo: dict[SSAValue, Any] = {}
    lead = [_key(i, memo) for i in indices[:-1]]
    base, _ = _affine(indices[-1], memo)
    offsets = []
    for op in ops:
        other, indices = _buffer_and_indices(op)
        if other != buffer or [_key(i, memo) for i in indices[:-1]] != lead:
            return None
        b, offset = _affine(indices[-1], memo)
        if b != base:
            return None
        offsets.append(offset)
    return offsets


def _consecutive(ops: Sequence[memref.LoadOp | memref.StoreOp]) -> bool:
    offsets = _address_offsets(ops)
    return offsets is not None and offsets == list(range(offsets[0], offsets[0] + len(ops)))


def _same_address(ops: Sequence[memref.LoadOp]) -> bool:
    offsets = _address_offsets(ops)
    return offsets is not None and len(set(offsets)) == 1


# --------------------------------------------------------------------------- packing


@dataclass
class _Pack:
    """How to make one vector from L scalar values (built only once the whole tree is known)."""

    kind: str
    values: tuple[SSAValue, ...]
    children: tuple[_Pack, ...] = ()
    source: SSAValue | None = None
    """`lanes`: the vector; `broadcast`: the scalar; `load`: lane 0's load result; `op`: the condition."""


_ELEMENTWISE = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.ExtFOp, arith.TruncFOp, arith.SelectOp)


def _plan_pack(values: Sequence[SSAValue], lanes: int, block: Block, need_vector: bool = False) -> _Pack | None:
    """A way to pack `values` (one per lane) in `block`, or None.

    `need_vector`: only packings that reach an existing vector somewhere (so
    that unrelated scalar code is left alone).
    """
    plan = _plan(tuple(values), lanes, block)
    if plan is None or (need_vector and not _reaches_vector(plan)):
        return None
    return plan


def _reaches_vector(plan: _Pack) -> bool:
    return plan.kind == "lanes" or any(_reaches_vector(c) for c in plan.children)


def _plan(values: tuple[SSAValue, ...], lanes: int, block: Block) -> _Pack | None:
    first = values[0]
    if not isinstance(first.type, Float32Type | Float64Type | BFloat16Type):
        return None
    if all(v is first for v in values):
        return _Pack("broadcast", values, source=first)
    owners = [v.owner for v in values]
    if not all(isinstance(o, Operation) and o.parent_block() is block for o in owners):
        return None
    kinds = {type(o) for o in owners}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is vector.ExtractOp:
        sources = {o.vector for o in owners}  # type: ignore[union-attr]
        if len(sources) != 1:
            return None
        (source,) = sources
        positions = [tuple(o.static_position.get_values()) for o in owners]  # type: ignore[union-attr]
        t = source.type
        if (
            isinstance(t, VectorType) and t.get_shape() == (lanes,) and not any(o.dynamic_position for o in owners)  # type: ignore[union-attr]
            and positions == [(l,) for l in range(lanes)]
        ):  # fmt: skip
            return _Pack("lanes", values, source=source)
        return None
    if kind is arith.ConstantOp:
        attrs = {o.value for o in owners}  # type: ignore[union-attr]
        if len(attrs) == 1 and isinstance(next(iter(attrs)), FloatAttr):
            return _Pack("broadcast", values, source=first)
        return None
    if kind is memref.LoadOp:
        loads = owners
        if _stored_between(loads):
            return None
        if _consecutive(loads):  # type: ignore[arg-type]
            return _Pack("load", values, source=first)
        if _same_address(loads):  # type: ignore[arg-type]
            return _Pack("broadcast", values, source=first)
        return None
    if kind in _ELEMENTWISE:
        if kind is arith.SelectOp:
            conds = {o.operands[0] for o in owners}
            if len(conds) != 1 or isinstance(next(iter(conds)).type, VectorType):
                return None
            operand_positions = (1, 2)
        else:
            operand_positions = tuple(range(len(first.owner.operands)))  # type: ignore[union-attr]
        if kind in (arith.ExtFOp, arith.TruncFOp) or kind in (arith.AddfOp, arith.SubfOp, arith.MulfOp):
            flags = {o.properties.get("fastmath") for o in owners}  # type: ignore[union-attr]
            if len(flags) != 1:
                return None
        children = []
        for pos in operand_positions:
            child = _plan(tuple(o.operands[pos] for o in owners), lanes, block)  # type: ignore[union-attr]
            if child is None:
                return None
            children.append(child)
        cond = owners[0].operands[0] if kind is arith.SelectOp else None  # type: ignore[union-attr]
        return _Pack("op", values, tuple(children), source=cond)
    return None


def _stored_between(loads: Sequence[Operation]) -> bool:
    """Whether a store to the loads' buffer sits between the first and the last of `loads` (in one block).

    Kernel buffers that are written overlap no other buffer of the launch
    (the host's rule, which the native translation's alias scopes rely on
    too), so only stores to the same buffer matter.
    """
    block = loads[0].parent_block()
    assert block is not None
    buffer = loads[0].operands[0]
    members = set(loads)
    seen = 0
    for op in block.ops:
        if op in members:
            seen += 1
            if seen == len(members):
                return False
        elif seen and any(
            isinstance(o, memref.StoreOp | vector.StoreOp) and o.operands[1] == buffer for o in op.walk()
        ):
            return True
    return False


def _last_in_block(values: Sequence[SSAValue]) -> Operation:
    """The latest of the values' defining ops (all in one block)."""
    owners = {v.owner for v in values}
    block = next(iter(owners)).parent_block()  # type: ignore[union-attr]
    assert block is not None
    last = None
    found = 0
    for op in block.ops:
        if op in owners:
            last = op
            found += 1
            if found == len(owners):  # every one seen: this is the latest
                break
    assert last is not None
    return last


def _insert_after(rewriter: PatternRewriter, anchor: Operation | Block, op: Operation) -> SSAValue:
    point = InsertPoint.at_start(anchor) if isinstance(anchor, Block) else InsertPoint.after(anchor)
    rewriter.insert(op, point)
    return op.results[0]


def _emit_pack(
    rewriter: PatternRewriter, plan: _Pack, lanes: int, cache: dict[SSAValue, SSAValue] | None = None
) -> SSAValue:
    """The vector of `plan`, its ops placed right after what they read (one broadcast per scalar in `cache`)."""
    element = plan.values[0].type
    vt = vector_type(element, lanes)
    if plan.kind == "lanes":
        assert plan.source is not None
        return plan.source
    if plan.kind == "broadcast":
        source = plan.source
        assert source is not None
        if cache is not None and source in cache:
            return cache[source]
        anchor: Operation | Block = source.owner  # type: ignore[assignment]
        value = _insert_after(rewriter, anchor, vector_broadcast(source, vt))
        if cache is not None:
            cache[source] = value
        return value
    if plan.kind == "load":
        load = plan.source.owner  # type: ignore[union-attr]
        assert isinstance(load, memref.LoadOp)
        return _insert_after(rewriter, load, vector_load(load.memref, load.indices, vt))
    children = [_emit_pack(rewriter, c, lanes, cache) for c in plan.children]
    first = plan.values[0].owner
    assert isinstance(first, Operation)
    anchor = _last_in_block(plan.values)
    if isinstance(first, arith.SelectOp):
        new: Operation = arith.SelectOp(plan.source, children[0], children[1])  # type: ignore[arg-type]
    elif isinstance(first, arith.ExtFOp | arith.TruncFOp):
        new = type(first)(children[0], vector_type(first.result.type, lanes))
    else:
        new = type(first)(children[0], children[1])  # type: ignore[call-arg]
    return _insert_after(rewriter, anchor, new)


def _pack_inits(
    rewriter: PatternRewriter, values: Sequence[SSAValue], lanes: int, before: Operation, cache: dict[SSAValue, SSAValue]
) -> SSAValue:
    """A vector of `values` (the initial running sums) available at `before`: packed, else inserted lane by lane."""
    block = before.parent_block()
    assert block is not None
    plan = _plan_pack(values, lanes, block)
    if plan is not None:
        return _emit_pack(rewriter, plan, lanes, cache)
    vt = vector_type(values[0].type, lanes)
    current = rewriter.insert(vector_broadcast(values[0], vt), _before(before)).results[0]
    for lane in range(1, lanes):
        current = rewriter.insert(vector.InsertOp(values[lane], current, [lane]), _before(before)).results[0]
    return current


def _before(op: Operation) -> InsertPoint:
    return InsertPoint.before(op)


# --------------------------------------------------------------------------- the tile's running sums


@dataclass
class _TileSums:
    """The running sums of one register tile, as found in the IR."""

    loops: list[scf.ForOp]
    """The accumulation loops, outermost first (the k loop last); each threads every sum."""
    fmas: list[math.FmaOp]
    """The k loop's fma of each running sum, in iter_args order."""
    lanes: int


def _fma_loop(loop: scf.ForOp) -> list[math.FmaOp] | None:
    """The k loop of a tile: iter_args each updated by one fma `fma(x, w, sum)` and yielded."""
    if not loop.iter_args:
        return None
    body = loop.body.block
    yielded = body.last_op
    if not isinstance(yielded, scf.YieldOp) or any(isinstance(op, scf.ForOp) for op in body.ops):
        return None
    fmas = []
    for i, v in enumerate(yielded.operands):
        op = v.owner
        if not isinstance(op, math.FmaOp) or op.operands[2] is not body.args[i + 1]:
            return None
        if v.uses.get_length() != 1 or body.args[i + 1].uses.get_length() != 1:
            return None
        fmas.append(op)
    return fmas


def find_tile_sums(j_loop: scf.ForOp, lanes: int) -> _TileSums | None:
    """The tile's accumulation loops under the column-block loop `j_loop`, if they vectorise with `lanes`."""
    for loop in j_loop.walk():
        if not isinstance(loop, scf.ForOp) or loop is j_loop:
            continue
        fmas = _fma_loop(loop)
        if fmas is None:
            continue
        loops = [loop]
        # The k-block loop around it (sums in registers): it passes them through.
        while True:
            parent = loops[0].parent_op()
            if not isinstance(parent, scf.ForOp) or parent is j_loop or not parent.iter_args:
                break
            pb = parent.body.block
            inner = loops[0]
            if list(inner.iter_args) != list(pb.args[1:]) or not isinstance(pb.last_op, scf.YieldOp):
                break
            if list(pb.last_op.operands) != list(inner.results):
                break
            if any(a.uses.get_length() != 1 for a in pb.args[1:]) or any(r.uses.get_length() != 1 for r in inner.results):
                break
            loops.insert(0, parent)
        if not _groups_vectorise(fmas, lanes):
            return None
        return _TileSums(loops, fmas, lanes)
    return None


def _groups_vectorise(fmas: Sequence[math.FmaOp], lanes: int) -> bool:
    if len(fmas) % lanes:
        return False
    t = fmas[0].result.type
    if not isinstance(t, Float32Type | Float64Type):
        return False
    for g in range(0, len(fmas), lanes):
        group = fmas[g : g + lanes]
        if any(f.result.type != t for f in group):
            return False
        if len({f.operands[0] for f in group}) != 1:
            return False
        loads = [f.operands[1].owner for f in group]
        if not all(isinstance(op, memref.LoadOp) for op in loads):
            return False
        if loads[0].parent_block() is not fmas[0].parent_block() or not _consecutive(loads):  # type: ignore[arg-type, union-attr]
            return False
        if any(op.memref.type.element_type != t for op in loads):  # type: ignore[union-attr]
            return False
    return True


def _widened(value: SSAValue) -> SSAValue:
    """The value an `arith.extf` widens (a bf16 tile's loads), else `value`."""
    owner = value.owner
    return owner.operands[0] if isinstance(owner, arith.ExtFOp) else value


def tile_rows(loop: scf.ForOp) -> list[int] | None:
    """The rows of a tile's k loop, as LLVM's SLP vectoriser sees them; None if `loop` is no tile's k loop.

    A tile's k loop in scalars (one lane) updates each running sum with one
    fma; the sums that share their operand-0 value and read operand 1 at
    consecutive addresses (bf16's widened to f32 on the way) are a row, which
    SLP packs into vectors across its columns. Each row gives its length; a
    row whose reads are not consecutive gives a 1 per sum. The cost model
    (`presk.cost.quantities`) reads from it the lanes and the independent
    chains the backend runs such a tile at.
    """
    fmas = _fma_loop(loop)
    if fmas is None:
        return None
    rows: dict[SSAValue, list[math.FmaOp]] = {}
    for fma in fmas:
        rows.setdefault(fma.operands[0], []).append(fma)
    lengths: list[int] = []
    for row in rows.values():
        loads = [_widened(fma.operands[1]).owner for fma in row]
        if all(isinstance(op, memref.LoadOp) for op in loads) and _consecutive(loads):  # type: ignore[arg-type]
            lengths.append(len(row))
        else:
            lengths.extend([1] * len(row))
    return lengths


@dataclass
class VectorizeTileSums(RewritePattern):
    """The tile's m·n scalar running sums as m·n/L vectors (see the module doc)."""

    machine: Machine

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        attr = op.attributes.get(LANES)
        if not isinstance(attr, IntegerAttr) or attr.value.data <= 1:
            return
        lanes = attr.value.data
        fmas = [o for o in op.walk() if isinstance(o, math.FmaOp)]
        if not fmas and any(isinstance(o, vector.FMAOp) for o in op.walk()):
            return  # already vectorised
        if not fmas:
            raise error_at(op, "E3003", f"psk-vectorize: a loop states lanes = {lanes} but holds no running sums")
        element = fmas[0].result.type
        dtype = _DTYPES.get(type(element), str(element))
        if dtype not in ("f64", "f32") or lanes not in self.machine.lane_widths(dtype):
            widths = ", ".join(str(w) for w in (1, *(self.machine.lane_widths(dtype) if dtype in ("f64", "f32") else ())))
            raise error_at(
                op,
                "E7002",
                f"psk-vectorize: condition 4: lanes = {lanes} is not a register width of this machine for {dtype}: "
                f"lanes are {widths}",
            )
        tile = find_tile_sums(op, lanes)
        if tile is None:
            raise error_at(
                op,
                "E3003",
                f"psk-vectorize: the loop stating lanes = {lanes} is not the column loop of a register tile whose "
                f"columns come in groups of {lanes} consecutive elements of operand 1, each group updated with one "
                "operand-0 value",
            )
        vt = vector_type(element, lanes)
        count = len(tile.fmas) // lanes
        outer = tile.loops[0]
        scalar_inits = list(outer.iter_args)
        cache: dict[SSAValue, SSAValue] = {}
        inits = [
            _pack_inits(rewriter, scalar_inits[g * lanes : (g + 1) * lanes], lanes, outer, cache) for g in range(count)
        ]
        fmas = tile.fmas
        doomed: set[Operation] = set(fmas)

        def grid(block: Block, sums: list[SSAValue]) -> list[SSAValue]:
            """Per k: a broadcast per row, a vector load per group of columns, a vector fma per (row, group)."""
            broadcasts: dict[SSAValue, SSAValue] = {}
            loads: dict[Operation, SSAValue] = {}
            yields = []
            for g in range(count):
                first = fmas[g * lanes]
                x, load = first.operands[0], first.operands[1].owner
                assert isinstance(load, memref.LoadOp)
                if x not in broadcasts:
                    broadcasts[x] = rewriter.insert(vector_broadcast(x, vt), InsertPoint.at_end(block)).vector
                if load not in loads:
                    vl = vector_load(load.memref, load.indices, vt)
                    loads[load] = rewriter.insert(vl, InsertPoint.at_end(block)).result
                f = rewriter.insert(vector_fma(broadcasts[x], loads[load], sums[g]), InsertPoint.at_end(block))
                yields.append(f.res)
            return yields

        def rebuild(level: int, level_inits: list[SSAValue]) -> scf.ForOp:
            loop = tile.loops[level]
            old = loop.body.block
            block = Block(arg_types=[old.args[0].type, *(vt for _ in range(count))])
            new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, level_inits, block)
            new_loop.attributes.update(loop.attributes)
            rewriter.insert(new_loop, InsertPoint.before(loop))
            rewriter.replace_all_uses_with(old.args[0], block.args[0])
            for o in list(old.ops):
                if o is old.last_op or o in doomed:
                    continue
                o.detach()
                block.add_op(o)
            if level == len(tile.loops) - 1:
                yields = grid(block, list(block.args[1:]))
            else:
                yields = list(rebuild(level + 1, list(block.args[1:])).results)
            rewriter.insert(scf.YieldOp(*yields), InsertPoint.at_end(block))
            return new_loop

        new_outer = rebuild(0, inits)
        # Each old result: its lane of the new vector result.
        anchor: Operation = new_outer
        for i, result in enumerate(list(outer.results)):
            ex = vector_extract(new_outer.results[i // lanes], i % lanes)
            rewriter.insert(ex, InsertPoint.after(anchor))
            anchor = ex
            rewriter.replace_all_uses_with(result, ex.result)
        # The old loops hold only their yields and the scalar fmas now: erase them, innermost first.
        for loop in reversed(tile.loops):
            for o in reversed(list(loop.body.block.ops)):
                rewriter.erase(o, safe_erase=False)
        for loop in reversed(tile.loops):
            rewriter.erase(loop, safe_erase=False)


# --------------------------------------------------------------------------- stores


def _inside_lanes(op: Operation) -> int | None:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, scf.ForOp):
            attr = parent.attributes.get(LANES)
            if isinstance(attr, IntegerAttr) and attr.value.data > 1:
                return attr.value.data
        parent = parent.parent_op()
    return None


@dataclass
class VectorizeTileStores(RewritePattern):
    """L consecutive scalar stores of values that pack into a vector: one `vector.store`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.StoreOp, rewriter: PatternRewriter) -> None:
        lanes = _inside_lanes(op)
        if lanes is None:
            return
        # The L stores, in order; between them only ops that neither store nor read the stored buffer.
        stores: list[memref.StoreOp] = [op]
        nxt = op.next_op
        while len(stores) < lanes and nxt is not None:
            if isinstance(nxt, memref.StoreOp):
                stores.append(nxt)
            elif nxt.regions or isinstance(nxt, vector.StoreOp) or (
                isinstance(nxt, memref.LoadOp | vector.LoadOp) and nxt.operands[0] == op.memref
            ):
                return
            nxt = nxt.next_op
        if len(stores) != lanes or not _consecutive(stores):
            return
        block = op.parent_block()
        assert block is not None
        plan = _plan_pack([s.value for s in stores], lanes, block, need_vector=True)
        if plan is None or plan.values[0].type != op.memref.type.element_type:  # type: ignore[attr-defined]
            return
        value = _emit_pack(rewriter, plan, lanes, {})
        rewriter.insert(vector.StoreOp(value, op.memref, list(op.indices)), _before(stores[-1]))
        for s in stores:
            rewriter.erase(s)


@dataclass(frozen=True)
class VectorizeContractions(ModulePass):
    """`psk-vectorize`: explicit vector code for the register tiles of contractions that state lanes."""

    name = "psk-vectorize"

    machine: Machine | None = field(default=None, compare=False)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        machine = self.machine if self.machine is not None else target_machine()
        for k in kernels(op):  # lanes still pending live on a structured contract: psk-tile records them
            if isinstance(stated(k).get("lanes"), int) and stated(k)["lanes"] > 1:
                raise refuse(k, None, "lanes", "the layout's lanes are not on a loop yet: run psk-tile before psk-vectorize")
        sums = PatternRewriteWalker(VectorizeTileSums(machine), apply_recursively=False)
        if not sums.rewrite_module(op):
            return
        # One walk: each group of stores packs from values the sums' rewrite already made, never from
        # another group's, so nothing a rewrite inserts is matched again.
        PatternRewriteWalker(VectorizeTileStores(), apply_recursively=False).rewrite_module(op)
        erase_unused(op)  # the scalar loads, fmas and constants the vectors replaced


def erase_unused(module: ModuleOp) -> None:
    """Erase every pure op whose results are unused, as a dead-code pass does, in one walk.

    Why one walk suffices: an op's users come after it (or inside a region
    after it), so visiting the ops in reverse sees each op once all its
    users have been decided. Why not xDSL's `dce`: it reaches the same
    fixpoint through a pattern walker that builds a rewriter per op, a
    quarter of this pass's time on a register tile's hundreds of scalar ops.
    """
    for op in reversed(list(module.walk())):
        if op is not module and op.parent is not None and is_trivially_dead(op):
            Rewriter.erase_op(op)
