"""Keyed sends of both Kafka producers are numbered with the unkeyed ones, so the outcomes a watched
producer reports (``Producer.watch_outcomes`` -> the runner's ``t_ack``) name the right sends. The clients
are stood in for: what is checked is the driver's numbering and the key it hands over, not Kafka."""

from __future__ import annotations

import functools
from typing import Any

from harness.drivers.kafka import _KafkaProducer
from harness.drivers.kafka_confluent import ConfluentProducer


class _Future:
    def __init__(self) -> None:
        self.callbacks: list[Any] = []

    def add_callback(self, fn: Any, *args: Any) -> None:
        self.callbacks.append(functools.partial(fn, *args))

    def add_errback(self, fn: Any, *args: Any) -> None:
        pass


class _KafkaPython:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes | None, int | None]] = []
        self.futures: list[_Future] = []

    def send(self, topic: str, value: bytes, key: bytes | None = None, partition: int | None = None) -> _Future:
        self.sent.append((key, partition))
        self.futures.append(_Future())
        return self.futures[-1]


class _Librdkafka:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes | None, int]] = []
        self.callbacks: list[Any] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None, partition: int = -1, **kw: Any) -> None:
        self.sent.append((key, partition))
        self.callbacks.append(kw["on_delivery"])

    def poll(self, timeout: float) -> int:
        return 0


def _bare(cls: type, client: Any) -> Any:
    producer = cls.__new__(cls)
    producer.topic, producer.partitions, producer.next_partition = "t", 2, 0
    producer.error, producer.report, producer.sent = None, None, 0
    producer.confirmed, producer.producer = True, client
    producer.poll_every = 1
    return producer


def test_kafka_python_keyed_sends_are_numbered_and_reported() -> None:
    reports: list[tuple[int, int, bool]] = []
    producer = _bare(_KafkaProducer, _KafkaPython())
    assert producer.watch_outcomes(lambda *r: reports.append(r))
    producer.send(bytearray(b"a"))
    producer.send_keyed(bytearray(b"b"), b"k1")
    producer.send(bytearray(b"c"))
    assert producer.producer.sent == [(None, 0), (b"k1", None), (None, 1)]  # the key's partition: the client's
    for future in reversed(producer.producer.futures):  # answers in any order
        for callback in future.callbacks:
            callback(None)
    assert sorted(reports) == [(0, 1, True), (1, 1, True), (2, 1, True)]


def test_confluent_keyed_sends_are_numbered_and_reported() -> None:
    reports: list[tuple[int, int, bool]] = []
    producer = _bare(ConfluentProducer, _Librdkafka())
    producer.report = lambda *r: reports.append(r)  # watch_outcomes would make a new handle: set directly
    producer.send_keyed(bytearray(b"a"), b"k0")
    producer.send(bytearray(b"b"))
    assert producer.producer.sent == [(b"k0", -1), (None, 0)]  # -1: librdkafka's partitioner hashes the key
    producer.producer.callbacks[1](None, None)
    producer.producer.callbacks[0]("timed out", None)
    assert reports == [(1, 1, True), (0, 1, False)]
