"""`presk plan`: the layout space of a nest, the static choice under a hand-made profile, the plan it writes.

No calibration: the profiles are built here with constants chosen so that
the answer can be worked out by hand (loads dominate everything, a split
costs a second, so the largest register tile that fits wins), for the
target's own register file, so the tests hold on AVX2 and AVX-512 alike.
The programs are tiny (a GEMM at N = 8 or 16, tests/plan/two_dots.mlir at
B = 4), so each run lowers a few hundred points in seconds.
"""

from __future__ import annotations

import io
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from presk import sizes
from presk.cli.main import main
from presk.cost.models import Constants, Form
from presk.cost.profile import Profile, save_profile
from presk.cost.terms import MachineDesc
from presk.dialects.psk_realize_layout import domain_violation, kind_violation
from presk.ir.context import presk_context
from presk.ir.parse import parse_module, read_source
from presk.dialects.psk_realize_layout import tile_registers
from presk.plans import parse_plan
from presk.target import target_machine
from presk.tuning.plan import Nest, Pricer, capture, choose
from presk.tuning.space import nest_space, point_key, tiles

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "bench/programs/gemm.mlir"
TWO_DOTS = ROOT / "tests/plan/two_dots.mlir"


def load_dominated(dtypes: tuple[str, ...] = ("f32",), skip: str | None = None, scalar_work: float = 1e30) -> Constants:
    """Loads cost a nanosecond each, traffic nothing, a split a second, and work nothing unless `scalar_work`
    (W a second in one lane, `lanes` times that in vectors): fewest loads per unsplit kernel wins. Every group
    the target can form, but `skip`."""
    machine = target_machine()
    values = {"lambda": 1e-7, "spawn": 1.0, "beta_l2": 1e30, "beta_l3": 1e30, "beta_mem": 1e30}
    for dtype in dtypes:
        for lanes in (1, *machine.lane_widths(dtype)):
            for workers in {1, *machine.allowed_workers(), machine.workers()}:
                group = f"{dtype}/l{lanes}/p{workers}"
                if group != skip:
                    values[f"pi[{group}]"] = scalar_work * lanes
                    values[f"rho[{group}]"] = 1e9
    return Constants("layout", values, Form("group", "max"))


def write_profile(path: Path, constants: Constants, machine_key: str | None = None) -> Path:
    machine = target_machine()
    profile = Profile(machine_key or machine.key(), MachineDesc.of(machine), Form("group", "max"),
                      layout=constants, u=0.1)  # fmt: skip
    save_profile(profile, path)
    return path


def pricer(constants: Constants) -> Pricer:
    machine = target_machine()
    return Pricer(constants, MachineDesc.of(machine), frozenset(), machine)


def gemm_nests(n: int, dtype: str = "f32") -> list[Nest]:
    module = parse_module(presk_context(), read_source(str(GEMM)), str(GEMM)).module
    env = sizes.resolve(module, {}, {"N": n})
    return capture(module, "gemm", env, parse_plan({"realization": dtype}, "test"))


# --------------------------------------------------------------------------
# The space.


@pytest.mark.parametrize("n, dtype", [(2048, "f64"), (512, "f32")])
def test_the_space_has_jblocks_where_k_is_outermost_and_j_holds_them(n: int, dtype: str) -> None:
    """`full` adds every J-block up to J to the K-outer orders at every k-block; `quick` J-blocks of
    256 and 512 at the k-block of 128, where that k-block of operand 1 takes half the core's private
    cache or more (f64 at 2048: 2 MiB; f32 at 512: 256 KiB, half an AVX2 Zen 3's L2, an eighth of the
    Xeon's). Each is a point of the space with a J-block added."""
    machine = target_machine()
    (nest,) = gemm_nests(n, dtype)
    iso, _ = nest.shapes[0]
    quick, full = nest_space(iso.site, {}, machine, "quick"), nest_space(iso.site, {}, machine, "full")
    private = machine.private_cache
    crowded = private is not None and 2 * 128 * n * {"f64": 8, "f32": 4}[dtype] >= private.size
    within = {jb for jb in (256, 512, 1024) if jb <= n}
    for space, kblocks, jblocks in ((quick, {128}, {256, 512} if crowded else set()), (full, {32, 128}, within)):
        blocked = [p for p in space if "jblock" in p]
        assert {p["jblock"] for p in blocked} == jblocks
        if not blocked:
            continue
        assert {p["order"] for p in blocked} == {"KIJ", "KJI"} and {p["kblock"] for p in blocked} == kblocks

        def unsplit(point: dict[str, Any]) -> str:  # the splits differ: a J-block adds a loop to divide
            return point_key({n: v for n, v in point.items() if n not in ("jblock", "split")})

        assert {unsplit(p) for p in blocked} <= {unsplit(p) for p in space if "jblock" not in p}
    assert {point_key(p) for p in quick} <= {point_key(p) for p in full}
    # The loop over blocks of J is the first a split may divide (the space is unchecked: the checks refuse
    # the split of one block, condition 8); every other point with a J-block lowers.
    for point in (p for p in full if "jblock" in p and p["tile"] in ([1, 1], [4, 16])):
        violation = iso.violation(point, machine)
        one_block = point["jblock"] == n and isinstance(point["split"], dict) and point["split"]["depth"] == 0
        assert (violation is not None) == one_block, (point, violation)
        if one_block:
            assert violation.condition == 8 and "the loop over blocks of J" in violation.reason  # type: ignore[union-attr]


def test_space_of_a_gemm_counts_domain_and_quick_within_full() -> None:
    machine = target_machine()
    (nest,) = gemm_nests(64)
    iso, launches = nest.shapes[0]
    assert launches == 1 and nest.site == "gemm/%0" and nest.kind == "contraction"
    full = nest_space(iso.site, {}, machine, "full")
    quick = nest_space(iso.site, {}, machine, "quick")
    # A 2-D dot has two parallel loops among its first three, the I and J block loops: splits are
    # "none" and each of them over each worker count above one; the row-wise form likewise (I and J).
    # But a block loop outside a k-block loop that keeps its sums in the output (K not last in the
    # order) is serial where its tile does not divide N = 64: its shifted last tile shares sums with
    # the tile before it.
    workers = len([p for p in machine.allowed_workers() if p > 1])
    widths = machine.lane_widths("f32")
    kblock_orders = [("none", "IJ"), ("none", "JI"),
                     *((k, "".join(o)) for k in (32, 128) for o in itertools.permutations("IJK"))]  # fmt: skip
    assert len(kblock_orders) == 14

    def splits(tile: list[int], kblock: Any, order: str) -> int:
        waits = kblock != "none" and order[-1] != "K"
        inside = order[order.index("K") + 1 :] if waits else ""
        serial = [c for c, block in zip("IJ", tile) if waits and c not in inside and 64 % block]
        return 1 + (2 - len(serial)) * workers

    def lanes_of(tile: list[int]) -> list[int]:
        return [1, *(w for w in widths if tile[1] % w == 0)]

    def size(pairs: list[tuple[list[int], int]], packs: Callable[[list[int]], int]) -> int:
        return sum(packs(t) * splits(t, k, o) for t, _ in pairs for k, o in kblock_orders) + 1 + 2 * workers

    pairs_full = [(t, lane) for t in tiles() for lane in lanes_of(t)]
    pairs_quick = [(t, lane) for t, lane in pairs_full
                   if t == [1, 1] or tile_registers(t, lane) <= machine.vector_registers]  # fmt: skip
    # false and true everywhere; full adds "both" on tiles of more than one row (the dot is NN)
    assert len(full) == size(pairs_full, lambda t: 3 if t[0] > 1 else 2)
    assert len(quick) == size(pairs_quick, lambda t: 2)
    assert {p["pack"] for p in full if p.get("form") != "row-wise"} == {False, True, "both"}
    assert {point_key(p) for p in quick} <= {point_key(p) for p in full}
    assert len({point_key(p) for p in full}) == len(full)
    for point in full:
        assert kind_violation("contraction", point) is None and domain_violation(point) is None, point
    # The checks at N = 64: k-blocks of 128 exceed K; whatever the static check accepts also lowers.
    accepted = [p for p in quick if iso.violation(p, machine) is None]
    assert 0 < len(accepted) < len(quick)
    assert all(p.get("kblock") != 128 for p in accepted)
    priced = pricer(load_dominated())
    for point in accepted[:: max(1, len(accepted) // 6)]:
        assert isinstance(priced.price(iso, point), float), point
    # "both" launches two copies and the product, and the price counts all three.
    both = next(p for p in full if p.get("pack") == "both" and iso.violation(p, machine) is None)
    single = {**both, "pack": True}
    assert len(priced.terms(iso, both)) == 3 and len(priced.terms(iso, single)) == 2
    assert priced.price(iso, both) != priced.price(iso, single)


def test_split_variants_priced_from_one_lowering_match_the_full_lowering() -> None:
    """The pricer lowers a tiled point once for all its splits (`Pricer.fast_terms`), and tiles once for
    all its lanes above one: every kernel's terms must be those of the point lowered whole, splits at
    each depth, packed or not, with lanes."""
    machine = target_machine()
    (nest,) = gemm_nests(16)
    iso = nest.shapes[0][0]
    legal = [p for p in nest_space(iso.site, {}, machine) if iso.violation(p, machine) is None]
    widths = sorted(w for w in machine.lane_widths("f32") if w > 1 and 16 % w == 0)[-2:] or [1]
    wanted = [
        {"tile": [1, 1], "kblock": "none", "order": "IJ", "lanes": 1, "pack": False},
        *({"tile": [4, 16], "kblock": "none", "order": "IJ", "lanes": w, "pack": True} for w in widths),
        {"tile": [2, 8], "kblock": "none", "order": "JI", "lanes": 1, "pack": True},
    ]
    points = [p for p in legal if {k: v for k, v in p.items() if k != "split"} in wanted]
    depths = {p["split"]["depth"] if isinstance(p["split"], dict) else None for p in points}
    assert any(p["pack"] for p in points) and (depths >= {None, 0, 1} or machine.workers() < 2)
    fast, full = pricer(load_dominated()), pricer(load_dominated())
    for point in points:
        assert fast.fast_terms(iso, point) == full.terms(iso, point), point
    bases = {json.dumps({k: v for k, v in p.items() if k != "split"}, sort_keys=True) for p in points}
    assert len(fast.shared) == len(bases) and fast.lowered == len(bases)
    # Lane widths above one of one tile, k-block, order and pack: one tile pass kept, the lanes renumbered
    # for the second width (on AVX-512; AVX2's quick space has one width of [4, 16]).
    assert len(fast.tiles) == (1 if any(p["lanes"] > 1 for p in points) else 0)
    # The row-wise form's tile pass reads its split: lowered whole.
    row_wise = next(p for p in legal if p.get("form") == "row-wise")
    assert fast.fast_terms(iso, row_wise) == full.terms(iso, row_wise)
    assert len(fast.shared) == len(bases)


# --------------------------------------------------------------------------
# The choice.


def hand_loads(n: int, tile: list[int], lanes: int) -> int:
    """Loads and stores of the unsplit, unpacked GEMM at `tile`, no k-block: per tile and k one
    broadcast of A per row and a vector of B per lane group, then the tile's stores."""
    m, cols = tile
    groups = cols // lanes
    return math.ceil(n / m) * math.ceil(n / cols) * (n * (m + groups) + m * groups)


def test_chosen_point_is_the_one_the_constants_make_cheapest() -> None:
    machine = target_machine()
    n = 16
    nests = gemm_nests(n)
    (choice,) = choose(nests, pricer(load_dominated()), u=0.1)
    candidates = [(t, lane) for t in tiles() for lane in (1, *machine.lane_widths("f32"))
                  if t[0] <= n and t[1] <= n and t[1] % lane == 0
                  and (t == [1, 1] or tile_registers(t, lane) <= machine.vector_registers)]  # fmt: skip
    best = min(hand_loads(n, t, lane) for t, lane in candidates)
    expected = [(t, lane) for t, lane in candidates if hand_loads(n, t, lane) == best]
    assert (choice.point["tile"], choice.point["lanes"]) == expected[0]
    # The first of equals: no k-block, IJ, no pack, no split (a split's second dominates).
    assert choice.point["kblock"] == "none" and choice.point["order"] == "IJ"
    assert choice.point["pack"] is False and choice.point["split"] == "none"
    assert choice.seconds == pytest.approx(1e-7 + best * 1e-9)
    assert 1 <= choice.within <= choice.priced and choice.refused > 0
    # Every priced point's price is kept (what --plot draws): the least is the choice's, and `within` counts them.
    assert len(choice.prices) == choice.priced and min(choice.prices) == choice.seconds
    assert choice.within == sum(1 for p in choice.prices if p <= choice.seconds * 1.1)


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so the progress bar draws."""

    def isatty(self) -> bool:
        return True


def test_a_nest_at_two_shapes_gets_one_layout_legal_at_both() -> None:
    machine = target_machine()
    (small,), (large,) = gemm_nests(8), gemm_nests(16)
    nest = Nest("gemm/%0", "contraction", [(small.shapes[0][0], 3), (large.shapes[0][0], 1)])
    p = pricer(load_dominated())
    terminal = Terminal()
    (choice,) = choose([nest], p, u=0.1, progress_stream=terminal)
    assert "pricing [" in terminal.getvalue() and "ETA" in terminal.getvalue()
    for iso, _ in nest.shapes:
        assert iso.violation(choice.point, machine) is None
    assert choice.point["tile"][0] <= 8 and choice.point["tile"][1] <= 8
    total = 3 * p.price(small.shapes[0][0], choice.point) + p.price(large.shapes[0][0], choice.point)
    assert choice.seconds == pytest.approx(total)
    # Alone, the larger shape would take a tile the smaller one refuses.
    (alone,) = choose([large], p, u=0.1)
    assert alone.point["tile"][1] == 16 or alone.point["tile"][0] > 8
    assert small.shapes[0][0].violation(alone.point, machine) is not None


# --------------------------------------------------------------------------
# The command: the plan it writes runs with the default's bits, its report, its errors.


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_written_plan_runs_natively_with_the_defaults_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "p.json", load_dominated())
    plan, drawn = tmp_path / "plan.json", tmp_path / "space.png"
    code, out, err = run_cli(["plan", str(TWO_DOTS), "--entry", "twice", "--dim", "B=4", "--realize", "f32",
                              "--profile", str(profile), "-o", str(plan), "--plot", str(drawn)], capsys)  # fmt: skip
    assert code == 0, err
    written = json.loads(plan.read_text())
    assert written["realization"] == "f32" and written["profile"] == str(profile)
    assert set(written["layout"]) == {"twice/%0", "twice/%1"}
    assert written["layout"]["twice/%1"]["form"] in ("tiled", "row-wise")  # J = 12: row-wise by default
    lines = out.splitlines()
    assert lines[0].startswith("2 nests, space quick, profile") and "u = 0.1" in lines[0]
    for site in ("twice/%0", "twice/%1"):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{site} (contraction): 1 × ["))
        assert json.loads(lines[at + 1]) == written["layout"][site]
        assert lines[at + 2].startswith("  predicted ") and "a launch" in lines[at + 2]
        assert "points within 1 + u" in lines[at + 2] and "refused" in lines[at + 2]
    assert lines[-2:] == [f"wrote {plan}", f"drew {drawn}"]
    assert drawn.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert_same_bits(plan, "twice", tmp_path, capsys)


def assert_same_bits(plan: Path, entry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     source: Path = TWO_DOTS) -> None:  # fmt: skip
    """`presk run --plan @plan --backend native` gives the bits of `--realize f32`: every point is exact."""
    outputs = {}
    for name, how in (("planned", ["--plan", f"@{plan}"]), ("default", ["--realize", "f32"])):
        target = tmp_path / f"{entry}-{name}.npz"
        code, _, err = run_cli(["run", str(source), "--entry", entry, "--dim", "B=4", *how,
                                "--backend", "native", "--output", str(target)], capsys)  # fmt: skip
        assert code == 0, err
        with np.load(target) as data:
            outputs[name] = {k: data[k].copy() for k in data.files}
    assert outputs["planned"].keys() == outputs["default"].keys()
    for key, value in outputs["default"].items():
        assert outputs["planned"][key].tobytes() == value.tobytes()


def test_attention_plan_packs_and_keeps_the_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scores are NT: a tile's lanes need the pack. The default's loop runs in vectors too where its trip fills
    a register (8 f32 lanes), but with a shuffle an element (`presk.cost.quantities.shuffles_per_element`): a
    model where loads dominate and work costs too (vectors `lanes` times faster than scalars) buys the packed
    tile. The softmax is planned too."""
    profile = write_profile(tmp_path / "p.json", load_dominated(scalar_work=1e9))
    plan = tmp_path / "attend.json"
    code, _, err = run_cli(["plan", str(TWO_DOTS), "--entry", "attend", "--dim", "B=4", "--realize", "f32",
                            "--profile", str(profile), "-o", str(plan)], capsys)  # fmt: skip
    assert code == 0, err
    layout = json.loads(plan.read_text())["layout"]
    assert layout["attend/%1"]["passes"] in (2, 3)
    if target_machine().lane_widths("f32"):
        assert layout["attend/%0"]["pack"] is True and layout["attend/%0"]["lanes"] > 1
    assert_same_bits(plan, "attend", tmp_path, capsys)


EPILOGUES = """
!Q = !psk_core.tensor<[batch: B, seq: 8, hd: 16]>
!K = !psk_core.tensor<[batch: B, seq2: 8, hd: 16]>
!S = !psk_core.tensor<[batch: B, seq: 8, seq2: 8]>
!X = !psk_core.tensor<[batch: B, embed: 16]>
!W = !psk_core.tensor<[embed: 16, hidden: 64]>
!H = !psk_core.tensor<[batch: B, hidden: 64]>
!Bias = !psk_core.tensor<[hidden: 64]>
!R = !psk_core.real

func.func @scores(%q: !Q, %k: !K, %c: !R) -> !S {
  %0 = psk_core.ein %q[batch, seq, hd], %k[batch, seq2, hd] : !S
  %1 = psk_core.mul %0, %c : !S
  %2 = psk_core.softmax %1 [seq2] : !S
  func.return %2 : !S
}

func.func @read_twice(%x: !X, %w: !W, %b: !Bias) -> (!H, !H) {
  %0 = psk_core.dot %x, %w : !H
  %1 = psk_core.add %0, %b : !H
  %2 = psk_core.exp %0 : !H
  func.return %1, %2 : !H, !H
}

func.func @tied(%x: !X, %w: !W, %y: !X, %v: !W) -> !H {
  %0 = psk_core.dot %x, %w : !H
  %1 = psk_core.dot %y, %v : !H
  %2 = psk_core.add %0, %1 : !H
  func.return %2 : !H
}
"""
"""Attention's scores times their scale (a mul alone reads the product), a product two ops read, and two
products one add sums (a gradient's tied weights): one of them can take the add."""


def test_the_plan_states_an_epilogue_where_the_product_can_take_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`presk plan` states `"epilogue": true` on a product one add or mul alone reads, never elsewhere, and
    the folded kernel keeps the bits of the two separate ones."""
    source = tmp_path / "epilogues.mlir"
    source.write_text(EPILOGUES)
    profile = write_profile(tmp_path / "p.json", load_dominated())
    layouts = {}
    for entry in ("scores", "read_twice", "tied"):
        plan = tmp_path / f"{entry}.json"
        code, out, err = run_cli(["plan", str(source), "--entry", entry, "--dim", "B=4", "--realize", "f32",
                                  "--profile", str(profile), "-o", str(plan)], capsys)  # fmt: skip
        assert code == 0, err
        layouts[entry] = json.loads(plan.read_text())["layout"]
        assert_same_bits(plan, entry, tmp_path, capsys, source)
    assert layouts["scores"]["scores/%0"]["epilogue"] is True
    assert "epilogue" not in layouts["read_twice"]["read_twice/%0"]
    # The first product takes the add; the second, which the same add reads, keeps its own kernel.
    assert layouts["tied"]["tied/%0"]["epilogue"] is True and "epilogue" not in layouts["tied"]["tied/%1"]
    # A plan written by hand that states it on both is refused by the checks, before a kernel exists.
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"realization": "f32", "layout": {f"tied/%{n}": {"epilogue": True} for n in (0, 1)}}))
    code, out, err = run_cli(["dump", str(source), "--entry", "tied", "--dim", "B=4", "--stage", "kernel",
                              "--plan", f"@{both}"], capsys)  # fmt: skip
    assert code != 0 and "E7002" in err and "which states the epilogue too" in err, err
    code, out, err = run_cli(["dump", str(source), "--entry", "scores", "--dim", "B=4", "--stage", "kernel",
                              "--plan", f"@{tmp_path / 'scores.json'}"], capsys)  # fmt: skip
    assert code == 0, err
    assert "psk_kernel.kernel @\"ein+mul\"" in out and "launch @mul" not in out


SCALED_SOFTMAX = """
!S    = !psk_core.tensor<[batch: B, heads: H, seq: T, seq2: T]>
!Mask = !psk_core.index<[seq: T, seq2: T], 2>
!R    = !psk_core.real

func.func @scaled(%s: !S, %c: !R) -> !S {
  %0 = psk_core.mul %s, %c : !S
  %1 = psk_core.causal_mask : !Mask
  %2 = psk_core.softmax %0 [seq2] mask %1 : !S
  func.return %2 : !S
}

func.func @plain(%s: !S) -> !S {
  %0 = psk_core.softmax %s [seq2] : !S
  func.return %0 : !S
}
"""
"""Attention's scaled and causally masked scores, and the softmax of the same shape without a mask."""


def softmax_nest(entry: str) -> Nest:
    module = parse_module(presk_context(), SCALED_SOFTMAX, "scaled.mlir").module
    env = sizes.resolve(module, {}, {"B": 2, "H": 2, "T": 16})
    return next(n for n in capture(module, entry, env, parse_plan({"realization": "f32"}, "test")) if n.kind == "softmax")


def test_a_causal_softmax_is_priced_reading_no_mask() -> None:
    """The program's softmax computes a causal mask from its loop counters, so the nest priced alone
    keeps `causal_mask` instead of taking the mask as an argument, and its terms are the unmasked
    softmax's bytes: no [T, T] buffer read for every row of every head. The mask's launch is not priced."""
    (masked, _), = softmax_nest("scaled").shapes
    (plain, _), = softmax_nest("plain").shapes
    assert "psk_core.causal_mask" in str(masked.module) and str(masked.module).count("%0: !psk_core") == 1
    prices = pricer(load_dominated())
    for point in ({"passes": 3, "split": "none"}, {"passes": 2, "split": "none"}):
        (terms, launches), = prices.terms(masked, point)
        (unmasked, _), = prices.terms(plain, point)
        assert launches == 1 and terms.bytes == unmasked.bytes and terms.q_l3 == unmasked.q_l3


def test_a_softmax_plan_leaves_the_split_to_the_executor_so_the_scaling_joins_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Of points priced alike, the plan takes the softmax's split left to the executor (its space lists
    it first): stated, even as "none", it would keep psk-fuse-slices from running the scaling `mul`
    inside the softmax's launch, which the model pricing the nest alone cannot see."""
    source = tmp_path / "scaled.mlir"
    source.write_text(SCALED_SOFTMAX)
    profile = write_profile(tmp_path / "p.json", load_dominated())
    plan = tmp_path / "plan.json"
    common = [str(source), "--entry", "scaled", "--dim", "B=2", "--dim", "H=2", "--dim", "T=16"]
    code, _, err = run_cli(["plan", *common, "--realize", "f32", "--profile", str(profile), "-o", str(plan)], capsys)
    assert code == 0, err
    (site, layout), = json.loads(plan.read_text())["layout"].items()
    assert "split" not in layout and layout["passes"] in (2, 3)
    stated = tmp_path / "stated.json"
    stated.write_text(json.dumps({"realization": "f32", "layout": {site: {**layout, "split": "none"}}}))
    kernels = {}
    for name, path in (("planned", plan), ("stated", stated)):
        code, out, err = run_cli(["dump", *common, "--stage", "kernel", "--plan", f"@{path}"], capsys)
        assert code == 0, err
        kernels[name] = out
    assert 'psk_kernel.kernel @"mul+softmax"' in kernels["planned"]
    assert 'psk_kernel.kernel @"mul+softmax"' not in kernels["stated"]


def test_errors_are_diagnostics_with_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_profile(tmp_path / "good.json", load_dominated())
    base = [str(GEMM), "--dim", "N=8", "--realize", "f32", "-o", str(tmp_path / "plan.json")]
    code, _, err = run_cli(["plan", *base, "--entry", "nope", "--profile", str(good)], capsys)
    assert code == 1 and "E4004" in err and "Traceback" not in err
    code, out, err = run_cli(["plan", *base, "--entry", "gemm", "--profile", str(good), "--plot", "/no/folder/s.png"],
                             capsys)  # fmt: skip
    assert code == 1 and "E0001: cannot write /no/folder/s.png" in err and out == "", "refused before pricing"
    code, _, err = run_cli(["plan", *base, "--entry", "gemm", "--profile", str(tmp_path / "missing.json")], capsys)
    assert code == 1 and "E0001" in err and "missing.json" in err
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    code, _, err = run_cli(["plan", *base, "--entry", "gemm", "--profile", str(corrupt)], capsys)
    assert code == 1 and "E8001" in err and "Traceback" not in err
    # A group the profile never measured: its points are not priced, the plan is the best of the others,
    # and the report says which group was left out. With no group of the nest's type at all: E8001. (At N = 4
    # the [1, 1] tile's j loop is shorter than any register, so it stays scalar; at N = 8 on AVX2 the backend
    # runs it in vectors once its k loop is unrolled, and the lane-1 group holds no point.)
    lacking = write_profile(tmp_path / "lacking.json", load_dominated(skip="f32/l1/p1"))
    small = [str(GEMM), "--dim", "N=4", *base[3:]]
    code, out, err = run_cli(["plan", *small, "--entry", "gemm", "--profile", str(lacking)], capsys)
    assert code == 0, err
    assert "points not priced: the profile measured no kernel of f32/l1/p1" in out + err
    chosen = json.loads((tmp_path / "plan.json").read_text())["layout"]["gemm/%0"]
    assert chosen.get("tile") != [1, 1]  # the one tile that stays scalar, in the group left out
    other_type = write_profile(tmp_path / "f64.json", load_dominated(("f64",)))
    code, _, err = run_cli(["plan", *base, "--entry", "gemm", "--profile", str(other_type)], capsys)
    assert code == 1 and "E8001" in err and 'nest "gemm/%0"' in err and "no point of its quick space can be priced" in err
    elsewhere = write_profile(tmp_path / "elsewhere.json", load_dominated(), "x86_64-unknown-linux-gnu|othercpu|avx2|")
    code, out, err = run_cli(["plan", *base, "--entry", "gemm", "--profile", str(elsewhere)], capsys)
    assert code == 0 and "warning" in err and "another machine" in err and "othercpu" in err
    assert json.loads((tmp_path / "plan.json").read_text())["layout"]["gemm/%0"]["split"] == "none"
    assert not (tmp_path / "missing.json").exists()
    # An output that cannot be written is refused before the program is read or a point priced: a plan of
    # minutes is not lost to the write at its end. A program that does not parse is not even read.
    garbled = tmp_path / "garbled.mlir"
    garbled.write_text("func.func @gemm(")
    for output, why in ((tmp_path / "no" / "plan.json", "is not a writable directory"), (tmp_path, "it is a directory")):
        args = ["plan", str(garbled), "--entry", "gemm", "--profile", str(good), "-o", str(output)]
        code, _, err = run_cli(args, capsys)
        assert code == 1 and "E0001" in err and why in err and "Traceback" not in err


def test_pricing_stays_in_this_process_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork would copy the locks a running thread holds: with one alive, points are priced here."""
    import threading

    from presk.tuning.plan import plan_jobs

    monkeypatch.setenv("PRESK_PLAN_JOBS", "2")
    assert plan_jobs() == (2 if threading.active_count() == 1 else 1)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        assert plan_jobs() == 1
    finally:
        release.set()
        worker.join()
