"""Shared helpers of the driver conformance suite: numbered payloads, an in-process run of one pattern,
and the delivery checks every driver must pass.

The run follows the runner's life cycle in one process: ``plan`` → consumers created and started (each
polled by its own thread) → producer created → the runner's settle pause → it sends N numbered messages → ``flush`` → wait until every
expected message arrived (or a generous deadline passed) → close → ``teardown``. Nothing here measures
time; clocks only bound waits.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.drivers.base import BrokerEndpoint, Consumer, Driver, Pattern, Role, Topology
from harness.runner.case import SETTLE  # the runner's pause between "every worker ready" and the start

HEADER = struct.Struct(">IQ")  # producer id, sequence number
PROBE = 0xFFFFFFFF  # producer id of the probes sent before a pub/sub flow until every subscriber hears them
SUBSCRIBE_TIMEOUT = 30.0  # seconds for every subscriber to hear a probe
DEADLINE = 60.0  # seconds to wait for delivery before checking what arrived
STALL = 5.0  # ... or until nothing arrived for this long


def fill_payload(buf: bytearray, producer: int, seq: int) -> None:
    """Write the header and a body derived from ``seq`` into ``buf`` (reused, as the runner does)."""
    HEADER.pack_into(buf, 0, producer, seq)
    buf[HEADER.size :] = bytes([seq % 251]) * (len(buf) - HEADER.size)


def parse_payload(payload: bytes, size: int) -> tuple[int, int]:
    """(producer, seq) of a received payload; AssertionError when its content is not what was sent."""
    assert len(payload) == size, f"payload of {len(payload)} bytes, sent {size}"
    producer, seq = HEADER.unpack_from(payload, 0)
    assert payload[HEADER.size :] == bytes([seq % 251]) * (size - HEADER.size), f"corrupt body of seq {seq}"
    return producer, seq


@dataclass
class Delivery:
    """What each consumer received, in arrival order, as (producer, seq)."""

    sent: int
    received: list[list[tuple[int, int]]] = field(default_factory=list)
    #: (first, count, accepted) as the producer reported them (``Producer.watch_outcomes``); None when the
    #: producer is told nothing beyond ``send`` returning
    outcomes: list[tuple[int, int, bool]] | None = None
    probes: int = 0  # sent through the producer before the messages (numbered first in its outcomes)

    def total(self) -> int:
        return sum(len(r) for r in self.received)


def topology(pattern: Pattern, consumers: int, size: int) -> Topology:
    return Topology(
        pattern=pattern,
        topics=1,
        producers=1,
        consumers=consumers,
        message_size=size,
        run_tag=uuid.uuid4().hex[:10],
    )


def os_threads() -> dict[int, str]:
    """The process's threads as the OS sees them, id -> name: Python's, and those C libraries start."""
    names = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/comm") as f:
            names[int(tid)] = f.read().strip()
    return names


class _Poller(threading.Thread):
    """Polls one consumer until told to stop (for pull-style drivers; harmless for callback ones)."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(daemon=True)
        self.consumer = consumer
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.consumer.poll(0.05)
        except BaseException as exc:  # reported by the test
            self.error = exc


def run_flow(
    driver_cls: type[Driver],
    options: Mapping[str, Any],
    broker: BrokerEndpoint | None,
    pattern: Pattern,
    consumers: int,
    count: int,
    size: int,
) -> Delivery:
    """Send ``count`` messages of ``size`` bytes from one producer to ``consumers`` consumers."""
    topo = topology(pattern, consumers, size)
    parent = driver_cls(options, broker)
    plan = parent.plan(topo)
    delivery = Delivery(sent=count, received=[[] for _ in range(consumers)])
    expected = count * consumers if pattern is Pattern.PUBSUB else count
    arrived = threading.Semaphore(0)
    subscribed = [threading.Event() for _ in range(consumers)]
    started: list[Consumer] = []
    pollers: list[_Poller] = []
    try:
        for c in range(consumers):
            consumer = driver_cls(options, broker).create_consumer(plan, Role(index=c, topic=0))
            started.append(consumer)
            sink = delivery.received[c]

            def on_message(
                payload: bytes, sink: list[tuple[int, int]] = sink, subscribed: threading.Event = subscribed[c]
            ) -> None:
                if len(payload) >= HEADER.size and HEADER.unpack_from(payload, 0)[0] == PROBE:
                    subscribed.set()  # a probe: this subscriber hears the publisher
                    return
                sink.append(parse_payload(payload, size))
                arrived.release()

            consumer.start(on_message)
            pollers.append(_Poller(consumer))
        for poller in pollers:
            poller.start()
        producer = driver_cls(options, broker).create_producer(plan, Role(index=0, topic=0))
        reported: list[tuple[int, int, bool]] = []
        lock = threading.Lock()

        def report(first: int, n: int, accepted: bool) -> None:
            with lock:
                reported.append((first, n, accepted))

        if producer.watch_outcomes(report):
            delivery.outcomes = reported
        try:
            time.sleep(SETTLE)  # as the runner does (for pub/sub the probes below decide when to start)
            if pattern is Pattern.PUBSUB:
                delivery.probes = _await_subscribers(producer, size, subscribed)
            buf = bytearray(size)
            for seq in range(count):
                fill_payload(buf, 0, seq)
                producer.send(buf)
            producer.flush(30.0)
            deadline = time.monotonic() + DEADLINE
            got = 0
            while got < expected and arrived.acquire(
                timeout=max(0.0, min(STALL, deadline - time.monotonic()))
            ):
                got += 1
            # A short grace so duplicates or extra deliveries show up in the checks.
            time.sleep(0.2)
        finally:
            producer.close()
    finally:
        for poller in pollers:
            poller.stopping.set()
        for poller in pollers:
            poller.join(timeout=10)
        for consumer in started:
            consumer.close()
        parent.teardown(plan)
    for poller in pollers:
        if poller.error is not None:
            raise poller.error
    return delivery


def _await_subscribers(producer: Any, size: int, subscribed: list[threading.Event]) -> int:
    """Publish probes until every subscriber has heard one (a fixed pause is not enough on a loaded
    machine: a subscriber that connected before the publisher bound may join late and miss the start);
    returns how many were sent."""
    probe = bytearray(size)
    fill_payload(probe, PROBE, 0)
    deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
    probes = 0
    while not all(e.is_set() for e in subscribed):
        if time.monotonic() > deadline:
            late = [c for c, e in enumerate(subscribed) if not e.is_set()]
            raise AssertionError(f"subscribers {late} heard no probe in {SUBSCRIBE_TIMEOUT:.0f} s")
        producer.send(probe)
        probes += 1
        time.sleep(0.01)
    return probes


def run_reqrep(
    driver_cls: type[Driver], options: Mapping[str, Any], broker: BrokerEndpoint | None, count: int, size: int
) -> list[bytes | None]:
    """``count`` requests through one requester and one replier; returns the replies in order."""
    topo = topology(Pattern.REQREP, 1, size)
    parent = driver_cls(options, broker)
    plan = parent.plan(topo)
    replier = driver_cls(options, broker).create_replier(plan, Role(index=0, topic=0))
    stopping = threading.Event()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            while not stopping.is_set():
                replier.poll(0.05)
        except BaseException as exc:
            errors.append(exc)

    replies: list[bytes | None] = []
    replier.start()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        requester = driver_cls(options, broker).create_requester(plan, Role(index=0, topic=0))
        try:
            buf = bytearray(size)
            for seq in range(count):
                fill_payload(buf, 0, seq)
                replies.append(requester.request(buf, timeout=10.0))
        finally:
            requester.close()
    finally:
        stopping.set()
        thread.join(timeout=10)
        replier.close()
        parent.teardown(plan)
    if errors:
        raise errors[0]
    return replies


# -- checks --------------------------------------------------------------------------------------


def check_outcomes(delivery: Delivery) -> None:
    """A producer that reports outcomes reported every send accepted, once, after ``flush`` returned."""
    if delivery.outcomes is None:
        return
    sends = delivery.probes + delivery.sent
    told = np.zeros(sends, np.int64)
    for first, n, accepted in list(delivery.outcomes):
        assert accepted, f"sends {first}..{first + n - 1} reported refused"
        assert 0 <= first and first + n <= sends, f"outcome of sends {first}..{first + n - 1} of {sends}"
        told[first:first + n] += 1
    assert (told == 1).all(), (f"sends without an outcome: {np.flatnonzero(told == 0)[:10].tolist()}, "
                               f"told twice: {np.flatnonzero(told > 1)[:10].tolist()}")


def check_pubsub(delivery: Delivery, ordered: bool, lossy: bool = False) -> None:
    """Every consumer got every message exactly once (and in send order when ``ordered``).

    ``lossy``: messages may be missing (a brokerless at-most-once drop at the high-water mark), but at
    least one arrives, and what arrives is neither duplicated nor corrupt nor (when ``ordered``) reordered.
    """
    everything = [(0, s) for s in range(delivery.sent)]
    for c, got in enumerate(delivery.received):
        assert len(set(got)) == len(got), f"consumer {c} received duplicates"
        if lossy:
            assert got and set(got) <= set(everything), f"consumer {c} received nothing"
        else:
            assert len(got) == delivery.sent, f"consumer {c} received {len(got)} of {delivery.sent}"
        if ordered:
            assert got == sorted(got), f"consumer {c} received messages out of order"


def check_queue(delivery: Delivery, ordered: bool, lossy: bool = False) -> None:
    """Each message went to exactly one consumer; each consumer's share is in send order when ``ordered``.
    ``lossy`` as for :func:`check_pubsub`."""
    merged = [m for got in delivery.received for m in got]
    assert len(set(merged)) == len(merged), "a message was delivered twice"
    if lossy:
        assert merged and set(merged) <= {(0, s) for s in range(delivery.sent)}, "nothing was received"
    else:
        assert len(merged) == delivery.sent, f"received {len(merged)} of {delivery.sent}"
        assert sorted(merged) == [(0, s) for s in range(delivery.sent)]
    if ordered:
        for c, got in enumerate(delivery.received):
            assert got == sorted(got), f"consumer {c} received its share out of order"


def require_backend(system: str, backend: str = "auto") -> None:
    """Skip (or, in CI, fail) when ``system`` has no usable broker backend here, with the reason."""
    import os

    import pytest

    from harness.brokers import choose_backend

    choice = choose_backend(system, backend)
    if choice.backend is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{system}: {choice.reason}")
        pytest.skip(f"{system}: {choice.reason}")


def run_flow_jvm(driver_cls: type[Driver], options: Mapping[str, Any], broker: BrokerEndpoint | None,
                 pattern: Pattern, consumers: int, count: int, size: int, work_dir: Any) -> Delivery:
    """``run_flow`` for drivers whose clients run in the JVM worker (``runs_in_jvm``): the flow goes through
    the real runner (worker processes relaying to JVMs), and each consumer's (producer, seq) in arrival
    order come from the raw rows. The JVM records headers only, so payload content is not checked here."""
    from harness.runner.case import Case, run_case
    from harness.scenario import Variant, parse_scenario

    system = driver_cls.name
    scenario = parse_scenario(
        {"name": "conformance", "pattern": pattern.value, "message_sizes": [size], "messages": count,
         "warmup": 0, "consumers": consumers, "timeout": 30},
        "conformance",
    )
    variant = Variant(system=system, name="conformance", options=dict(options))
    case = Case(scenario, variant, size, None, 0, "conformance", broker)
    result = run_case(case, driver_cls(options, broker), work_dir)
    assert result.complete, result.problems
    rows = result.rows
    delivery = Delivery(sent=count, received=[[] for _ in range(consumers)])
    got = rows[rows["t_recv"].notna()]  # reqrep: the requests that got their reply, under consumer 0
    for c in range(consumers):
        mine = got[got["consumer"] == c]
        delivery.received[c] = list(zip(mine["producer"].astype(int), mine["seq"].astype(int), strict=True))
    return delivery
