"""One case on a Spark cluster: its producers and consumers as one barrier stage (``mqbench compare
--spark-master``).

The driver plans the case as the single-host runner does (``harness.runner._workers.specs``); each worker
spec becomes a :class:`~harness.cluster.Role` on the host the scenario's ``hosts:`` names (or spread over
the executors). In a brokerless case the listening side goes first: each binder starts its worker on its
own executor's address (:func:`on_host`), finds which of the plan's ports it listens on, and publishes
them with that address through ``allGather``; the other side then connects to what was published
(:func:`on_ports`), so no ``hosts:`` is needed. Inside its task a role forks one worker process running the runner's own
``worker_main``, waits until it is ready, passes the stage's start barrier, releases it, and then joins the
other tasks every :data:`ROUND` seconds through ``allGather``: each task adds its worker's count and state,
and every task reaches the same verdict from the same reports (the case is over when the consumers have
what was sent, nothing moved for a while after the producers finished, or a worker failed). The worker's
record files travel back as bytes to the driver's scratch folder, where the runner's ``assemble_rows``
turns them into raw rows; each side's stamps are then moved onto the coordinator's clock by its host's
measured offset (:mod:`harness.cluster._clock`), and the rows name the host and executor that stamped them.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import re
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness import _watchdog
from harness.cluster._clock import Offset
from harness.cluster._stage import Role, RoleResult, StageError, run_stage
from harness.drivers.base import Driver, Pattern, Topology
from harness.network import loopback_ports
from harness.runfolder import RunFolder
from harness.runfolder.schema import CLOCK_TABLE_COLUMNS, CLOCKS
from harness.runner._context import Case, WorkerContext, WorkerSpec
from harness.runner._records import assemble_rows
from harness.runner._workers import DRAIN_IDLE, READY_TIMEOUT, CaseFailed, OnProgress, expected_counts, specs
from harness.runner.case import CaseResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUND = 0.1  # seconds between two allGather rounds of the watch
START_DELAY_NS = 20_000_000  # the producers' schedule starts this long after the barrier is released
_SENDER_STAMPS = ("t_intended", "t_send", "t_ack")
WORKER_COMM = "mqb-"
_LOOPBACK = re.compile(r"127\.0\.0\.1:(\d+)")  # a worker process's name starts with this (then its role: mqb-producer-0)


def unsupported(case: Case, driver: Driver) -> str | None:
    """Why this case cannot run on a cluster yet (one sentence), or None."""
    sc, system = case.scenario, case.variant.system
    if sc.faults or sc.consumer_rate is not None:
        return "faults and slow consumers do not run on a Spark cluster yet; run this scenario without --spark-master"
    if driver.needs_broker:
        return None
    if sc.pattern is Pattern.PUBSUB:
        return (f"brokerless pub/sub ({system}) needs the subscription handshake, which does not run on a Spark "
                "cluster yet; run it without --spark-master")
    return None


def on_ports(plan: Any, published: dict[int, str]) -> Any:
    """A brokerless plan with each ``127.0.0.1:<port>`` endpoint that a binder published moved to the address
    it listens on (``published``: port -> address); an unpublished one (its binder failed) stays."""
    if isinstance(plan, str):
        return _LOOPBACK.sub(lambda m: f"{published.get(int(m.group(1)), '127.0.0.1')}:{m.group(1)}", plan)
    if isinstance(plan, dict):
        return {k: on_ports(v, published) for k, v in plan.items()}
    if isinstance(plan, (list, tuple)):
        return type(plan)(on_ports(v, published) for v in plan)
    return plan


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` and its children (a JVM client) listen on."""
    import psutil

    ports: set[int] = set()
    try:
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            ports |= {c.laddr.port for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    except psutil.Error:
        pass
    return ports


def on_host(plan: Any, address: str) -> Any:
    """A brokerless plan with every ``127.0.0.1:<port>`` endpoint moved to ``address`` (the binders' host):
    binders listen there and the other side connects there. The ports are the driver's choice, free on
    its machine; one taken on the binders' host fails the case with the bind's error."""
    if isinstance(plan, str):
        return plan.replace("127.0.0.1:", f"{address}:")
    if isinstance(plan, dict):
        return {k: on_host(v, address) for k, v in plan.items()}
    if isinstance(plan, (list, tuple)):
        return type(plan)(on_host(v, address) for v in plan)
    return plan


@dataclass
class _Local:
    """A task's worker process and what it shares with it."""

    spec: WorkerSpec
    ctx: WorkerContext
    proc: Any
    scratch: str
    errors: list[str]
    undo: int  # the watchdog's token for removing ``scratch`` if this task's process is killed

    def close(self) -> None:
        """Stop the worker and remove the scratch folder: the stage calls this when the task ends before
        ``run`` (another task failed, the barrier broke); ``run`` stops the worker and reads its records first."""
        _stop(self)
        _watchdog.remove_folder(self.scratch, self.undo)


@dataclass(frozen=True)
class _Roles:
    """What every task knows about the case (pickled into the tasks): the scenario and all worker specs."""

    case: Case
    producers: list[WorkerSpec]
    consumers: list[WorkerSpec]
    brokerless: bool = False

    def prepare(self, role: Role, where: dict[str, tuple[str, str]]) -> _Local:
        """Fork the role's worker and wait until it is connected and ready (before the start barrier). In a
        brokerless case the binders start first, on their executor's address, and publish the ports they
        listen on (``allGather``, which every task joins once); then the others connect to them."""
        from pyspark import BarrierTaskContext

        scratch, undo = _watchdog.temporary_folder("mqbench-task-")  # removed too if this task's process is killed
        spec = replace(role.spec, out=os.path.join(scratch, role.name), namespace=None)
        if not self.brokerless:
            return self._start(spec, scratch, undo)
        binders = self.consumers if self.case.scenario.pattern is Pattern.REQREP else self.producers
        local = None
        published: dict[str, str] = {}
        if role.name in {b.name for b in binders}:
            host = where[role.name][1].rsplit(":", 1)[0]
            try:  # the executor's address may be a host name: a listener binds an IP
                address = socket.gethostbyname(host)
            except OSError:
                address = host  # the worker's bind says what is wrong
            local = self._start(replace(spec, plan=on_host(spec.plan, address)), scratch, undo)
            if not local.errors:
                bound = listening_ports(local.proc.pid) & loopback_ports(spec.plan)
                published = {str(port): address for port in bound}
        endpoints: dict[int, str] = {}
        for answer in BarrierTaskContext.get().allGather(json.dumps(published)):
            endpoints.update({int(port): address for port, address in json.loads(answer).items()})
        return local if local is not None else self._start(replace(spec, plan=on_ports(spec.plan, endpoints)), scratch, undo)

    def _start(self, spec: WorkerSpec, scratch: str, undo: int) -> _Local:
        """Fork the worker of ``spec`` and wait until it is ready (or failed, or timed out)."""
        from harness.runner.worker import worker_main

        fork = mp.get_context("fork")
        n = len(self.producers) + len(self.consumers)
        ctx = WorkerContext(status=fork.Queue(), start=fork.Event(), stop=fork.Event(),
                            start_ns=fork.Value("q", 0, lock=False), progress=fork.Array("q", n, lock=False))
        proc = fork.Process(target=_worker, args=(worker_main, spec, ctx), name=f"mqbench-{spec.name}", daemon=True)
        proc.start()
        local = _Local(spec, ctx, proc, scratch, [], undo)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                msg = ctx.status.get(timeout=0.1)
            except queue.Empty:
                if not proc.is_alive():
                    local.errors.append(f"{spec.name} exited (code {proc.exitcode}) before it was ready")
                    return local
                continue
            if msg[0] == "ready":
                return local
            if msg[0] == "error":
                local.errors.append(f"{msg[1]}: {msg[2]}")
                return local
        local.errors.append(f"{spec.name} was not ready after {READY_TIMEOUT:.0f} s")
        return local

    def run(self, role: Role, local: _Local) -> dict[str, Any]:
        """After the start barrier: release the worker, watch with the other tasks, stop it, return its
        record files (name suffix -> bytes), its done count and the shared verdict."""
        from pyspark import BarrierTaskContext

        barrier = BarrierTaskContext.get()
        spec, ctx = local.spec, local.ctx
        ctx.start_ns.value = time.monotonic_ns() + START_DELAY_NS
        ctx.start.set()
        done: list[Any] | None = None
        watch = _Verdict(self)
        try:
            while True:
                while True:
                    try:
                        msg = ctx.status.get_nowait()
                    except queue.Empty:
                        break
                    if msg[0] == "done":
                        done = [int(msg[2]), str(msg[3])]
                    elif msg[0] == "error":
                        local.errors.append(f"{msg[1]}: {msg[2]}")
                mine = {"name": spec.name, "slot": spec.slot, "count": int(ctx.progress[spec.slot]), "done": done,
                        "errors": local.errors, "now": time.monotonic()}
                if watch.over([json.loads(x) for x in barrier.allGather(json.dumps(mine))]):
                    break
                time.sleep(ROUND)
        finally:
            _stop(local)
        try:
            files = {name[len(spec.name):]: Path(local.scratch, name).read_bytes()
                     for name in os.listdir(local.scratch) if name.startswith(spec.name)}
        finally:
            _watchdog.remove_folder(local.scratch, local.undo)
        return {"files": files, "errors": local.errors, "complete": watch.complete, "problems": watch.problems}


class _Verdict:
    """Whether the case is over, from one round of every task's report; the same in every task (the
    reports are the same, and their clock is the first task's)."""

    def __init__(self, roles: _Roles) -> None:
        self.roles = roles
        self.last_total = -1
        self.last_change = 0.0
        self.complete = True
        self.problems: list[str] = []

    def over(self, reports: Sequence[dict[str, Any]]) -> bool:
        sc, producers, consumers = self.roles.case.scenario, self.roles.producers, self.roles.consumers
        counts = [0] * (len(producers) + len(consumers))
        done: dict[str, tuple[int, str]] = {}
        for r in reports:
            counts[r["slot"]] = r["count"]
            if r["done"] is not None:
                done[r["name"]] = (r["done"][0], r["done"][1])
        if any(r["errors"] for r in reports):
            self.complete = False
            self.problems.append("a worker failed; the case was stopped")
            return True
        now, total = reports[0]["now"], sum(counts)
        if total != self.last_total:
            self.last_total, self.last_change = total, now
        if all(s.name in done for s in producers):
            if sc.pattern is Pattern.REQREP:
                return True
            received = counts[len(producers):]
            if sum(received) >= sum(expected_counts(sc, producers, consumers, counts, done)):
                return True
            if now - self.last_change > min(DRAIN_IDLE, sc.timeout):
                return True  # nothing more is coming: what is missing is lost
        if now - self.last_change > sc.timeout + (sc.duration or 0.0):
            self.complete = False
            self.problems.append(f"stalled: no message moved for {sc.timeout + (sc.duration or 0.0):.0f} s; "
                                 "results kept")
            return True
        return False


def _worker(main: Any, spec: WorkerSpec, ctx: WorkerContext) -> None:
    """The worker process: it dies with its task (PR_SET_PDEATHSIG), so a task Spark kills (a cancelled job,
    a driver's Ctrl-C) leaves no worker behind on the executor's host. It is named ``mqb-<role>`` (``ps``,
    ``/proc/PID/comm``; the kernel keeps 15 bytes) so that it can be told from Spark's Python workers."""
    import ctypes

    from harness import _watchdog

    _watchdog.die_with_parent()
    ctypes.CDLL(None, use_errno=True).prctl(15, f"{WORKER_COMM}{spec.name}".encode()[:15])  # 15 = PR_SET_NAME
    main(spec, ctx)


def _stop(local: _Local) -> None:
    """Ask the worker to stop, then interrupt it (it saves its records), then kill it."""
    local.ctx.stop.set()
    proc = local.proc
    proc.join(3.0)
    if proc.is_alive() and proc.pid is not None:
        os.kill(proc.pid, signal.SIGUSR1)
        proc.join(5.0)
    if proc.is_alive():
        local.errors.append(f"{local.spec.name} had to be killed (its records are missing)")
        proc.kill()
        proc.join(2.0)


class ClusterCases:
    """Runs cases on the cluster behind ``spark`` (``run_case`` has the runner's ``run_case`` signature)
    and keeps the run's clock table (``clocks.parquet``/``.csv``)."""

    def __init__(self, spark: SparkSession, run: RunFolder, coordinator: str | None = None) -> None:
        self.spark = spark
        self.run = run
        # The clock server listens where the executors reach the driver.
        self.coordinator = coordinator or spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
        self.clock_rows: list[dict[str, Any]] = []

    def run_case(self, case: Case, driver: Driver, work_dir: Path, on_progress: OnProgress | None = None) -> CaseResult:
        why = unsupported(case, driver)
        if why is not None:
            raise CaseFailed(why)
        sc = case.scenario
        tag = f"{os.getpid()}-{int(time.time() * 1000) % 10**9}"
        plan = driver.plan(Topology(sc.pattern, sc.topics, sc.producers, sc.consumers, case.size, tag))
        try:
            if not driver.needs_broker and not loopback_ports(plan):
                raise CaseFailed(f"{case.variant.system} listens on no TCP port here (transport: ipc?), which other "
                                 "hosts cannot reach; use transport: tcp on a Spark cluster")
            return self._run(case, driver, plan, work_dir)
        finally:
            driver.teardown(plan)

    def _run(self, case: Case, driver: Driver, plan: dict[str, Any], work_dir: Path) -> CaseResult:
        work_dir.mkdir(parents=True, exist_ok=True)
        producers, consumers = specs(case, driver, plan, work_dir)
        hosts = case.scenario.hosts
        roles = [*(Role(s.name, s, hosts.of("producers")) for s in producers),
                 *(Role(s.name, s, hosts.of("consumers")) for s in consumers)]
        tasks = _Roles(case, producers, consumers, brokerless=not driver.needs_broker)
        try:
            results = run_stage(self.spark, roles, tasks.run, self.coordinator, prepare=tasks.prepare)
        except StageError as exc:
            raise CaseFailed(str(exc)) from None
        for spec, result in zip([*producers, *consumers], results, strict=True):
            for suffix, data in result.value["files"].items():
                Path(f"{spec.out}{suffix}").write_bytes(data)
        offsets = host_offsets(results)
        rows = on_coordinator_clock(assemble_rows(case, producers, consumers, work_dir), case.scenario.pattern,
                                    results, offsets)
        self._record_clocks(case, results, offsets)
        first = results[0].value
        problems = [*first["problems"], *(e for r in results for e in r.value["errors"])]
        if rows.empty and not problems:
            problems.append("the stage ended without a record from any worker (no message was sent or received)")
        return CaseResult(rows=rows, complete=bool(first["complete"]) and not problems, problems=problems)

    def _record_clocks(self, case: Case, results: Sequence[RoleResult], offsets: dict[str, Offset]) -> None:
        sc = case.scenario
        key = case.key
        cross = cross_host_uncertainty_ns(results, offsets, sc.pattern)
        for r in results:
            self.clock_rows.append({
                "run_id": case.run_id, **key.columns(), "pattern": sc.pattern.value,
                "case": key.stem, "role": r.role, "host": r.host, "executor": r.executor,
                "offset_ns": r.offset.offset_ns, "uncertainty_ns": r.offset.uncertainty_ns, "rtt_ns": r.offset.rtt_ns,
                "applied_offset_ns": offsets[r.host].offset_ns, "latency_uncertainty_ns": cross,
            })
        self.run.write_table(CLOCKS, pd.DataFrame(self.clock_rows, columns=list(CLOCK_TABLE_COLUMNS)), csv=True)


def host_offsets(results: Sequence[RoleResult]) -> dict[str, Offset]:
    """One offset per host: the tightest of its tasks' (tasks on one host share its clock, so latencies
    between them stay exactly as measured)."""
    best: dict[str, Offset] = {}
    for r in results:
        if r.host not in best or r.offset.uncertainty_ns < best[r.host].uncertainty_ns:
            best[r.host] = r.offset
    return best


def cross_host_uncertainty_ns(results: Sequence[RoleResult], offsets: dict[str, Offset], pattern: Pattern) -> int:
    """The uncertainty of a latency between the case's hosts: the sum of the two largest host
    uncertainties; 0 when every role ran on one host, and for a round trip (the requester stamps both
    ends on its own clock)."""
    hosts = {r.host for r in results}
    if len(hosts) < 2 or pattern is Pattern.REQREP:
        return 0
    widest = sorted((offsets[h].uncertainty_ns for h in hosts), reverse=True)
    return widest[0] + widest[1]


def on_coordinator_clock(
    rows: pd.DataFrame, pattern: Pattern, results: Sequence[RoleResult], offsets: dict[str, Offset]
) -> pd.DataFrame:
    """``rows`` with the host and executor that stamped each side, and every stamp moved onto the
    coordinator's clock by its host's offset (a same-host latency is unchanged)."""
    where = {r.role: (r.host, r.executor) for r in results}
    sender = "requester" if pattern is Pattern.REQREP else "producer"
    receiver = sender if pattern is Pattern.REQREP else "consumer"
    rows = rows.copy()

    def side(kind: str, index: pd.Series, prefix: str) -> pd.Series:
        # object columns of names, also when there are no rows (mapping an empty int column keeps its dtype)
        places = pd.Series([where.get(f"{kind}-{i}", (None, None)) for i in index], index=index.index, dtype=object)
        rows[f"{prefix}_host"] = pd.Series([p[0] for p in places], index=index.index, dtype=object)
        rows[f"{prefix}_executor"] = pd.Series([p[1] for p in places], index=index.index, dtype=object)
        return rows[f"{prefix}_host"].map(lambda h: 0 if h is None else offsets[h].offset_ns).astype("int64")

    shift = side(sender, rows["producer"], "send")
    for stamp in _SENDER_STAMPS:
        rows[stamp] = rows[stamp] + shift.to_numpy()
    recv_index = rows["producer"] if pattern is Pattern.REQREP else rows["consumer"]
    rows["t_recv"] = rows["t_recv"] + side(receiver, recv_index, "recv").to_numpy()
    return rows
