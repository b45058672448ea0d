"""The JetStream variant of the NATS driver without a broker: what it declares (guarantee, parity), and its
producer's window and outcomes against a fake JetStream context whose acks the test gives (accepted,
refused, nobody serving the subject, never)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from harness.drivers import _nats_jetstream as jsmod
from harness.drivers._nats_jetstream import JetStreamProducer
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError, Guarantee, Pattern, Topology
from harness.drivers.nats import NatsDriver

T = TypeVar("T")
CLUSTER = BrokerEndpoint("nats", "nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222", "process",
                         shape=ClusterShape(3, 3, 2))


def test_the_variant_declares_what_it_waits_for_and_when_it_syncs() -> None:
    core = NatsDriver({}, CLUSTER)
    assert core.guarantee() is Guarantee.AT_MOST_ONCE and core.parity()["acks"].startswith("none")
    js = NatsDriver({"jetstream": True}, CLUSTER)
    assert js.guarantee() is Guarantee.DURABLE
    assert "majority of its 3 replicas" in js.parity()["acks"]
    assert "every 2 min" in js.parity()["fsync"] and "before its ack" in js.parity()["fsync"]
    single = NatsDriver({"jetstream": True}, BrokerEndpoint("nats", "nats://127.0.0.1:4222", "process"))
    assert "replicas" not in single.parity()["acks"]
    memory = NatsDriver({"jetstream": True, "storage": "memory"}, CLUSTER)
    assert memory.guarantee() is Guarantee.AT_LEAST_ONCE and memory.parity()["fsync"] == "none (memory storage)"
    # the leader asked for is the stream's, named as topic 0
    topo = Topology(Pattern.QUEUE, 1, 1, 1, 100, "abc")
    assert js.leader_resource({"topology": {**_topology(topo)}}) == topo.topic_name(0)


def test_a_shape_jetstream_cannot_take_is_one_sentence() -> None:
    def endpoint(replicas: int, min_insync: int) -> BrokerEndpoint:
        return BrokerEndpoint("nats", CLUSTER.url, "process", shape=ClusterShape(7, replicas, min_insync))

    with pytest.raises(DriverError, match="majority of the stream's 3 replicas stored it \\(2\\); min_insync 3"):
        NatsDriver({"jetstream": True}, endpoint(3, 3))
    with pytest.raises(DriverError, match="at most 5 replicas"):
        NatsDriver({"jetstream": True}, endpoint(7, 4))
    NatsDriver({}, endpoint(3, 3))  # core NATS keeps no replicas: any shape carries it
    NatsDriver({"jetstream": True}, endpoint(5, 3))


def _topology(t: Topology) -> dict[str, Any]:
    return {"pattern": t.pattern.value, "topics": t.topics, "producers": t.producers, "consumers": t.consumers,
            "message_size": t.message_size, "run_tag": t.run_tag}


class _FakeJetStream:
    """``publish_async`` as nats-py's: a future of the ack per publish, resolved by the test."""

    def __init__(self) -> None:
        self.published: list[tuple[bytes, asyncio.Future[Any]]] = []

    async def publish_async(self, subject: str, payload: bytes) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.published.append((payload, future))
        return future


class _FakeSession:
    """What the producer uses of ``nats._Session``: a loop in its own thread, errors, check, close."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.js = _FakeJetStream()
        self.nc = SimpleNamespace(jetstream=lambda **_: self.js)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def check(self) -> None:
        if self.errors:
            raise DriverError(str(self.errors[0]))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def resolve(self, *outcomes: tuple[int, BaseException | None]) -> None:
        """In one turn of the loop: publish i accepted (None) or failed with the exception."""
        def settle() -> None:
            for i, exc in outcomes:
                future = self.js.published[i][1]
                if exc is None:
                    future.set_result(SimpleNamespace(seq=i + 1))
                else:
                    future.set_exception(exc)
        self.loop.call_soon_threadsafe(settle)

    def published(self, n: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.js.published) < n:
            assert time.monotonic() < deadline, f"{len(self.js.published)} of {n} publishes made"
            time.sleep(0.01)


def _producer(window: int = 100, ack_timeout: float = 5.0) -> tuple[JetStreamProducer, _FakeSession, list[Any]]:
    session = _FakeSession()
    producer = JetStreamProducer(session, "s", window, ack_timeout)  # type: ignore[arg-type]
    reports: list[tuple[int, int, bool]] = []
    assert producer.watch_outcomes(lambda first, count, ok: reports.append((first, count, ok)))
    return producer, session, reports


def _eventually(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within 5 s"
        time.sleep(0.01)


def test_outcomes_are_reported_once_each_as_runs_of_consecutive_sends() -> None:
    from nats.js.errors import APIError

    producer, session, reports = _producer()
    for _ in range(5):
        producer.send(bytearray(b"x" * 10))
    session.published(5)
    session.resolve((0, None), (1, None), (2, APIError(code=500, description="storage failed")), (3, None), (4, None))
    producer.flush(5)
    assert reports == [(0, 2, True), (2, 1, False), (3, 2, True)]
    assert not session.errors  # a watched producer reports refusals instead of raising them
    producer.close()


def test_a_publish_nobody_serves_is_made_again_until_acked() -> None:
    from nats.js.errors import NoStreamResponseError

    producer, session, reports = _producer()
    producer.send(bytearray(b"abc"))
    session.published(1)
    session.resolve((0, NoStreamResponseError()))  # mid-election: no stream leader subscribed yet
    session.published(2)
    assert session.js.published[1][0] == b"abc"
    assert reports == []
    session.resolve((1, None))
    producer.flush(5)
    assert reports == [(0, 1, True)]
    producer.close()


def test_a_publish_without_an_ack_is_refused_at_its_deadline() -> None:
    producer, session, reports = _producer(ack_timeout=0.3)
    producer.send(bytearray(b"abc"))
    session.published(1)
    producer.flush(5)
    assert reports == [(0, 1, False)]
    assert session.js.published[0][1].cancelled()  # nats-py's future is let go
    producer.close()


def test_a_full_window_waits_until_half_of_it_is_settled() -> None:
    producer, session, _ = _producer(window=4)
    sent = threading.Event()

    def four() -> None:
        for _ in range(4):
            producer.send(bytearray(b"m"))
        sent.set()

    threading.Thread(target=four, daemon=True).start()
    session.published(4)
    time.sleep(0.2)
    assert not sent.is_set()  # 4 in flight: the fourth send waits
    session.resolve((0, None))
    time.sleep(0.2)
    assert not sent.is_set()  # 3 in flight: still more than half the window
    session.resolve((1, None))
    _eventually(sent.is_set)
    session.resolve((2, None), (3, None))
    producer.flush(5)
    producer.close()


def test_an_unwatched_refusal_is_raised_by_the_next_send_and_a_window_of_one_acks_each_send() -> None:
    from nats.js.errors import APIError

    session = _FakeSession()
    producer = JetStreamProducer(session, "s", 10, 5.0)  # type: ignore[arg-type]
    producer.send(bytearray(b"a"))
    session.published(1)
    session.resolve((0, APIError(code=503, description="no quorum")))
    _eventually(lambda: bool(session.errors))
    with pytest.raises(DriverError, match="did not acknowledge"):
        producer.send(bytearray(b"b"))
    producer.close()

    session = _FakeSession()
    each = JetStreamProducer(session, "s", 1, 5.0)  # type: ignore[arg-type]
    assert each.acks_synchronously and not each.watch_outcomes(lambda *_: None)
    done = threading.Event()
    threading.Thread(target=lambda: (each.send(bytearray(b"a")), done.set()), daemon=True).start()
    session.published(1)
    time.sleep(0.1)
    assert not done.is_set()  # a send returns once its ack came
    session.resolve((0, None))
    _eventually(done.is_set)
    each.close()


def test_the_queue_pattern_shares_one_durable_consumer_per_topic() -> None:
    from harness.drivers.base import Role

    assert jsmod.durable(Pattern.QUEUE, Role(0, 0)) == jsmod.durable(Pattern.QUEUE, Role(3, 0))
    assert jsmod.durable(Pattern.PUBSUB, Role(0, 0)) != jsmod.durable(Pattern.PUBSUB, Role(1, 0))
