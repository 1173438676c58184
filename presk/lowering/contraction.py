"""The contraction nests: out[outer, I, J] = Σ_K a[outer, I, K] · b[.., K, J], at their layout.

Every layout gives every output element the same chain: the FMA of its
terms in increasing k, starting from zero, in the arithmetic type. The
layout changes only where the running sums live and in which order the
elements are visited, so every point of the space computes the default's
bits. What each decision becomes:

- `form`: "tiled" keeps a tile's running sums in registers (`scf.for`
  `iter_args`); "row-wise" keeps them in the output row from one k to the
  next (zeroed first, then one FMA per k and column, read and written back).
- `tile` [m_i, n_j]: the block loops step over tiles of m_i rows and n_j
  columns; the body holds m_i·n_j accumulators, loads m_i elements of
  operand 0 and n_j of operand 1 per k, and stores the tile once. A tile
  that does not divide its axis runs ⌈I / m_i⌉ (or ⌈J / n_j⌉) blocks, the
  last one shifted back to end at the axis's end (`_tile_indices`): its
  overlap with the block before it is computed again by the same chains and
  stored again with the same bits. That needs m_i ≤ I and n_j ≤ J
  (condition 3); under a k-block loop that encloses the block loop, see
  below.
- `kblock` (32, 128): the k loop becomes a loop over blocks of K and one
  within each block, k = block·size + within, still in increasing k. A
  k-block that does not divide K cuts its last block short: the loop
  within block b runs over [b·size, min(b·size + size, K)).
- the summed axes of a TN contraction (both operands carry them before I
  and J, `Contraction.tn`): K is the innermost, which the k-block divides;
  the others (`Contraction.k_outer`) loop once each, outermost first, just
  outside K's loops, so each chain adds its terms in the order of their
  flat index. Where the k-block loop encloses I or J they sit at its place
  in the order, and a tile's sums start from zero (and take the epilogue)
  at the first (last) block of that flat index.
- `jblock` (256, 512, 1024 columns, a multiple of n_j): a loop over blocks
  of J encloses the block loops, and the J block loop steps over the tiles
  of one block (the last block cut short where it does not divide J's
  tiles). It only reorders the tiles; each keeps its chain. With K
  outermost inside it (KIJ, KJI) that is BLIS's loop over n_c: a k-block of
  operand 1's block stays in L2 while every row's tiles read it.
- `order`: the block loops, outermost first. Without a k-block "IJ" or
  "JI". With one, a permutation of "IJK": when K is the innermost block
  loop ("IJK", "JIK") the running sums stay in registers across blocks;
  when the k-block loop encloses the I or J block loop, each tile's sums
  are kept in the OUTPUT buffer between blocks (read back at every block
  but the first, which starts from zero through a select), which is exact
  only when the storage type is the arithmetic type (condition 7, checked
  by the caller). A block loop the k-block loop encloses cannot shift its
  last tile: the tile would read sums that already hold the current block
  of K and add it again. Along I the last tile's rows past the axis's end
  are clamped to its last row instead (`_clamped_indices`); along J, whose
  columns are the lanes, the tile divides the axis (condition 3).
- `lanes`: recorded here as `psk_kernel.lanes = L` on the loop over the
  tile's columns (the J block loop, whose body holds the n_j unrolled
  columns; the row-wise form's inner column loop), and applied by
  `psk-vectorize` (`presk.passes.vectorize`, the last of the layout passes): the tile's running sums become m·n/L vectors of L
  lanes across its columns (a broadcast of operand 0 per row, a vector load
  of operand 1 per L columns, a vector fma each, per k), and its stores
  vector stores. The lanes never run across k, so each element keeps its
  chain. bf16 has no lanes; the row-wise form has none either.
- `pack`: done at the host level by `psk-pack` (`presk.passes.pack`):
  operand 1 of an NT contraction copied to a panel (outer axes..., K, J) by
  `emit_pack`, which the contraction then reads as NN; operand 1 of an NN
  contraction copied to a blocked panel (outer axes..., ⌈J/n_j⌉, K, n_j) by
  `emit_blocked_pack`, which the tile reads one block at a time
  (`ContractionOperands.b_block`); its blocks hold the columns of the
  tile's J blocks, the last one shifted back as the tile is.
- `split`: done on the finished kernel (`psk-split`, `presk.passes.split.apply_split`), but for
  the row-wise form's J loop, which sits inside the serial k loop: split, it
  is emitted outermost (`by_columns`).
- `epilogue`: `Epilogue` adds the add's other operand to each output element (or multiplies by the mul's)
  once its sum is done: in f64/f32 in the register before the store; in
  bf16 the sum is rounded to bf16 and widened back (the store and the read
  of the add's kernel), then added, then stored. Under a k-block whose loop
  encloses I or J, the addition belongs to the last block (a select on the
  block variable); in the row-wise form it is one more sweep of the row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, Float64Type, IntegerAttr, MemRefType, i64
from xdsl.ir import Attribute, SSAValue

from presk.dialects.psk_kernel import PREFETCH_AHEAD
from presk.dialects.psk_realize_nests import Contraction
from presk.lowering.kernel_builder import KernelBuilder, Loop
from presk.lowering.nests import Operand, Scalar, accumulate

LANES = "psk_kernel.lanes"
"""Integer attribute of the loop over a tile's columns: the vector width the layout states."""

PANEL_PREFETCH_BYTES = 4096
"""How far ahead of its k a tile asks for operand 0's packed panel ([..., ⌈I/m⌉, K..., m]).

A tile streams its panel (m elements a k) once per J block, one contiguous
stream, which two threads reading at once do not get fast enough from the
hardware prefetchers alone (an NN tile's operand 0 is m rows, m streams,
which they follow): `xᵀ · ct` at [1536, 384] over 8 × 256 terms, f32, tile
[8, 32], 2 threads, took 9.1–10.4 ms without and 7.3–7.8 with the line
4 KiB ahead requested at each k; 2 and 8 KiB did as well, 1 KiB less; on
one thread it changed nothing measurable (docs/performance.md, "Operand 0's
panel requested ahead")."""

PACK_LANES: dict[type, int] = {Float32Type: 16, Float64Type: 8}
"""The block of a pack's register transpose per element type: one 512-bit register per row (LLVM
splits a vector wider than the machine's registers, so any x86-64 runs it)."""


@dataclass(frozen=True)
class ContractionOperands:
    """The axis labels of a contraction nest's two operands and output, outer axes first."""

    c: Contraction
    a_labels: tuple[str, ...]
    b_labels: tuple[str, ...]
    out_labels: tuple[str, ...]
    sizes: Mapping[str, int]
    b_block: int | None = None
    """Operand 1 is a blocked panel [outer..., ⌈J/n⌉, K, n] of n = `b_block` columns (`psk-pack` on NN)."""
    a_block: int | None = None
    """Operand 0 of a TN contraction is a blocked panel [outer..., ⌈I/m⌉, K..., m] of m = `a_block` rows."""


@dataclass(frozen=True)
class Epilogue:
    """The add or mul folded into a product's kernel: its other operand, and on which side it is."""

    operand: Operand
    product_first: bool
    """True for `add(product, other)`, False for `add(other, product)` (the operand order is kept)."""
    op: str = "add"
    """`add` or `mul`: what the folded kernel did with the product's element and the other operand."""


@dataclass(frozen=True)
class TiledLayout:
    """The decisions of the tiled form, resolved."""

    m: int
    n: int
    kblock: int | None
    order: str
    jblock: int | None = None
    """Columns per block of the loop over blocks of J around the block loops, or None (no such loop)."""

    @property
    def sums_in_output(self) -> bool:
        """Whether the k-block loop encloses the I or J block loop (running sums kept in the output)."""
        return self.kblock is not None and self.order[-1] != "K"

    @property
    def enclosed(self) -> str:
        """The block loops the k-block loop encloses ("" where the running sums stay in registers)."""
        return self.order[self.order.index("K") + 1 :] if self.kblock is not None else ""

    def clamps_rows(self, i_size: int | None) -> bool:
        """Whether the I block loop's last tile clamps its rows past I's end (`_clamped_indices`) instead of
        shifting back: the k-block loop encloses it and m does not divide I (unbound: decided at launch).

        A panel of operand 0 holds whole blocks of the tile's rows, not clamped ones, so `psk-pack` packs
        operand 0 only where this is false.
        """
        return "I" in self.enclosed and i_size is not None and i_size % self.m != 0

    def block_loop_parallel(self, letter: str, extent: int | None) -> bool:
        """Whether the I or J block loop (`letter`, over an axis of `extent`) may run its iterations at once.

        Its last tile, where the block does not divide the axis, is shifted
        back over the tile before it (`_tile_indices`), so two iterations
        share those elements. That is harmless while each tile writes its
        finished sums once (both write the same bits), but where the running
        sums wait in the output buffer between blocks of K and the k-block
        loop runs inside this one, each iteration reads back the shared
        elements' partial sums between its blocks: run at once, one reads
        what the other has just written and adds a block of K twice. So the
        loop is serial there, and a split cannot divide it (condition 8; the
        executor splits only parallel loops).
        """
        block = self.m if letter == "I" else self.n
        shifted = extent is not None and extent % block != 0  # unbound: the launch shapes' check decides
        return not (self.sums_in_output and letter not in self.enclosed and shifted)

    def jblock_loop_parallel(self, extent: int | None) -> bool:
        """Whether the loop over blocks of J (J of `extent`) may run its iterations at once.

        It encloses the k-block loop, so it is serial exactly where a J
        block loop outside the k-block loop would be: the last tile, shifted
        back into the block before it, shares sums that wait in the output.
        """
        shifted = extent is not None and extent % self.n != 0
        return not (self.sums_in_output and shifted)


def tiled_layout(layout: Mapping[str, Any]) -> TiledLayout:
    """The tile, k-block and order of a resolved layout (their defaults where absent)."""
    tile = layout.get("tile")
    m, n = tile if isinstance(tile, list) and len(tile) == 2 else (1, 1)
    size = _block_size(layout.get("kblock", "none"))
    order = layout.get("order")
    if not isinstance(order, str) or ("K" in order) != (size is not None):
        order = "IJK" if size is not None else "IJ"
    return TiledLayout(m, n, size, order, _block_size(layout.get("jblock", "none")))


def _block_size(value: Any) -> int | None:
    """A k-block's or J-block's size as a layout states it, or None for `"none"`."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def lanes_attribute(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def emit_contraction(
    kb: KernelBuilder, co: ContractionOperands, a: Operand, b: Operand, out: SSAValue,
    layout: Mapping[str, Any], arith_type: Attribute, epilogue: Epilogue | None = None,
    lanes: int | None = None, by_columns: bool = False,
) -> None:  # fmt: skip
    """out[outer, I, J] = Σ_K a[outer, I, K] · b[.., K, J], at the nest's layout.

    `layout` is resolved (stated decisions over the defaults) and already
    checked against the shapes and types; `lanes`, when not None, is
    recorded on the column loop. `by_columns` (row-wise form only) puts the
    loop over J outermost, for a split of the row-wise form's J loop (its
    loop at depth outer + 2, inside the serial k loop): each column's chain
    is unchanged, and the runner divides the kernel's outermost loop.
    """
    c, sizes = co.c, co.sizes
    outer = [sizes[n] for n in c.outer]
    assert co.b_block is None or layout.get("form") != "row-wise", "a blocked panel is read by a tile"
    if by_columns:
        _row_wise_by_columns(kb, co, a, b, out, arith_type, epilogue, lanes)
        return
    with kb.nest(outer) as outer_ivs:
        base = dict(zip(c.outer, outer_ivs))
        if layout.get("form") == "row-wise":
            _row_wise(kb, co, a, b, out, base, arith_type, epilogue, lanes)
        else:
            _tiled(kb, co, a, b, out, base, tiled_layout(layout), arith_type, epilogue, lanes)


def _at(labels: Sequence[str], where: Mapping[str, SSAValue]) -> list[SSAValue]:
    return [where[n] for n in labels]


def _storage(out: SSAValue) -> Attribute:
    assert isinstance(out.type, MemRefType)
    return out.type.element_type


def _with_epilogue(
    kb: KernelBuilder, value: Scalar, out: SSAValue, epilogue: Epilogue, where: Mapping[str, SSAValue],
    arith_type: Attribute,
) -> Scalar:  # fmt: skip
    """The add's (or mul's) value at one output element, from the product's finished sum.

    The separate kernels round the sum to the storage type and read it back;
    in f64/f32 that is the identity, in bf16 a rounding, done here in the
    register (truncf, extf) as the store and the add's load would do it.
    """
    storage = _storage(out)
    if storage != arith_type:
        value = kb.convert(kb.convert(value, storage), arith_type)
    other = epilogue.operand.read(kb, where, arith_type)
    combine = kb.mulf if epilogue.op == "mul" else kb.addf
    return combine(value, other) if epilogue.product_first else combine(other, value)


def _row_wise(
    kb: KernelBuilder, co: ContractionOperands, a: Operand, b: Operand, out: SSAValue,
    base: Mapping[str, SSAValue], arith_type: Attribute, epilogue: Epilogue | None, lanes: int | None,
) -> None:  # fmt: skip
    """The running sums live in the output row: zeroed, then one FMA per k and column (storage = arithmetic)."""
    c, sizes = co.c, co.sizes
    n_i, n_j = sizes[c.i], sizes[c.j]
    with kb.loop(n_i, parallel=True) as li:
        row = {**base, c.i: li.iv}
        with kb.loop(n_j, parallel=True) as lj:
            kb.store(kb.real(0.0, arith_type), out, _at(co.out_labels, {**row, c.j: lj.iv}))
        with kb.nest(_summed_sizes(co), parallel=False) as kivs:
            where = {**row, **dict(zip(c.summed, kivs))}
            x = kb.load_real(a.buffer, _at(co.a_labels, where), arith_type)  # type: ignore[arg-type]
            with kb.loop(n_j, parallel=True) as lj:
                if lanes is not None:
                    lj.op.attributes[LANES] = lanes_attribute(lanes)
                cell = _at(co.out_labels, {**where, c.j: lj.iv})
                w = kb.load_real(b.buffer, _at(co.b_labels, {**where, c.j: lj.iv}), arith_type)  # type: ignore[arg-type]
                kb.store(kb.fma(x, w, kb.load(out, cell)), out, cell)
        if epilogue is not None:
            with kb.loop(n_j, parallel=True) as lj:
                at = {**row, c.j: lj.iv}
                cell = _at(co.out_labels, at)
                total = kb.load_real(out, cell, arith_type)
                kb.store_real(_with_epilogue(kb, total, out, epilogue, at, arith_type), out, cell)


def _row_wise_by_columns(
    kb: KernelBuilder, co: ContractionOperands, a: Operand, b: Operand, out: SSAValue, arith_type: Attribute,
    epilogue: Epilogue | None, lanes: int | None,
) -> None:  # fmt: skip
    """The row-wise form with its J loop outermost: each output element zeroed, its chain, its epilogue."""
    c, sizes = co.c, co.sizes
    n_i, n_j = sizes[c.i], sizes[c.j]
    with kb.loop(n_j, parallel=True) as lj:
        if lanes is not None:
            lj.op.attributes[LANES] = lanes_attribute(lanes)
        with kb.nest([sizes[n] for n in c.outer]) as outer_ivs:
            with kb.loop(n_i, parallel=True) as li:
                at = {**dict(zip(c.outer, outer_ivs)), c.i: li.iv, c.j: lj.iv}
                cell = _at(co.out_labels, at)
                kb.store(kb.real(0.0, arith_type), out, cell)
                with kb.nest(_summed_sizes(co), parallel=False) as kivs:
                    where = {**at, **dict(zip(c.summed, kivs))}
                    x = kb.load_real(a.buffer, _at(co.a_labels, where), arith_type)  # type: ignore[arg-type]
                    w = kb.load_real(b.buffer, _at(co.b_labels, where), arith_type)  # type: ignore[arg-type]
                    kb.store(kb.fma(x, w, kb.load(out, cell)), out, cell)
                if epilogue is not None:
                    total = kb.load_real(out, cell, arith_type)
                    kb.store_real(_with_epilogue(kb, total, out, epilogue, at, arith_type), out, cell)


def _tiled(
    kb: KernelBuilder, co: ContractionOperands, a: Operand, b: Operand, out: SSAValue,
    base: Mapping[str, SSAValue], tl: TiledLayout, arith_type: Attribute, epilogue: Epilogue | None,
    lanes: int | None,
) -> None:  # fmt: skip
    """Block loops in the layout's order over tiles of [m, n]; each tile's chains in increasing k."""
    c, sizes = co.c, co.sizes
    n_i, n_j, n_k = sizes[c.i], sizes[c.j], sizes[c.k]
    m, n, size = tl.m, tl.n, tl.kblock
    assert co.b_block in (None, n), "a blocked panel's blocks are the tile's columns"
    assert co.a_block in (None, m), "a blocked panel's blocks are the tile's rows"
    assert co.a_block is None or not tl.clamps_rows(n_i), "an operand 0 panel's last block is shifted"
    assert m <= n_i and n <= n_j, "condition 3: a tile fits in the output"
    assert "J" not in tl.enclosed or n_j % n == 0, "condition 3: a J block loop the k-block loop encloses has no shifted last tile"
    assert tl.jblock is None or (tl.jblock % n == 0 and tl.jblock <= n_j), "condition 3: a J-block holds whole tiles"
    counts = {"I": blocks(n_i, m), "J": blocks(n_j, n), "K": blocks(n_k, size) if size is not None else 1}
    # In registers, the k-block loop is the outer of the two k loops around the tile's body.
    letters = tl.order if tl.sums_in_output else tl.order.replace("K", "")
    k_outer = [sizes[name] for name in c.k_outer]
    with ExitStack() as stack:
        ivs: dict[str, SSAValue] = {}
        outer_k: dict[str, SSAValue] = {}  # the summed axes besides K, where the k-block loop encloses I or J
        j_block = None  # the counter of the loop over blocks of J, of `per_block` tiles each
        per_block = tl.jblock // n if tl.jblock is not None else counts["J"]
        if tl.jblock is not None:
            j_block = stack.enter_context(kb.loop(blocks(counts["J"], per_block), parallel=tl.jblock_loop_parallel(n_j))).iv
        for letter in letters:
            if letter == "K":
                outer_k = {name: stack.enter_context(kb.loop(size)).iv for name, size in zip(c.k_outer, k_outer)}
            parallel = letter != "K" and tl.block_loop_parallel(letter, {"I": n_i, "J": n_j}[letter])
            if letter == "J" and j_block is not None:
                loop, ivs["J"] = _tiles_of_block(kb, stack, j_block, per_block, counts["J"], parallel)
            else:
                loop = stack.enter_context(kb.loop(counts[letter], parallel=parallel))
                ivs[letter] = loop.iv
            if letter == "J" and lanes is not None:
                loop.op.attributes[LANES] = lanes_attribute(lanes)
        rows = (_clamped_indices if "I" in tl.enclosed else _tile_indices)(kb, ivs["I"], m, n_i)
        cols = _tile_indices(kb, ivs["J"], n, n_j)
        zero = kb.real(0.0, arith_type)
        cells = [_at(co.out_labels, {**base, c.i: rows[r], c.j: cols[s]}) for r in range(m) for s in range(n)]

        def b_at(where: Mapping[str, SSAValue], s: int) -> list[SSAValue]:
            if co.b_block is None:
                return _at(co.b_labels, {**where, c.j: cols[s]})
            # The blocked panel: the tile's columns are block J's n (n = b_block), its column s at s.
            b_outer = co.b_labels[: -len(c.summed) - 1]
            return [*_at(b_outer, where), ivs["J"], *_at(c.summed, where), kb.index(s)]

        def a_at(where: Mapping[str, SSAValue], r: int) -> list[SSAValue]:
            if co.a_block is None:
                return _at(co.a_labels, {**where, c.i: rows[r]})
            # The blocked panel: block I's m rows side by side at each k, row r at r.
            a_outer = co.a_labels[: -len(c.summed) - 1]
            return [*_at(a_outer, where), ivs["I"], *_at(c.summed, where), kb.index(r)]

        # With its sums in registers a tile reads its panel straight through K; where the k-block loop
        # encloses I or J, the line ahead is the tile's next k-block, read only after every other tile.
        streams_panel = co.a_block is not None and not tl.sums_in_output

        def step_at(summed: Mapping[str, SSAValue], accs: list[Scalar]) -> list[Scalar]:
            where = {**base, **summed}
            xs = []
            for r in range(m):
                x = kb.load(a.buffer, a_at(where, r))  # type: ignore[arg-type]
                if r == 0 and streams_panel:  # the panel's m elements of a k share a line: one request
                    x.owner.attributes[PREFETCH_AHEAD] = IntegerAttr(PANEL_PREFETCH_BYTES, i64)  # type: ignore[union-attr]
                xs.append(kb.convert(x, arith_type))
            ws = [kb.load_real(b.buffer, b_at(where, s), arith_type) for s in range(n)]  # type: ignore[arg-type]
            return [kb.fma(xs[r], ws[s], accs[r * n + s]) for r in range(m) for s in range(n)]

        if not tl.sums_in_output:

            def over_k(outer: Mapping[str, SSAValue], accs: list[Scalar]) -> list[Scalar]:
                """The chains' steps over K (in blocks where there is a k-block), from `accs`."""
                if size is None:
                    return accumulate(kb, [n_k], accs, lambda kivs, a: step_at({**outer, c.k: kivs[0]}, a))
                if n_k % size == 0:
                    return accumulate(
                        kb, [counts["K"], size], accs,
                        lambda kivs, a: step_at({**outer, c.k: kb.offset(kivs[0], size, kivs[1])}, a),
                    )  # fmt: skip
                with kb.loop(counts["K"], inits=accs) as k_blocks:
                    k_blocks.yields = _within_block(
                        kb, k_blocks.iv, size, n_k, k_blocks.args, lambda k, a: step_at({**outer, c.k: k}, a)
                    )
                return k_blocks.results

            # The summed axes besides K, outermost first, around K's loops: the order of their flat index.
            sums = accumulate(kb, k_outer, [zero] * (m * n), lambda kivs, accs: over_k(dict(zip(c.k_outer, kivs)), accs))
            for r in range(m):
                for s in range(n):
                    value = sums[r * n + s]
                    if epilogue is not None:
                        at = {**base, c.i: rows[r], c.j: cols[s]}
                        value = _with_epilogue(kb, value, out, epilogue, at, arith_type)
                    kb.store_real(value, out, cells[r * n + s])
            return
        # The k-block loop encloses I or J: each tile's sums wait in the output between blocks.
        block = ivs["K"]
        # Every block of K, the other summed axes' included, in the order of their flat index.
        flat = _flat_block(kb, outer_k, sizes, block, counts["K"])
        first = kb.add(arith.CmpiOp(flat, kb.index(0), "eq"))
        inits = [kb.select(first, zero, kb.load_real(out, cell, arith_type)) for cell in cells]
        sums = _within_block(kb, block, size, n_k, inits, lambda k, a: step_at({**outer_k, c.k: k}, a))  # type: ignore[arg-type]
        total = counts["K"] * math.prod(sizes[name] for name in c.k_outer)
        last = kb.add(arith.CmpiOp(flat, kb.index(total - 1), "eq")) if epilogue is not None else None
        for r in range(m):
            for s in range(n):
                value = sums[r * n + s]
                if epilogue is not None:
                    at = {**base, c.i: rows[r], c.j: cols[s]}
                    value = kb.select(last, _with_epilogue(kb, value, out, epilogue, at, arith_type), value)  # type: ignore[arg-type]
                kb.store_real(value, out, cells[r * n + s])


def _tiles_of_block(
    kb: KernelBuilder, stack: ExitStack, block: SSAValue, per_block: int, tiles: int, parallel: bool
) -> tuple[Loop, SSAValue]:  # fmt: skip
    """The J block loop inside block `block` of J: its loop, and the index of its tile along J.

    Block b holds tiles [b·per_block, min(b·per_block + per_block, tiles)):
    a loop of `per_block` where that divides the tiles (the tile index
    b·per_block + t), else a loop over those bounds, cut short at the last
    block as a k-block is (`_within_block`), so that no tile runs twice.
    """
    if tiles % per_block == 0:
        loop = stack.enter_context(kb.loop(per_block, parallel=parallel))
        return loop, kb.offset(block, per_block, loop.iv)
    lower = kb.offset(block, per_block, 0)
    upper = kb.min_index(kb.offset(lower, 1, per_block), kb.index(tiles))
    loop = stack.enter_context(kb.span(lower, upper, parallel=parallel))
    return loop, loop.iv


def _summed_sizes(co: ContractionOperands) -> list[int]:
    """The extents of the summed axes, outermost first (K last)."""
    return [co.sizes[name] for name in co.c.summed]


def _flat_block(kb: KernelBuilder, outer: Mapping[str, SSAValue], sizes: Mapping[str, int], block: SSAValue, blocks: int) -> SSAValue:
    """The flat index of (the summed axes besides K, the k-block): 0 at the first block of K, the count less one at the last."""
    flat: SSAValue | None = None
    for name, iv in outer.items():
        flat = iv if flat is None else kb.offset(flat, sizes[name], iv)
    return block if flat is None else kb.offset(flat, blocks, block)


def blocks(extent: int, block: int) -> int:
    """The iterations of a block loop: ⌈extent / block⌉, the last block shifted back or cut short."""
    return -(-extent // block)


def _tile_indices(kb: KernelBuilder, iv: SSAValue, count: int, extent: int) -> list[SSAValue]:
    """The `count` consecutive rows (or columns) of block `iv` along an axis of `extent`.

    Where the tile divides the axis, block b holds b·count + r. Otherwise the
    last block is shifted back to end at the axis's end: block b starts at
    min(b·count, extent − count), so it overlaps the block before it. The
    overlapped elements are computed again by the same chain (zero, then
    one FMA per k in increasing k, in registers) and stored again with the
    bits they already hold. That holds only where each tile's whole chain
    runs before it is stored, so a block loop the k-block loop encloses
    (`TiledLayout.enclosed`, its sums waiting in the output between blocks
    of K) never shifts: the lowering's callers refuse it (condition 3).
    The indices stay consecutive from one start, so the tile's lanes load
    and store them as vectors from an unaligned column.
    """
    if extent % count == 0:
        return [kb.offset(iv, count, r) for r in range(count)]
    start = _shifted_start(kb, iv, count, extent)
    return [kb.offset(start, 1, r) for r in range(count)]


def _clamped_indices(kb: KernelBuilder, iv: SSAValue, count: int, extent: int) -> list[SSAValue]:
    """The `count` rows of block `iv`, those past the axis's end clamped to its last row.

    For an I block loop the k-block loop encloses (`TiledLayout.enclosed`),
    where a shifted last tile would add a block of K twice to the rows it
    shares with the tile before it. Row r of block b is min(b·count + r,
    extent − 1): the last block's rows past the end all compute the axis's
    last row, each from the same running sum (every tile reads its sums
    before it stores any) by the same chain, and store the same bits to it.
    No row outside the last block is touched, so a split of the I loop
    gives each row one worker. Rows below extent mod count never pass the
    end and need no clamp. Only rows: a tile's columns are its lanes, which
    load and store consecutive addresses.
    """
    if extent % count == 0:
        return _tile_indices(kb, iv, count, extent)
    last = kb.index(extent - 1)
    return [
        kb.offset(iv, count, r) if r < extent % count else kb.min_index(kb.offset(iv, count, r), last)
        for r in range(count)
    ]


def _shifted_start(kb: KernelBuilder, iv: SSAValue, count: int, extent: int) -> SSAValue:
    """min(iv·count, extent − count): block iv's first index, the last block ending at the axis's end."""
    return kb.min_index(kb.offset(iv, count, 0), kb.index(extent - count))


def _within_block(
    kb: KernelBuilder, block: SSAValue, size: int, n_k: int, inits: list[Scalar],
    step_at: Callable[[SSAValue, list[Scalar]], list[Scalar]],
) -> list[Scalar]:  # fmt: skip
    """The chains' steps over block `block` of K, in increasing k, from `inits`.

    A k-block that divides K runs `size` values of k from block·size. One
    that does not runs [block·size, min(block·size + size, K)): the last
    block is cut short rather than shifted, since every block adds its terms
    to the same running sums and an overlapping block would add some twice.
    """
    if n_k % size == 0:
        return accumulate(kb, [size], inits, lambda kivs, accs: step_at(kb.offset(block, size, kivs[0]), accs))
    lower = kb.offset(block, size, 0)
    upper = kb.min_index(kb.offset(lower, 1, size), kb.index(n_k))
    with kb.span(lower, upper, inits) as within:
        within.yields = step_at(within.iv, within.args)
    return within.results


def emit_pack(kb: KernelBuilder, source: SSAValue, panel: SSAValue, order: Sequence[int]) -> None:
    """panel[p] = source[p permuted]: a copy in the storage type, every loop parallel.

    `order[d]` is the axis of `source` that panel axis d reads; the bits
    move unchanged (no conversion).
    """
    assert isinstance(panel.type, MemRefType)
    shape = list(panel.type.get_shape())
    rank = len(shape)
    lanes = PACK_LANES.get(type(panel.type.element_type))
    swaps_last_two = list(order) == [*range(rank - 2), rank - 1, rank - 2]
    if lanes is not None and swaps_last_two and shape[-1] % lanes == 0 and shape[-2] % lanes == 0:
        _emit_transposed_blocks(kb, source, panel, lanes)
        return
    with kb.nest(shape) as ivs:
        kb.store(kb.load(source, [ivs[order.index(d)] for d in range(len(order))]), panel, list(ivs))


PACK_ROWS = 16
"""Rows of the source a blocked pack copies together, column block after column block: 16 rows of a
[8, 256, 1536] f32 operand are 96 KiB read in order, each block's 16 × 32 bytes written as one run."""


def emit_blocked_pack(kb: KernelBuilder, source: SSAValue, panel: SSAValue, summed: int = 1) -> None:
    """panel[..., jb, k..., s] = source[..., k..., j0(jb) + s]: operand 1 of an NN contraction in blocks of n columns.

    `summed` is the number of summed axes operand 1 carries before J (K,
    and a TN contraction's other summed axes), kept after the block axis.

    Block jb holds the columns of the tile's J block jb (`_tile_indices`):
    j0(jb) = jb·n, and where n does not divide J the last block is shifted
    back to end at J's end, min(jb·n, J − n), so its first columns repeat
    the block before it. Both sides run along the innermost loop (n
    consecutive elements), so LLVM copies a block's row with vector loads
    and stores; every loop is parallel and the bits move unchanged. A row
    narrower than `PACK_LANES` (operand 0's blocks of a tile's 8 rows) is
    one `vector.load` and one `vector.store` of n lanes: as a loop of n
    copies it ran behind the streaming stores' alignment peel, never
    reaching their vector part, and the course GPT's [8, 256, 1536] f32
    panel in blocks of 8 took 3.05 ms a launch where the same bytes in
    blocks of 32 took 0.94 (2.1 ms as vectors of 8, in its `loss_grad`).

    The source is read in its own order, `PACK_ROWS` rows at a time (every
    row when they do not divide the last summed axis), all the column
    blocks of those rows before the next: copying block by block read n
    elements of each row a row apart, a page for the MLP's activations,
    which the prefetchers do not follow (the [8, 256, 1536] f32 pack of the
    course GPT's MLP gradient: 3.2 → 1.8 ms a launch in its `loss_grad`).
    """
    assert isinstance(panel.type, MemRefType) and isinstance(source.type, MemRefType)
    shape = panel.type.get_shape()
    outer, count, k_sizes, n = shape[: -summed - 2], shape[-summed - 2], shape[-summed - 1 : -1], shape[-1]
    j_size = source.type.get_shape()[-1]
    rows = PACK_ROWS if k_sizes[-1] % PACK_ROWS == 0 else 1
    lanes = PACK_LANES.get(type(panel.type.element_type))
    as_vector = lanes is not None and 1 < n < lanes
    counts = [*outer, *k_sizes[:-1], k_sizes[-1] // rows, count, *([rows] if rows > 1 else []), *([] if as_vector else [n])]
    with kb.nest(counts) as all_ivs:
        ivs, ks = all_ivs[: len(outer)], all_ivs[len(outer) : len(outer) + summed]
        jb = all_ivs[len(outer) + summed]
        if rows > 1:
            ks = [*ks[:-1], kb.offset(ks[-1], rows, all_ivs[-1 if as_vector else -2])]

        def column(s: int | SSAValue) -> SSAValue:
            if j_size % n == 0:
                return kb.offset(jb, n, s)
            return kb.offset(_shifted_start(kb, jb, n, j_size), 1, s)

        if as_vector:
            row = kb.vector_load(source, [*ivs, *ks, column(0)], n)
            kb.vector_store(row, panel, [*ivs, jb, *ks, kb.index(0)])
        else:
            s = all_ivs[-1]
            kb.store(kb.load(source, [*ivs, *ks, column(s)]), panel, [*ivs, jb, *ks, s])


def emit_transposed_blocked_pack(kb: KernelBuilder, source: SSAValue, panel: SSAValue) -> None:
    """panel[..., jb, k, s] = source[..., j0(jb) + s, k]: operand 1 of an NT contraction as an NN one's blocked panel.

    An NT operand b[..., J, K] is transposed and cut into blocks of the
    tile's n columns in one copy, so that the contraction reads it as
    `emit_blocked_pack`'s panel (one contiguous stream a tile) rather than
    as a transposed [..., K, J] panel whose rows are J apart: at J = 1536 a
    k-block of a tile's columns sits at a 6 KiB stride, in two of L1's sets.
    Block jb starts at j0(jb) = jb·n, the last one shifted back to end at
    J's end where n does not divide J (`emit_blocked_pack`). Where the
    blocks and K are whole register blocks, L×L blocks move through a
    register transpose (`_emit_transposed_blocks`); elsewhere element by
    element. Only data moves: the bits are the source's.
    """
    assert isinstance(panel.type, MemRefType) and isinstance(source.type, MemRefType)
    *outer, count, k_size, n = panel.type.get_shape()
    j_size = source.type.get_shape()[-2]
    lanes = PACK_LANES.get(type(panel.type.element_type))
    if lanes is not None and n % lanes == 0 and j_size % n == 0 and k_size % lanes == 0:
        _emit_transposed_blocks(kb, source, panel, lanes, n)
        return
    with kb.nest([*outer, count, k_size, n]) as (*ivs, jb, k, s):
        start = kb.offset(jb, n, 0) if j_size % n == 0 else _shifted_start(kb, jb, n, j_size)
        kb.store(kb.load(source, [*ivs, kb.offset(start, 1, s), k]), panel, [*ivs, jb, k, s])


def _emit_transposed_blocks(
    kb: KernelBuilder, source: SSAValue, panel: SSAValue, lanes: int, block: int | None = None
) -> None:
    """panel[..., k, j] = source[..., j, k] by L×L blocks: L loads along K, a register transpose, L stores along J.

    Element by element, the copy reads along K and writes along J, one of
    them L apart; LLVM vectorised it with scatters (one store per lane) and
    the attention pack took a fifth of the scores `ein`'s time. The
    transpose is log₂ L rounds of two-input shuffles: round h exchanges,
    in every 2h × 2h block of the L × L block, the top-right and bottom-left
    h × h blocks; after h = L/2, …, 1 every element is at its transposed
    place. Only data moves: the bits are the source's. With `block` = n the
    panel is [..., J/n, K, n] (`emit_transposed_blocked_pack`): the L×L
    block at column j0 of the source lands in column block j0 / n, at
    j0 mod n.
    """
    assert isinstance(panel.type, MemRefType)
    if block is None:
        *outer, k_size, j_size = panel.type.get_shape()
        counts = [*outer, j_size // lanes, k_size // lanes]
    else:
        *outer, count, k_size, _ = panel.type.get_shape()
        counts = [*outer, count, block // lanes, k_size // lanes]
    with kb.nest(counts) as all_ivs:
        kblock = all_ivs[-1]
        if block is None:
            ivs, (jl,) = all_ivs[: len(outer)], all_ivs[len(outer) : -1]
            j0 = kb.offset(jl, lanes, 0)
        else:
            ivs, (jb, sub) = all_ivs[: len(outer)], all_ivs[len(outer) : -1]
            within = kb.offset(sub, lanes, 0)
            j0 = kb.offset(jb, block, within)
        k0 = kb.offset(kblock, lanes, 0)
        rows = [kb.vector_load(source, [*ivs, kb.offset(j0, 1, i), k0], lanes) for i in range(lanes)]
        h = lanes // 2
        while h:
            low, high = _exchange_masks(lanes, h)
            for i in range(lanes):
                if i % (2 * h) < h:
                    a, b = rows[i], rows[i + h]
                    rows[i], rows[i + h] = kb.shuffle(a, b, low), kb.shuffle(a, b, high)
            h //= 2
        for i, row in enumerate(rows):
            if block is None:
                kb.vector_store(row, panel, [*ivs, kb.offset(k0, 1, i), j0])
            else:
                kb.vector_store(row, panel, [*ivs, jb, kb.offset(k0, 1, i), within])


def _exchange_masks(lanes: int, h: int) -> tuple[list[int], list[int]]:
    """Shuffle masks of rows a (upper) and b (lower) of a round: per 2h-column chunk c, the new a takes
    the first halves [a_c, b_c] and the new b the second ones (lanes of b numbered from `lanes`)."""
    low, high = [], []
    for c in range(0, lanes, 2 * h):
        low += [*range(c, c + h), *range(lanes + c, lanes + c + h)]
        high += [*range(c + h, c + 2 * h), *range(lanes + c + h, lanes + c + 2 * h)]
    return low, high
