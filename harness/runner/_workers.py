"""The worker processes of one case, and the objects they share with the parent (parent process only).

``specs`` gives the worker specs of a case. ``Workers`` starts each worker from its spec (forked from a
preloaded server process), collects their status messages, waits for readiness and the slow-joiner handshake, and stops them: ask (the stop event), then
interrupt (SIGUSR1: a worker saves its records even when blocked in a send), then terminate and kill. The
fault injector kills and relaunches single workers through it (``faults.WorkerHooks``). It also meters the
CPU of the case's processes over the measured interval (:meth:`Workers.measure_cpu`): each worker with the
process its client runs in (the JVM, whose pid the worker names in its ready message), the broker and the
harness parent. ``watch`` follows the shared progress counters until the case is over.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.drivers import class_path, load_class
from harness.drivers.base import BrokerEndpoint, Driver, Pattern, Role
from harness.runner._context import Case
from harness.runner._forkserver_main import start_forkserver
from harness.runner._records import leading_count
from harness.runner.faults import FaultInjector
from harness.runner.jvm import stop_grace
from harness.runner.proc import CpuMeter, CpuUse, CpuWhileActive
from harness.runner.worker import WorkerContext, WorkerSpec, group_main, worker_main
from harness.scenario import Scenario

# Workers fork from a clean, single-threaded server process that has already imported what they need:
# starting one costs milliseconds instead of a fresh interpreter's second of imports. That includes the
# main module (the `mqbench` script, which imports the whole CLI), which every child of a forkserver runs
# again before it starts unless the server has loaded it: `_forkserver_main` does, from the path or name
# `Workers` starts the server with (CPython 3.11's own "__main__" preload never loads it). Without it, every
# worker of every case paid about 1.5 s of imports here, and sixteen processes of a thousand-topic case each a
# minute on a loaded machine.
_CTX = mp.get_context("forkserver")
_CTX.set_forkserver_preload(["harness.runner._forkserver_main", "harness.runner.worker", "numpy", "zmq", "mqcore"])
SUBSCRIBE_TIMEOUT = 30.0  # at most (or the scenario's timeout): for every subscription to reach its publishers
SETTLE = 0.2  # seconds between "all ready" and the start, for subscriptions to propagate (no handshake)
DRAIN_IDLE = 3.0  # after the producers finished: seconds without progress before we stop waiting
OnProgress = Callable[[int, int], None]  # (received so far, expected so far)
READY_TIMEOUT = 60.0  # seconds for every worker to connect and report ready (a group: a second more per role)
INTERRUPT_WAIT = 8.0  # seconds of repeated interrupts (SIGUSR1) for workers to save their records and exit
#: Cases with at most this many producers and consumers run each in a process of its own; above, roles of
#: one kind share ``ROLE_PROCESSES`` processes per kind, a thread each (``worker.group_main``): a thousand
#: topics would otherwise need two thousand interpreters.
ONE_PROCESS_EACH = 64
ROLE_PROCESSES = 8
#: Roles whose clients run in the JVM are threads of one JVM per process, so fewer processes do: each JVM
#: loads and compiles the client's code again, and at 1,000 RocketMQ topics the JIT compilers of 16 client
#: JVMs were the largest use of the two cores while the roles set up (docs/jvm.md).
JVM_ROLE_PROCESSES = 2


class CaseFailed(Exception):
    """A case that could not run at all (a worker failed to start); one sentence."""


class Workers:
    """The processes of one case and the shared objects they synchronise on."""

    def __init__(self, n: int) -> None:
        self.ctx = WorkerContext(
            status=_CTX.Queue(), start=_CTX.Event(), stop=_CTX.Event(), start_ns=_CTX.Value("q", 0, lock=False),
            progress=_CTX.Array("q", n, lock=False), release_ns=_CTX.Value("q", 0, lock=False),
        )
        self.status, self.start, self.stop = self.ctx.status, self.ctx.start, self.ctx.stop
        self.start_ns, self.progress, self.release_ns = self.ctx.start_ns, self.ctx.progress, self.ctx.release_ns
        self.procs: dict[str, Any] = {}
        self.specs: dict[str, WorkerSpec] = {}
        self.group_of: dict[str, str] = {}  # a role's name -> the process that plays it, when grouped
        self.gone: list[Any] = []  # processes killed by a fault
        self.done: dict[str, tuple[int, str]] = {}
        self.errors: list[str] = []
        self.closed_late: list[str] = []  # killed at the end after every role had saved its records
        self.subscribed: set[str] = set()  # consumers that heard every producer's probe
        self.client_pids: dict[str, int] = {}  # worker -> the process its client runs in (the JVM)
        self._meter: CpuWhileActive | None = None
        self._unmeasured: list[tuple[str, str]] = []  # (role, why) of roles the meter cannot see

    def _start(self, name: str, target: Callable[..., None], plays: Any) -> None:
        """Fork process ``name`` from the forkserver (started first if need be) to run ``target(plays, ctx)``."""
        start_forkserver()
        p = _CTX.Process(target=target, args=(plays, self.ctx), name=f"mqbench-{name}", daemon=True)
        p.start()
        self.procs[name] = p

    def launch(self, spec: WorkerSpec) -> None:
        self._start(spec.name, worker_main, spec)
        self.specs[spec.name] = spec

    def launch_group(self, name: str, specs: list[WorkerSpec]) -> None:
        """One process ``name`` that plays every role of ``specs`` (``worker.group_main``)."""
        self._start(name, group_main, specs)
        for spec in specs:
            self.specs[spec.name] = spec
            self.group_of[spec.name] = name

    def process(self, name: str) -> Any:
        """The process that plays role ``name`` (its own, or its group's)."""
        return self.procs[self.group_of.get(name, name)]

    # -- fault hooks (called from the FaultInjector thread) -------------------------------------------

    def kill(self, name: str) -> bool:
        p = self.procs.get(name)
        if p is None or not p.is_alive() or p.pid is None:
            return False
        os.kill(p.pid, signal.SIGKILL)
        p.join(5)
        self.gone.append(p)
        return True

    def relaunch(self, name: str) -> None:
        self.done.pop(name, None)
        self.launch(self.specs[name])

    def mark_done(self, name: str) -> None:
        self.done[name] = (leading_count(f"{self.specs[name].out}.tsend"), "")

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.pid is not None and p.is_alive()]

    def drain(self, timeout: float) -> tuple[Any, ...] | None:
        try:
            msg = self.status.get(timeout=timeout)
        except queue.Empty:
            return None
        if msg[0] == "done":
            self.done[msg[1]] = (int(msg[2]), str(msg[3]))
        elif msg[0] == "error":
            self.errors.append(f"{msg[1]}: {msg[2]}")
        elif msg[0] == "subscribed":
            self.subscribed.add(msg[1])
        elif msg[0] == "ready" and len(msg) > 2:
            self.client_pids[msg[1]] = int(msg[2])
        return tuple(msg)

    # -- CPU over the measured interval ---------------------------------------------------------------

    def measure_cpu(self, broker: BrokerEndpoint | None, broker_pids: list[int] | None,
                    node_pids: list[list[int]] | None = None) -> None:
        """Start metering: the harness parent, each worker (with its JVM), and the broker: ``broker_pids``
        when it runs here (and for a cluster each node apart, ``node_pids``: roles ``broker node0`` ...),
        "not measured" when ``broker`` runs elsewhere (external, container), no role at all when the
        system has no broker."""
        roles = {"harness": [os.getpid()]}
        self._unmeasured = []
        if broker is not None and broker_pids:
            roles["broker"] = broker_pids
            for i, pids in enumerate(node_pids or []):
                roles[f"broker node{i}"] = pids
        elif broker is not None:
            why = ("its processes were not found" if broker.backend == "process"
                   else f"it runs outside this harness ({broker.backend})")
            self._unmeasured.append(("broker", f"not measured: {why}"))
        for name, p in self.procs.items():
            if p.pid is not None:
                roles[name] = [p.pid, *self._client_pids(name)]
        self._meter = CpuWhileActive(CpuMeter(roles), lambda: sum(self.progress)).start()

    def cpu_used(self) -> list[CpuUse]:
        """CPU per role from :meth:`measure_cpu` to the last message moved (empty when not started)."""
        if self._meter is None:
            return []
        used, self._meter = self._meter.stop(), None
        wall = used[0].wall_s
        return [*used, *(CpuUse(role, float("nan"), wall, why) for role, why in self._unmeasured)]

    def _join_all(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for p in self.procs.values():
            while p.is_alive() and time.monotonic() < deadline:
                p.join(0.05)
                while self.drain(0) is not None:  # keep the queue flowing so workers can exit
                    pass

    def wait_ready(self, names: list[str]) -> None:
        pending = set(names)
        deadline = time.monotonic() + READY_TIMEOUT + (len(names) if self.group_of else 0)
        while pending:
            msg = self.drain(0.1)
            if msg is not None and msg[0] == "ready":
                pending.discard(msg[1])
            if self.errors:
                raise CaseFailed(self.errors[0].splitlines()[0])
            dead = [n for n in pending if not self.process(n).is_alive()]
            if dead:
                self._said_before_exit()
                raise CaseFailed(f"{dead[0]} exited (code {self.process(dead[0]).exitcode}) before it was ready")
            if time.monotonic() > deadline:
                raise CaseFailed(f"{sorted(pending)[0]} was not ready after {READY_TIMEOUT:.0f} s")

    def wait_subscribed(self, names: list[str], timeout: float) -> list[str]:
        """Wait until every consumer in ``names`` has heard a probe from each of its producers; return
        those that had not after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            pending = sorted(set(names) - self.subscribed)
            if not pending or time.monotonic() > deadline:
                return pending
            self.drain(0.05)
            if self.errors:
                raise CaseFailed(self.errors[0].splitlines()[0])
            dead = [n for n in self.procs if not self.procs[n].is_alive()]
            if dead:
                self._said_before_exit()
                raise CaseFailed(f"{dead[0]} exited (code {self.procs[dead[0]].exitcode}) before the start")

    def _said_before_exit(self) -> None:
        """Read what is left on the status queue and raise the first error a worker reported there before it
        exited (a group process reports its roles' errors, then ends): that error, not the exit, says why."""
        while self.drain(0.05) is not None:
            pass
        if self.errors:
            raise CaseFailed(self.errors[0].splitlines()[0])

    def shutdown(self, grace: float) -> list[str]:
        """Stop every worker: ask (stop event), then interrupt (SIGUSR1: the worker saves its records even
        when blocked in a send), then terminate and kill. Returns the ones whose records are lost; one killed
        while its client closed, after each of its roles had saved its records and reported, is only named in
        ``closed_late``."""
        self.stop.set()
        self.cpu_used()  # a case that failed before it was measured: stop the meter's thread
        self._join_all(grace)
        # a group process is given as long as its JVM (jvm.stop_grace) to save its roles' records
        most = max((len(self._roles(name)) for name in self.procs), default=1)
        deadline = time.monotonic() + INTERRUPT_WAIT + stop_grace(most) - stop_grace(1)
        while time.monotonic() < deadline:
            alive = [p for p in self.procs.values() if p.is_alive() and p.pid is not None]
            if not alive:
                break
            for p in alive:  # repeated: a worker ignores all but the first
                try:
                    os.kill(p.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
            self._join_all(min(0.5, max(0.0, deadline - time.monotonic())))
        forced = []
        for name, p in self.procs.items():
            if p.is_alive():
                if all(r in self.done for r in self._roles(name)):
                    self.closed_late.append(name)  # every role saved its records and reported before
                else:
                    forced.append(name)
                p.terminate()
                p.join(2)
                if p.is_alive():
                    p.kill()
                    p.join(2)
                for client in self._client_pids(name):  # a JVM in its own process group, whose relay
                    try:  # could not kill it
                        os.killpg(client, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        for p in self.gone:
            p.join(1)
        while self.drain(0.05) is not None:
            pass
        for name, p in self.procs.items():  # a worker that died of a signal of its own (a crash in a client)
            code = p.exitcode
            killed_by_fault = any(g is p for g in self.gone)
            if (name not in forced and not killed_by_fault and code is not None and code < 0
                    and not all(r in self.done for r in self._roles(name))):
                self.errors.append(f"{name}: ended by {_signal_name(-code)} before it reported; its records "
                                   "are missing")
        self.status.close()
        self.status.join_thread()
        return forced

    def _client_pids(self, name: str) -> list[int]:
        """The processes the clients of worker process ``name`` run in (its JVM: one for a whole group)."""
        return sorted({self.client_pids[r] for r in self._roles(name) if r in self.client_pids})

    def _roles(self, name: str) -> list[str]:
        """The roles worker process ``name`` plays: several for a group, else itself."""
        return [r for r, g in self.group_of.items() if g == name] or [name]


def launch_all(w: Workers, producers: list[WorkerSpec], consumers: list[WorkerSpec]) -> None:
    """Start the case's workers, consumers first: one process per role, or for more than
    ``ONE_PROCESS_EACH`` roles (and none of them resilient or on a host of its own) ``ROLE_PROCESSES``
    processes per kind, each playing an equal share of that kind's roles (roles whose clients run in the
    JVM: through one JVM per process, ``jvm.relay_group``)."""
    for name, specs in groups(producers, consumers):
        if name is None:
            w.launch(specs[0])
        else:
            w.launch_group(name, specs)


def grouped(roles: list[WorkerSpec]) -> bool:
    """Whether ``launch_all`` plays ``roles`` in shared processes: more than ``ONE_PROCESS_EACH`` of them, and
    none resilient or on a network host of its own."""
    return len(roles) > ONE_PROCESS_EACH and not any(s.resilient or s.namespace for s in roles)


def groups(producers: list[WorkerSpec], consumers: list[WorkerSpec]) -> list[tuple[str | None, list[WorkerSpec]]]:
    """The worker processes of ``launch_all``, consumers first: ``(None, [spec])`` for a role in a process of
    its own, ``(name, specs)`` for a process that plays several."""
    roles = [*consumers, *producers]
    if not grouped(roles):
        return [(None, [spec]) for spec in roles]
    out: list[tuple[str | None, list[WorkerSpec]]] = []
    per_kind = JVM_ROLE_PROCESSES if load_class(roles[0].driver).runs_in_jvm else ROLE_PROCESSES
    for kind in (consumers, producers):
        n = min(per_kind, len(kind))
        for i in range(n):
            share = kind[i::n]
            if share:
                out.append((f"{share[0].kind}s-{i}", share))
    return out


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def specs(case: Case, driver: Driver, plan: dict[str, Any], work_dir: Path) -> tuple[list[WorkerSpec], list[WorkerSpec]]:
    sc = case.scenario
    per_producer = None if sc.messages is None else sc.messages + sc.warmup
    rate = None if case.rate is None else case.rate / sc.producers
    duration_ns = None if sc.duration is None else int(sc.duration * 1e9)
    if per_producer is not None:
        send_cap = per_producer
    elif rate is not None and sc.duration is not None:
        send_cap = int(rate * sc.duration) + sc.warmup + 1024
    else:
        send_cap = 1 << 16
    reqrep = sc.pattern is Pattern.REQREP
    resilient = bool(sc.faults) and not reqrep
    # The slow-joiner handshake (see _run); runs with faults and slow consumers keep their own loops.
    probing = (sc.pattern is Pattern.PUBSUB and driver.capabilities.slow_joiner and not resilient
               and sc.consumer_rate is None)
    common = dict(
        system=case.variant.system,
        driver=class_path(type(driver)),
        options=dict(case.variant.options),
        broker=case.broker,
        plan=plan,
        size=case.size,
        payload=sc.payload,
        duration_ns=duration_ns,
        resilient=resilient,
        kills=sc.kills,
        payload_file=sc.payload_file,
        compressible=sc.compressible,
        keys=sc.keys,
        key_count=sc.key_count,
        backlog=sc.backlog is not None,
        drain_rate=sc.backlog.drain_rate if sc.backlog is not None else 1.0,
    )
    consumers = []
    for c in range(sc.consumers):
        on_topic = sum(1 for p in range(sc.producers) if p % sc.topics == c % sc.topics)
        consumers.append(
            WorkerSpec(
                kind="replier" if reqrep else "consumer",
                name=f"{'replier' if reqrep else 'consumer'}-{c}",
                slot=sc.producers + c,
                role=Role(c, c % sc.topics),
                total=None,
                rate=None,
                capacity=max(1024, int(send_cap * on_topic * (2.0 if resilient else 1.05))),
                out=str(work_dir / f"consumer-{c}"),
                consumer_rate=sc.consumer_rate,
                probe_from=tuple(p for p in range(sc.producers) if p % sc.topics == c % sc.topics)
                if probing else (),
                **common,  # type: ignore[arg-type]
            )
        )
    producers = [
        WorkerSpec(
            kind="requester" if reqrep else "producer",
            name=f"{'requester' if reqrep else 'producer'}-{p}",
            slot=p,
            role=Role(p, p % sc.topics),
            total=per_producer,
            rate=rate,
            capacity=send_cap,
            out=str(work_dir / f"producer-{p}"),
            probe=probing,
            rate_profile=tuple((r / sc.producers, seconds) for r, seconds in sc.rate_profile),
            phase_ns=int(p * 1e9 / case.rate) if case.rate and not sc.rate_profile else 0,
            **common,  # type: ignore[arg-type]
        )
        for p in range(sc.producers)
    ]
    return producers, consumers


def watch(
    case: Case,
    w: Workers,
    producers: list[WorkerSpec],
    consumers: list[WorkerSpec],
    problems: list[str],
    on_progress: OnProgress | None,
    injector: FaultInjector | None = None,
) -> bool:
    """Wait until the case is over; True when it ended normally, False on a stall.

    With faults, the case is not over while a fault is still to come or under way, the drain wait counts
    from the moment the last restarted broker/worker was back, and only the drain wait ends it (receipt
    counts include redeliveries, so reaching the expected count does not mean everything arrived)."""
    sc = case.scenario
    timeout = sc.timeout + (sc.duration or 0.0)
    last_total = -1
    last_change = time.monotonic()
    producer_names = [s.name for s in producers]
    while True:
        w.drain(0.1)
        if w.errors:
            problems.append("a worker failed; the case was stopped")
            return False
        counts = list(w.progress)
        sent_total = sum(counts[: len(producers)])
        received = counts[len(producers) :]
        total = sum(counts)
        now = time.monotonic()
        if total != last_total:
            last_total, last_change = total, now
        if injector is not None:
            if injector.busy():
                last_change = now
                continue
            last_change = max(last_change, injector.settled_at())
        producers_done = all(n in w.done for n in producer_names)
        expected = expected_counts(sc, producers, consumers, counts, w.done) if producers_done else None
        if on_progress is not None:
            on_progress(sum(received) if sc.pattern is not Pattern.REQREP else sent_total,
                        sum(expected) if expected else _planned(sc, len(producers)))
        if sc.pattern is Pattern.REQREP:
            if producers_done:
                return True
        elif expected is not None:
            if injector is not None:
                pass  # after faults, receipts include redeliveries: counts cannot tell that all arrived
            elif sc.pattern is Pattern.QUEUE:
                got, due = [0] * sc.topics, [0] * sc.topics
                for r, e, s in zip(received, expected, consumers, strict=True):
                    got[s.role.topic] += r
                    due[s.role.topic] += e
                topics_full = all(g >= d for g, d in zip(got, due, strict=True))
                if topics_full:
                    return True
            elif all(r >= e for r, e in zip(received, expected, strict=True)):
                return True
            if now - last_change > min(DRAIN_IDLE, sc.timeout):
                return True  # nothing more is coming: what is missing is lost
        if now - last_change > timeout:
            problems.append(
                f"stalled: no message moved for {timeout:.0f} s "
                f"({sent_total} sent, {sum(received)} received); results kept"
            )
            return False


def _planned(sc: Scenario, producers: int) -> int:
    return (sc.messages + sc.warmup) * producers if sc.messages is not None else 0


def expected_counts(
    sc: Scenario, producers: list[WorkerSpec], consumers: list[WorkerSpec], counts: list[int],
    done: dict[str, tuple[int, str]],
) -> list[int]:
    """Per consumer, how many messages its topic carried (pubsub: each; queue: shared by the topic)."""
    sent_per_topic = [0] * sc.topics
    for spec in producers:
        sent_per_topic[spec.role.topic] += done[spec.name][0]
    share = [0] * sc.topics
    for spec in consumers:
        share[spec.role.topic] += 1
    if sc.pattern is Pattern.PUBSUB:
        return [sent_per_topic[spec.role.topic] for spec in consumers]
    return [-(-sent_per_topic[spec.role.topic] // share[spec.role.topic]) for spec in consumers]
