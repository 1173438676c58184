"""The kernel quantities of the cost model (`presk.cost.quantities.kernel_terms`), counted by hand.

Every expected value is worked out in a comment beside it from the kernel's
text, never by calling the code under test. The machines are described by
hand (`desc`) with caches small enough that the footprints are easy to
count; the register widths a lowered kernel may use come from the target
(`presk.target.target_machine`), so the file passes on AVX-512 and AVX2
hosts alike (`PRESK_TARGET=x86-64-v3`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.builtin import ModuleOp

from presk import sizes
from presk.cost.quantities import kernel_terms
from presk.cost.terms import RULES, KernelTerms, MachineDesc
from presk.dialects.psk_kernel import KernelOp
from presk.dialects.psk_realize_layout import tile_registers
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.lowering import mathlib
from presk.pipeline import lower
from presk.plans import parse_plan
from presk.target import CacheLevel, target_machine

ROOT = Path(__file__).resolve().parents[2]
BIG = 1 << 30
"""A cache nothing in these tests outgrows."""


def desc(l1: int | None = BIG, l2: int | None = BIG, l3: int | None = BIG, *, registers: int = 32, line: int = 64,
         l3_shared_by: int = 1) -> MachineDesc:  # fmt: skip
    """A machine with the given cache sizes in bytes (None: the level is missing)."""
    caches = tuple(
        CacheLevel(level, size, line, l3_shared_by if level == 3 else 1)
        for level, size in ((1, l1), (2, l2), (3, l3))
        if size is not None
    )
    return MachineDesc(caches, registers, line, 2)


def kernel(text: str) -> KernelOp:
    parsed = parse_module(presk_context(), text, "kernel.mlir")
    parsed.verify()
    (op,) = [o for o in parsed.module.body.block.ops if isinstance(o, KernelOp)]
    return op


@functools.cache
def _gemm_program() -> ModuleOp:
    path = ROOT / "bench" / "programs" / "gemm.mlir"
    return parse_module(presk_context(), path.read_text(), str(path)).module


def gemm(n: int, dtype: str, layout: dict[str, Any]) -> KernelOp:
    """The product kernel of `bench/programs/gemm.mlir` at N = n, lowered with `layout` (no pack)."""
    program = _gemm_program()
    env = sizes.resolve(program, {}, {"N": n})
    plan = parse_plan({"realization": dtype, "layout": {"gemm/%0": layout}}, "test")
    kernels = lower(program, "gemm", env, plan)
    (dot,) = [op for op in kernels.body.block.ops if isinstance(op, KernelOp) and op.sym_name.data == "dot"]
    return dot


# --------------------------------------------------------------------------- an elementwise add, 3 × 5


ADD = """
psk_kernel.kernel @add(%a: memref<3x5xf64>, %b: memref<3x5xf64>, %o: memref<3x5xf64>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  scf.for %i = %c0 to %c3 step %c1 {
    scf.for %j = %c0 to %c5 step %c1 {
      %x = memref.load %a[%i, %j] : memref<3x5xf64>
      %y = memref.load %b[%i, %j] : memref<3x5xf64>
      %r = arith.addf %x, %y : f64
      memref.store %r, %o[%i, %j] : memref<3x5xf64>
    } {psk_kernel.parallel}
  } $ATTR
}
"""


def test_elementwise_add() -> None:
    terms = kernel_terms(kernel(ADD.replace("$ATTR", "{psk_kernel.parallel}")), desc())
    # W: one addf per element, 3·5 = 15; the index constants, loads and the store weigh 0.
    assert terms.work == 15
    # Q: three buffers of 15 f64: 3·15·8 = 360 bytes.
    assert terms.bytes == 360
    # N_ld: two loads and a store per element: 3·15 = 45.
    assert terms.loads == 45
    # Everything fits: each buffer comes in once, at every level.
    assert (terms.q_l2, terms.q_l3, terms.q_mem) == (360, 360, 360)
    assert terms.spill == 0
    assert (terms.workers, terms.lanes, terms.dtype) == (1, 1, "f64")


def with_vectors(d: MachineDesc, bits: int) -> MachineDesc:
    return MachineDesc(d.caches, d.vector_registers, d.line, d.workers, bits)


@pytest.mark.parametrize("bits", [256, 512])
def test_a_loop_the_backend_vectorises_counts_its_lanes(bits: int) -> None:
    # The inner loop over j is parallel, carries nothing, and reads and writes along j: LLVM runs it in
    # vectors of bits / 64 f64, and the group is that lane width's.
    terms = kernel_terms(kernel(ADD.replace("$ATTR", "{psk_kernel.parallel}")), with_vectors(desc(), bits))
    lanes = bits // 64
    assert terms.lanes == lanes
    # N_ld: the 45 scalar accesses, once per `lanes` elements; W and the bytes as without vectors.
    assert terms.loads == 45 / lanes
    assert (terms.work, terms.bytes) == (15, 360)


def test_a_strided_loop_and_a_running_sum_stay_scalar() -> None:
    # Along j the add reads a[j, i]: a stride of 3 elements, no vector load, so one lane.
    strided = ADD.replace("%a[%i, %j] : memref<3x5xf64>", "%a[%j, %i] : memref<5x3xf64>").replace(
        "%a: memref<3x5xf64>", "%a: memref<5x3xf64>")
    terms = kernel_terms(kernel(strided.replace("$ATTR", "{psk_kernel.parallel}")), with_vectors(desc(), 512))
    assert (terms.lanes, terms.loads) == (1, 45)
    # A register tile in one lane: its k loop carries the running sum in order; nothing vectorises it, and at
    # N = 256 it is too long to unroll (768 ops), so the j loop around it is no innermost loop to vectorise.
    tile = kernel_terms(gemm(256, "f64", SCALAR_GEMM), with_vectors(desc(), 512))
    assert (tile.lanes, tile.loads) == (1, 2 * 256**3 + 256**2)


def test_a_profile_without_the_register_width_sees_only_written_vectors() -> None:
    d = desc()
    assert d.vector_bits == 0 and MachineDesc.from_json(d.to_json()) == d
    wide = with_vectors(d, 512)
    assert MachineDesc.from_json(wide.to_json()).vector_bits == 512
    assert kernel_terms(kernel(ADD.replace("$ATTR", "{psk_kernel.parallel}")), d).lanes == 1


# --------------------------------------------------------------------------- FMA chains: the latency stall


def with_chains(d: MachineDesc, bits: int, chains: int = 8) -> MachineDesc:
    return MachineDesc(d.caches, d.vector_registers, d.line, d.workers, bits, chains)


def test_a_one_lane_tile_runs_at_the_lanes_slp_gives_its_rows() -> None:
    # f32 [1, 8] in one lane at N = 64: one row of 8 consecutive columns, one 8-lane vector at 512 bits
    # (8 is the largest power of two <= 8 that 16 lanes hold): one chain. Per tile and k a broadcast of
    # A and one vector load of B (not 8), 64 tiles (i) x 8 (j) x 64 k, and the 64² scalar stores.
    w = 2 * 64**3
    terms = kernel_terms(gemm(64, "f32", {"tile": [1, 8], "lanes": 1}), with_chains(desc(), 512))
    assert (terms.lanes, terms.loads) == (8, 64 * 8 * 64 * 2 + 64**2)
    # One chain where 8 keep the units busy, and a k loop of 64 · (1 fma + 2 loads + 2) = 320 operations,
    # more than the reorder window (256) holds, so no two tiles overlap: the fmas take 8 times as long.
    assert terms.work == w and terms.stall == 7 * w
    # f64 at 256 bits: a register holds 4, so the row is 2 vectors, 2 chains: 8/2 - 1 = 3 W; loads 3 per
    # tile and k instead of 9.
    f64 = kernel_terms(gemm(64, "f64", {"tile": [1, 8], "lanes": 1}), with_chains(desc(), 256))
    assert (f64.lanes, f64.loads, f64.stall) == (4, 64 * 8 * 64 * 3 + 64**2, 3 * w)
    # f32 [2, 4]: two rows of 4, each one 4-lane vector, half the narrowest register (8 f32 lanes): the
    # group of 8 lanes at half its rate, and 2 chains: W · (2 · 8/2) costs 7 W more.
    narrow = kernel_terms(gemm(64, "f32", {"tile": [2, 4], "lanes": 1}), with_chains(desc(), 512))
    assert (narrow.lanes, narrow.stall) == (8, 7 * w)


def test_written_vectors_are_a_chain_each() -> None:
    w = 2 * 64**3
    lanes = target_machine().register_width("f32")  # 16 on AVX-512, 8 on AVX2
    bits = 32 * lanes
    # [4, L] in L f32 lanes at N = 64: 4 vector running sums, half of the 8 chains: a stall of 1 W.
    four = kernel_terms(gemm(64, "f32", {"tile": [4, lanes], "lanes": lanes}), with_chains(desc(), bits))
    assert (four.lanes, four.work, four.stall) == (lanes, w, w)
    # [4, 2L]: 8 vectors, as many chains as the units need: no stall.
    wide = kernel_terms(gemm(64, "f32", {"tile": [4, 2 * lanes], "lanes": lanes}), with_chains(desc(), bits))
    assert wide.stall == 0
    # The [1, 1] tile is one chain an execution whatever the width: 7 W. (At N = 64 the translator unrolls its
    # k loop whole and LLVM runs the j loop around it in vectors, each lane its own element's chain.)
    scalar = kernel_terms(gemm(64, "f64", SCALAR_GEMM), with_chains(desc(), bits))
    assert (scalar.lanes, scalar.stall) == (bits // 64, 7 * w)


def test_a_short_k_loop_overlaps_the_next_tiles_chains() -> None:
    # [1, 8] at N = 8: a k loop of 8 · (1 fma + 2 loads + 2) = 40 operations; the reorder window holds
    # 256 / 40 = 6.4 of them, so 6.4 chains run at once: a stall of W · (8 / 6.4 - 1) = W / 4.
    terms = kernel_terms(gemm(8, "f32", {"tile": [1, 8], "lanes": 1}), with_chains(desc(), 512))
    assert (terms.work, terms.stall) == (1024, 256)


COLUMN_WALK = """
psk_kernel.kernel @columns(%b: memref<64x1024xf32>, %o: memref<2xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.for %j = %c0 to %c2 step %c1 {
    %s = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %b[%k, %j] : memref<64x1024xf32>
      %t = arith.addf %acc, %x : f32
      scf.yield %t : f32
    }
    memref.store %s, %o[%j] : memref<2xf32>
  } {psk_kernel.parallel}
}
"""


def with_tlb(d: MachineDesc, pages: int) -> MachineDesc:
    return dataclasses.replace(d, tlb_pages=pages)


def test_page_walks_count_the_pages_a_tlb_cannot_keep() -> None:
    k = kernel(COLUMN_WALK)
    # b's rows are 1 024 f32 = 4 KiB apart: each of the 64 rows a column touches is a page of its own, and
    # both columns (j = 0, 1) lie on the same 64 pages; o is one page. So the kernel touches 65 pages.
    # A TLB of 128 pages keeps them all: each is walked once, 65 walks.
    assert kernel_terms(k, with_tlb(desc(), 128)).page_walks == 65
    # One of 16 pages keeps no column (64 pages), only a row's page at a time: each j walks its column's 64
    # pages again (2 · 64), and its store o[j] (2 · 1; its page does not stay either, the column between).
    assert kernel_terms(k, with_tlb(desc(), 16)).page_walks == 130
    # A description that does not know its TLB counts none, and every other term is as without it.
    terms = kernel_terms(k, with_tlb(desc(), 16))
    plain = kernel_terms(k, desc())
    assert plain.page_walks == 0
    assert dataclasses.replace(terms, page_walks=0.0) == plain
    # Rows closer than a page share their pages: b of 64 × 64 f32 has rows of 256 bytes, and a column is a
    # stretch of 63 · 256 + 4 bytes, 4 pages (the whole of b). With o, 5 pages: a TLB of 16 walks each once.
    near = kernel(COLUMN_WALK.replace("64x1024xf32", "64x64xf32"))
    assert kernel_terms(near, with_tlb(desc(), 16)).page_walks == 5
    # A TLB of 2 pages holds a row's page at a time: each j walks the column's 4 pages and its o[j] again.
    assert kernel_terms(near, with_tlb(desc(), 2)).page_walks == 2 * (4 + 1)


DEFAULT_EIN = """
psk_kernel.kernel @ein(%a: memref<4x$Kxf32>, %b: memref<$BSxf32>, %o: memref<4x$Jxf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %ck = arith.constant $K : index
  %cj = arith.constant $J : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %cj step %c1 {
      %z = arith.constant 0.0 : f32
      %s = scf.for %k = %c0 to %ck step %c1 iter_args(%acc = %z) -> (f32) {
        %x = memref.load %a[%i, %k] : memref<4x$Kxf32>
        %y = memref.load %b[$B] : memref<$BSxf32>
        %f = math.fma %x, %y, %acc : f32
        scf.yield %f : f32
      }
      memref.store %s, %o[%i, %j] : memref<4x$Jxf32>
    } {psk_kernel.parallel}
  } {psk_kernel.parallel}
}
"""


def default_ein(j: int, k: int = 8, along_rows: bool = False) -> KernelOp:
    """A contraction at its default layout (a small attention's values): out[i, j] = Σ_k a[i, k] · b[k, j], a
    chain of k fmas an element, which the translator unrolls whole when short (`is_short_fma_chain`);
    `along_rows`: b stored transposed and read b[j, k] (the scores' operand)."""
    shape, index = (f"{j}x{k}", "%j, %k") if along_rows else (f"{k}x{j}", "%k, %j")
    text = DEFAULT_EIN.replace("$BS", shape).replace("$B", index).replace("$J", str(j)).replace("$K", str(k))
    return kernel(text)


@pytest.mark.parametrize("bits", [256, 512])
def test_the_loop_around_a_short_chain_runs_in_vectors(bits: int) -> None:
    lanes = bits // 32
    j = 2 * lanes
    terms = kernel_terms(default_ein(j), with_chains(desc(), bits))
    # Unrolled, the k loop leaves j innermost: a[i, k] does not move with j (a broadcast), b[k, j] and
    # o[i, j] are contiguous along it, so LLVM runs j in vectors of `lanes` f32, each lane its own chain.
    # W: 4 · j · 8 fmas of 2. N_ld: per element 8 · 2 loads and a store, once per `lanes` elements.
    w = 4 * j * 8 * 2
    assert (terms.lanes, terms.work, terms.loads) == (lanes, w, 4 * j * (8 * 2 + 1) / lanes)
    # One chain an execution of 8 · (1 fma + 2 loads + 2) = 40 operations: the window (256) overlaps 6.4 of
    # them, against 8 chains needed: W · (8 / 6.4 - 1) = W / 4, as before the unrolling.
    assert terms.stall == w / 4
    # b read along its rows moves with j in its first index only: LLVM loads the rows whole and moves the
    # elements into their lanes with shuffles (an interleaved group), each a vector fma's issue slot (2 · lanes
    # of W): about one an element at 256 bits, one a vector (1 / lanes an element) at 512 (AVX-512's
    # two-source permutes), for the 4 · j · 8 elements. The loads are as many vectors; the stall the fmas'.
    rows = kernel_terms(default_ein(j, along_rows=True), with_chains(desc(), bits))
    assert (rows.lanes, rows.loads, rows.stall) == (lanes, 4 * j * (8 * 2 + 1) / lanes, w / 4)
    per_element = 1 if bits == 256 else 1 / lanes
    assert rows.work == w + 2 * lanes * per_element * 4 * j * 8
    # A loop shorter than the register, or a profile without the register's width: not vectorised.
    assert kernel_terms(default_ein(lanes // 2), with_chains(desc(), bits)).lanes == 1
    assert kernel_terms(default_ein(j), with_chains(desc(), 0)).lanes == 1


def test_a_chain_too_long_to_unroll_keeps_the_loop_around_it_scalar() -> None:
    # 200 terms are 600 ops unrolled, above the translator's 400 (FULL_UNROLL_OPS): the k loop stays a loop.
    terms = kernel_terms(default_ein(16, k=200), with_chains(desc(), 256))
    assert (terms.lanes, terms.loads) == (1, 4 * 16 * (200 * 2 + 1))


def test_a_row_wise_product_chains_through_memory() -> None:
    # The row-wise form adds each k's terms to out[i, j] in memory: per k, the j loop (64 elements, 4 vectors
    # of 16 at 512 bits) loads each element the previous k stored. 4 chains, each step an fma and a
    # forwarded store (twice the fma's latency): they need 2 · 8 = 16 chains, so the fmas take 4 times as
    # long: a stall of 3 W.
    w = 2 * 64**3
    terms = kernel_terms(gemm(64, "f32", {"form": "row-wise"}), with_chains(desc(), 512))
    assert (terms.work, terms.lanes, terms.stall) == (w, 16, 3 * w)
    # A profile without fma_chains: no chain, no stall.
    assert kernel_terms(gemm(64, "f32", {"form": "row-wise"}), with_vectors(desc(), 512)).stall == 0


def test_no_stall_without_the_chains_and_no_slp_without_the_width() -> None:
    tile = gemm(8, "f32", {"tile": [1, 8], "lanes": 1})
    # fma_chains 0, a profile written before it: the tile as its samples were priced, one lane, no stall.
    before = kernel_terms(tile, with_vectors(desc(), 512))
    assert (before.lanes, before.stall, before.loads) == (1, 0, 8 * 8 * 9 + 64)
    # Without the register's width the tile stays in one lane: 8 scalar chains, no stall, 9 loads per k.
    unknown = kernel_terms(tile, with_chains(desc(), 0))
    assert (unknown.lanes, unknown.stall, unknown.loads) == (1, 0, 8 * 8 * 9 + 64)
    # An elementwise loop has no running sums: no chains, no stall.
    assert kernel_terms(kernel(ADD.replace("$ATTR", "{psk_kernel.parallel}")), with_chains(desc(), 512)).stall == 0


def test_a_loop_of_running_sums_waits_for_its_additions() -> None:
    # Row sums of 8 rows of 64 f64: one running sum a row. At 512 bits the translator's ordered sums take
    # 4 iterations at a time (256 bits of f64), each added to the one sum in turn: a chain of one addition
    # per iteration, in which the core could do 8 chains · 4 lanes = 32 W. The iteration's own work is its
    # addition, 1 W: a stall of 31 W an iteration. An execution is 64 · (1 sum + 1 load + 2) = 256
    # operations, one reorder window: no overlap. 8 · 64 · 31 = 15 872.
    rows = kernel(_reduction(8, 64, outer="i"))
    terms = kernel_terms(rows, with_chains(desc(), 512))
    assert (terms.lanes, terms.work, terms.stall) == (4, 8 * 64, 8 * 64 * 31)
    # 8 columns: an execution is 8 · 4 = 32 operations, 8 of which the window overlaps: 32 / 8 = 4 W an
    # iteration at the least, a stall of 3. 8 · 8 · 3 = 192.
    short = kernel_terms(kernel(_reduction(8, 8, outer="i")), with_chains(desc(), 512))
    assert short.stall == 8 * 8 * 3
    # A profile written before fma_chains: no stall.
    assert kernel_terms(rows, with_vectors(desc(), 512)).stall == 0


def test_a_vector_wider_than_the_register_runs_as_several() -> None:
    # VECTOR_OPS writes vector<8xf32> (256 bits). On 128-bit registers each is two of 4 lanes: the kernel's
    # lanes are 4 and each vector access counts twice (1 + 4·2·2 loads); on 256 bits, as written (1 + 4·2).
    wide = kernel_terms(kernel(VECTOR_OPS), with_vectors(desc(), 256))
    narrow = kernel_terms(kernel(VECTOR_OPS), with_vectors(desc(), 128))
    assert (wide.lanes, wide.loads) == (8, 1 + 4 * 2)
    assert (narrow.lanes, narrow.loads) == (4, 1 + 4 * 2 * 2)
    assert narrow.work == wide.work == 4 * 24


@pytest.mark.parametrize(("element", "lanes", "bits", "group"), [
    ("f32", 4, 512, 8), ("f32", 6, 512, 8), ("f32", 8, 512, 8), ("f32", 4, 256, 8),
    ("f64", 2, 512, 4), ("f64", 6, 512, 8), ("f64", 6, 256, 4), ("f64", 4, 256, 4),
])  # fmt: skip
def test_a_narrow_written_vector_runs_in_the_narrowest_register_group(element: str, lanes: int, bits: int, group: int) -> None:
    # A blocked pack's rows of a tile's m_i elements, one vector each: priced in the group of the narrowest
    # calibrated register (256 bits) that holds them, never in a group of their own odd width.
    copy = PACK_ROWS.replace("$T", element).replace("$L", str(lanes)).replace("$N", str(3 * lanes))
    terms = kernel_terms(kernel(copy), with_vectors(desc(), bits))
    assert terms.lanes == group
    assert terms.work == 0  # a copy: no arithmetic


def test_fma_chains_round_trip_and_refusal() -> None:
    d = with_chains(desc(), 512)
    assert MachineDesc.from_json(d.to_json()) == d and d.to_json()["fma_chains"] == 8
    assert "fma_chains" not in with_vectors(desc(), 512).to_json()
    bad = {**d.to_json(), "fma_chains": -1}
    with pytest.raises(ValueError, match="machine_desc.fma_chains is the independent FMA chains"):
        MachineDesc.from_json(bad)


def test_tlb_pages_round_trip_and_a_description_without_them_reads_as_not_known() -> None:
    d = with_tlb(desc(), 2560)
    assert MachineDesc.from_json(d.to_json()) == d and d.to_json()["tlb_pages"] == 2560
    assert "tlb_pages" not in desc().to_json() and MachineDesc.from_json(desc().to_json()).tlb_pages == 0


def test_terms_without_a_stall_read_back_as_zero() -> None:
    terms = kernel_terms(gemm(8, "f32", {"tile": [1, 8], "lanes": 1}), with_chains(desc(), 512))
    data = terms.to_json()
    assert data["stall"] == terms.stall == 256 and KernelTerms.from_json(data) == terms
    del data["stall"]
    assert KernelTerms.from_json(data).stall == 0


def test_overhead_rule_adds_one_operation_per_iteration() -> None:
    terms = kernel_terms(kernel(ADD.replace("$ATTR", "{psk_kernel.parallel}")), desc(), rules=frozenset({"overhead"}))
    # 15 adds + the outer loop's 3 iterations + the inner loop's 3·5 = 15: 33.
    assert terms.work == 15 + 3 + 15
    assert terms.loads == 45


def test_split_kernel_one_workers_share() -> None:
    terms = kernel_terms(kernel(ADD.replace("$ATTR", "{psk_kernel.parallel}")), desc(), workers=2)
    # The split loop (over i, 3 iterations) cut to ceil(3 / 2) = 2: 2·5 = 10 elements.
    assert terms.work == 10
    assert terms.loads == 3 * 10
    # Each buffer is indexed by i: the worker's 2 of its 3 rows, 3 buffers · 10 f64 · 8 bytes.
    assert terms.bytes == 3 * 10 * 8
    assert terms.q_mem == 3 * 10 * 8
    assert terms.workers == 2


def test_kernel_without_split_loop_ignores_workers() -> None:
    # The outer loop is not parallel: no split loop, so one worker runs the whole kernel.
    terms = kernel_terms(kernel(ADD.replace("$ATTR", "")), desc(), workers=2)
    assert (terms.work, terms.loads, terms.bytes, terms.workers) == (15, 45, 360, 1)


def test_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown cost rules"):
        kernel_terms(kernel(ADD.replace("$ATTR", "")), desc(), rules=frozenset({"fast"}))


# --------------------------------------------------------------------------- what the work weighs


def exps(function: str, width: int, lanes: int) -> float:
    """What one evaluation of `function` in `lanes` weighs in the transcendental term: its instructions over
    an exp's in the same lanes."""
    return mathlib.instructions(function, width, lanes) / mathlib.instructions("exp", width, lanes)


def test_a_transcendental_weighs_its_instructions() -> None:
    # sqrt is one intrinsic; exp, log, tanh and erf are presk's polynomials, the same instructions in every
    # lane (exp aside: on vectors its quick form for the normal range is shorter than the whole method);
    # f64's erf is the longest of them, twice f32's.
    assert all(mathlib.instructions("sqrt", w, lanes) == 1 for w in (32, 64) for lanes in (1, 4, 8))
    for width in (32, 64):
        for function in ("log", "tanh", "erf"):
            assert len({mathlib.instructions(function, width, lanes) for lanes in (1, 4, 8, 16)}) == 1
        assert mathlib.instructions("exp", width, 8) < mathlib.instructions("exp", width, 1)
        assert exps("erf", width, 8) > max(exps("tanh", width, 8), exps("log", width, 8)) > 1
    assert mathlib.instructions("erf", 64, 4) > 2 * mathlib.instructions("erf", 32, 8)


SCALAR_OPS = """
psk_kernel.kernel @ops(%a: memref<4xf32>, %o: memref<4xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %k = arith.muli %i, %c4 : index
    %x = memref.load %a[%i] : memref<4xf32>
    %e = math.exp %x : f32
    %s = math.sqrt %e : f32
    %c = arith.cmpf ogt, %s, %x : f32
    %m = arith.select %c, %s, %x : f32
    %f = math.fma %m, %x, %x : f32
    %t = math.tanh %f : f32
    memref.store %t, %o[%i] : memref<4xf32>
  }
}
"""


def test_work_weights() -> None:
    terms = kernel_terms(kernel(SCALAR_OPS), desc())
    # Per element: exp 8, sqrt 1, cmpf 1, select 1, fma 2, tanh 8 = 21 (muli on index: 0); 4 elements: 84.
    assert terms.work == 4 * 21
    assert terms.loads == 4 * 2
    assert (terms.lanes, terms.dtype) == (1, "f32")
    # The transcendentals again, once an execution, in exps: exp and tanh per element, 4 elements; a tanh
    # weighs the instructions of presk's scalar tanh over those of its scalar exp.
    assert terms.transcendental == pytest.approx(4 * (1 + exps("tanh", 32, 1)))


VECTOR_EXP = """
psk_kernel.kernel @exp(%a: memref<64xf32>, %o: memref<64xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c16 {
    %x = vector.load %a[%i] : memref<64xf32>, vector<16xf32>
    %e = math.exp %x : vector<16xf32>
    vector.store %e, %o[%i] : memref<64xf32>, vector<16xf32>
  }
  scf.for %j = %c0 to %c64 step %c4 {
    %y = memref.load %a[%j] : memref<64xf32>
    %l = math.log %y : f32
    memref.store %l, %o[%j] : memref<64xf32>
  } {psk_kernel.parallel}
}
"""


@pytest.mark.parametrize("bits", [0, 256, 512])
def test_transcendentals_count_once_a_register(bits: int) -> None:
    terms = kernel_terms(kernel(VECTOR_EXP), with_vectors(desc(), bits))
    # The written exp of 16 f32 lanes, 4 iterations: one register each on 512 bits (or when the register is
    # not known), two of 8 lanes on 256. The log's loop (step 4, 16 iterations) moves 4 elements a step: not
    # contiguous, so the backend runs it in scalars, 16 logs.
    # The scalar logs weigh the scalar log's instructions over the scalar exp's (the whole method).
    assert terms.transcendental == pytest.approx(4 * (2 if bits == 256 else 1) + 16 * exps("log", 32, 1))
    lanes = bits // 32 if bits else 1
    # W still weighs each lane 8: 64 exp lanes and 16 logs.
    assert terms.work == 8 * (64 + 16)
    vectorised = kernel(VECTOR_EXP.replace("step %c4", "step %c1"))
    # With step 1 the log's loop is contiguous and parallel: the backend runs it in vectors of 256 or 512
    # bits (8 or 16 f32 lanes), one log a vector; with no register known, 64 scalar logs.
    assert kernel_terms(vectorised, with_vectors(desc(), bits)).transcendental == pytest.approx(
        4 * (2 if bits == 256 else 1) + 64 / lanes * exps("log", 32, lanes))


SCRATCH_ERF = """
psk_kernel.kernel @gelu(%a: memref<4x16xf32>, %o: memref<4x16xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %s = psk_kernel.scratch rows [1] : memref<4x16xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %x = memref.load %a[%i, %j] : memref<4x16xf32>
      memref.store %x, %s[%i, %j] : memref<4x16xf32>
    } {psk_kernel.parallel}
    scf.for %j = %c0 to %c16 step %c1 {
      %y = memref.load %s[%i, %j] : memref<4x16xf32>
      %e = math.erf %y : f32
      memref.store %e, %s[%i, %j] : memref<4x16xf32>
    } {psk_kernel.parallel}
    scf.for %j = %c0 to %c16 step %c1 {
      %z = memref.load %s[%i, %j] : memref<4x16xf32>
      memref.store %z, %o[%i, %j] : memref<4x16xf32>
    } {psk_kernel.parallel}
  } {psk_kernel.parallel}
}
"""


@pytest.mark.parametrize("bits", [256, 512])
def test_a_loop_over_the_kernels_scratch_alone_is_vectorised_too(bits: int) -> None:
    # The erf's loop reads and writes only the scratch (as `psk-promote-to-scratch` leaves a fused GELU),
    # contiguously along j: LLVM vectorises it as it does a loop over the arguments (the fused MLP kernel
    # of MiniGPT's loss broadcasts erf's constants into ymm registers on AVX2). One erf a vector; the
    # scratch's accesses count as loads, and none of it is traffic.
    lanes = bits // 32
    terms = kernel_terms(kernel(SCRATCH_ERF), with_vectors(desc(), bits))
    assert terms.transcendental == pytest.approx(4 * 16 / lanes * exps("erf", 32, lanes))
    assert terms.loads == 3 * 2 * 4 * 16 / lanes
    assert terms.bytes == 2 * 4 * 16 * 4  # a and o only
    # Every other element of the scratch's rows (a stride of 2 along j, 8 iterations) keeps the erf's loop
    # scalar: 4 · 8 erfs.
    erf_loop = """    scf.for %j = %c0 to %c16 step %c1 {
      %y = memref.load %s[%i, %j] : memref<4x16xf32>
      %e = math.erf %y : f32
      memref.store %e, %s[%i, %j] : memref<4x16xf32>"""
    assert erf_loop in SCRATCH_ERF
    strided = SCRATCH_ERF.replace(erf_loop, """    scf.for %j = %c0 to %c8 step %c1 {
      %j2 = arith.addi %j, %j : index
      %y = memref.load %s[%i, %j2] : memref<4x16xf32>
      %e = math.erf %y : f32
      memref.store %e, %s[%i, %j2] : memref<4x16xf32>""").replace("  %c16 = ", "  %c8 = arith.constant 8 : index\n  %c16 = ")
    assert kernel_terms(kernel(strided), with_vectors(desc(), bits)).transcendental == pytest.approx(4 * 8 * exps("erf", 32, 1))


VECTOR_OPS = """
psk_kernel.kernel @axpy(%s: memref<2xf32>, %a: memref<32xf32>, %o: memref<32xf32>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %w = memref.load %s[%c0] : memref<2xf32>
  %v = vector.broadcast %w : f32 to vector<8xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %k = arith.muli %i, %c8 : index
    %x = vector.load %a[%k] : memref<32xf32>, vector<8xf32>
    %y = vector.fma %v, %x, %x : vector<8xf32>
    %z = arith.mulf %y, %x : vector<8xf32>
    vector.store %z, %o[%k] : memref<32xf32>, vector<8xf32>
  }
}
"""


def test_vector_lanes_count_in_work_not_in_loads() -> None:
    terms = kernel_terms(kernel(VECTOR_OPS), desc())
    # Per iteration: a vector.fma of 8 lanes (2·8 = 16) and a mulf of 8 lanes (8): 24; 4 iterations: 96.
    # The broadcast weighs 0.
    assert terms.work == 4 * 24
    # The scalar load outside the loop (its broadcast is part of it: 0), then per iteration a vector load
    # and a vector store, once each whatever their lanes: 1 + 4·2 = 9.
    assert terms.loads == 1 + 4 * 2
    # Q: %s is read (2 f32: 8 bytes), %a and %o whole (32 f32: 128 bytes each).
    assert terms.bytes == 8 + 128 + 128
    assert terms.lanes == 8
    # L1 of 64 bytes: the one element of %s read (4 bytes; Q counts the whole buffer, the traffic its
    # footprint) fits, once. %a and %o (128 bytes) do not; one iteration touches 8 f32 = 32 bytes of each
    # (a vector access of 8 lanes covers 8 consecutive elements): 4·32 = 128 each.
    assert kernel_terms(kernel(VECTOR_OPS), desc(l1=64)).q_l2 == 4 + 128 + 128
    # Live between the fma and the mulf: %v (defined outside, used inside), %x (the mulf still reads it) and
    # %y: 3. With one register, two spill: two L1 accesses each per iteration, 2·2·4 = 16.
    assert kernel_terms(kernel(VECTOR_OPS), desc(registers=1)).spill == 16


BF16 = """
psk_kernel.kernel @add(%a: memref<6xbf16>, %b: memref<6xbf16>, %o: memref<6xbf16>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %x = memref.load %a[%i] : memref<6xbf16>
    %y = memref.load %b[%i] : memref<6xbf16>
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %r = arith.addf %xf, %yf : f32
    %rb = arith.truncf %r : f32 to bf16
    memref.store %rb, %o[%i] : memref<6xbf16>
  } {psk_kernel.parallel}
}
"""


def test_bf16_storage_computes_in_f32() -> None:
    terms = kernel_terms(kernel(BF16), desc())
    # One f32 add per element (the casts weigh 0): 6. Buffers of bf16, 2 bytes: 3·6·2 = 36.
    assert (terms.work, terms.bytes, terms.loads, terms.dtype) == (6, 36, 18, "bf16")


# --------------------------------------------------------------------------- a scalar GEMM, N = 8


SCALAR_GEMM = {"form": "tiled", "tile": [1, 1], "lanes": 1}
"""Loops i, j (parallel), then k with the running sum in an iter_arg: per k a load of A[i, k] and one
of B[k, j] and an fma; per (i, j) a store of C[i, j]."""


def test_scalar_gemm() -> None:
    terms = kernel_terms(gemm(8, "f64", SCALAR_GEMM), desc())
    assert terms.work == 2 * 8**3  # one fma (2) per multiply-add
    assert terms.loads == 2 * 8**3 + 8**2  # two loads per k, a store per output element: 1088
    assert terms.bytes == 3 * 64 * 8  # A, B, C: 64 f64 each
    assert (terms.lanes, terms.dtype, terms.workers) == (1, "f64", 1)
    # Live in the k loop: the running sum and the two loaded values: 3. One register: 2 spill, at
    # 2 accesses per iteration and 8^3 iterations: 2·2·512.
    assert kernel_terms(gemm(8, "f64", SCALAR_GEMM), desc(registers=1)).spill == 2 * 2 * 512


def test_gemm_operand_one_fits_l1_or_not() -> None:
    dot = gemm(8, "f64", SCALAR_GEMM)
    # Each buffer is 64·8 = 512 bytes. With an L1 of 600 bytes each fits alone: 3·512 = 1536 from L2.
    assert kernel_terms(dot, desc(l1=600)).q_l2 == 1536
    # With 256 bytes none fits. A: one i iteration reads row i, 64 bytes, which fits: 8·64 = 512.
    # C: likewise a row per i: 512. B: an i iteration reads all of B (512), a j loop all of it too,
    # a j iteration (the k loop) column j, 64 bytes, which fits: once per (i, j), 64·64 = 4096.
    small = kernel_terms(dot, desc(l1=256, l2=600))
    assert small.q_l2 == 512 + 4096 + 512
    # L2 of 600 bytes holds each buffer: 1536 from L3; L3 holds everything too.
    assert (small.q_l3, small.q_mem) == (1536, 1536)


def test_missing_levels() -> None:
    dot = gemm(8, "f64", SCALAR_GEMM)
    # Only L1 (256 bytes): L2 and L3 hold what L1 holds, so every level sees L1's misses: 5120.
    terms = kernel_terms(dot, desc(l1=256, l2=None, l3=None))
    assert (terms.q_l2, terms.q_l3, terms.q_mem) == (5120, 5120, 5120)
    # No cache at all: every access brings its element each time it runs:
    # A and B 512 loads · 8 bytes each, C 64 stores · 8 bytes: 4096 + 4096 + 512.
    bare = kernel_terms(dot, MachineDesc((), 32, 64, 2))
    assert (bare.q_l2, bare.q_l3, bare.q_mem) == (8704, 8704, 8704)


def test_shared_l3_is_divided_among_the_workers() -> None:
    dot = gemm(8, "f64", SCALAR_GEMM)
    # One worker owns the whole L3 of 900 bytes: every buffer (512) fits, 1536.
    assert kernel_terms(dot, desc(l1=0, l2=0, l3=900, l3_shared_by=2), workers=1).q_mem == 1536
    # Two workers on an L3 shared by 2: 450 bytes each. The worker's share: i cut to 4 rows. A's 4 rows
    # (256 bytes) fit, C's too; B (512) does not: a j iteration brings column j (64 bytes), 4·8 times:
    # 256 + 2048 + 256.
    assert kernel_terms(dot, desc(l1=0, l2=0, l3=900, l3_shared_by=2), workers=2).q_mem == 2560
    # A private L3 of 900 bytes keeps B: 256 + 512 + 256.
    assert kernel_terms(dot, desc(l1=0, l2=0, l3=900, l3_shared_by=1), workers=2).q_mem == 1024


# --------------------------------------------------------------------------- the rules `lines` and `shared`


def _reduction(rows: int, cols: int, outer: str) -> str:
    """out[outer] = Σ x[i, j] over the other axis, `outer` the loop outside; x is rows × cols f64."""
    inner = "j" if outer == "i" else "i"
    n_out, n_in = (rows, cols) if outer == "i" else (cols, rows)
    return f"""
psk_kernel.kernel @sum(%x: memref<{rows}x{cols}xf64>, %o: memref<{n_out}xf64>) "t" {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %no = arith.constant {n_out} : index
  %ni = arith.constant {n_in} : index
  %z = arith.constant 0.0 : f64
  scf.for %{outer} = %c0 to %no step %c1 {{
    %s = scf.for %{inner} = %c0 to %ni step %c1 iter_args(%acc = %z) -> (f64) {{
      %v = memref.load %x[%i, %j] : memref<{rows}x{cols}xf64>
      %t = arith.addf %acc, %v : f64
      scf.yield %t : f64
    }}
    memref.store %s, %o[%{outer}] : memref<{n_out}xf64>
  }} {{psk_kernel.parallel}}
}}
"""


def test_lines_bring_a_line_per_element_across_the_contiguous_axis() -> None:
    columns = kernel(_reduction(8, 8, outer="j"))  # column sums: the inner loop walks rows
    plain = kernel_terms(columns, desc(l1=256))
    # x is 512 bytes, more than L1. A j iteration reads column j, 8 f64 = 64 bytes, which fits: 8·64 = 512.
    # o (8 f64, 64 bytes) fits: 64.
    assert plain.q_l2 == 512 + 64
    lines = kernel_terms(columns, desc(l1=256, line=64), rules=frozenset({"lines"}))
    # In whole 64-byte lines, column j is 8 lines = 512 bytes: no longer fits. An i iteration is one line
    # (it fits), so the i loop brings what its iterations bring, one line each: 8 lines per j, 8·8·64 = 4096.
    # o: one span of 64 bytes, one line: 64.
    assert lines.q_l2 == 4096 + 64


def test_lines_share_a_line_between_consecutive_iterations() -> None:
    rows = kernel(_reduction(8, 64, outer="i"))  # row sums: the inner loop walks the contiguous axis
    lines = kernel_terms(rows, desc(l1=256, line=64), rules=frozenset({"lines"}))
    # x is 8 rows of 512 bytes. An i iteration (a row) does not fit 256 bytes; a j iteration (one element:
    # one line) does, and consecutive j share their line: each row is brought once, as 8 lines: 8·512 = 4096
    # (not a line per element, 8·64·64). o: 64 bytes, one line.
    assert lines.q_l2 == 4096 + 64
    assert kernel_terms(rows, desc(l1=256)).q_l2 == 4096 + 64  # without lines: the same bytes


ROW_WISE = """
psk_kernel.kernel @rowwise(%a: memref<8x8xf64>, %b: memref<8x8xf64>, %c: memref<8x8xf64>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %k = %c0 to %c8 step %c1 {
      %x = memref.load %a[%i, %k] : memref<8x8xf64>
      scf.for %j = %c0 to %c8 step %c1 {
        %y = memref.load %b[%k, %j] : memref<8x8xf64>
        %s = memref.load %c[%i, %j] : memref<8x8xf64>
        %t = math.fma %x, %y, %s : f64
        memref.store %t, %c[%i, %j] : memref<8x8xf64>
      } {psk_kernel.parallel}
    }
  } {psk_kernel.parallel}
}
"""


def test_shared_asks_all_buffers_to_fit_together() -> None:
    dot = kernel(ROW_WISE)
    # Each buffer (512 bytes) fits an L1 of 600 apart: 3·512.
    assert kernel_terms(dot, desc(l1=600)).q_l2 == 1536
    shared = kernel_terms(dot, desc(l1=600), rules=frozenset({"shared"}))
    # Together: the kernel (1536) does not fit, nor an i iteration (row i of A 64 + all of B 512 + row i of C
    # 64 = 640). A k iteration does (A[i, k] 8 + row k of B 64 + row i of C 64 = 136), and consecutive k
    # share what the k loop does not move (row i of C) and bring the rest: the k loop's footprint, 640,
    # once per i: 8·640 = 5120 (not 8·8·136 = 8704, C's row evicted at every step of k).
    assert shared.q_l2 == 5120
    # An L1 of 2048 holds all three: the rule changes nothing.
    assert kernel_terms(dot, desc(l1=2048), rules=frozenset({"shared"})).q_l2 == 1536


def test_rules_off_by_default_and_overhead_leaves_traffic_alone() -> None:
    dot = gemm(8, "f64", SCALAR_GEMM)
    plain = kernel_terms(dot, desc(l1=256))
    assert kernel_terms(dot, desc(l1=256), rules=frozenset()) == plain
    overhead = kernel_terms(dot, desc(l1=256), rules=frozenset({"overhead"}))
    # Loop iterations: i 8, j 64, k 512: 584 more operations; nothing else moves.
    assert overhead.work == plain.work + 8 + 64 + 512
    assert (overhead.q_l2, overhead.loads, overhead.bytes) == (plain.q_l2, plain.loads, plain.bytes)
    assert set(RULES) == {"lines", "shared", "overhead", "sets"}


GATHER = """
psk_kernel.kernel @gather(%t: memref<16x8xf64>, %ids: memref<4xi64>, %o: memref<4x8xf64>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %id = memref.load %ids[%i] : memref<4xi64>
    %row = arith.index_cast %id : i64 to index
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %t[%row, %j] : memref<16x8xf64>
      memref.store %v, %o[%i, %j] : memref<4x8xf64>
    }
  } {psk_kernel.parallel}
}
"""


def test_gathered_index_is_conservative() -> None:
    gather = kernel(GATHER)
    # The table's row is loaded: inside the i loop it may be any row, so the whole table (16·8·8 = 1024
    # bytes) is its footprint there; with i fixed it is one row (64 bytes). L1 of 64 bytes: a row per i,
    # 4·64 = 256; ids (4 i64, 32 bytes) fit: 32; o: a row per i, 256.
    assert kernel_terms(gather, desc(l1=64)).q_l2 == 256 + 32 + 256
    # Everything fits a large cache: the whole table counts, 1024 + 32 + 256.
    assert kernel_terms(gather, desc()).q_l2 == 1312
    assert kernel_terms(gather, desc()).bytes == 1312
    assert kernel_terms(gather, desc()).work == 0


# --------------------------------------------------------------------------- register tiles and their spills


def _f64_register_tiles() -> list[int]:
    """The f64 lane widths L of this target whose [4, 4L] tile is in the layout domain (n_j ≤ 32)."""
    return [lanes for lanes in target_machine().lane_widths("f64") if lanes > 1 and 4 * lanes <= 32]


@pytest.mark.filterwarnings("ignore::presk.diagnostics.PlanWarning")  # the 21 vectors spill on 16 registers, as counted
@pytest.mark.parametrize("lanes", _f64_register_tiles())
def test_register_tile_in_lanes_holds_21(lanes: int) -> None:
    # The seed's [4, 16] tile in four lanes, at this machine's widths: a [4, 4L] tile in L f64 lanes holds
    # 4·4 = 16 accumulators and the 4 vectors of operand 1, loaded with the first row, while each row's
    # broadcast of operand 0 lives for that row's 4 fmas only: 21 registers (`tile_registers`), not the
    # 24 of every value the loop loads. N = 32: the k loop runs (32/4)·(32/(4L))·32 times.
    dot = gemm(32, "f64", {"tile": [4, 4 * lanes], "lanes": lanes})
    iterations = (32 // 4) * (32 // (4 * lanes)) * 32
    assert tile_registers([4, 4 * lanes], lanes) == 21
    assert kernel_terms(dot, desc(registers=21)).spill == 0
    assert kernel_terms(dot, desc(registers=20)).spill == 2 * 1 * iterations
    assert kernel_terms(dot, desc(registers=0)).spill == 2 * 21 * iterations
    terms = kernel_terms(dot, desc())
    assert terms.lanes == lanes
    assert terms.work == 2 * 32**3
    # Per k: 4 scalar loads (their broadcasts are part of them) and 4 vector loads; per tile 16 vector stores.
    assert terms.loads == 8 * iterations + 16 * (32 // 4) * (32 // (4 * lanes))


def test_the_zen_micro_kernel_fits_sixteen_registers() -> None:
    # [6, 16] in 8 f32 lanes, BLIS's Zen micro-kernel: 12 accumulators, the 2 vectors of operand 1 and one
    # row's broadcast at a time: 15, so a 16-register core keeps it without spilling (counting the 6
    # broadcasts of a k as live at once gave 20, and a spill the measured kernel does not have).
    dot = gemm(48, "f32", {"tile": [6, 16], "lanes": 8})
    iterations = (48 // 6) * (48 // 16) * 48
    assert tile_registers([6, 16], 8) == 15
    assert kernel_terms(dot, desc(registers=16)).spill == kernel_terms(dot, desc(registers=15)).spill == 0
    assert kernel_terms(dot, desc(registers=14)).spill == 2 * 1 * iterations


def test_register_tile_without_lanes_holds_84() -> None:
    # [4, 16] in one lane: 64 accumulators, 16 scalars of operand 1 and 4 of operand 0, all loaded before
    # the first fma: 84.
    dot = gemm(32, "f64", {"tile": [4, 16], "lanes": 1})
    iterations = (32 // 4) * (32 // 16) * 32
    assert kernel_terms(dot, desc(registers=84)).spill == 0
    assert kernel_terms(dot, desc(registers=32)).spill == 2 * (84 - 32) * iterations
    assert kernel_terms(dot, desc(registers=16)).spill == 2 * (84 - 16) * iterations


# --------------------------------------------------------------------------- lowered kernels at large sizes


def test_lowered_tiles_last_block_clamped_stays_in_the_buffers() -> None:
    # N = 18 with a [4, 16] tile: the last row and column blocks are shifted back (arith.minsi); the
    # footprints are cut to the buffers, so in a large cache each buffer comes in once: 3·18·18·4 bytes.
    widest = target_machine().register_width("f32")
    dot = gemm(18, "f32", {"form": "tiled", "tile": [4, 16], "lanes": min(widest, 16)})
    terms = kernel_terms(dot, desc())
    assert terms.bytes == 3 * 18 * 18 * 4
    assert (terms.q_l2, terms.q_l3, terms.q_mem) == (terms.bytes,) * 3


@pytest.mark.filterwarnings("ignore::presk.diagnostics.PlanWarning")  # a tile wider than 16 registers, on purpose
def test_analysis_is_fast() -> None:
    widest = target_machine().register_width("f32")
    dot = gemm(256, "f32", {"tile": [4, 32], "lanes": widest, "kblock": 128, "order": "IJK"})
    machine = MachineDesc.of(target_machine())
    kernel_terms(dot, machine, 2, frozenset(RULES))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        terms = kernel_terms(dot, machine, 2, frozenset(RULES))
        times.append(time.perf_counter() - start)
    assert isinstance(terms, KernelTerms)
    # A few milliseconds on a 2-core Xeon; the bound leaves room for a loaded machine.
    assert sorted(times)[2] < 0.05


# --------------------------------------------------------------------------- the rule `sets`


def sets_desc(ways: int, size: int = 512) -> MachineDesc:
    """An L1 of 4 sets × 2 ways × 64-byte lines (512 bytes; 0 ways: associativity not known), L2 and L3 large."""
    caches = (CacheLevel(1, size, 64, 1, ways), CacheLevel(2, BIG, 64, 1), CacheLevel(3, BIG, 64, 1))
    return MachineDesc(caches, 32, 64, 2)


def _reread(rows: int, cols: int, by_column: bool) -> str:
    """o[j] = 4 × Σ_i x[.., ..]: for each j the same `rows` elements are read 4 times over (loops j, r, i).

    by_column: x is rows × cols and j picks a column (x[i, j]); otherwise x is cols × rows and j picks a
    row (x[j, i]), the same bytes, contiguous.
    """
    shape, index = (f"{rows}x{cols}", "%i, %j") if by_column else (f"{cols}x{rows}", "%j, %i")
    return f"""
psk_kernel.kernel @reread(%x: memref<{shape}xf64>, %o: memref<{cols}xf64>) "t" {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %nr = arith.constant {rows} : index
  %nc = arith.constant {cols} : index
  %z = arith.constant 0.0 : f64
  scf.for %j = %c0 to %nc step %c1 {{
    %s = scf.for %r = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (f64) {{
      %t = scf.for %i = %c0 to %nr step %c1 iter_args(%a = %acc) -> (f64) {{
        %v = memref.load %x[{index}] : memref<{shape}xf64>
        %n = arith.addf %a, %v : f64
        scf.yield %n : f64
      }}
      scf.yield %t : f64
    }}
    memref.store %s, %o[%j] : memref<{cols}xf64>
  }} {{psk_kernel.parallel}}
}}
"""


def test_sets_charge_a_column_whose_rows_share_one_set() -> None:
    column = kernel(_reread(8, 32, by_column=True))
    # x is 8 rows of 32 f64 (256 bytes = 4 lines); a cache way is 4 sets · 64 bytes = 256 bytes, so every row
    # starts in set 0 and column j's 8 elements lie in 8 lines of one set (the set of byte 8j within a row).
    # Without the rule: x (2048 bytes) does not fit 512, column j (8 f64 = 64 bytes) does: once per j,
    # 32·64 = 2048. o (32 f64, 256 bytes) fits: 256.
    assert kernel_terms(column, sets_desc(2)).q_l2 == 2048 + 256
    # Under `sets`: column j needs 8 lines of a set of 2 ways: it does not fit in the j iteration, nor in the
    # r loop, nor in one r iteration (the i loop walks the column); one element does: 32·4·8 loads of 8 bytes
    # = 8192. o: 4 consecutive lines, one per set: fits, 256.
    assert kernel_terms(column, sets_desc(2), rules=frozenset({"sets"})).q_l2 == 8192 + 256
    # The levels that do not say their ways (L2, L3 here) hold everything: 2048 + 256 from L3 and memory.
    terms = kernel_terms(column, sets_desc(2), rules=frozenset({"sets"}))
    assert (terms.q_l3, terms.q_mem) == (2048 + 256, 2048 + 256)


def test_sets_leave_a_contiguous_footprint_of_the_same_bytes_alone() -> None:
    rows = kernel(_reread(8, 32, by_column=False))
    # x is 32 rows of 8 f64 and j reads row j: 64 bytes, one line: it fits with or without the rule, once
    # per j: 32·64 = 2048; o: 256.
    assert kernel_terms(rows, sets_desc(2)).q_l2 == 2048 + 256
    assert kernel_terms(rows, sets_desc(2), rules=frozenset({"sets"})).q_l2 == 2048 + 256


def test_sets_spread_a_stride_coprime_with_the_sets() -> None:
    column = kernel(_reread(8, 40, by_column=True))
    # Rows of 40 f64 = 320 bytes = 5 lines: row i starts in set 5i mod 4 = i mod 4, so column j's 8 lines fall
    # 2 in each of the 4 sets: exactly the 2 ways, it fits. Once per j: 40·64 = 2560; o (40 f64, 320 bytes =
    # 5 lines) fits: 320.
    assert kernel_terms(column, sets_desc(2), rules=frozenset({"sets"})).q_l2 == 2560 + 320
    # 4 sets of one way (256 bytes): 2 lines per set are too many, one element per iteration, 40·4·8·8 =
    # 10240, where without the rule column j (64 bytes) still fits, 2560. o (320 bytes) no longer fits;
    # each j brings its element (the store): 40·8 = 320 either way.
    assert kernel_terms(column, sets_desc(1, 256)).q_l2 == 2560 + 320
    assert kernel_terms(column, sets_desc(1, 256), rules=frozenset({"sets"})).q_l2 == 10240 + 320
    # 8 sets of one way (512 bytes): row i starts in set 5i mod 8, 8 distinct sets, one line each: it fits.
    assert kernel_terms(column, sets_desc(1, 512), rules=frozenset({"sets"})).q_l2 == 2560 + 320


def test_sets_without_ways_change_nothing() -> None:
    column = kernel(_reread(8, 32, by_column=True))
    # Ways 0: not known, the level is taken as fully associative: the footprints of the first test, 2048 + 256.
    assert kernel_terms(column, sets_desc(0), rules=frozenset({"sets"})).q_l2 == 2048 + 256
    for rules in (frozenset({"lines"}), frozenset({"shared"}), frozenset({"lines", "shared"})):
        assert kernel_terms(column, sets_desc(0), rules=rules | {"sets"}) == kernel_terms(column, sets_desc(0), rules=rules)


XEON = MachineDesc((CacheLevel(1, 48 << 10, 64, 1, 12), CacheLevel(2, 2 << 20, 64, 1, 16), CacheLevel(3, BIG, 64, 1)), 32, 64, 2)
"""This machine's L1d (48 KiB, 12 ways: 64 sets) and L2 (2 MiB, 16 ways: 2048 sets); L3 large."""


def _gemm_lanes() -> int:
    return 8 if 8 in target_machine().lane_widths("f64") else 4


@pytest.mark.filterwarnings("ignore::presk.diagnostics.PlanWarning")  # its tile spills on 16 registers; the sets are what is tested
@pytest.mark.parametrize("order", ["JI", "IJ"])
def test_sets_see_what_the_pack_gains(order: str) -> None:
    """f64 GEMM at N = 512, tile [4, 16]: operand 1 read in place (rows 4 KiB apart) or from the packed panel.

    A row of A, B or C is 512 f64 = 4 KiB = 64 lines. The tile's k loop reads A's 4 rows (16 KiB, contiguous)
    and B's column block: 512 rows of 16 f64 (128 bytes, 2 lines), 64 KiB in all; packed, the same 64 KiB
    are contiguous ([32, 512, 16]). The C tile is 4 rows of 128 bytes, 512 bytes.
    """
    layout = {"tile": [4, 16], "lanes": _gemm_lanes(), "order": order}
    unpacked = gemm(512, "f64", layout)
    packed = gemm(512, "f64", {**layout, "pack": True})
    shared, both = frozenset({"shared"}), frozenset({"shared", "sets"})
    tiles = (512 // 4) * (512 // 16)  # 4096 executions of the k loop
    k_loop = 16384 + 65536  # A's 4 rows and B's block
    c_tiles = tiles * 512  # each C tile stored once: 2 MiB
    # q_l2 (L1 of 48 KiB): the k loop (80 KiB) does not fit; one k iteration does (A 4 elements, B 2 lines:
    # under `sets` A's 4 lines sit in one set, 4 of 12 ways) and consecutive ones share: the k loop's
    # footprint once per tile, plus the C tiles: 4096·81920 + 2 MiB, in every case.
    for dot in (unpacked, packed):
        for rules in (shared, both):
            assert kernel_terms(dot, XEON, rules=rules).q_l2 == tiles * k_loop + c_tiles
    # q_l3 (L2 of 2 MiB), without `sets`: a tile's k loop and C tile (82432 bytes) fit, and the loop around
    # it brings its footprint once: JI (i inside j) once per j, A 2 MiB + B's block 64 KiB + C's 64 KiB
    # block, 32 times; IJ (j inside i) once per i, A's 4 rows 16 KiB + B 2 MiB + C's 4 rows 16 KiB, 128 times.
    once = 32 * (2**21 + 65536 + 65536) if order == "JI" else 128 * (16384 + 2**21 + 16384)
    for dot in (unpacked, packed):
        assert kernel_terms(dot, XEON, rules=shared).q_l3 == once
    # Under `sets` and `shared`: L2's way (128 KiB) is 32 pages, so L2 is seen as the 64 sets a page spans with
    # 16·32 = 512 ways each. In place, B's block is 512 rows 4 KiB apart, each row's 2 lines in the same 2 sets:
    # 512 lines in each, all 512 ways. A's 4 rows (256 consecutive lines) and the C tile (8 lines) add
    # ⌈264 / 64⌉ = 5 lines to the busiest: 517 > 512. The tile no longer fits L2: its k loop comes from L3
    # every time, like L1's, 4096·81920 + 2 MiB.
    assert kernel_terms(unpacked, XEON, rules=both).q_l3 == tiles * k_loop + c_tiles
    # Packed, B's block is 1024 consecutive lines, 16 per set: 16 + 5 ≤ 512, the same as without the rule.
    assert kernel_terms(packed, XEON, rules=both).q_l3 == once
    # `sets` alone: B's block needs 512 lines in each of its 2 sets, exactly their ways, and fits by itself.
    assert kernel_terms(unpacked, XEON, rules=frozenset({"sets"})).q_l3 == kernel_terms(unpacked, XEON).q_l3


def test_sets_above_the_page_are_the_physical_pages_not_the_stride() -> None:
    """Column j of x (32 rows 128 KiB apart, 16 384 f64 each) read 4 times over, on the Xeon's levels.

    L1's way is a page (64 sets × 64 bytes): the 32 lines fall in one set of 12 ways and evict each other, so
    each of the 4 reads of the column comes from L2, 16 384 · 4 · 256 bytes. L2's way is 128 KiB, 32 pages:
    which of its sets a line takes depends on the physical page, so it is seen as 64 sets of 16 · 32 ways, and
    the column (32 lines in one of them) stays: brought once per j, 16 384 · 256. o: 128 KiB, once.
    """
    column = kernel(_reread(32, 16384, by_column=True))
    terms = kernel_terms(column, XEON, rules=frozenset({"sets"}))
    assert terms.q_l2 == 16384 * 4 * 256 + 131072
    assert terms.q_l3 == 16384 * 256 + 131072


def test_runs_a_page_apart_are_counted_apart_in_whole_lines() -> None:
    """q_l2_scattered, q_l3_scattered: what q_l2 and q_l3 bring in runs a page or more apart, in whole lines."""
    # Column j of x (64 rows of 512 f64: 4 KiB apart) read 4 times over. An L2 of 1 KiB holds the column
    # (64 elements, 512 bytes), not x: each column comes from L3 once, 512·512 bytes, all of it in runs of one
    # element a page apart. Each run waits for its whole line: 512 columns · 64 lines of 64 bytes, eight times
    # the bytes. o (4 KiB) comes an element at a time: 512·8, not scattered.
    column = kernel(_reread(64, 512, by_column=True))
    terms = kernel_terms(column, desc(l2=1024))
    assert (terms.q_l3, terms.q_l3_scattered) == (512 * 512 + 4096, 512 * 64 * 64)
    # An L1 of 1 KiB and L2, L3 large: the columns come so from L2, and x from L3 once, whole, a stream.
    from_l2 = kernel_terms(column, desc(l1=1024))
    assert (from_l2.q_l2, from_l2.q_l2_scattered) == (512 * 512 + 4096, 512 * 64 * 64)
    assert (from_l2.q_l3, from_l2.q_l3_scattered) == (512 * 512 + 4096, 0)
    # The same bytes read a row at a time (x is 512 rows of 64 f64): one run each, nothing scattered.
    rows = kernel_terms(kernel(_reread(64, 512, by_column=False)), desc(l1=1024, l2=1024))
    assert (rows.q_l2, rows.q_l2_scattered, rows.q_l3, rows.q_l3_scattered) == (512 * 512 + 4096, 0, 512 * 512 + 4096, 0)
    # Rows 2 KiB apart share their pages: not scattered.
    near = kernel_terms(kernel(_reread(64, 256, by_column=True)), desc(l1=1024, l2=1024))
    assert (near.q_l2_scattered, near.q_l3_scattered) == (0, 0)
    # From L2 (x fits it whole) nothing comes from L3 at all.
    assert kernel_terms(column, desc()).q_l3_scattered == 0


ACCUMULATE_BY_BLOCKS = """
psk_kernel.kernel @blocks(%x: memref<8x64xf64>, %o: memref<64xf64>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  scf.for %b = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c64 step %c1 {
      %v = memref.load %o[%j] : memref<64xf64>
      %a = memref.load %x[%b, %j] : memref<8x64xf64>
      %s = arith.addf %v, %a : f64
      memref.store %s, %o[%j] : memref<64xf64>
    } {psk_kernel.parallel}
  }
}
"""
"""o[j] += x[b, j] for each of 8 blocks b: the output row read and written again at every block, as a
register tile's sums are between two k-blocks."""


def test_the_written_buffers_part_of_l2_is_counted_apart() -> None:
    """q_l2_written: of q_l2, the bytes of the buffers the kernel writes."""
    blocks = kernel(ACCUMULATE_BY_BLOCKS)
    # An L1 of 256 bytes holds neither o (512 bytes) nor a row of x: o comes back at each of the 8 blocks,
    # 8 · 512 bytes, and x once, 4 096.
    small = kernel_terms(blocks, desc(l1=256))
    assert (small.q_l2, small.q_l2_written) == (8 * 512 + 4096, 8 * 512)
    # An L1 of 1 KiB holds o: it comes once, and x a row a block.
    held = kernel_terms(blocks, desc(l1=1024))
    assert (held.q_l2, held.q_l2_written) == (512 + 4096, 512)


def test_machine_description_keeps_the_ways() -> None:
    assert MachineDesc.from_json(XEON.to_json()) == XEON
    # A profile written before the ways were known: its caches read back with 0 (not known).
    old = {"caches": [{"level": 1, "size": 512, "line": 64, "shared_by": 1}], "vector_registers": 32, "line": 64,
           "workers": 2}  # fmt: skip
    assert MachineDesc.from_json(old).caches == (CacheLevel(1, 512, 64, 1, 0),)
    assert "ways" not in MachineDesc.from_json(old).to_json()["caches"][0]


PACK_ROWS = """
psk_kernel.kernel @pack(%a: memref<4x$Nx$T>, %o: memref<3x4x$Lx$T>) "t" {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %cl = arith.constant $L : index
  scf.for %k = %c0 to %c4 step %c1 {
    scf.for %b = %c0 to %c3 step %c1 {
      %j = arith.muli %b, %cl : index
      %row = vector.load %a[%k, %j] : memref<4x$Nx$T>, vector<$Lx$T>
      vector.store %row, %o[%b, %k, %c0] : memref<3x4x$Lx$T>, vector<$Lx$T>
    } {psk_kernel.parallel}
  } {psk_kernel.parallel}
}
"""
