"""Brokers that keep the messages also deliver them after a crash: the broker is SIGKILLed while a slow
consumer leaves a backlog in it, started again on the same port and data through the harness's provisioning
(``BrokerControl``, as the ``restart-broker`` fault does), and every message it accepted, before the crash and
after it, must arrive (duplicates allowed). Covers the at-least-once/durable variants of ``eval-crash``: Apache
Kafka with ``acks=all`` through both Python clients, RocketMQ with synchronous sends.

The waits end as the runner's drain does (no receipt for ``STALL`` seconds) or at a generous deadline; no
assertion depends on how fast this machine is. The broker cases need `make brokers`; without it they skip,
except in CI (``CI=true``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.brokers import broker_control, provision
from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, Driver, Pattern, Role
from harness.runner._resilient import ReconnectingConsumer
from harness.runner.case import SETTLE
from tests.harness.drivers.conformance import _Poller, fill_payload, parse_payload, require_backend, topology

SIZE = 100
BATCH = 2000  # messages before the crash, and again after it
CONSUMER_PAUSE = 0.002  # seconds per message: the consumer is slower than the producer, so a backlog waits
DOWN = 3.0  # seconds the broker stays dead while the clients keep trying
STALL = 5.0  # the runner's drain wait is shorter (3 s): a client that pauses longer loses messages there
DEADLINE = 120.0

CASES = [
    pytest.param("kafka", {"acks": "all"}, id="kafka-python"),
    pytest.param("kafka", {"acks": "all", "client": "confluent-kafka"}, id="confluent-kafka"),
    pytest.param("rocketmq", {}, id="rocketmq"),
]


def test_kafka_python_clients_back_off_at_most_as_long_as_the_java_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's default reconnect backoff grows to 30 s, and its metadata refresh waits that out: after a
    broker restart its consumer is fenced (the leader epoch went up) until then, far longer than a run's drain."""
    import kafka

    from harness.drivers.kafka import KafkaDriver

    made: dict[str, dict[str, Any]] = {}

    def recorder(kind: str) -> Any:
        def make(**config: Any) -> Any:
            made[kind] = config
            return _FakeClient()

        return make

    monkeypatch.setattr(kafka, "KafkaProducer", recorder("producer"))
    monkeypatch.setattr(kafka, "KafkaConsumer", recorder("consumer"))
    driver = KafkaDriver({"acks": "all"}, BrokerEndpoint("kafka", "kafka://127.0.0.1:9092", "external"))
    # the plan as the parent makes it, without the broker: no topics (the clients above are fakes)
    plan = {**Driver.plan(driver, topology(Pattern.QUEUE, 1, SIZE)), "partitions": 1}
    driver.create_producer(plan, Role(index=0, topic=0))
    driver.create_consumer(plan, Role(index=0, topic=0))
    for kind in ("producer", "consumer"):
        assert made[kind]["reconnect_backoff_max_ms"] <= 1000, kind  # the Java client's reconnect.backoff.max.ms


# Run in a child process: librocketmq's threads keep an interpreter that made a consumer from exiting.
_WHERE_CONSUMERS_START = """
import ctypes, os
from harness.drivers.rocketmq_consumer import push_consumer
consumer, raw = push_consumer("127.0.0.1:9876", "mqbench-g", "mqbench-g-0", 12345)
for name in ("_ZN8rocketmq21DefaultMQPushConsumer19getConsumeFromWhereEv",
             "_ZNK8rocketmq21DefaultMQPushConsumer26getMaxCacheMsgSizePerQueueEv"):
    get = getattr(raw, name)
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_void_p]
    print(get(consumer._handle), flush=True)
os._exit(0)
"""


def test_rocketmq_consumers_without_a_stored_offset_start_at_the_first_message() -> None:
    """librocketmq's default (the last offset) makes a group whose offsets a killed broker had not flushed
    skip everything queued before it asks again."""
    pytest.importorskip("rocketmq.client")
    from harness.drivers.rocketmq_consumer import CONSUME_FROM_FIRST_OFFSET

    child = subprocess.run([sys.executable, "-c", _WHERE_CONSUMERS_START], capture_output=True, text=True,
                           timeout=60, cwd=Path(__file__).parents[3])
    assert child.returncode == 0, child.stderr
    assert [int(x) for x in child.stdout.split()[-2:]] == [CONSUME_FROM_FIRST_OFFSET, 12345]


def test_rocketmq_consumers_hold_what_they_read_in_a_second() -> None:
    """librocketmq pauses a queue's pulls for a second when its consumer holds more than its cache: the cache
    is the Java client's 100 MiB, between librocketmq's 1,000 messages and 20,000."""
    from harness.drivers.rocketmq_consumer import cache_messages

    assert [cache_messages(size) for size in (100, 1024, 65536, 1 << 20)] == [20_000, 20_000, 1600, 1000]


class _FakeClient:
    def close(self, *args: Any, **kwargs: Any) -> None:
        pass

    def partitions_for(self, topic: str) -> set[int]:  # the producer asks for its topic's metadata when made
        return {0}


@pytest.mark.broker
@pytest.mark.parametrize(("system", "options"), CASES)
def test_every_accepted_message_arrives_after_a_broker_restart(
    system: str, options: dict[str, Any], tmp_path: Path
) -> None:
    require_backend(system, "process")
    cls = driver_class(system)
    with provision(system, backend="process", logs_dir=tmp_path / "logs") as endpoint:
        control = broker_control(endpoint)
        assert control is not None
        parent = cls(options, endpoint)
        plan = parent.plan(topology(Pattern.QUEUE, 1, SIZE))
        received: set[int] = set()
        last = [time.monotonic()]

        def on_message(payload: bytes) -> None:
            received.add(parse_payload(payload, SIZE)[1])
            last[0] = time.monotonic()
            time.sleep(CONSUMER_PAUSE)

        def make() -> Any:
            made = cls(options, endpoint).create_consumer(plan, Role(index=0, topic=0))
            made.start(on_message)
            return made

        stop = threading.Event()
        consumer = ReconnectingConsumer(make, stop)  # as the runner does in runs with faults
        poller = _Poller(consumer)  # type: ignore[arg-type]
        poller.start()
        try:
            time.sleep(SETTLE)
            accepted = _send(cls, options, endpoint, plan, range(BATCH))
            assert len(received) < len(accepted), "no backlog at the crash: the consumer is not slow enough"
            control.kill()
            time.sleep(DOWN)
            control.start()
            accepted |= _send(cls, options, endpoint, plan, range(BATCH, 2 * BATCH))
            deadline = time.monotonic() + DEADLINE
            last[0] = time.monotonic()
            while not accepted <= received and time.monotonic() < min(deadline, last[0] + STALL):
                time.sleep(0.1)
        finally:
            stop.set()
            poller.stopping.set()
            poller.join(timeout=10)
            consumer.close()
            parent.teardown(plan)
    assert poller.error is None, poller.error
    missing = sorted(accepted - received)
    assert not missing, (f"{system} {options}: {len(missing)} of {len(accepted)} accepted messages never arrived "
                         f"after the restart (first missing: {missing[0]})")


def _send(cls: Any, options: Mapping[str, Any], endpoint: BrokerEndpoint, plan: Mapping[str, Any],
          seqs: Iterable[int]) -> set[int]:
    """Send ``seqs`` through a fresh producer, made again after a refused send (as the runner's reconnecting
    send does); the sequence numbers the broker accepted."""
    accepted: set[int] = set()
    producer = _producer(cls, options, endpoint, plan)
    buf = bytearray(SIZE)
    try:
        for seq in seqs:
            fill_payload(buf, 0, seq)
            try:
                producer.send(buf)
            except Exception:  # noqa: BLE001 - refused: the sender was told, so it is not owed a delivery
                producer.close()
                producer = _producer(cls, options, endpoint, plan)
                continue
            accepted.add(seq)
        producer.flush(60.0)
    finally:
        producer.close()
    return accepted


def _producer(cls: Any, options: Mapping[str, Any], endpoint: BrokerEndpoint, plan: Mapping[str, Any]) -> Any:
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            return cls(options, endpoint).create_producer(plan, Role(index=0, topic=0))
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
