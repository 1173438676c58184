"""`presk autotune --ray` and `presk bench --calibrate --ray`: batches over pinned Ray actors on a local cluster.

One local cluster of 2 CPUs serves the whole module (starting Ray takes
seconds); each test's `Cluster` adds its two actors, one pinned to each
core, and the tests that kill an actor leave the next run to start a new
one. The sweeps are a tiny GEMM (N = 16) narrowed to its first points, as
in test_autotune.py, and the first points of the small calibration space
in f64, so every run compiles a handful of kernels.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from presk import sizes
from presk.cli.main import main
from presk.cost.profile import Profile, append_samples, load_profile, read_samples, save_profile
from presk.cost.terms import MachineDesc
from presk.ir.context import presk_context
from presk.ir.parse import parse_module, read_source
from presk.jit.native import NativeRunner
from presk.target import target_machine
from presk.tuning import autotune as at
from presk.tuning.calibration import Progress, run_space, space
from presk.tuning.distributed import POINT_TIMEOUT_S, TIMEOUT_PREDICTIONS, Cluster, Measurer, kind_profile_path, point_timeout
from presk.tuning.space import point_key
from conftest import FIRST

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "bench/programs/gemm.mlir"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray of 2 CPUs for the module (its files under /tmp/ray, none in the repository), shut down after."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def cluster(local_ray: None) -> Iterator[Cluster]:
    """Two actors in batches of two points, stopped after the test (Ray itself stays up)."""
    with Cluster(batch=2, err=io.StringIO()) as c:
        yield c



def gemm(n: int = 16) -> tuple[Any, dict[str, int]]:
    module = parse_module(presk_context(), read_source(str(GEMM)), str(GEMM)).module
    return module, sizes.resolve(module, {}, {"N": n})


def points_of(path: Path) -> list[dict[str, Any]]:
    return [r for r in at.read_results(path) if r.get("record", "point") == "point"]


def pairs(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((r["shape_key"], point_key(r["point"])) for r in lines)


def split_workers(point: dict[str, Any]) -> int:
    split = point.get("split")
    return int(split["workers"]) if isinstance(split, dict) else 1


# --------------------------------------------------------------------------
# autotune


def test_autotune_on_ray_measures_the_serial_runs_points(tmp_path: Path, narrow: None, cluster: Cluster) -> None:
    module, env = gemm()
    serial = at.autotune(module, "gemm", env, "f32", str(tmp_path / "serial.jsonl"), err=io.StringIO())
    err = io.StringIO()
    result = at.autotune(module, "gemm", env, "f32", str(tmp_path / "ray.jsonl"), err=err, cluster=cluster)
    here, there = points_of(tmp_path / "serial.jsonl"), points_of(tmp_path / "ray.jsonl")
    assert pairs(here) == pairs(there) and len(there) == 1 + FIRST == result.measured
    assert result.lost == 0 and result.skipped == 0 and serial.measured == result.measured
    key = target_machine().key()
    cores = {w.info.core for w in cluster.workers}
    assert len(cluster.workers) == 2 and cores == set(cluster.workers[0].info.mask[:2])
    for line in there:
        assert set(here[0]) <= set(line) and line["machine"] == key
        assert line["bits"] == "ok" and 0 < line["q1_s"] <= line["median_s"] <= line["q3_s"]
        host, _, cpus = line["worker"].rpartition(":")
        # A point split over two workers owns the node; the others ran on one pinned core.
        if split_workers(line["point"]) > 1:
            assert len(cpus.split(",")) == len(cluster.workers[0].info.mask)
    assert {int(r["worker"].rpartition(":")[2]) for r in there if "," not in r["worker"]} <= cores
    # The plan is chosen from this machine's lines, as the serial run's is.
    (outcome,) = result.outcomes
    assert outcome.best is not None and outcome.measured == 1 + FIRST
    assert set(result.plan) == set(serial.plan) and any(line.startswith("ray: 2 workers") for line in result.workers)


def test_a_killed_worker_s_batch_is_measured_by_another(tmp_path: Path, narrow: None, cluster: Cluster) -> None:
    killed: list[int] = []

    def kill_the_first(event: str, worker: Any, items: Any) -> None:
        if event == "dispatch" and not killed:
            time.sleep(0.2)  # into its batch
            killed.append(worker.info.pid)
            os.kill(worker.info.pid, signal.SIGKILL)

    cluster.hook = kill_the_first
    module, env = gemm()
    err = io.StringIO()
    result = at.autotune(module, "gemm", env, "f32", str(tmp_path / "r.jsonl"), err=err, cluster=cluster)
    lines = points_of(tmp_path / "r.jsonl")
    assert killed and result.lost == 0 and len(lines) == 1 + FIRST == result.measured
    assert len(set(pairs(lines))) == 1 + FIRST
    assert f"pid {killed[0]}" in err.getvalue() and "died with a batch of 2 points" in err.getvalue()
    assert "go to another worker" in err.getvalue()
    assert any("died" in note for note in result.workers)
    assert sum(w.alive for w in cluster.workers) == 1


def test_an_interrupted_run_resumes_without_measuring_twice(tmp_path: Path, narrow: None, cluster: Cluster) -> None:
    results = tmp_path / "r.jsonl"
    seen: list[int] = []

    def interrupt_at_the_second_batch(event: str, worker: Any, items: Any) -> None:
        if event == "result":
            seen.append(len(items))
            if len(seen) == 2:
                raise KeyboardInterrupt

    cluster.hook = interrupt_at_the_second_batch
    module, env = gemm()
    with pytest.raises(KeyboardInterrupt):
        at.autotune(module, "gemm", env, "f32", str(results), err=io.StringIO(), cluster=cluster)
    first = points_of(results)
    # The first batch back left its lines (a point it handed back for the whole node is not one); the
    # second's, and any batch still in flight, were lost with the run.
    assert 1 <= len(first) <= seen[0] <= 2
    cluster.hook = None
    result = at.autotune(module, "gemm", env, "f32", str(results), err=io.StringIO(), cluster=cluster)
    lines = points_of(results)
    assert result.skipped == len(first) and result.measured == 1 + FIRST - len(first)
    assert len(lines) == 1 + FIRST and len(set(pairs(lines))) == 1 + FIRST


def test_the_cli_measures_on_ray_and_resumes(tmp_path: Path, narrow: None, local_ray: None,
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    results, plan = tmp_path / "r.jsonl", tmp_path / "plan.json"
    argv = ["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=16", "--realize", "f32", "-o", str(results),
            "--plan-out", str(plan), "--ray", "--ray-batch", "3"]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "ray: 2 workers" in out and "this machine's kind" in out and "6 points measured" in out
    assert len(points_of(results)) == 1 + FIRST and json.loads(plan.read_text())["realization"] == "f32"
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "0 points measured, 6 already in the file" in out


def hanging_on(hang: str) -> type[Measurer]:
    """A measurer whose point of key `hang` never finishes (a class of this function: Ray pickles it by value)."""

    class Hanging(Measurer):
        def _one(self, job: str, shared: Any, item: Any, whole_node: bool) -> tuple[str, Any]:
            if job == "autotune" and point_key(item.point) == hang:
                time.sleep(3600)
            return super()._one(job, shared, item, whole_node)

    return Hanging


def test_a_hanging_point_times_out_its_worker_is_replaced_and_the_rest_is_measured(
    tmp_path: Path, narrow: None, local_ray: None
) -> None:
    module, env = gemm()
    results = tmp_path / "r.jsonl"
    first = at.legal_points(at.capture(module, "gemm", env, at.parse_plan({"realization": "f32"}, "t"))[0],
                            target_machine(), "quick")[0][0]  # fmt: skip
    err = io.StringIO()
    started = time.monotonic()
    with Cluster(batch=2, err=err, point_timeout_s=8.0, actor=hanging_on(point_key(first))) as cluster:
        result = at.autotune(module, "gemm", env, "f32", str(results), err=err, cluster=cluster)
        alive = {w.info.pid for w in cluster.workers if w.alive}
        # A second run skips it: it is in the file, as timed out (its actor would hang on it, were it sent).
        again = at.autotune(module, "gemm", env, "f32", str(results), err=io.StringIO(), cluster=cluster)
    killed = re.search(r"timed out after \d+ s \(its timeout 8 s\) on worker \d+ on .*, pid (\d+)\)", err.getvalue())
    assert killed is not None and len(alive) == 2 and int(killed.group(1)) not in alive  # replaced
    assert time.monotonic() - started < 120  # not the hour the point sleeps
    lines = points_of(results)
    (hung,) = [r for r in lines if r["bits"] == "timeout"]
    assert point_key(hung["point"]) == point_key(first) and hung["median_s"] is None and hung["timeout_s"] == 8.0
    assert hung["seconds"] >= 8.0 and hung["worker"]
    assert result.timed_out == 1 and result.measured == FIRST and result.lost == 0
    assert len(set(pairs(lines))) == 1 + FIRST and all(r["bits"] == "ok" for r in lines if r is not hung)
    (outcome,) = result.outcomes
    assert outcome.best is not None and point_key(outcome.best) != point_key(first) and outcome.measured == FIRST
    assert "timed out after" in err.getvalue() and "the worker is replaced" in err.getvalue()
    assert any("1 points timed out" in line for line in at.report(result)) and not result.differ
    assert again.measured == 0 and again.skipped == 1 + FIRST and again.timed_out == 0


def test_a_worker_too_stuck_to_answer_is_timed_from_its_batch_s_start(tmp_path: Path, narrow: None,
                                                                      cluster: Cluster) -> None:  # fmt: skip
    """A stopped process (SIGSTOP) answers nothing, not even `status`: its first point times out from dispatch,
    and the rest of its batch goes to the others."""
    stopped: list[int] = []

    def stop_the_first(event: str, worker: Any, items: Any) -> None:
        if event == "dispatch" and not stopped:
            stopped.append(worker.info.pid)
            os.kill(worker.info.pid, signal.SIGSTOP)

    cluster.hook = stop_the_first
    cluster.point_timeout_s = 6.0
    module, env = gemm()
    err = io.StringIO()
    result = at.autotune(module, "gemm", env, "f32", str(tmp_path / "r.jsonl"), err=err, cluster=cluster)
    lines = points_of(tmp_path / "r.jsonl")
    assert stopped and result.timed_out == 1 and result.measured == FIRST and result.lost == 0
    assert len(set(pairs(lines))) == 1 + FIRST and sum(r["bits"] == "timeout" for r in lines) == 1
    assert f"pid {stopped[0]}" in err.getvalue() and "timed out after" in err.getvalue()
    assert sum(w.alive for w in cluster.workers) == 2 and stopped[0] not in {w.info.pid for w in cluster.workers}


def test_an_actor_answers_status_while_it_runs_and_runs_its_batches_one_at_a_time(local_ray: None) -> None:
    class Sleepy(Measurer):
        def _one(self, job: str, shared: Any, item: Any, whole_node: bool) -> tuple[str, Any]:
            start = time.monotonic()
            time.sleep(item)
            return ("done", (start, time.monotonic()))

    from presk.tuning.distributed import STATUS_GROUP

    with Cluster(err=io.StringIO(), actor=Sleepy) as cluster:
        cluster.start()
        handle = cluster.workers[0].handle
        first = handle.run.remote("sleep", None, [0.3, 1.5], False)
        second = handle.run.remote("sleep", None, [0.3], False)
        # Asked while the first batch runs its second point (polled: a loaded machine may start the batch late).
        deadline = time.monotonic() + 20
        while True:
            status = ray.get(handle.status.options(concurrency_group=STATUS_GROUP).remote(), timeout=10)
            if (status is not None and status[0] == 1) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status is not None, "the actor reports the batch it runs"
        index, seconds, done = status
        assert index == 1 and 0 <= seconds < 1.5 and len(done) == 1 and done[0][0] == "done"
        (_, (_, end)), _ = ray.get(first)
        ((_, (start, _)),) = ray.get(second)
        assert start >= end  # queued behind the first, not beside it on the same core
        assert ray.get(handle.status.options(concurrency_group=STATUS_GROUP).remote(), timeout=10) is None


def test_the_default_point_timeout_grows_with_the_prediction() -> None:
    assert point_timeout(None, None) == POINT_TIMEOUT_S
    assert point_timeout(None, 2.0) == POINT_TIMEOUT_S + TIMEOUT_PREDICTIONS * 2.0
    assert point_timeout(7.5, 2.0) == 7.5


# --------------------------------------------------------------------------
# calibration


def test_calibration_on_ray_measures_the_serial_runs_samples(tmp_path: Path, cluster: Cluster) -> None:
    machine = target_machine()
    points = space("calib-small", machine, ["f64"])[:6]  # chain, exp, rowsum on one worker and on all
    desc = MachineDesc.of(machine)
    serial = tmp_path / "serial.json"
    save_profile(Profile(machine.key(), desc, rules=("sets", "shared")), serial)
    measured, refused, _ = run_space(points, set(), NativeRunner(), desc, lambda samples: append_samples(serial, samples),
                                     Progress(len(points), stream=io.StringIO()))  # fmt: skip
    path = tmp_path / "P.json"
    profile = save_profile(Profile(machine.key(), desc, rules=("sets", "shared")), path)
    tally, others = cluster.calibrate(points, str(path), profile, None, io.StringIO())
    assert (tally.measured, tally.refused) == (measured, refused) and measured >= 4
    assert tally.lost == 0 and others == []
    here, there = read_samples(serial), read_samples(path)
    assert sorted((s.extra["key"], s.extra["kernel"]) for s in here) == sorted((s.extra["key"], s.extra["kernel"]) for s in there)
    for sample in there:
        assert sample.extra["machine"] == machine.key() and sample.seconds > 0
        assert set(sample.terms) == set(here[0].terms)
        assert sample.extra["workers"] == (1 if sample.extra["layout"]["split"] == "none" else machine.workers())
    # A second run resumes: every point is in the profile.
    again, _ = cluster.calibrate(points, str(path), load_profile(path), None, io.StringIO())
    assert again.measured == 0 and again.skipped == measured and len(read_samples(path)) == len(there)


def test_a_calibration_worker_killed_by_ray_kill(tmp_path: Path, cluster: Cluster) -> None:
    machine = target_machine()
    points = space("calib-small", machine, ["f64"])[:6]
    killed: list[str] = []

    def kill_the_first(event: str, worker: Any, items: Any) -> None:
        if event == "dispatch" and not killed:
            killed.append(worker.name)
            ray.kill(worker.handle)

    cluster.hook = kill_the_first
    path = tmp_path / "P.json"
    profile = save_profile(Profile(machine.key(), MachineDesc.of(machine), rules=("sets", "shared")), path)
    err = io.StringIO()
    tally, _ = cluster.calibrate(points, str(path), profile, None, err)
    assert killed and tally.measured + tally.refused == 6 and tally.measured >= 4 and tally.lost == 0
    assert len({s.extra["key"] for s in read_samples(path)}) == tally.measured
    assert f"{killed[0]} died" in err.getvalue()


def test_the_calibration_cli_on_ray(tmp_path: Path, local_ray: None, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "P.json"
    argv = ["bench", "--calibrate", str(path), "--space", "calib-small", "--space-types", "f64", "--ray", "--budget", "4s"]
    assert main(argv) == 0, capsys.readouterr().err
    out, _ = capsys.readouterr()
    assert "ray: 2 workers" in out and "points on Ray" in out and f"wrote {path}" in out
    samples = read_samples(path)
    assert samples and all(s.extra["machine"] == target_machine().key() for s in samples)


def test_another_machine_kind_calibrates_into_its_own_profile(tmp_path: Path, cluster: Cluster) -> None:
    """A mixed cluster, made by giving P.json another machine's key: the workers are another kind for it."""
    machine = target_machine()
    points = space("calib-small", machine, ["f64"])[:2]
    path = tmp_path / "P.json"
    other_key = "aarch64-unknown-linux-gnu|neoverse-v2|...|cores=64"
    profile = save_profile(Profile(other_key, MachineDesc.of(machine), rules=("sets", "shared")), path)
    err = io.StringIO()
    tally, others = cluster.calibrate(points, str(path), profile, None, err)
    assert others == [kind_profile_path(path, machine.key())] and tally.measured == 2
    assert read_samples(path) == [] and "no worker of the cluster is of" in err.getvalue()
    assert load_profile(others[0]).machine == machine.key() and len(read_samples(others[0])) >= 2


# --------------------------------------------------------------------------
# Errors: clear messages, no traceback, and none of them starts Ray.


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--entry", "nope", "--ray"], "E4004", "@nope"),
        (["--entry", "gemm", "--ray", "--ray-batch", "0"], "E4001", "--ray-batch 0"),
        (["--entry", "gemm", "--ray-batch", "4"], "E4001", "--ray-batch goes with --ray"),
        (["--entry", "gemm", "--point-timeout", "30s"], "E4001", "--point-timeout goes with --ray"),
        (["--entry", "gemm", "--ray", "--point-timeout", "0"], "E4001", "--point-timeout 0: expected a positive"),
        (["--entry", "gemm", "--ray", "--point-timeout", "soon"], "E4001", "--point-timeout soon: expected a time"),
        (["--entry", "gemm", "--ray-address", "127.0.0.1:9"], "E4001", "cannot connect to the Ray cluster at 127.0.0.1:9"),
        (["--entry", "gemm", "--ray-address", "nowhere"], "E4001", "expected HOST:PORT"),
    ],
)
def test_autotune_errors(argv: list[str], code: str, message: str, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    status = main(["autotune", str(GEMM), "--dim", "N=8", "-o", str(tmp_path / "r.jsonl"), *argv])
    err = capsys.readouterr().err
    assert status == 1 and f"error: {code}" in err and message in err and "Traceback" not in err


def test_a_corrupt_results_file_fails_before_ray(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n{}\n")
    status = main(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "-o", str(bad), "--ray"])
    err = capsys.readouterr().err
    assert status == 1 and "E8001" in err and f"{bad}:1" in err and "Traceback" not in err


def test_without_ray_installed_the_error_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    status = main(["autotune", str(GEMM), "--entry", "gemm", "--dim", "N=8", "-o", str(tmp_path / "r.jsonl"), "--ray"])
    err = capsys.readouterr().err
    assert status == 1 and "--ray needs Ray" in err and "pip install 'presk[ray]'" in err and "Traceback" not in err
    status = main(["bench", "--calibrate", str(tmp_path / "P.json"), "--space", "calib-small", "--ray"])
    err = capsys.readouterr().err
    assert status == 1 and "pip install 'presk[ray]'" in err and "Traceback" not in err


def test_calibration_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = target_machine()
    other = tmp_path / "other.json"
    save_profile(Profile("aarch64-unknown-linux-gnu|neoverse-v2|...|cores=64", MachineDesc.of(machine)), other)
    status = main(["bench", "--calibrate", str(other), "--space", "calib-small", "--ray"])
    err = capsys.readouterr().err
    assert status == 1 and "error: E8001" in err and "measured on another machine" in err
    status = main(["bench", str(GEMM), "--entry", "gemm", "--dim", "N=8", "--calibrate", str(tmp_path / "P.json"), "--ray"])
    err = capsys.readouterr().err
    assert status == 1 and "error: E4001" in err and "--ray measures a calibration space" in err
    status = main(["bench", str(GEMM), "--entry", "gemm", "--dim", "N=8", "--ray"])  # a plain benchmark: not ignored
    err = capsys.readouterr().err
    assert status == 1 and "error: E4001" in err and "--ray measures a calibration space" in err


def test_autotune_with_another_machines_profile_warns(tmp_path: Path, narrow: None, cluster: Cluster) -> None:
    machine = target_machine()
    path = tmp_path / "other.json"
    from test_autotune import load_dominated

    load_dominated(path)
    data = json.loads(path.read_text())
    data["machine"] = "aarch64-unknown-linux-gnu|neoverse-v2|...|cores=64"
    path.write_text(json.dumps(data))
    module, env = gemm()
    err = io.StringIO()
    result = at.autotune(module, "gemm", env, "f32", str(tmp_path / "r.jsonl"), str(path), err=err, cluster=cluster)
    assert "was measured on another machine" in err.getvalue() and result.measured == 1 + FIRST
    lines = points_of(tmp_path / "r.jsonl")
    assert all(r["machine"] == machine.key() for r in lines)
    assert all(r["predicted_s"] is not None for r in lines if not r["default"])


# --------------------------------------------------------------------------
# Last: it leaves the cluster without workers for a while.


def test_when_every_worker_dies_the_points_are_reported_lost(tmp_path: Path, narrow: None, cluster: Cluster) -> None:
    def kill_every_one(event: str, worker: Any, items: Any) -> None:
        if event == "dispatch":
            ray.kill(worker.handle)

    cluster.hook = kill_every_one
    module, env = gemm()
    err = io.StringIO()
    result = at.autotune(module, "gemm", env, "f32", str(tmp_path / "r.jsonl"), err=err, cluster=cluster)
    assert result.measured == 0 and result.lost == 1 + FIRST
    assert "no worker of its kind left" in err.getvalue()
    assert any("were not measured" in line for line in at.report(result))


def test_the_workers_see_the_driver_s_presk_variables(local_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """`PRESK_TARGET` and the other `PRESK_*` variables hold in each actor before it reads them: its machine is
    the driver's target, not its host's."""
    from presk.target import target_named

    monkeypatch.setenv("PRESK_TARGET", "x86-64")
    with Cluster(err=io.StringIO()) as cluster:
        cluster.start()
        assert len(cluster.workers) == 2
        assert {w.info.key for w in cluster.workers} == {target_named("x86-64").key()}
    assert target_named("x86-64").key() != target_named("host").key()  # every host of ours has more than SSE2
