"""A node fault in the middle of a flow through a real cluster, checked the way Jepsen checks a history: one
producer sends numbered messages while a slow consumer leaves a backlog; the node that leads the topic/queue/
stream (asked of the broker at that moment) is killed, paused or restarted; the producer goes on (made again
after a refused send, as the runner's reconnecting send does); then the consumer reads until every accepted
message arrived or nothing more came. Accepted means acknowledged: where the producer is told each send's
outcome (``Producer.watch_outcomes``) only sends it confirmed count; otherwise a send that returned does.

``run_node_fault`` returns the history; ``check_no_acknowledged_loss`` is the assertion every durable
replicated variant must pass. Used by the per-broker cluster tests (``test_<system>_cluster.py``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.brokers import ClusterControl, broker_control, provision
from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, ClusterShape, Pattern, Role
from harness.runner._resilient import ReconnectingConsumer
from harness.runner.case import SETTLE
from tests.harness.drivers.conformance import _Poller, fill_payload, parse_payload, topology

SIZE = 100
STALL = 8.0  # seconds without a receipt before the final read gives up
DEADLINE = 180.0
CONSUMER_PAUSE = 0.001  # seconds per message: a backlog waits in the broker when the fault comes


@dataclass
class History:
    """What the producer was told and what the consumer got, by sequence number."""

    sent: int = 0
    accepted: set[int] = field(default_factory=set)  # acknowledged (or returned, without outcomes)
    refused: set[int] = field(default_factory=set)  # raised, or refused in an outcome
    received: list[int] = field(default_factory=list)  # in arrival order, duplicates kept
    leader: int = -1  # the node the fault hit
    notes: list[str] = field(default_factory=list)

    @property
    def lost(self) -> list[int]:
        return sorted(self.accepted - set(self.received))

    @property
    def duplicates(self) -> int:
        return len(self.received) - len(set(self.received))


Fault = Callable[[ClusterControl, int], None]


def kill(control: ClusterControl, node: int) -> None:
    control.kill(node)


def kill_and_restart(down: float = 3.0) -> Fault:
    def fault(control: ClusterControl, node: int) -> None:
        control.kill(node)
        time.sleep(down)
        control.start(node)
    return fault


def pause(duration: float = 5.0) -> Fault:
    def fault(control: ClusterControl, node: int) -> None:
        control.pause(node)
        time.sleep(duration)
        control.resume(node)
    return fault


def run_node_fault(
    system: str, options: Mapping[str, Any], shape: ClusterShape, fault: Fault, tmp_path: Path,
    before: int = 2000, after: int = 2000, pattern: Pattern = Pattern.QUEUE, cluster: BrokerEndpoint | None = None,
) -> History:
    """Start a ``shape`` cluster, send ``before`` messages, apply ``fault`` to the leader while sending goes on,
    send ``after`` more, read until done; the cluster is torn down whatever happens. With ``cluster`` (a
    cluster of that shape the caller provisioned, to share its start among several faults) nothing is
    started or stopped: the cluster is left as the fault left it, for the caller to make whole again."""
    cls = driver_class(system, options.get("client"))
    history = History()
    started: contextlib.AbstractContextManager[BrokerEndpoint] = (
        contextlib.nullcontext(cluster) if cluster is not None
        else provision(system, backend="process", shape=shape, logs_dir=tmp_path / "logs"))
    with started as endpoint:
        control = broker_control(endpoint)
        assert isinstance(control, ClusterControl), f"{system} {shape.label()} gave no cluster control"
        parent = cls(options, endpoint)
        plan = parent.plan(topology(pattern, 1, SIZE))
        last = [time.monotonic()]
        lock = threading.Lock()

        def on_message(payload: bytes) -> None:
            seq = parse_payload(payload, SIZE)[1]
            with lock:
                history.received.append(seq)
            last[0] = time.monotonic()
            time.sleep(CONSUMER_PAUSE)

        def make() -> Any:
            made = cls(options, endpoint).create_consumer(plan, Role(index=0, topic=0))
            made.start(on_message)
            return made

        stop = threading.Event()
        consumer = ReconnectingConsumer(make, stop)
        poller = _Poller(consumer)  # type: ignore[arg-type]
        poller.start()
        try:
            time.sleep(SETTLE)
            _Sender(cls, options, endpoint, plan, history).send(range(before))
            history.leader = control.leader(parent.leader_resource(plan))
            sender = threading.Thread(
                target=_Sender(cls, options, endpoint, plan, history).send, args=(range(before, before + after),),
                daemon=True)
            sender.start()
            time.sleep(0.2)  # the fault comes while messages are in flight
            fault(control, history.leader)
            sender.join(DEADLINE)
            assert not sender.is_alive(), f"the producer was still sending {DEADLINE:.0f} s after the fault"
            deadline = time.monotonic() + DEADLINE
            last[0] = time.monotonic()
            while not history.accepted <= set(history.received) and time.monotonic() < min(deadline, last[0] + STALL):
                time.sleep(0.1)
        finally:
            stop.set()
            poller.stopping.set()
            poller.join(timeout=10)
            consumer.close()
            parent.teardown(plan)
    assert poller.error is None, poller.error
    return history


def check_no_acknowledged_loss(history: History, what: str) -> None:
    assert history.accepted, f"{what}: no send was acknowledged"
    lost = history.lost
    assert not lost, (f"{what}: {len(lost)} of {len(history.accepted)} acknowledged messages never arrived after the "
                      f"fault on node {history.leader} (first missing: {lost[0]}; refused: {len(history.refused)})")


class _Sender:
    """Sends ``seqs`` through a producer made again after a refused send; records outcomes in ``history``."""

    def __init__(self, cls: Any, options: Mapping[str, Any], endpoint: BrokerEndpoint, plan: Mapping[str, Any],
                 history: History) -> None:
        self.cls, self.options, self.endpoint, self.plan, self.history = cls, options, endpoint, plan, history
        self.lock = threading.Lock()

    def _producer(self) -> tuple[Any, list[int], bool]:
        """A fresh producer, the seqs it has been handed (index -> seq) and whether it reports outcomes."""
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                producer = self.cls(self.options, self.endpoint).create_producer(self.plan, Role(index=0, topic=0))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        handed: list[int] = []

        def report(first: int, count: int, accepted: bool) -> None:
            with self.lock:
                for seq in handed[first : first + count]:
                    (self.history.accepted if accepted else self.history.refused).add(seq)

        watched = bool(producer.watch_outcomes(report))
        return producer, handed, watched

    def send(self, seqs: range) -> None:
        producer, handed, watched = self._producer()
        buf = bytearray(SIZE)
        try:
            for seq in seqs:
                fill_payload(buf, 0, seq)
                try:
                    with self.lock:
                        handed.append(seq)
                    producer.send(buf)
                except Exception:  # noqa: BLE001 - refused: the sender was told, so it is not owed a delivery
                    with self.lock:
                        self.history.refused.add(seq)
                    _close(producer)
                    producer, handed, watched = self._producer()
                    continue
                self.history.sent += 1
                if not watched:
                    self.history.accepted.add(seq)
            try:
                producer.flush(60.0)
            except Exception as exc:  # noqa: BLE001 - the outcomes already say which sends failed
                self.history.notes.append(f"flush raised {exc!r}")
        finally:
            _close(producer)


def _close(producer: Any) -> None:
    try:
        producer.close()
    except Exception:  # noqa: BLE001 - a producer whose broker went away may fail to close cleanly
        pass
