"""`presk plan`'s fast pricing against the slow one, point by point: the same prices to the bit, the same plan.

The slow path lowers every legal point whole through `presk.pipeline.lower`
and prices its kernels (`Pricer.terms`); the fast path is what `presk plan`
runs: grouped lowerings shared by splits and lanes, over forked processes,
with the terms cache (`presk.tuning.terms_cache`), first cold (every point
lowered, its terms written) and then warm (no point lowered). The program is
tests/plan/two_dots.mlir's `twice` at B = 4: two contraction nests, one whose
J (12) no tile divides, so remainders and the row-wise form are priced too.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
from pathlib import Path

import pytest

from presk import sizes
from presk.cli.guard import _terminate
from presk.cost.terms import MachineDesc
from presk.diagnostics import PreskError
from presk.ir.context import presk_context
from presk.ir.parse import parse_module, read_source
from presk.plans import parse_plan
from presk.target import target_machine
from presk.tuning import plan as planning
from presk.tuning.plan import Pricer, capture, choose, legal_points
from presk.tuning.space import point_key
from presk.tuning.terms_cache import TermsCache, terms_dir
from test_plan_static import load_dominated

ROOT = Path(__file__).resolve().parents[2]
TWO_DOTS = ROOT / "tests/plan/two_dots.mlir"
RULES = frozenset({"sets", "shared"})


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PRESK_TERMS_CACHE", raising=False)
    return tmp_path / "cache" / "terms"


def nests() -> list[planning.Nest]:
    module = parse_module(presk_context(), read_source(str(TWO_DOTS)), str(TWO_DOTS)).module
    env = sizes.resolve(module, {}, {"B": 4})
    return capture(module, "twice", env, parse_plan({"realization": "f32"}, "test"))


def pricer(store: TermsCache | None = None) -> Pricer:
    machine = target_machine()
    return Pricer(load_dominated(), MachineDesc.of(machine), RULES, machine, store=store)


def store() -> TermsCache:
    machine = target_machine()
    opened = TermsCache.open(MachineDesc.of(machine), RULES, machine, machine)
    assert opened is not None
    return opened


def slow_prices(found: list[planning.Nest]) -> dict[tuple[str, str], float | str]:
    """Every legal point of every shape lowered whole: its price, or the code it was refused with."""
    slow = pricer()
    out: dict[tuple[str, str], float | str] = {}
    for nest in found:
        for point in legal_points(nest, slow.machine, "quick")[0]:
            for iso, _ in nest.shapes:
                try:
                    out[(iso.key, point_key(point))] = slow.predict(slow.terms(iso, point))
                except PreskError as error:
                    assert error.code == "E7002", error
                    out[(iso.key, point_key(point))] = error.code
    return out


def summary(choices: list[planning.NestChoice]) -> list[tuple[object, ...]]:
    return [(c.nest.site, json.dumps(c.point), c.seconds, c.priced, c.refused, c.within, sorted(c.conditions.items()))
            for c in choices]  # fmt: skip


def fast_prices(p: Pricer) -> dict[tuple[str, str], float | str]:
    return {key: v if isinstance(v, float) else v.code for key, v in p.cache.items()}


@pytest.fixture(scope="module")
def slow() -> dict[tuple[str, str], float | str]:
    """The slow path's prices, computed once for both parameters (it uses no cache)."""
    return slow_prices(nests())


@pytest.mark.parametrize("jobs", ["2", "1"])
def test_the_fast_pricing_cold_and_warm_gives_the_slow_pricing_s_prices_and_plan(
    jobs: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, slow: dict[tuple[str, str], float | str]
) -> None:
    monkeypatch.setenv("PRESK_PLAN_JOBS", jobs)  # 2: the forked, grouped path (one process where fork is missing)
    found = nests()
    assert len(slow) > planning.PARALLEL_MIN and any(isinstance(v, float) for v in slow.values())

    cold = pricer(store())
    cold_choices = choose(found, cold, u=0.1)
    assert cold.store is not None and cold.store.hits == 0
    cold.store.save()
    assert fast_prices(cold) == slow  # every point, to the bit (float ==), refusals alike
    assert 0 < cold.lowered < len(slow)  # splits and lanes shared their lowerings

    # The slow prices chosen from: the same plan, counts and closeness.
    reference = pricer()
    reference.cache.update({k: v if isinstance(v, float) else PreskError(v, "refused") for k, v in slow.items()})
    assert summary(choose(found, reference, u=0.1)) == summary(cold_choices)

    # Warm: a new process's pricer reads every point's terms from disk and lowers nothing.
    assert len(list(cache_dir.glob("*.json"))) == len({iso.key for n in found for iso, _ in n.shapes})
    warm = pricer(store())
    warm_choices = choose(found, warm, u=0.1)
    assert warm.lowered == 0 and warm.store is not None and warm.store.hits == len(slow)
    assert fast_prices(warm) == slow and summary(warm_choices) == summary(cold_choices)
    assert not warm.store.added and not warm.store.added_checks  # the checks' verdicts came from disk too


def test_the_static_checks_verdicts_are_kept(cache_dir: Path) -> None:
    (first, _) = nests()
    iso = first.shapes[0][0]
    machine = target_machine()
    kept = store()
    legal, conditions = legal_points(first, machine, "quick", kept)
    assert (legal, conditions) == legal_points(first, machine, "quick")
    kept.save()
    # What the cache says is what counts: a verdict planted on the first legal point refuses it.
    again = store()
    assert again.check(iso.key, point_key(legal[0])) == "" and again.check(iso.key, "{}") is None
    again.put_check(iso.key, point_key(legal[0]), "3")
    planted, counts = legal_points(first, machine, "quick", again)
    assert planted == legal[1:] and counts["3"] == conditions.get("3", 0) + 1


def test_the_stored_terms_are_the_full_lowering_s(cache_dir: Path) -> None:
    (first, _) = nests()
    iso = first.shapes[0][0]
    points = legal_points(first, target_machine(), "quick")[0][::37]
    kept = store()
    with_store = pricer(kept)
    for point in points:
        with_store.stored_terms(iso, point, checked=True)
    kept.save()
    again, full = store(), pricer()
    for point in points:
        assert again.get(iso.key, point_key(point)) == full.terms(iso, point), point


def test_the_key_holds_the_rules_and_the_machine_description(cache_dir: Path) -> None:
    (first, _) = nests()
    iso = first.shapes[0][0]
    point = legal_points(first, target_machine(), "quick")[0][0]
    kept = store()
    pricer(kept).stored_terms(iso, point)
    kept.save()
    machine = target_machine()
    desc = MachineDesc.of(machine)
    assert store().get(iso.key, point_key(point)) is not None
    other_rules = TermsCache.open(desc, frozenset({"lines"}), machine, machine)
    smaller = MachineDesc(desc.caches[:1], desc.vector_registers, desc.line, desc.workers)
    other_desc = TermsCache.open(smaller, RULES, machine, machine)
    assert other_rules is not None and other_rules.get(iso.key, point_key(point)) is None
    assert other_desc is not None and other_desc.get(iso.key, point_key(point)) is None


def test_a_corrupt_cache_file_is_priced_again_and_rewritten(cache_dir: Path) -> None:
    (first, _) = nests()
    iso = first.shapes[0][0]
    point = legal_points(first, target_machine(), "quick")[0][0]
    kept = store()
    expected = pricer(kept).price(iso, point)
    kept.save()
    (path,) = cache_dir.glob("*.json")
    path.write_text("{not json")
    again = store()
    assert again.get(iso.key, point_key(point)) is None
    p = pricer(again)
    assert p.price(iso, point) == expected and p.lowered == 1
    again.save()
    assert store().get(iso.key, point_key(point)) is not None


def test_files_untouched_for_a_month_are_deleted_and_read_ones_are_touched(cache_dir: Path) -> None:
    import os
    import time

    (first, _) = nests()
    iso = first.shapes[0][0]
    points = legal_points(first, target_machine(), "quick")[0]
    kept = store()
    pricer(kept).price(iso, points[0])
    kept.save()
    (used,) = cache_dir.glob("*.json")
    old = time.time() - 31 * 86400
    stale = cache_dir / "0123456789abcdef0123456789abcdef01234567.json"
    stale.write_text("{}")
    for path in (used, stale):
        os.utime(path, (old, old))
    again = store()
    p = pricer(again)
    assert p.price(iso, points[0]) is not None and p.lowered == 0  # read: touched
    p.price(iso, points[1])  # a new point: written, and the folder pruned
    again.save()
    assert used.exists() and not stale.exists()


def test_the_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRESK_TERMS_CACHE", "off")
    machine = target_machine()
    assert TermsCache.open(MachineDesc.of(machine), RULES, machine, machine) is None
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path))
    assert terms_dir() == tmp_path / "terms"


def _dispositions(_: int) -> tuple[object, object]:
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def test_the_pricing_workers_die_of_sigterm_and_leave_ctrl_c_to_the_parent() -> None:
    """A presk command raises `Terminated` on SIGTERM, and forked workers inherit that handler; but the pool ends
    its workers with SIGTERM and counts on their dying of it. With the inherited handler a worker could unwind
    while holding the task queue's lock, and `presk plan` then hung on its sibling (seen in CI; one run in about
    thirty in a loop). The workers' own start (`_start_pricing_worker`) restores the defaults."""
    previous = signal.signal(signal.SIGTERM, _terminate)  # as `run_guarded` has it while a command runs
    try:
        with multiprocessing.get_context("fork").Pool(2, initializer=planning._start_pricing_worker) as pool:
            seen = pool.map(_dispositions, range(4))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert set(seen) == {(signal.SIG_DFL, signal.SIG_IGN)}
