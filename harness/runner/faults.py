"""Faults injected during a case, and the time series sampled beside them (parent process only).

``FaultInjector`` is a thread started with the case's common start stamp: it sleeps until each fault's
``at``, carries it out (SIGKILL of the broker or of a worker, then for ``restart-*`` a start of the same
broker on the same port and data directory, or of the same worker spec, which continues the killed one's
mapped records; for node faults of a cluster, a kill, restart, pause or isolation of the node chosen by role
at that moment) and records when it happened in ``time.monotonic_ns`` (the clock of the raw records): the
fault, its end (``t_back_ns``) and, for node faults, when the cluster was whole again (``t_whole_ns``).
``Sampler`` is a thread that every ``interval`` seconds records the harness's progress counters (sent and
received so far), the resident memory of the broker's processes and of the workers (from /proc), and the
queue depth where the broker's provisioner can ask it cheaply (``Provisioner.queue_depth``).

Both threads are started after the start event and stopped (joined) before the workers are shut down;
they touch the workers only through the callbacks the case gives them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.runner._netfaults import NetworkFaults
from harness.runner.proc import rss_bytes
from harness.scenario import Fault

#: Why queue depth is not sampled for a system (shown in the report beside the figure): each broker's
#: provisioner says it (``Provisioner.depth_note``); brokerless systems have no queue to ask.
BROKERLESS_DEPTH_NOTE = "no broker: messages queue in the sender's and receiver's pipes (bounded by the HWMs)"


class _DepthNotes(Mapping[str, str]):
    """``system -> why its queue depth is not sampled``, read from the provisioners when asked."""

    def __getitem__(self, system: str) -> str:
        from harness.brokers import provisioner
        from harness.drivers import BROKERLESS

        if system in BROKERLESS:
            return BROKERLESS_DEPTH_NOTE
        prov = provisioner(system)
        if prov is None:
            raise KeyError(system)
        return prov.depth_note

    def __iter__(self) -> Iterator[str]:
        from harness.brokers import PROVISIONERS
        from harness.drivers import BROKERLESS

        return iter([*PROVISIONERS, *BROKERLESS])

    def __len__(self) -> int:
        return sum(1 for _ in self)


DEPTH_NOT_SAMPLED: Mapping[str, str] = _DepthNotes()

@dataclass
class WorkerHooks:
    """What the injector may do to the workers of one case (implemented by ``_workers.Workers``)."""

    kill: Callable[[str], bool]  # SIGKILL the worker of that name; False when it was not running
    relaunch: Callable[[str], None]  # start the worker of that name again from its spec
    mark_done: Callable[[str], None]  # a producer killed for good: count what it sent as its total


class FaultInjector(threading.Thread):
    def __init__(
        self,
        faults: Sequence[Fault],
        start_ns: int,
        hooks: WorkerHooks,
        control: Any,  # harness.brokers.BrokerControl | None
        needs_broker: bool,
        producers: Sequence[str],
        consumers: Sequence[str],
        network: NetworkFaults | None = None,  # runs with hosts
        leader_resource: str = "",  # what a node fault's ``leader`` leads (Driver.leader_resource)
    ) -> None:
        super().__init__(name="mqbench-faults", daemon=True)
        self.faults = list(faults)
        self.start_ns = start_ns
        self.hooks = hooks
        self.control = control
        self.needs_broker = needs_broker
        self.producers = list(producers)
        self.consumers = list(consumers)
        self.network = network
        self.leader_resource = leader_resource
        self.records: list[dict[str, Any]] = []
        self.halt = threading.Event()
        self.broker_down = False
        self._settled = time.monotonic()

    def busy(self) -> bool:
        """True while a fault is still to come or is being carried out."""
        return not self.halt.is_set() and self.is_alive()

    def settled_at(self) -> float:
        """``time.monotonic()`` when the last fault was over (the restarted part back)."""
        return self._settled

    def run(self) -> None:
        for index, fault in enumerate(self.faults):
            due = self.start_ns + int(fault.at * 1e9)
            while not self.halt.is_set() and time.monotonic_ns() < due:
                self.halt.wait(min(0.05, max(0.0, (due - time.monotonic_ns()) / 1e9)))
            if self.halt.is_set():
                self.records.append(self._record(index, fault, fault.action, None, None, False, "not reached: the case ended first"))
                continue
            self.records.append(self._carry_out(index, fault))
            self._settled = time.monotonic()

    def stop(self) -> list[dict[str, Any]]:
        """End the thread (faults not reached yet are recorded as such) and return the records."""
        self.halt.set()
        if self.is_alive():
            self.join()
        for index in range(len(self.records), len(self.faults)):
            f = self.faults[index]
            self.records.append(self._record(index, f, f.action, None, None, False, "not reached: the case ended first"))
        return self.records

    def _record(
        self, index: int, fault: Fault, done_as: str, t_fault: int | None, t_back: int | None, ok: bool, detail: str
    ) -> dict[str, Any]:
        return {
            "fault": index,
            "action": fault.action,
            "carried_out_as": done_as,
            "target": fault.target,
            "at_s": fault.at,
            "down_s": fault.duration if fault.network or fault.action in ("pause-node", "isolate-node") else fault.down,
            "host": fault.host,
            "delay_s": fault.delay if fault.action == "delay" else None,
            "t_planned_ns": self.start_ns + int(fault.at * 1e9),
            "t_fault_ns": t_fault,
            "t_back_ns": t_back,
            "t_whole_ns": None,
            "node": None,
            "node_role": str(fault.node) if fault.on_node else None,
            "ok": ok,
            "detail": detail,
        }

    def _carry_out(self, index: int, fault: Fault) -> dict[str, Any]:
        if fault.network:
            return self._network(index, fault)
        if fault.on_node:
            return self._node(index, fault)
        action = fault.action
        if action == "restart-peer":
            action = "restart-broker" if self.needs_broker else "restart-consumer"
        kind, _, what = action.partition("-")
        if what == "broker":
            if not self.needs_broker:
                return self._record(index, fault, action, None, None, False, "not applicable: no broker")
            if self.control is None:
                return self._record(
                    index, fault, action, None, None, False,
                    "skipped: only brokers provisioned here (local processes or containers) can be killed",
                )
            t = time.monotonic_ns()
            self.control.kill()
            self.broker_down = True
            if kind == "kill":
                return self._record(index, fault, action, t, None, True, "broker SIGKILLed")
            self.halt.wait(fault.down)
            try:
                self.control.start()
            except Exception as exc:  # noqa: BLE001 - recorded; the case goes on without a broker
                return self._record(index, fault, action, t, None, False, f"broker did not come back: {exc}")
            self.broker_down = False
            return self._record(index, fault, action, t, time.monotonic_ns(), True, "broker SIGKILLed and started again")
        names = self.producers if what == "producer" else self.consumers
        name = names[fault.target]
        t = time.monotonic_ns()
        if not self.hooks.kill(name):
            return self._record(index, fault, action, t, None, False, f"{name} was not running")
        if kind == "kill":
            if what == "producer":
                self.hooks.mark_done(name)
            return self._record(index, fault, action, t, None, True, f"{name} SIGKILLed")
        self.halt.wait(fault.down)
        self.hooks.relaunch(name)
        return self._record(index, fault, action, t, time.monotonic_ns(), True, f"{name} SIGKILLed and started again")

    def _network(self, index: int, fault: Fault) -> dict[str, Any]:
        """A network fault: apply, hold for its duration (or until the case ends), always undo."""
        if self.network is None:
            return self._record(index, fault, fault.action, None, None, False, "skipped: the case runs on no hosts")
        t = time.monotonic_ns()
        try:
            detail = self.network.apply(fault)
        except Exception as exc:  # noqa: BLE001 - recorded; the case goes on without the fault
            self.network.undo(fault)
            return self._record(index, fault, fault.action, None, None, False, f"not applied: {exc}")
        try:
            self.halt.wait(fault.duration)
        finally:
            self.network.undo(fault)
        return self._record(index, fault, fault.action, t, time.monotonic_ns(), True, detail)

    def _node(self, index: int, fault: Fault) -> dict[str, Any]:
        """A node fault: choose the node (by role, asked of the broker now), act on it, record its end and when
        the cluster was whole again."""
        from harness.brokers import ClusterControl

        action = fault.action
        if not self.needs_broker:
            return self._record(index, fault, action, None, None, False, "not applicable: no broker")
        control = self.control
        if not isinstance(control, ClusterControl):
            why = "one node" if self.control is not None else "only clusters started here as local processes"
            return self._record(index, fault, action, None, None, False, f"not applicable: {why}")
        try:
            node, how = self._choose(control, fault.node)
        except Exception as exc:  # noqa: BLE001 - recorded; the case goes on without the fault
            return self._record(index, fault, action, None, None, False, f"no node to act on: {exc}")
        done = self._act(control, node, fault)
        record = self._record(index, fault, action, done["t_fault"], done.get("t_back"), done["ok"],
                              f"node {node} ({how}) {done['detail']}")
        record.update(node=node, t_whole_ns=done.get("t_whole"))
        return record

    def _choose(self, control: Any, node: str | int) -> tuple[int, str]:
        if isinstance(node, int):
            if node >= control.nodes:
                raise ValueError(f"the cluster has {control.nodes} nodes, not {node + 1}")
            return node, f"node {node}"
        leader = control.leader(self.leader_resource)
        if node == "leader":
            return leader, f"the leader of {self.leader_resource}"
        others = [n for n in range(control.nodes) if n != leader]
        return others[0], f"a follower (the leader of {self.leader_resource} is node {leader})"

    def _act(self, control: Any, node: int, fault: Fault) -> dict[str, Any]:
        action = fault.action
        if action == "isolate-node":
            host = control.host(node)
            if self.network is None or host is None:
                return {"t_fault": None, "ok": False, "detail": "not isolated: the nodes run on no hosts"}
            t = time.monotonic_ns()
            try:
                self.network.net.set_link(host, up=False)
                self.halt.wait(fault.duration)
            finally:
                self.network.net.set_link(host, up=True)
            back = time.monotonic_ns()
            return {"t_fault": t, "t_back": back, "ok": True, "t_whole": self._whole(control),
                    "detail": f"cut off (host {host}'s link down) and joined again"}
        t = time.monotonic_ns()
        if action == "pause-node":
            control.pause(node)
            try:
                self.halt.wait(fault.duration)
            finally:
                control.resume(node)
            return {"t_fault": t, "t_back": time.monotonic_ns(), "ok": True, "t_whole": self._whole(control),
                    "detail": "paused (SIGSTOP) and resumed (SIGCONT)"}
        control.kill(node)
        if action == "kill-node":
            return {"t_fault": t, "ok": True, "detail": "SIGKILLed"}
        self.halt.wait(fault.down)
        try:
            control.start(node)
        except Exception as exc:  # noqa: BLE001 - recorded; the case goes on without the node
            return {"t_fault": t, "ok": False, "detail": f"SIGKILLed and did not come back: {exc}"}
        back = time.monotonic_ns()
        return {"t_fault": t, "t_back": back, "t_whole": back, "ok": True, "detail": "SIGKILLed and started again"}

    def _whole(self, control: Any) -> int | None:
        """When the cluster passed its readiness check again after a node came back, or None if it did not."""
        try:
            control.start()  # every node runs: this only waits for the cluster to be whole
        except Exception:  # noqa: BLE001 - not whole again within the broker's start timeout
            return None
        return time.monotonic_ns()

    def ensure_broker(self) -> str:
        """After the case: start the broker (or the cluster's dead nodes) again if a fault left it dead, and
        resume paused nodes (the next case needs them)."""
        if self.control is None:
            return ""
        paused = sorted(getattr(self.control, "paused", ()))
        for node in paused:
            self.control.resume(node)
        if self.control.running() and not paused:
            return ""
        self.control.start()
        return "the broker was left dead by a fault and was started again after the case"


class Sampler(threading.Thread):
    """Backlog, memory and queue depth every ``interval`` seconds, as rows for ``timeseries/*.parquet``."""

    def __init__(
        self,
        progress: Any,
        n_producers: int,
        fanout: int,
        start_ns: int,
        broker_pids: Callable[[], list[int]],
        worker_pids: Callable[[], list[int]],
        depth: Callable[[], float] | None,
        interval: float = 0.2,
    ) -> None:
        super().__init__(name="mqbench-sampler", daemon=True)
        self.progress, self.n_producers, self.fanout = progress, n_producers, fanout
        self.start_ns = start_ns
        self.broker_pids, self.worker_pids, self.depth = broker_pids, worker_pids, depth
        self.interval = interval
        self.rows: list[dict[str, Any]] = []
        self.halt = threading.Event()

    def sample(self) -> None:
        counts = list(self.progress)
        sent = sum(counts[: self.n_producers])
        received = sum(counts[self.n_producers :])
        depth = float("nan")
        if self.depth is not None:
            with contextlib.suppress(Exception):
                depth = float(self.depth())
        t = time.monotonic_ns()
        broker = self.broker_pids()
        self.rows.append(
            {
                "t_ns": t,
                "seconds": (t - self.start_ns) / 1e9,
                "sent": sent,
                "received": received,
                "backlog": sent * self.fanout - received,
                "broker_rss_bytes": rss_bytes(broker) if broker else float("nan"),
                "workers_rss_bytes": rss_bytes(self.worker_pids()),
                "queue_depth": depth,
            }
        )

    def run(self) -> None:
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(self.interval)

    def stop(self) -> list[dict[str, Any]]:
        self.halt.set()
        if self.is_alive():
            self.join()
        self.sample()
        return self.rows


def depth_probe(system: str, broker: Any, plan: Mapping[str, Any]) -> Callable[[], float] | None:
    """A cheap queue-depth probe from the system's provisioner, or None (``DEPTH_NOT_SAMPLED`` says why)."""
    from harness.brokers import provisioner
    from harness.drivers.base import Pattern, topology_from_plan

    topology = topology_from_plan(plan)
    prov = provisioner(system)
    if prov is None or broker is None or topology.pattern is not Pattern.QUEUE:
        return None
    with contextlib.suppress(Exception):
        return prov.queue_depth(broker.url, [topology.topic_name(i) for i in range(topology.topics)])
    return None
