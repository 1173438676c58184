"""The benchmarks' timing helpers (`bench/timing.py`): argument checks, the layout sweep, turns of calls."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from timing import balanced_orders, final, positive_int, side_by_side, sweep  # noqa: E402

from presk.diagnostics import PreskError  # noqa: E402


@pytest.mark.parametrize("text,message", [("0", "at least 1"), ("-3", "at least 1"), ("x", "a whole number")])
def test_counts_below_one_are_usage_errors(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        positive_int(text)
    assert positive_int("7") == 7


@pytest.mark.parametrize(
    "argument, message",
    [
        (["--block", "0"], "argument --block: expected at least 1, got 0"),
        (["--points", "[1]"], "argument --points: a non-empty JSON list of layouts"),
        (["--points", "{tile"], "argument --points: not JSON"),
        (["--finalists", "0"], "argument --finalists: expected at least 1, got 0"),
    ],
)
def test_a_bench_script_refuses_bad_arguments_without_a_traceback(argument: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_gemm.py"), *argument], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_sweep_counts_refusals_by_code_and_sorts_fastest_first() -> None:
    calls: list[str] = []

    def build(point: str) -> object:
        if point.startswith("bad"):
            raise PreskError("E7002", f"refused {point}")
        return lambda: calls.append(point)

    timed, refused = sweep(["a", "bad1", "b", "bad2"], build, screen=3)
    assert refused == {"E7002": 2}
    assert sorted(point for _, point in timed) == ["a", "b"]
    assert [t for t, _ in timed] == sorted(t for t, _ in timed)
    assert calls.count("a") == calls.count("b") == 1 + 3  # one warm-up call, then the screen


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_balanced_orders_let_every_contender_follow_every_other_equally_often(n: int) -> None:
    orders = balanced_orders(n)
    assert all(sorted(order) == list(range(n)) for order in orders)
    follows = Counter((a, b) for order in orders for a, b in zip(order, order[1:]))
    assert set(follows) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert len(set(follows.values())) <= 1


def test_turns_follow_the_balanced_orders_and_count_all_but_the_first_call() -> None:
    order: list[str] = []
    contenders = {name: (lambda name=name: order.append(name)) for name in "xyzw"}
    timings = side_by_side(contenders, rounds=4, warmup=0, progress=False, block=2)
    turns = order[::2]
    assert order[1::2] == turns
    assert turns == ["x", "y", "w", "z", "y", "z", "x", "w", "z", "w", "y", "x", "w", "x", "z", "y"]
    # The best point no longer follows the same contender (here "x") in most rounds.
    assert sum(a == "x" for a, b in zip(turns, turns[1:]) if b == "y") == 1
    assert all(t.rounds == 4 for t in timings.values())
    with pytest.raises(ValueError, match="at least 1"):
        side_by_side(contenders, block=0)


def test_the_final_picks_the_fastest_finalist_timed_again_not_the_sweeps_first() -> None:
    now = [0.0]
    cost = {"lucky": 3.0, "steady": 2.0, "slow": 5.0, "last": 1.0}

    def build(point: str) -> object:
        def call() -> None:
            now[0] += cost[point]

        return call

    # The sweep's order, as a noisy minute left it: "lucky" first, "last" beyond the finalists.
    swept = [(1.0, "lucky"), (1.5, "steady"), (1.6, "slow"), (9.0, "last")]
    assert final(swept, build, count=3, rounds=3, block=2, clock=lambda: now[0]) == "steady"
    assert final(swept, build, count=1, clock=lambda: now[0]) == "lucky"


def test_a_sweep_whose_every_point_is_refused_ends_with_a_message_not_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_gemm.py"), "--sizes", "16", "--threads", "1", "--dtypes", "f64",
         "--points", '[{"tile": [3, 3], "lanes": 4}]'],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert "the layout checks refused every point of the sweep (E7002)" in done.stderr
    assert "Traceback" not in done.stderr
