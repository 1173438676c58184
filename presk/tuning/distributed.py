"""Measuring on Ray: `presk autotune --ray` and `presk bench --calibrate P.json --space S --ray`.

Why Ray, and why this shape. A sweep is thousands of independent points,
each a compilation and some 50 ms of timing; spreading them over cores and
machines is what Ray is for, so presk uses it rather than a home-made pool.
A Ray task per point would cost more in scheduling than a millisecond
kernel takes, so the unit of work is a **batch** of points handed to a
long-lived **actor** (`Measurer`), which keeps its compiler, its kernel
cache and each nest's reference outputs between batches.

Pinning. A timing is only worth what its core is: two measurements sharing
a core, or one migrating between cores, measure the scheduler. So the
cluster has one actor per CPU of each node, and each actor pins every
thread of its process to its own core (`os.sched_setaffinity`) before it
measures anything. Each actor reads its machine (`target_machine()`) before
pinning, so its machine key and the worker count a split gets are the
node's, exactly what a measurement in one process would see.

Points on several workers. A point whose kernels split over several
workers (an explicit split, or the executor's default one) cannot be timed
on one core. Such a point is measured by one actor of its node that widens
its affinity to the whole node's mask for that batch, while the scheduler
gives the node's other actors nothing: the point owns the node as it would
in a run without Ray. A point whose layout states workers above one goes
there at once; any other point is lowered by a pinned actor, which hands it
back when its kernels turn out to split (a pack kernel, the executor's
split of a default layout), and it joins the whole-node queue.

Machines. Every line records the machine key of the actor that measured
it, and each kind of machine in the cluster measures the points its own
lines lack, so a mixed cluster tunes each kind for itself. What is built
from the lines afterwards (the plan of `presk autotune`, the profile of a
calibration) is the driver's machine's: the other kinds' autotune lines stay
in the results file for a run on that kind; the other kinds' calibration
samples go to a profile of their own beside P.json (`kind_profile_path`).

Failures. Results are appended, synced, as each batch comes back, so an
interrupted run loses at most the batches in flight, and the same command
resumes. An actor that dies (killed, or its process crashed) has its batch
re-queued to the others of its machine kind, and the run reports it; a
batch that has killed `MAX_ATTEMPTS` actors, or whose kind has no actor
left, is reported as not measured and the run finishes without it.

Timeouts. A point whose measurement hangs (a kernel that never returns, a
lowering that loops) would otherwise hold its actor, and the run, for ever.
Each point has a timeout (`--point-timeout`, else `point_timeout`'s
default: a fixed bound plus a multiple of its predicted time), counted
from when its actor starts it, never from when its batch was queued: an
actor runs its batch in one thread and answers `status` in another (a
concurrency group of its own, `STATUS_GROUP`), so the driver knows which point of the
batch it is on and for how long. A point past its timeout is recorded as
timed out (a line of autotune with `"bits": "timeout"`, never chosen; a
calibration point without samples), the points of the batch it finished
are kept, the ones after it go back to the queue, and its actor is
killed and replaced by a fresh one on the same core. An actor too stuck to
answer is timed from the last answer it gave (or from the batch's start).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from xdsl.dialects.builtin import ModuleOp

from presk.cost.kernel_cost import default_split
from presk.cost.profile import Profile, append_samples, load_profile, save_profile
from presk.cost.terms import MachineDesc
from presk.diagnostics import PreskError
from presk.dialects.psk_kernel import KernelOp
from presk.target import Machine
from presk.tuning.calibration import Point as CalibrationPoint
from presk.tuning.calibration import Progress
from presk.tuning.space import Point, point_key

__all__ = [
    "AUTOTUNE_BATCH",
    "CALIBRATION_BATCH",
    "INSTALL_HINT",
    "MAX_ATTEMPTS",
    "POINT_TIMEOUT_S",
    "TIMEOUT_PREDICTIONS",
    "Cluster",
    "Measurer",
    "Tally",
    "WorkerInfo",
    "import_ray",
    "kind_profile_path",
    "point_timeout",
]

INSTALL_HINT = "pip install 'presk[ray]' (or: pip install 'ray>=2.40,<3')"
AUTOTUNE_BATCH = 8
"""Points per batch in `presk autotune`: a point is a compilation and about 50 ms of timing, so a batch is a
second or two, long beside Ray's millisecond of dispatch and short enough to balance the cores at the end."""
CALIBRATION_BATCH = 4
"""Points per batch in a calibration: its large GEMMs take seconds each."""
MAX_ATTEMPTS = 3
"""Actors a batch may see die before its points are reported as not measured (a point that crashes its process
would otherwise take every actor of the cluster with it)."""
START_TIMEOUT_S = 300.0
"""How long the actors may take to start (a node busy with other jobs may not place them at all)."""
POINT_TIMEOUT_S = 300.0
"""The fixed part of a point's default timeout: its lowering and compilation (seconds; tens for a large unrolled
register tile on a loaded machine), the default layout's reference run on an actor's first point of a shape,
and the timing's floor (`MIN_SECONDS`), with a wide margin. A point past it is hung, or not worth measuring."""
TIMEOUT_PREDICTIONS = 50.0
"""The part that grows with the point: this many times its predicted launch. A measurement calls it at least
`MIN_CALLS` + 1 times (the untimed first call included), and the model may be several times off."""
STATUS_S = 5.0
"""How long the driver waits for an actor's `status` before timing its point from its last answer."""
POLL_S = 1.0
"""How often the driver asks the busy actors where they are, while points have timeouts."""
STATUS_GROUP = "status"
"""The actors' concurrency group of `status`: a thread of its own, so that it answers while `run` runs (whose
calls, in the default group, still run one at a time: a batch queued behind another waits for it)."""


def point_timeout(stated_s: float | None, predicted_s: float | None) -> float:
    """A point's timeout in seconds: `--point-timeout` if stated, else `POINT_TIMEOUT_S` plus
    `TIMEOUT_PREDICTIONS` times its predicted launch (when there is a prediction)."""
    if stated_s is not None:
        return stated_s
    return POINT_TIMEOUT_S + TIMEOUT_PREDICTIONS * (predicted_s or 0.0)


def import_ray() -> ModuleType:
    """Ray, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise PreskError("E4001", f"--ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


def kind_profile_path(path: str | Path, machine_key: str) -> Path:
    """Where a calibration keeps the samples of another machine kind than P.json's: `P.<hash of the key>.json`."""
    path = Path(path)
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(f"{stem}.{_short(machine_key)}.json")


def _set_affinity(cpus: Iterable[int]) -> None:
    """Put every thread of this process on `cpus`.

    `os.sched_setaffinity(0, ...)` moves the calling thread only; the
    executor's worker pool and Ray's own threads are other threads, so each
    is moved by its id (a thread that ends meanwhile is skipped). Threads
    started later inherit the mask of the thread that starts them."""
    mask = set(cpus)
    os.sched_setaffinity(0, mask)
    for name in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(name), mask)
        except (ProcessLookupError, PermissionError, OSError):
            continue


def kernel_workers(kernels: ModuleOp, machine: Machine) -> int:
    """The most workers any kernel of `kernels` runs on (the executor's split policy on `machine`)."""
    return max((default_split(op, machine) for op in kernels.walk() if isinstance(op, KernelOp)), default=1)


# --------------------------------------------------------------------------
# The actor.


@dataclass(frozen=True)
class WorkerInfo:
    """What an actor says about itself when it starts."""

    slot: int
    node: str
    host: str
    pid: int
    machine: Machine
    key: str
    """`Machine.key()`, read before pinning: the node's, as a run in one process reads it."""
    core: int | None
    """The CPU it is pinned to (None where the OS has no affinity call)."""
    mask: tuple[int, ...]
    """The CPUs it could run on before pinning: its node's, which a whole-node batch runs on."""


@dataclass(frozen=True)
class ShapeSpec:
    """A nest shape of `presk autotune` as text, so that an actor can rebuild it (xDSL IR does not pickle)."""

    text: str
    storage: str
    operand_storage: str
    iso_key: str
    key: str
    site: str
    kind: str


@dataclass(frozen=True)
class TunePoint:
    """One point of `presk autotune` for an actor: the shape, the point, and the driver's prediction for it."""

    shape: ShapeSpec
    point: Point
    default: bool
    predicted_s: float | None


class Measurer:
    """A Ray actor that measures batches of points on one core (or, for a whole-node batch, on its node's).

    Plain class: `Cluster` makes it an actor with `ray.remote`, so that this
    module imports without Ray and the class pickles by reference."""

    def __init__(self, slot: int, environment: Mapping[str, str] | None = None) -> None:
        """`environment`: the driver's `PRESK_*` variables, set before anything reads them (the target, the
        caches, the threads). Passed here rather than as Ray's `runtime_env`, which starts each worker
        through a setup process of its own (about a second of CPU an actor) instead of a prestarted one."""
        os.environ.update(environment or {})
        from presk.jit.native import NativeRunner
        from presk.target import target_machine

        # The machine first, pinned second: its key and a split's workers are the node's.
        self.machine = target_machine()
        self.key = self.machine.key()
        self.runner = NativeRunner()
        self.mask: tuple[int, ...] = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
        self.core: int | None = self.mask[slot % len(self.mask)] if self.mask else None
        self.slot = slot
        self.shapes: dict[str, Any] = {}
        self.current: tuple[int, float, list[tuple[str, Any]]] | None = None
        """The batch being run: the index of its point being measured, since when (monotonic), the outcomes so far."""
        if self.core is not None:
            _set_affinity({self.core})

    def info(self) -> WorkerInfo:
        import ray

        node = ray.get_runtime_context().get_node_id()
        return WorkerInfo(self.slot, node, socket.gethostname(), os.getpid(), self.machine, self.key, self.core,
                          self.mask)  # fmt: skip

    def run(self, job: str, shared: Any, items: Sequence[Any], whole_node: bool) -> list[tuple[str, Any]]:
        """Measure `items` in order; one (status, value) each: `done`, `refused` (E7002), `node` (its kernels
        split: measure it on the whole node), or `error` ((code, message) of a diagnostic)."""
        if whole_node and self.core is not None:
            _set_affinity(self.mask)
        outcomes: list[tuple[str, Any]] = []
        try:
            for index, item in enumerate(items):
                self.current = (index, time.monotonic(), outcomes)
                outcomes.append(self._one(job, shared, item, whole_node))
            return outcomes
        finally:
            self.current = None
            if whole_node and self.core is not None:
                _set_affinity({self.core})

    def status(self) -> tuple[int, float, list[tuple[str, Any]]] | None:
        """Where the running batch is: its point being measured (index), for how many seconds, and the outcomes
        of the points before it; None when idle. Answered while `run` runs (its own thread, `STATUS_GROUP`)."""
        current = self.current
        if current is None:
            return None
        index, since, outcomes = current
        return index, time.monotonic() - since, list(outcomes[:index])

    def _one(self, job: str, shared: Any, item: Any, whole_node: bool) -> tuple[str, Any]:
        start = time.perf_counter()
        try:
            kernels = self._lower(job, item)
        except PreskError as error:
            return ("refused", None) if error.code == "E7002" else ("error", (error.code, error.message))
        if not whole_node and self.core is not None and kernel_workers(kernels, self.machine) > 1:
            return ("node", None)
        lowering_s = time.perf_counter() - start
        try:
            if job == "autotune":
                return ("done", self._autotune(shared, item, kernels, whole_node, lowering_s))
            return ("done", self._calibrate(shared, item, kernels))
        except PreskError as error:
            return ("error", (error.code, error.message))

    def _shape(self, spec: ShapeSpec) -> Any:
        """The nest shape of `spec`, parsed and realized once per actor (its reference outputs are kept)."""
        shape = self.shapes.get(spec.key)
        if shape is None:
            from presk.ir.context import presk_context
            from presk.ir.parse import parse_module
            from presk.pipeline import realize
            from presk.dialects.psk_realize import NestOp
            from presk.plans import parse_plan
            from presk.tuning.autotune import Shape
            from presk.tuning.plan import Isolated

            module = parse_module(presk_context(), spec.text, f"<{spec.site}>").module
            realized = realize(module, {}, parse_plan({"realization": spec.storage}, "presk plan"))
            site = next(op for op in realized.walk() if isinstance(op, NestOp))
            iso = Isolated(module, site, spec.storage, spec.operand_storage, spec.iso_key)
            shape = self.shapes[spec.key] = Shape(iso, spec.key, spec.site, spec.kind)
        return shape

    def _lower(self, job: str, item: Any) -> ModuleOp:
        if job == "autotune":
            from presk.tuning.autotune import lower_point

            return lower_point(self._shape(item.shape).iso, item.point)
        from presk.tuning.calibration import point_kernels

        return point_kernels(item)

    def _autotune(self, shared: tuple[str | None, float | None], item: TunePoint, kernels: ModuleOp,
                  whole_node: bool, lowering_s: float) -> tuple[Any, str]:  # fmt: skip
        from presk.tuning.autotune import measure_record

        profile_path, u = shared
        err = io.StringIO()
        record = measure_record(self._shape(item.shape), item.point, item.default, self.runner, self.key,
                                item.predicted_s, profile_path, u, err, kernels=kernels)  # fmt: skip
        if record is not None:
            # A line's seconds include the lowering, as in a run in one process (`presk rank`'s statement N).
            record["seconds"] += lowering_s
            record["worker"] = self._where(whole_node)
        return record, err.getvalue()

    def _calibrate(self, desc: MachineDesc, point: CalibrationPoint, kernels: ModuleOp) -> list[Any]:
        from presk.tuning.calibration import measure_point

        samples = measure_point(point, self.runner, desc, kernels=kernels)
        for sample in samples:
            sample.extra["machine"] = self.key
        return samples

    def _where(self, whole_node: bool) -> str:
        """`host:cpu` of a pinned measurement, `host:cpu,cpu,...` of a whole-node one."""
        cpus = self.mask if whole_node or self.core is None else (self.core,)
        return f"{socket.gethostname()}:{','.join(map(str, cpus))}"


# --------------------------------------------------------------------------
# The driver.


@dataclass
class _Worker:
    info: WorkerInfo
    handle: Any
    alive: bool = True
    batch: list[int] | None = None
    whole_node: bool = False
    index: int = 0
    """The point of its batch it was last known to measure."""
    since: float = 0.0
    """When (the driver's monotonic clock) it started that point, as far as the driver knows."""

    @property
    def name(self) -> str:
        core = "unpinned" if self.info.core is None else f"core {self.info.core}"
        return f"worker {self.info.slot} on {self.info.host} ({core}, pid {self.info.pid})"

    def where(self) -> str:
        """`host:cpu`, or `host:cpu,cpu,...` in a whole-node batch (as `Measurer._where` writes it)."""
        cpus = self.info.mask if self.whole_node or self.info.core is None else (self.info.core,)
        return f"{self.info.host}:{','.join(map(str, cpus))}"


@dataclass
class Tally:
    """What a distributed run did, for the command's report."""

    measured: int = 0
    refused: int = 0
    skipped: int = 0
    stopped: bool = False
    lost: int = 0
    timed_out: int = 0
    """Points past their timeout: recorded as such (autotune) and never chosen, their workers replaced."""
    records: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """A line per machine kind (its workers and points), and one per worker that died."""


@dataclass
class _Item:
    kind: str
    value: Any
    whole_node: bool
    label: str
    attempts: int = 0
    timeout_s: float | None = None


Hook = Callable[[str, "_Worker", Sequence[Any]], None]
Timeout = Callable[["_Item", float, "_Worker"], None]
"""What a job does with a point past its timeout: (the item, the seconds it ran, the worker it ran on)."""


class Cluster:
    """A Ray cluster of pinned `Measurer` actors: started here (`address=None`) or joined (`address`, or `auto`).

    Connects and starts its actors on first use, so that a command's own
    errors (an unknown entry, a corrupt file) come before any Ray process.
    A process already connected to Ray (a library caller, the tests) keeps
    its connection: the cluster then only adds and removes its actors.
    `hook`, if set, is called with ("dispatch" | "result", worker, items):
    the tests kill a worker through it. `point_timeout_s`: every point's
    timeout (`--point-timeout`; None: `point_timeout`'s default). `actor`:
    the actor's class (the tests give one whose points hang).
    """

    def __init__(self, address: str | None = None, batch: int | None = None, err: TextIO | None = None,
                 hook: Hook | None = None, point_timeout_s: float | None = None,
                 actor: type[Measurer] = Measurer) -> None:  # fmt: skip
        self.ray = import_ray()
        if batch is not None and batch < 1:
            raise PreskError("E4001", f"--ray-batch {batch}: give a positive number of points")
        if point_timeout_s is not None and not point_timeout_s > 0:
            raise PreskError("E4001", f"--point-timeout {point_timeout_s:g}: give a positive time")
        self.address = address
        self.batch = batch
        self.point_timeout_s = point_timeout_s
        self.actor = actor
        self.err = err or sys.stderr
        self.hook = hook
        self.workers: list[_Worker] = []
        self.owns_ray = False
        """Whether this cluster called `ray.init` (and so shuts Ray down when it closes)."""
        self.connected = False
        self.died: list[str] = []

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- starting and stopping ------------------------------------------------

    def _connect(self) -> None:
        ray = self.ray
        if self.connected:
            return
        if self.address is not None:
            _check_reachable(self.address)
        if not ray.is_initialized():
            import logging

            options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
            try:
                if self.address is None:
                    from presk.target.caches import affinity_cpus

                    ray.init(address="local", num_cpus=len(affinity_cpus()), **options)
                else:
                    ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as error:
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray cluster"
                hint = ""
                if self.address == "auto":
                    hint = " (start one with `ray start --head`)"
                elif self.address is not None and not os.environ.get("RAY_AUTH_MODE"):
                    # Ray >= 2.59 turns token authentication on for `ray start --head` when ~/.ray/auth_token
                    # exists, but ray.init(address=HOST:PORT) only sends the token under RAY_AUTH_MODE=token.
                    hint = (" (a cluster started with token authentication needs RAY_AUTH_MODE=token here, "
                            "and its token in ~/.ray/auth_token)")  # fmt: skip
                raise PreskError("E4001", f"cannot connect to {where}{hint}: {error}") from None
            self.owns_ray = True
        self.connected = True

    def start(self) -> None:
        """Connect, and start an actor on each CPU of each live node that has none (again after a death)."""
        self._connect()
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.workers = [w for w in self.workers if w.alive]
        taken: dict[str, set[int]] = {}
        for w in self.workers:
            taken.setdefault(w.info.node, set()).add(w.info.slot)
        env = {k: v for k, v in os.environ.items() if k.startswith("PRESK_")}
        # `status` (where the batch is, for the timeouts) has a thread of its own; `run`s stay one at a time.
        actor = ray.remote(concurrency_groups={STATUS_GROUP: 1})(self.actor)
        pending = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            cpus = int(node.get("Resources", {}).get("CPU", 0))
            for slot in range(cpus):
                if slot in taken.get(node["NodeID"], set()):
                    continue
                strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
                handle = actor.options(num_cpus=1, max_restarts=0, max_task_retries=0,
                                       scheduling_strategy=strategy).remote(slot, env)  # fmt: skip
                pending.append((handle, handle.info.remote(), node.get("NodeManagerHostname", node["NodeID"])))
        if not pending and not self.workers:
            raise PreskError("E4001", "the Ray cluster has no CPU to measure on")
        ready, _ = ray.wait([ref for _, ref, _ in pending], num_returns=len(pending), timeout=START_TIMEOUT_S)
        ready_set = set(ready)
        for handle, ref, host in pending:
            if ref not in ready_set:
                ray.kill(handle)
                self.err.write(f"presk: warning: a worker on {host} did not start within {START_TIMEOUT_S:.0f} s "
                               "(its node's CPUs are taken?); measuring without it\n")  # fmt: skip
                continue
            try:
                self.workers.append(_Worker(ray.get(ref), handle))
            except self._deaths() as error:
                self.err.write(f"presk: warning: a worker on {host} could not start ({_first_line(error)}); "
                               "is presk installed there, at this version?\n")  # fmt: skip
        if not self.workers:
            raise PreskError("E4001", "no Ray worker could start: see the warnings above")

    def close(self) -> None:
        """Stop the actors, and disconnect if this cluster connected (a local cluster it started stops with it;
        a cluster it joined goes on)."""
        ray = self.ray
        for w in self.workers:
            if w.alive:
                try:
                    ray.kill(w.handle)
                except Exception:  # noqa: BLE001 - an actor already gone is what we wanted
                    pass
        self.workers = []
        if self.connected and self.owns_ray and ray.is_initialized():
            ray.shutdown()
        self.connected = False

    def _deaths(self) -> tuple[type[BaseException], ...]:
        exceptions = self.ray.exceptions
        unavailable = getattr(exceptions, "ActorUnavailableError", exceptions.RayActorError)  # Ray >= 2.2x
        return (exceptions.RayActorError, exceptions.WorkerCrashedError, unavailable)

    def kinds(self) -> dict[str, list[_Worker]]:
        """The live workers by machine key."""
        kinds: dict[str, list[_Worker]] = {}
        for w in self.workers:
            if w.alive:
                kinds.setdefault(w.info.key, []).append(w)
        return kinds

    def describe(self, driver_key: str) -> list[str]:
        """A line per machine kind: its workers and hosts, and whether it is this machine's kind."""
        lines = []
        for key, workers in self.kinds().items():
            hosts = sorted({w.info.host for w in workers})
            mine = "this machine's kind" if key == driver_key else "another kind, measured for itself"
            machine = workers[0].info.machine
            lines.append(f"ray: {len(workers)} workers on {', '.join(hosts)}: {machine.cpu_name}, "
                         f"{machine.cores} cores, key {_short(key)} ({mine})")  # fmt: skip
        return lines

    # -- the two jobs -----------------------------------------------------------

    def autotune(self, items: Sequence[tuple[Any, Point, bool]], done: set[tuple[str, str, str]],
                 predicted: Mapping[tuple[str, str], float | None], profile_path: str | None, u: float | None,
                 results_path: str, budget_s: float | None, err: TextIO) -> Tally:  # fmt: skip
        """Measure `presk autotune`'s points: each machine kind the (shape, point) pairs its lines lack."""
        from presk.target import target_machine
        from presk.tuning.autotune import append_record

        self.start()
        driver_key = target_machine().key()
        tally = Tally(notes=self.describe(driver_key))
        specs: dict[str, ShapeSpec] = {}
        shapes: dict[str, Any] = {}
        work: dict[str, list[_Item]] = {}
        for kind in self.kinds():
            for shape, point, is_default in items:
                pk = point_key(point)
                if (kind, shape.key, pk) in done:
                    tally.skipped += 1
                    continue
                spec = specs.get(shape.key)
                if spec is None:
                    shapes[shape.key] = shape
                    iso = shape.iso
                    spec = specs[shape.key] = ShapeSpec(str(iso.module), iso.storage, iso.operand_storage, iso.key,
                                                        shape.key, shape.site, shape.kind)  # fmt: skip
                value = TunePoint(spec, point, is_default, predicted.get((shape.key, pk)))
                work.setdefault(kind, []).append(_Item(kind, value, _states_workers(point.get("split")),
                                                       f"{shape.site} {json.dumps(point)}",
                                                       timeout_s=point_timeout(self.point_timeout_s,
                                                                               value.predicted_s)))  # fmt: skip
        if driver_key not in self.kinds():
            err.write("presk autotune: warning: no worker of the cluster is of this machine's kind: the plan is "
                      "chosen from this kind's lines already in the file\n")  # fmt: skip

        def record(item: _Item, value: tuple[dict[str, Any] | None, str]) -> None:
            line, text = value
            if text:
                err.write(text)
            if line is not None:
                append_record(results_path, line)
                tally.records.append(line)

        def timed_out(item: _Item, seconds: float, worker: _Worker) -> None:
            tp: TunePoint = item.value
            line = {
                "machine": item.kind, "site": tp.shape.site, "kind": tp.shape.kind,
                "shape": shapes[tp.shape.key].iso.describe(), "shape_key": tp.shape.key, "point": tp.point,
                "default": tp.default, "predicted_s": tp.predicted_s, "profile": profile_path, "u": u,
                "median_s": None, "q1_s": None, "q3_s": None, "calls": 0, "bits": "timeout",
                "timeout_s": item.timeout_s, "seconds": seconds, "worker": worker.where(),
            }  # fmt: skip
            append_record(results_path, line)
            tally.records.append(line)

        shared = {kind: (profile_path, u) for kind in work}
        self._run("autotune", work, shared, self.batch or AUTOTUNE_BATCH, record, tally, budget_s, err, timed_out)
        return tally

    def calibrate(self, points: Sequence[CalibrationPoint], path: str, profile: Profile, budget_s: float | None,
                  err: TextIO) -> tuple[Tally, list[Path]]:  # fmt: skip
        """Measure a calibration space: P.json's machine kind into P.json, each other kind into its own profile.

        Returns the tally and the other kinds' profiles that received samples (to be fitted too)."""
        self.start()
        tally = Tally(notes=self.describe(profile.machine))
        paths: dict[str, Path] = {}
        shared: dict[str, MachineDesc] = {}
        work: dict[str, list[_Item]] = {}
        for kind, workers in self.kinds().items():
            if kind == profile.machine:
                target, kind_profile = Path(path), profile
                desc = profile.machine_desc or MachineDesc.of(workers[0].info.machine)
            else:
                target = kind_profile_path(path, kind)
                kind_profile = _kind_profile(target, workers[0].info.machine, profile)
                desc = kind_profile.machine_desc or MachineDesc.of(workers[0].info.machine)
            paths[kind], shared[kind] = target, desc
            done = {str(s.extra.get("key")) for s in kind_profile.samples}
            for point in points:
                if point.key in done:
                    tally.skipped += 1
                    continue
                split = json.loads(point.key)["layout"].get("split")
                label = f"{point.entry} {point.dtype} {dict(point.sizes)}"
                work.setdefault(kind, []).append(_Item(kind, point, _states_workers(split), label,
                                                       timeout_s=point_timeout(self.point_timeout_s, None)))
        if profile.machine not in self.kinds():
            err.write(f"presk: warning: no worker of the cluster is of {path}'s machine: its samples do not grow, "
                      "the other kinds' go to profiles of their own\n")  # fmt: skip
        written: set[str] = set()

        def record(item: _Item, samples: list[Any]) -> None:
            append_samples(paths[item.kind], samples)
            written.add(item.kind)
            tally.records.append(item.value.key)

        self._run("calibrate", work, shared, self.batch or CALIBRATION_BATCH, record, tally, budget_s, err,
                  lambda item, seconds, worker: None)  # a calibration point past its timeout has no samples
        return tally, [paths[k] for k in sorted(written) if k != profile.machine]

    # -- the scheduler ----------------------------------------------------------

    def _run(self, job: str, work: Mapping[str, list[_Item]], shared: Mapping[str, Any], batch: int,
             record: Callable[[_Item, Any], None], tally: Tally, budget_s: float | None, err: TextIO,
             timed_out: Timeout) -> None:  # fmt: skip
        """Hand out batches until every item is measured, refused, timed out or lost; `record` each result as it
        comes, `timed_out` each point past its timeout.

        Per machine kind two queues: points for one core, and points for a
        whole node. A whole-node batch goes to a node only when all its
        workers are idle, and none of them gets work until it is back."""
        ray = self.ray
        for w in self.workers:  # a batch of an interrupted run may still be running: this run's queue behind it
            w.batch, w.whole_node = None, False
        total = sum(len(items) for items in work.values())
        progress = Progress(total, budget_s, f"{job} on ray", stream=err)
        pinned = {kind: deque(i for i in items if not i.whole_node) for kind, items in work.items()}
        whole = {kind: deque(i for i in items if i.whole_node) for kind, items in work.items()}
        flight: dict[Any, tuple[_Worker, list[_Item]]] = {}
        timeouts = any(i.timeout_s is not None for items in work.values() for i in items)
        polled = time.monotonic()
        try:
            while True:
                if not tally.stopped and progress.over_budget():
                    tally.stopped = True
                if not tally.stopped:
                    self._dispatch(job, shared, batch, pinned, whole, flight)
                if not flight:
                    break
                ready, _ = ray.wait(list(flight), num_returns=1, timeout=POLL_S if timeouts else None)
                for ref in ready:
                    worker, items = flight.pop(ref)
                    worker.batch = None
                    try:
                        outcomes = ray.get(ref)
                    except self._deaths() as error:
                        self._lost_worker(worker, items, pinned, whole, tally, err, error)
                        continue
                    except ray.exceptions.RayTaskError as error:
                        cause = getattr(error, "cause", None)
                        raise (cause if isinstance(cause, Exception) else error) from None
                    if self.hook is not None:
                        self.hook("result", worker, [i.value for i in items])
                    self._take(worker, items, outcomes, whole, record, tally, progress)
                if timeouts and time.monotonic() - polled >= POLL_S:
                    self._time_out(flight, pinned, whole, record, timed_out, tally, progress, err)
                    polled = time.monotonic()
        finally:
            progress.close()
        left = sum(len(q) for q in pinned.values()) + sum(len(q) for q in whole.values())
        if not tally.stopped:
            tally.lost += left

    def _take(self, worker: _Worker, items: Sequence[_Item], outcomes: Sequence[tuple[str, Any]],
              whole: Mapping[str, deque[_Item]], record: Callable[[_Item, Any], None], tally: Tally,
              progress: Progress) -> None:  # fmt: skip
        """The outcomes of a batch's first points (all of them, or those before a point that timed out)."""
        for item, (status, value) in zip(items, outcomes):
            if status == "node":
                whole[item.kind].append(item)
            elif status == "refused":
                tally.refused += 1
                progress.step("(refused)")
            elif status == "error":
                code, message = value
                raise PreskError(code, f"{message} (on {worker.name})")
            else:
                record(item, value)
                tally.measured += 1
                progress.step(item.label)

    def _time_out(self, flight: dict[Any, tuple[_Worker, list[_Item]]], pinned: Mapping[str, deque[_Item]],
                  whole: Mapping[str, deque[_Item]], record: Callable[[_Item, Any], None], timed_out: Timeout,
                  tally: Tally, progress: Progress, err: TextIO) -> None:  # fmt: skip
        """Ask each busy actor where its batch is; one whose point is past its timeout is killed and replaced.

        The outcomes of the points it finished are taken, the point is
        `timed_out`, and the points after it (and, if the actor never
        answered, the ones before) go back to the front of their queue."""
        ray = self.ray
        asked = {ref: worker.handle.status.options(concurrency_group=STATUS_GROUP).remote()
                 for ref, (worker, _) in flight.items()}  # fmt: skip
        replace = False
        for ref, question in asked.items():
            worker, items = flight[ref]
            answer = None
            try:
                answer = ray.get(question, timeout=STATUS_S)
            except ray.exceptions.GetTimeoutError:
                pass  # too stuck to answer: timed from what it last said
            except self._deaths():
                continue  # `ray.wait` reports its death with its batch
            now = time.monotonic()
            done: list[tuple[str, Any]] | None = None
            if answer is not None:
                index, seconds, done = answer
                worker.index, worker.since = index, now - seconds
            item = items[worker.index]
            if item.timeout_s is None or now - worker.since <= item.timeout_s:
                continue
            del flight[ref]
            seconds = now - worker.since
            try:
                ray.kill(worker.handle)
            except Exception:  # noqa: BLE001 - an actor already gone is what we wanted
                pass
            worker.alive = False
            kept = done if done is not None and len(done) == worker.index else []
            self._take(worker, items, kept, whole, record, tally, progress)
            timed_out(item, seconds, worker)
            tally.timed_out += 1
            progress.step(f"(timed out) {item.label}")
            again = [i for n, i in enumerate(items) if n >= len(kept) and i is not item]
            for i in reversed(again):
                (whole if i.whole_node else pinned)[i.kind].appendleft(i)
            note = (f"ray: {item.label} timed out after {seconds:.0f} s (its timeout {item.timeout_s:g} s) on "
                    f"{worker.name}: recorded as timed out, never chosen; the worker is replaced"
                    + (f", {len(again)} points of its batch go back to the queue" if again else ""))  # fmt: skip
            tally.notes.append(note)
            err.write(f"presk: warning: {note}\n")
            replace = True
        if replace:
            self.start()  # a fresh actor on each core whose actor was killed

    def _dispatch(self, job: str, shared: Mapping[str, Any], batch: int, pinned: Mapping[str, deque[_Item]],
                  whole: Mapping[str, deque[_Item]], flight: dict[Any, tuple[_Worker, list[_Item]]]) -> None:  # fmt: skip
        """Give every idle worker a batch it may run now (see `_run`)."""
        by_node: dict[str, list[_Worker]] = {}
        for w in self.workers:
            if w.alive:
                by_node.setdefault(w.info.node, []).append(w)
        for node_workers in by_node.values():
            if any(w.batch is not None and w.whole_node for w in node_workers):
                continue  # the node belongs to a whole-node batch
            for w in node_workers:
                if w.batch is not None:
                    continue
                kind = w.info.key
                queue, on_node = pinned.get(kind), False
                if not queue:
                    if whole.get(kind) and all(o.batch is None for o in node_workers):
                        queue, on_node = whole[kind], True
                    else:
                        continue
                items = [queue.popleft() for _ in range(min(batch, len(queue)))]
                ref = w.handle.run.remote(job, shared[kind], [i.value for i in items], on_node)
                flight[ref] = (w, items)
                w.batch, w.whole_node = [id(i) for i in items], on_node
                w.index, w.since = 0, time.monotonic()  # until it says otherwise (`_time_out`)
                if self.hook is not None:
                    self.hook("dispatch", w, [i.value for i in items])
                if on_node:
                    break  # the rest of the node waits for it

    def _lost_worker(self, worker: _Worker, items: list[_Item], pinned: Mapping[str, deque[_Item]],
                     whole: Mapping[str, deque[_Item]], tally: Tally, err: TextIO, error: BaseException) -> None:  # fmt: skip
        """A worker died with `items` in flight: re-queue them at the front, unless they have killed enough."""
        worker.alive = False
        retry = [i for i in items if i.attempts + 1 < MAX_ATTEMPTS]
        for i in items:
            i.attempts += 1
        dropped = len(items) - len(retry)
        for i in reversed(retry):
            (whole if i.whole_node else pinned)[i.kind].appendleft(i)
        others = any(w.alive and w.info.key == worker.info.key for w in self.workers)
        fate = (f"its {len(retry)} points go to another worker" if retry and others
                else f"its {len(retry)} points have no worker of its kind left" if retry else "")  # fmt: skip
        if dropped:
            fate += ("; " if fate else "") + f"{dropped} points dropped after killing {MAX_ATTEMPTS} workers"
            tally.lost += dropped
        note = f"ray: {worker.name} died with a batch of {len(items)} points ({_first_line(error)}): {fate}"
        tally.notes.append(note)
        err.write(f"presk: warning: {note}\n")


def _check_reachable(address: str) -> None:
    """Fail at once on a `host:port` nothing answers at: Ray itself retries such an address for minutes."""
    if address == "auto":
        return
    rest = address.split("://", 1)[-1]
    host, _, port = rest.rpartition(":")
    if not host or not port.isdecimal():
        raise PreskError("E4001", f"--ray-address {address}: expected HOST:PORT (as `ray start --head` prints it) or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5.0).close()
    except OSError as error:
        raise PreskError("E4001", f"cannot connect to the Ray cluster at {address}: {error.strerror or error} "
                         "(start one with `ray start --head`, which prints its address)") from None


def _states_workers(split: Any) -> bool:
    """Whether a layout's split states workers above one: its point goes to the whole-node queue at once."""
    return isinstance(split, dict) and int(split.get("workers", 1)) > 1


def _kind_profile(path: Path, machine: Machine, like: Profile) -> Profile:
    """The profile of another machine kind beside P.json: created under P.json's rules, or read and checked."""
    if not path.exists():
        return save_profile(Profile(machine.key(), MachineDesc.of(machine), rules=like.rules), path)
    profile = load_profile(path)
    if profile.machine != machine.key():
        raise PreskError("E8001", f"{path} holds another machine's samples ({profile.machine}); it is where "
                         f"{machine.key()}'s go: move it away")  # fmt: skip
    return profile


def _short(key: str) -> str:
    """A machine key's hash, to name a kind in one line (the key itself runs to a thousand characters)."""
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:10]


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
