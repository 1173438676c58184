"""The plan's second check (`psk-verify-layout`): a nest's layout at its launch shapes, types and machine.

The seed's "Well-formedness" conditions 3 (the tile and the k-block are no
larger than their axes, and a tile divides the axes whose block loops the
k-block loop encloses; a row-wise contraction has no tile, k-block, order
or pack), 4
(lanes are one or a register width of the storage type, divide the tile's
n_j, and on an NT contraction need the pack), 5 (a split's workers are the
machine's or half of them), 7 (a running sum kept in the output buffer and
two softmax passes only where the storage type is the arithmetic type), 8
(the split's loop is parallel with two iterations or more) and the
epilogue's, each accepted and refused. The seed's 9 (a pack only on an NT
contraction) is lifted: an NN contraction's pack is a blocked panel, and
a pack is accepted on every tiled contraction. The machine-dependent
conditions run on two fake machines, an AVX2 one (256-bit
registers: f32 lanes 8, f64 lanes 4) and an AVX-512 one (f32 8 and 16, f64
4 and 8), never on the host's, so the tests mean the same everywhere.

`test_every_point_*` sweep the whole tiled space of four nests (a square
dot, attention's two eins, a dot whose I, J and K most tiles and k-blocks
do not divide: 6, 12 and 48) in f64,
f32 and bf16 on both machines, against `oracle`, which restates the
conditions from the seed independently of the implementation: every point
is refused exactly when the oracle finds a violated condition, and with the
first one the oracle finds.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import pytest

from presk.target import THREADS_ENV, Machine
from presk.diagnostics import PreskError
from presk.dialects.psk_realize import LayoutAttr, SiteOp, layout_error
from presk.dialects.psk_realize_layout import (
    KBLOCKS,
    LANES,
    ORDERS_WITH_KBLOCK,
    ORDERS_WITHOUT_KBLOCK,
    TILE_COLS,
    TILE_ROWS,
)
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.passes.verify_layout import (
    FIRST_CHECK,
    LayoutViolation,
    VerifyLayouts,
    check_layouts,
    launch_layout,
    layout_violation,
    site_loops,
)

AVX2 = Machine("x86_64-unknown-linux-gnu", "haswell", frozenset({"avx", "avx2", "fma"}), cores=4, vector_bits=256)
AVX512 = Machine(
    "x86_64-unknown-linux-gnu", "skylake-avx512", frozenset({"avx", "avx2", "fma", "avx512f"}), cores=2, vector_bits=512
)
MACHINES = {"avx2": AVX2, "avx512": AVX512}
REALIZE = {"f64": "<f64, f64>", "f32": "<f32, f32>", "bf16": "<bf16, f32>"}


@pytest.fixture(autouse=True)
def _no_thread_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)


# --------------------------------------------------------------------------
# Programs.


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(v)


def layout_text(decisions: Mapping[str, Any]) -> str:
    return " layout <" + ", ".join(f"{k} = {_value(v)}" for k, v in decisions.items()) + ">" if decisions else ""


DOT = """
!A = !psk_core.tensor<[i: {I}, k: {K}]>
!W = !psk_core.tensor<[k: {K}, j: {J}]>
!O = !psk_core.tensor<[i: {I}, j: {J}]>
func.func @f(%a: !A, %w: !W) -> !O {{
  %0 = psk_realize.nest "f/%0" realize {R}{L} : !O {{
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }}
  func.return %0 : !O
}}
"""

SCORES = """
!Q = !psk_core.tensor<[batch: {B}, heads: {H}, seq: {I}, hd: {K}]>
!K = !psk_core.tensor<[batch: {B}, heads: {H}, seq2: {J}, hd: {K}]>
!S = !psk_core.tensor<[batch: {B}, heads: {H}, seq: {I}, seq2: {J}]>
func.func @f(%q: !Q, %k: !K) -> !S {{
  %0 = psk_realize.nest "f/%0" realize {R}{L} : !S {{
    %0 = psk_core.ein %q[batch, heads, seq, hd], %k[batch, heads, seq2, hd] : !S
    psk_realize.yield %0 : !S
  }}
  func.return %0 : !S
}}
"""

VALUES = """
!P = !psk_core.tensor<[batch: {B}, heads: {H}, seq: {I}, seq2: {K}]>
!V = !psk_core.tensor<[batch: {B}, heads: {H}, seq2: {K}, hd: {J}]>
!O = !psk_core.tensor<[batch: {B}, heads: {H}, seq: {I}, hd: {J}]>
func.func @f(%p: !P, %v: !V) -> !O {{
  %0 = psk_realize.nest "f/%0" realize {R}{L} : !O {{
    %0 = psk_core.ein %p[batch, heads, seq, seq2], %v[batch, heads, seq2, hd] : !O
    psk_realize.yield %0 : !O
  }}
  func.return %0 : !O
}}
"""

SOFTMAX = """
!S = !psk_core.tensor<[s: {I}, t: {J}]>
func.func @f(%x: !S) -> !S {{
  %0 = psk_realize.nest "f/%0" realize {R}{L} : !S {{
    %0 = psk_core.softmax %x [t] : !S
    psk_realize.yield %0 : !S
  }}
  func.return %0 : !S
}}
"""

GROUP = """
!X = !psk_core.tensor<[n: {I}, m: {J}]>
func.func @f(%x: !X) -> !X {{
  %0 = psk_realize.group "f/%0" realize {R}{L} : !X {{
    %0 = psk_core.exp %x : !X
    psk_realize.yield %0 : !X
  }}
  func.return %0 : !X
}}
"""

SUM = """
!X = !psk_core.tensor<[n: {I}, m: {J}]>
!R = !psk_core.tensor<[n: {I}]>
func.func @f(%x: !X) -> !R {{
  %0 = psk_realize.nest "f/%0" realize {R}{L} : !R {{
    %0 = psk_core.sum %x [m] : !R
    psk_realize.yield %0 : !R
  }}
  func.return %0 : !R
}}
"""

EPILOGUE = """
!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!T = {T}
func.func @f(%a: !A, %w: !W, %t: !T) -> !O {{
  %0 = psk_realize.nest "f/%0" realize <f32, f32>{L} : !O {{
    %0 = psk_core.dot %a, %w : !O
    psk_realize.yield %0 : !O
  }}
  %1 = psk_realize.group "f/%1" realize <f32, f32> : !O {{
    %1 = psk_core.add %0, %t : !O
    psk_realize.yield %1 : !O
  }}
  func.return %1 : !O
}}
"""


def site_of(
    template: str, layout: Mapping[str, Any] | None = None, storage: str = "f32", verify: bool = True, **sizes: Any
) -> SiteOp:
    """The site "f/%0" of `template` at `sizes` (I, J, K, B, H; T for EPILOGUE's operand type)."""
    values = {"I": 4, "J": 16, "K": 32, "B": 2, "H": 2, **sizes}
    text = template.format(R=REALIZE[storage], L=layout_text(layout or {}), **values)
    parsed = parse_module(presk_context(), text, "test.mlir")
    if verify:
        parsed.verify()
    return next(op for op in parsed.module.walk() if isinstance(op, SiteOp) and op.site_name == "f/%0")


def check(site: SiteOp, machine: Machine = AVX512, env: Mapping[str, int] | None = None) -> LayoutViolation | None:
    return layout_violation(site, env or {}, machine)


def refused(site: SiteOp, machine: Machine = AVX512, env: Mapping[str, int] | None = None) -> LayoutViolation:
    violation = check(site, machine, env)
    assert violation is not None, "expected the layout to be refused"
    return violation


# --------------------------------------------------------------------------
# The message.


NO_LARGER = (
    "a tile is no larger than its axes (one that does not divide an axis ends its last block at the axis's end, "
    "shifted back)"
)
KBLOCK_NO_LARGER = (
    'a k-block is no larger than K (one that does not divide K cuts its last block short; "none" sums K in one block)'
)


def exceeds(name: str, block: int, letter: str, axis: str, size: int) -> str:
    return f"the tile's {name} = {block} exceeds {letter} ({axis}) = {size}: {NO_LARGER}"


def enclosed(name: str, block: int, letter: str, axis: str, size: int, order: str) -> str:
    return (
        f"the tile's {name} = {block} does not divide {letter} ({axis}) = {size}, and with the order \"{order}\" "
        f"the k-block loop encloses the {letter} block loop: the running sums wait in the output buffer from one "
        "block of K to the next, where a last tile shifted back over the one before it would add their shared "
        "elements' block twice"
    )


def test_message_names_the_nest_the_decision_and_the_condition() -> None:
    site = site_of(SCORES, {"tile": [4, 16], "pack": True}, I=8, J=8)
    violation = refused(site)
    assert violation == LayoutViolation(3, "tile", exceeds("n_j", 16, "J", "seq2", 8))
    assert violation.message("f/%2") == (
        'E7002: nest "f/%2", decision "tile": condition 3: the tile\'s n_j = 16 exceeds J (seq2) = 8: ' + NO_LARGER
    )
    assert violation.message("f/%2") == layout_error("f/%2", "tile", violation.text)


def test_the_pass_raises_e7002_at_the_nest() -> None:
    text = DOT.format(I=4, J=16, K=8, R=REALIZE["f32"], L=layout_text({"tile": [4, 16], "lanes": 4}))
    parsed = parse_module(presk_context(), text, "dot.mlir")
    parsed.verify()
    with pytest.raises(PreskError) as raised:
        check_layouts(parsed.module, {}, AVX2)
    error = raised.value
    assert error.code == "E7002"
    assert (error.file, error.line) == ("dot.mlir", 6)
    assert error.headline.startswith('E7002: nest "f/%0", decision "lanes": condition 4: lanes = 4 is not a register width')


def test_the_pass_is_registered_without_options() -> None:
    import dataclasses

    from presk.universe import PRESK_UNIVERSE

    assert PRESK_UNIVERSE.all_passes["psk-verify-layout"]() is VerifyLayouts
    assert VerifyLayouts.name == "psk-verify-layout"
    assert dataclasses.fields(VerifyLayouts) == ()


def test_a_layout_outside_its_domains_is_reported_as_the_first_check_would() -> None:
    site = site_of(DOT, {"lanes": 8}, verify=True)
    site.layout = LayoutAttr({"tile": [3, 5]})
    violation = refused(site)
    assert violation.condition == FIRST_CHECK
    assert violation.decision == "tile"
    assert violation.text == violation.reason  # no condition number: the first check's own words


def test_a_layout_hands_out_its_decisions_as_fresh_copies() -> None:
    """The checks read a layout's decisions from one decoding kept per JSON text: what `stated` and
    `defaults` return may be changed, a tile's list or a split's object inside it too, without changing the
    attribute or the next read; a deeper value (which the verifier refuses) reads back whole as well.
    `with_defaults` keeps the stated part as it is and drops the defaults it states."""
    layout = LayoutAttr({"split": {"depth": 0, "workers": 2}, "tile": [4, 16]}, {"kblock": 32, "order": "IJK"})
    stated, defaults = layout.stated, layout.defaults
    stated["tile"].append(99)
    stated["split"]["depth"] = 5
    stated["lanes"] = 8
    defaults["order"] = "JI"
    assert layout.stated == {"tile": [4, 16], "split": {"depth": 0, "workers": 2}}
    assert layout.defaults == {"kblock": 32, "order": "IJK"}
    assert layout.stated_json.data == '{"tile":[4,16],"split":{"depth":0,"workers":2}}'
    deep = LayoutAttr({"tile": [[1, 2], [3]]})
    deep.stated["tile"][0].append(7)
    got = deep.stated
    got["tile"][0].append(7)
    assert deep.stated == {"tile": [[1, 2], [3]]}
    both = layout.with_defaults({"tile": [1, 1], "kblock": "none", "lanes": 8})
    assert both == LayoutAttr(layout.stated, {"tile": [1, 1], "kblock": "none", "lanes": 8})
    assert both.stated == layout.stated and both.defaults == {"kblock": "none", "lanes": 8}


# --------------------------------------------------------------------------
# Condition 3: the tile and the k-block fit in the axes, a tile divides the axes of the block loops a
# k-block loop encloses; row-wise has none of them.


@pytest.mark.parametrize("m", TILE_ROWS)
@pytest.mark.parametrize("i_size", [1, 2, 4, 6, 12])
def test_condition_3_the_tiles_rows_fit_in_i(m: int, i_size: int) -> None:
    """A tile that does not divide I (4 rows of 6) shifts its last block back: only a larger one is refused."""
    violation = check(site_of(DOT, {"tile": [m, 8]}, I=i_size, J=16))
    if m <= i_size:
        assert violation is None
    else:
        assert violation == LayoutViolation(3, "tile", exceeds("m_i", m, "I", "i", i_size))


@pytest.mark.parametrize("n", TILE_COLS)
@pytest.mark.parametrize("j_size", [8, 12, 16, 24, 32, 48, 92])
def test_condition_3_the_tiles_columns_fit_in_j(n: int, j_size: int) -> None:
    violation = check(site_of(VALUES, {"tile": [1, n]}, J=j_size), AVX512)
    if n <= j_size:
        assert violation is None
    else:
        assert violation == LayoutViolation(3, "tile", exceeds("n_j", n, "J", "hd", j_size))


@pytest.mark.parametrize("kblock", [32, 128])
@pytest.mark.parametrize("k_size", [32, 48, 64, 70, 96, 128, 160, 256])
def test_condition_3_the_kblock_fits_in_k(kblock: int, k_size: int) -> None:
    """A k-block that does not divide K (32 of 70) cuts its last block short: only a larger one is refused."""
    violation = check(site_of(SCORES, {"kblock": kblock}, K=k_size))
    if kblock <= k_size:
        assert violation is None
    else:
        assert violation == LayoutViolation(3, "kblock", f"the k-block of {kblock} exceeds K (hd) = {k_size}: {KBLOCK_NO_LARGER}")


@pytest.mark.parametrize("order", ORDERS_WITH_KBLOCK)
def test_condition_3_a_tile_divides_j_where_the_kblock_loop_encloses_the_j_block_loop(order: str) -> None:
    """Running sums kept in the output between blocks of K allow no shifted last tile along J (24 = 16 + 8
    columns); along I (6 = 4 + 2 rows) the last tile clamps its rows instead, and the block loops outside
    the k-block loop, or with K last, shift theirs."""
    violation = check(site_of(DOT, {"tile": [4, 16], "kblock": 32, "order": order}, I=6, J=24, K=64))
    inside = order[order.index("K") + 1 :]
    if "J" in inside:
        assert violation == LayoutViolation(3, "tile", enclosed("n_j", 16, "J", "j", 24, order))
    else:
        assert violation is None
    # Where n_j divides J, every order is accepted, whatever I.
    assert check(site_of(DOT, {"tile": [4, 8], "kblock": 32, "order": order}, I=6, J=24, K=70)) is None


@pytest.mark.parametrize(
    "decision, value, shown",
    [("tile", [1, 8], "the tile is [1, 8]"), ("kblock", 32, "the k-block is 32"),
     ("order", "JI", 'the order is "JI"'), ("pack", True, "the pack is true")],
)  # fmt: skip
def test_condition_3_a_row_wise_contraction_has_no_tile_kblock_order_or_pack(decision: str, value: Any, shown: str) -> None:
    template = SCORES if decision == "pack" else DOT
    violation = refused(site_of(template, {"form": "row-wise", decision: value}, K=64))
    assert violation.condition == 3 and violation.decision == decision
    assert violation.reason.endswith(f"has no tile, k-block, J-block, order or pack, but {shown}")


def test_condition_3_a_row_wise_contraction_may_state_the_neutral_values() -> None:
    neutral = {"form": "row-wise", "tile": [1, 1], "kblock": "none", "order": "IJ", "lanes": 1, "pack": False}
    assert check(site_of(DOT, neutral)) is None
    assert check(site_of(SCORES, neutral)) is None


def test_condition_3_a_tile_on_a_dot_row_wise_by_default_says_how_to_tile_it() -> None:
    violation = refused(site_of(DOT, {"tile": [2, 4]}, J=12))
    assert violation.decision == "tile"
    assert violation.reason.endswith(
        'but the tile is [2, 4]; the form is row-wise by default here, since J (j) = 12 is not a multiple of eight: '
        'state "form": "tiled" for a tile'
    )
    assert check(site_of(DOT, {"form": "tiled", "tile": [2, 4]}, J=12)) is None


# --------------------------------------------------------------------------
# Condition 4: lanes.


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("lanes", LANES)
def test_condition_4_lanes_are_one_or_a_register_width_of_the_storage_type(machine: str, storage: str, lanes: int) -> None:
    widths = {("avx2", "f64"): (4,), ("avx2", "f32"): (8,), ("avx512", "f64"): (4, 8), ("avx512", "f32"): (8, 16)}
    allowed = (1, *widths.get((machine, storage), ()))
    violation = check(site_of(DOT, {"tile": [1, 16], "lanes": lanes}, storage), MACHINES[machine])
    if lanes in allowed:
        assert violation is None
    else:
        assert violation is not None and (violation.condition, violation.decision) == (4, "lanes")
        if storage == "bf16":
            assert "bf16 has no vector lanes on this machine" in violation.reason
        else:
            shown = ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}"
            assert violation.reason == (
                f"lanes = {lanes} is not a register width of this machine for {storage}: lanes are {shown}"
            )


def test_condition_4_sixteen_f32_lanes_need_avx512() -> None:
    site = site_of(SCORES, {"tile": [4, 16], "lanes": 16, "pack": True})
    assert check(site, AVX512) is None
    assert refused(site, AVX2).reason == "lanes = 16 is not a register width of this machine for f32: lanes are 1 or 8"


@pytest.mark.parametrize("n", TILE_COLS)
@pytest.mark.parametrize("lanes", [8, 16])
def test_condition_4_lanes_divide_the_tiles_columns(n: int, lanes: int) -> None:
    violation = check(site_of(DOT, {"tile": [1, n], "lanes": lanes}, J=32), AVX512)
    if n % lanes == 0:
        assert violation is None
    else:
        assert violation == LayoutViolation(4, "lanes", f"lanes = {lanes} do not divide the tile's n_j = {n}")


def test_condition_4_lanes_on_an_nt_contraction_need_the_pack() -> None:
    unpacked = refused(site_of(SCORES, {"tile": [1, 8], "lanes": 8}), AVX2)
    assert (unpacked.condition, unpacked.decision) == (4, "lanes")
    assert "need the pack: operand 1 carries K (hd) innermost, so J (seq2) is not contiguous" in unpacked.reason
    assert check(site_of(SCORES, {"tile": [1, 8], "lanes": 8, "pack": True}), AVX2) is None
    assert check(site_of(VALUES, {"tile": [1, 8], "lanes": 8}), AVX2) is None  # NN: contiguous already


def test_condition_4_a_row_wise_contraction_has_one_lane() -> None:
    violation = refused(site_of(DOT, {"form": "row-wise", "lanes": 8}))
    assert (violation.condition, violation.decision) == (4, "lanes")
    assert violation.reason.endswith("a row-wise contraction has no tile: its lanes are 1")


def test_condition_4_the_executors_widest_lanes_are_not_checked() -> None:
    site = site_of(DOT, {"tile": [1, 4]})  # default lanes "widest": 16 and 8 do not divide 4, the executor takes 1
    assert launch_layout(site, {})["lanes"] == "widest"
    assert check(site, AVX512) is None


# --------------------------------------------------------------------------
# Condition 5: workers.


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 8, 10])
def test_condition_5_workers_are_the_machines_or_half(workers: int) -> None:
    split = {"depth": 0, "workers": workers}
    for template in (DOT, SOFTMAX, GROUP, SUM):
        violation = check(site_of(template, {"split": split}, I=32), AVX2)  # 4 cores: 4 or 2
        if workers in (4, 2):
            assert violation is None
        else:
            assert violation == LayoutViolation(
                5, "split", f"a split's workers are this machine's 4 or half of them (2), not {workers}"
            )


def test_condition_5_presk_threads_sets_the_machines_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    site = site_of(GROUP, {"split": {"depth": 0, "workers": 6}}, I=8)
    assert refused(site, AVX512).condition == 5
    monkeypatch.setenv(THREADS_ENV, "12")
    assert check(site, AVX512) is None
    monkeypatch.setenv(THREADS_ENV, "6")
    assert check(site, AVX512) is None
    monkeypatch.setenv(THREADS_ENV, "1")
    assert refused(site, AVX512).reason == "a split's workers are this machine's 1 or half of them (1), not 6"


def test_condition_5_no_split_and_the_executors_split_are_not_checked() -> None:
    assert check(site_of(GROUP, {"split": "none"}), AVX2) is None
    assert launch_layout(site_of(GROUP), {})["split"] == "executor"
    assert check(site_of(GROUP), AVX2) is None


# --------------------------------------------------------------------------
# Condition 7: a running sum in the output buffer, two passes: storage = arithmetic.


@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
def test_condition_7_the_row_wise_form(storage: str) -> None:
    violation = check(site_of(DOT, {"form": "row-wise"}, storage))
    if storage != "bf16":
        assert violation is None
    else:
        assert violation is not None and (violation.condition, violation.decision) == (7, "form")
        assert "stored in bf16 while the arithmetic is f32" in violation.reason


@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("order", ORDERS_WITH_KBLOCK)
def test_condition_7_a_kblock_loop_enclosing_a_block_loop(storage: str, order: str) -> None:
    violation = check(site_of(DOT, {"kblock": 32, "order": order}, storage, K=64))
    if storage != "bf16" or order.endswith("K"):
        assert violation is None
    else:
        assert violation is not None and (violation.condition, violation.decision) == (7, "order")
        enclosed = " and ".join(f"the {x} block loop" for x in order[order.index("K") + 1 :])
        assert violation.reason.startswith(f'with the order "{order}" the k-block loop encloses {enclosed}, ')


def test_condition_7_a_kblock_without_an_order_is_innermost() -> None:
    site = site_of(DOT, {"kblock": 32}, "bf16", K=64)
    assert launch_layout(site, {})["order"] == "IJK"
    assert check(site) is None


@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("passes", [2, 3])
def test_condition_7_two_softmax_passes(storage: str, passes: int) -> None:
    violation = check(site_of(SOFTMAX, {"passes": passes}, storage))
    if storage != "bf16" or passes == 3:
        assert violation is None
    else:
        assert violation is not None and (violation.condition, violation.decision) == (7, "passes")


# --------------------------------------------------------------------------
# Condition 8: the split's loop.


def test_condition_8_the_loops_of_a_contraction_follow_its_outer_axes_and_order() -> None:
    site = site_of(SCORES, {"tile": [4, 16], "kblock": 32, "order": "JKI"}, I=8, J=32, K=64)
    loops = site_loops(site, launch_layout(site, {}), {}, site.result.type)
    assert [(loop.what, loop.iterations, loop.parallel) for loop in loops] == [
        ("the loop over batch", 2, True),
        ("the loop over heads", 2, True),
        ("the J block loop (seq2 in blocks of 16)", 2, True),
        ("the k-block loop (hd in blocks of 32), which sums", 2, False),
        ("the I block loop (seq in blocks of 4)", 2, True),
        ("the loop over K (hd), which sums", 32, False),
    ]
    row_wise = site_of(DOT, {"form": "row-wise"})
    loops = site_loops(row_wise, launch_layout(row_wise, {}), {}, row_wise.result.type)
    assert [loop.parallel for loop in loops] == [True, False, True]


@pytest.mark.parametrize(
    "template, layout, depth, expected",
    [
        (SCORES, {}, 0, None),
        (SCORES, {}, 1, None),
        (SCORES, {}, 2, None),  # the I block loop: seq = 4 in blocks of 1
        (DOT, {}, 0, None),
        (DOT, {}, 1, None),
        (DOT, {}, 2, "the split's loop at depth 2 is the loop over K (k), which sums, so it is not parallel"),
        (DOT, {"tile": [4, 8]}, 0, ("the split's loop at depth 0 is the I block loop (i in blocks of 4), "
                                    "with 1 iteration; a split divides a loop of two iterations or more")),
        (DOT, {"tile": [2, 16], "order": "JI"}, 0, ("the split's loop at depth 0 is the J block loop (j in blocks of 16), "
                                                    "with 1 iteration; a split divides a loop of two iterations or more")),
        (DOT, {"kblock": 32, "order": "KIJ"}, 0, ("the split's loop at depth 0 is the k-block loop (k in blocks of 32), "
                                                  "which sums, so it is not parallel")),
        (DOT, {"form": "row-wise"}, 0, None),
        (DOT, {"form": "row-wise"}, 1, "the split's loop at depth 1 is the loop over K (k), which sums, so it is not parallel"),
        (DOT, {"form": "row-wise"}, 2, None),
        (SOFTMAX, {"passes": 2}, 0, None),
        # three passes run the kept axis in blocks of rows (softmax.row_blocks): s = 4 is one block
        (SOFTMAX, {}, 0, "the split's loop at depth 0 is the loop over s in blocks of 4 rows, with 1 iteration; a split divides a loop of two iterations or more"),
        (SOFTMAX, {}, 1, "the split's loop at depth 1 is the loop over t, which sums, so it is not parallel"),
        (SUM, {}, 0, None),
        (SUM, {}, 1, "the split's loop at depth 1 is the loop over m, which sums, so it is not parallel"),
        (GROUP, {}, 1, None),
        (GROUP, {}, 2, "the nest has 2 loops (the loop over n, the loop over m): there is no loop at depth 2 to split"),
    ],
)  # fmt: skip
def test_condition_8_the_split_loop_is_parallel_with_two_iterations(
    template: str, layout: dict[str, Any], depth: int, expected: str | None
) -> None:
    site = site_of(template, {**layout, "split": {"depth": depth, "workers": 2}}, K=64)
    violation = check(site, AVX512)
    assert violation == (None if expected is None else LayoutViolation(8, "split", expected))


def test_condition_8_one_iteration_of_an_outer_axis() -> None:
    violation = refused(site_of(SCORES, {"split": {"depth": 0, "workers": 2}}, B=1))
    assert violation.reason == (
        "the split's loop at depth 0 is the loop over batch, with 1 iteration; a split divides a loop of two iterations or more"
    )


# --------------------------------------------------------------------------
# The seed's condition 9 (a pack only on an NT contraction) is lifted.


@pytest.mark.parametrize("template", [DOT, VALUES, SCORES])
def test_a_pack_on_any_tiled_contraction(template: str) -> None:
    """NT: a transposed panel; NN: a blocked panel (`psk-pack`). Row-wise, a pack stays refused (condition 3)."""
    assert check(site_of(template, {"tile": [2, 8], "pack": True})) is None
    row_wise = refused(site_of(template, {"form": "row-wise", "pack": True}))
    assert (row_wise.condition, row_wise.decision) == (3, "pack")
    assert check(site_of(template, {"pack": False})) is None


# --------------------------------------------------------------------------
# The epilogue at launch.


@pytest.mark.parametrize(
    "operand", ["[j: 16]", "[i: 4]", "[i: 4, j: 16]"],
)
def test_the_epilogue_accepts_every_operand_that_broadcasts(operand: str) -> None:
    site = site_of(EPILOGUE, {"tile": [4, 16], "lanes": 16, "epilogue": True}, T=f"!psk_core.tensor<{operand}>")
    assert check(site) is None


def test_the_epilogue_refuses_a_widening_operand() -> None:
    site = site_of(EPILOGUE, {"epilogue": True}, T="!psk_core.tensor<[n: 2, j: 16]>", verify=False)
    violation = refused(site)
    assert (violation.condition, violation.decision) == ("epilogue", "epilogue")
    assert violation.text.startswith("the epilogue's condition: the add's other operand carries n, which the product's output [i, j] lacks")
    longer = refused(site_of(EPILOGUE, {"epilogue": True}, T="!psk_core.tensor<[j: 32]>", verify=False))
    assert longer.reason.startswith("the add's other operand has j = 32 where the product's output has j = 16")


def test_the_epilogue_with_lanes_runs_along_j_innermost_or_not_at_all() -> None:
    transposed = "!psk_core.tensor<[j: 16, i: 4]>"
    assert check(site_of(EPILOGUE, {"tile": [4, 16], "lanes": 1, "epilogue": True}, T=transposed, verify=False)) is None
    violation = refused(site_of(EPILOGUE, {"tile": [4, 16], "lanes": 8, "epilogue": True}, T=transposed, verify=False))
    assert violation.reason.endswith("with lanes it runs along J as its innermost axis or not at all")


def test_the_epilogue_evaluates_the_structural_conditions_again() -> None:
    from presk.dialects import psk_core as core

    site = site_of(EPILOGUE, {"epilogue": True}, T="!psk_core.tensor<[j: 16]>")
    assert check(site) is None
    # A second reader, added after the first check: the second check refuses the epilogue.
    site.parent_block().insert_op_after(core.ExpOp(site.result), site)
    assert refused(site) == LayoutViolation(
        "epilogue", "epilogue", "the product's value has 2 readers; an epilogue needs one add or mul alone to read it"
    )


# --------------------------------------------------------------------------
# Sizes: bound through the environment, or decided at launch.


def test_sizes_are_bound_through_the_environment() -> None:
    text = DOT.format(I="N", J="M", K=8, R=REALIZE["f32"], L=layout_text({"tile": [4, 16]}))
    parsed = parse_module(presk_context(), text, "dot.mlir")
    parsed.verify()
    site = next(op for op in parsed.module.walk() if isinstance(op, SiteOp))
    assert check(site, env={}) is None  # nothing bound: decided at launch
    assert check(site, env={"N": 8, "M": 32}) is None
    assert check(site, env={"N": 6, "M": 24}) is None  # each last tile shifted back
    assert refused(site, env={"N": 2, "M": 32}).reason == exceeds("m_i", 4, "I", "i", 2)
    assert refused(site, env={"N": 8, "M": 8}).reason == exceeds("n_j", 16, "J", "j", 8)


def test_an_unbound_j_leaves_the_dots_default_form_to_the_launch() -> None:
    text = DOT.format(I=4, J="M", K=8, R=REALIZE["f32"], L=layout_text({"lanes": 8}))
    parsed = parse_module(presk_context(), text, "dot.mlir")
    parsed.verify()
    site = next(op for op in parsed.module.walk() if isinstance(op, SiteOp))
    assert check(site, env={}) is None
    assert launch_layout(site, {"M": 16})["tile"] == [1, 8]
    assert check(site, env={"M": 16}) is None
    # J = 12: the default form is row-wise, which has one lane.
    assert refused(site, env={"M": 12}).condition == 4


# --------------------------------------------------------------------------
# Every point of the tiled space, against an oracle restating the seed.


NESTS = {
    "square dot": (DOT, {"I": 16, "J": 16, "K": 128}, False),
    "scores": (SCORES, {"I": 16, "J": 32, "K": 32}, True),
    "values": (VALUES, {"I": 8, "J": 16, "K": 64}, False),
    "dot 6x12x48": (DOT, {"I": 6, "J": 12, "K": 48}, False),
}
WIDTHS = {"avx2": {"f64": (4,), "f32": (8,), "bf16": ()}, "avx512": {"f64": (4, 8), "f32": (8, 16), "bf16": ()}}


def oracle(point: Mapping[str, Any], sizes: Mapping[str, int], nt: bool, storage: str, machine: str) -> int | None:
    """The first condition a tiled point violates (3, 4, 7), restated from the seed's text (its 9 lifted).

    Condition 3 as presk states it: a tile and a k-block no larger than their
    axes, and a tile's n_j dividing J where the k-block loop encloses the J
    block loop (there the running sums wait in the output, and a last tile
    shifted back would add a block twice; the I block loop's last tile
    clamps its rows instead)."""
    m, n = point["tile"]
    kblock = point["kblock"]
    if m > sizes["I"] or n > sizes["J"] or (kblock != "none" and kblock > sizes["K"]):
        return 3
    inside = point["order"][point["order"].index("K") + 1 :] if kblock != "none" else ""
    if "J" in inside and sizes["J"] % n:
        return 3
    # "both": operand 0's panel holds whole blocks of the tile's rows, which such a loop's clamped rows are not.
    if point["pack"] == "both" and (m == 1 or ("I" in inside and sizes["I"] % m)):
        return 3
    lanes = point["lanes"]
    if lanes != 1 and (lanes not in WIDTHS[machine][storage] or n % lanes or (nt and not point["pack"])):
        return 4
    if storage == "bf16" and kblock != "none" and point["order"][-1] != "K":
        return 7
    return None


def tiled_points() -> list[dict[str, Any]]:
    tiles = [[1, 1]] + [[m, n] for m in TILE_ROWS for n in TILE_COLS]
    points = []
    for tile, kblock, lanes, pack in itertools.product(tiles, KBLOCKS, LANES, (False, True, "both")):
        orders = ORDERS_WITHOUT_KBLOCK if kblock == "none" else ORDERS_WITH_KBLOCK
        for order in orders:
            points.append({"form": "tiled", "tile": tile, "kblock": kblock, "order": order, "lanes": lanes, "pack": pack})
    return points


@pytest.mark.parametrize("nest", NESTS)
@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("machine", MACHINES)
def test_every_point_is_refused_exactly_where_the_oracle_says(nest: str, storage: str, machine: str) -> None:
    template, sizes, nt = NESTS[nest]
    site = site_of(template, {}, storage, **sizes)
    refusals: dict[int, int] = {}
    points = tiled_points()
    for point in points:
        site.layout = LayoutAttr(point)
        violation = check(site, MACHINES[machine])
        expected = oracle(point, sizes, nt, storage, machine)
        got = None if violation is None else violation.condition
        assert got == expected, (point, violation)
        if got is not None:
            refusals[got] = refusals.get(got, 0) + 1
    assert len(points) == 21 * (2 + 2 * 6) * len(LANES) * 3  # 21 tiles: [1, 1] and 5 m_i × 4 n_j; three packs
    assert sum(refusals.values()) < len(points)  # every nest has accepted points


@pytest.mark.parametrize("nest", NESTS)
@pytest.mark.parametrize("storage", ["f64", "f32", "bf16"])
def test_every_row_wise_point(nest: str, storage: str) -> None:
    """Row-wise: only the neutral values of the tiled decisions, one lane, and not in bf16."""
    template, sizes, _ = NESTS[nest]
    site = site_of(template, {}, storage, **sizes)
    for tile, kblock, order, lanes, pack in itertools.product(
        ([1, 1], [1, 8]), ("none", 32), ("IJ", "JI"), (1, 8), (False, True, "both")
    ):
        point = {"form": "row-wise", "tile": tile, "kblock": kblock, "lanes": lanes, "pack": pack}
        if kblock == "none":
            point["order"] = order
        site.layout = LayoutAttr(point)
        violation = check(site, AVX512)
        neutral = tile == [1, 1] and kblock == "none" and order == "IJ" and pack is False
        expected = 3 if not neutral else 4 if lanes != 1 else 7 if storage == "bf16" else None
        assert (None if violation is None else violation.condition) == expected, (point, violation)
