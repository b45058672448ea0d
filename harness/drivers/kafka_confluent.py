"""The Kafka driver's producer and consumer through confluent-kafka (librdkafka), option
``client: confluent-kafka``. Same topics, partitioning and offsets as the kafka-python path
(``harness.drivers.kafka``); librdkafka batches and sends on its own threads.

The producer asks for delivery reports of failed messages only (``delivery.report.only.error``), served by
``poll(0)`` every ``CONFLUENT_POLL_EVERY`` sends, when librdkafka's queue is full, and in ``flush``. When
the runner watches outcomes, the handle is made again with a report for every message (each send its own
callback, carrying its number), served by ``poll(0)`` after every send so that an acknowledgement is told
when it comes, not a thousand sends later. The consumer takes up to ``FETCH_BATCH`` messages per ``consume`` call; it never joins its (unique, unused)
group: partitions are assigned at their end offsets as of ``start()``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from harness.drivers.base import DriverError
from harness.drivers.kafka import (
    ACKS,
    CONFLUENT_POLL_EVERY,
    DELIVERY_TIMEOUT_MS,
    AssignedConsumer,
    KafkaDriver,
    RoundRobinProducer,
)

FETCH_BATCH = 1000  # messages per Consumer.consume call
TIMEOUT = 30.0  # seconds for metadata and offset look-ups


def _module() -> Any:
    try:
        import confluent_kafka
    except ImportError:
        raise DriverError(
            "kafka option client=confluent-kafka needs the Python package confluent-kafka "
            "(pip install confluent-kafka)"
        ) from None
    return confluent_kafka


def _common(driver: KafkaDriver) -> dict[str, Any]:
    # librdkafka writes every failed connect to stderr (a line each 50 ms while a broker restarts, over the
    # run's progress); its log goes to a silent logger instead: failures reach the harness as delivery
    # errors and as messages that never arrive.
    quiet = logging.getLogger("mqbench.librdkafka")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
    return {"bootstrap.servers": ",".join(driver.bootstrap), "client.id": f"mqbench-{uuid.uuid4().hex[:8]}",
            "logger": quiet}


class ConfluentProducer(RoundRobinProducer):
    def __init__(self, driver: KafkaDriver, topic: str, partitions: int, index: int) -> None:
        super().__init__(topic, partitions, index)
        self.ck = _module()
        opts = driver.opts
        acks = ACKS[opts.acks]
        self.confirmed = acks != 0
        self.url = driver.url
        self.config = {
            **_common(driver),
            "acks": str(acks) if acks != "all" else "all",
            "partitioner": "murmur2_random",  # the Java client's partitioner, for keyed messages
            "linger.ms": opts.linger_ms,
            "batch.size": opts.batch_size,
            "compression.type": opts.compression,
            # Idempotent with acks=all on Apache Kafka (KafkaDriver.idempotent); retries are unbounded
            # (message.send.max.retries' default) within the delivery timeout.
            "enable.idempotence": driver.idempotent(),
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            "message.max.bytes": 8 * 1024 * 1024,
            "delivery.report.only.error": True,
            "on_delivery": self._report,
            "error_cb": self._client_error,
        }
        self.poll_every = CONFLUENT_POLL_EVERY
        self.producer = self._connect()

    def _connect(self) -> Any:
        """A librdkafka handle with ``self.config``, connected: librdkafka connects lazily, so the topic is
        asked for now, and a broker that is not there says so here."""
        producer = self.ck.Producer(self.config)
        try:
            producer.list_topics(self.topic, timeout=TIMEOUT)
        except self.ck.KafkaException as exc:
            _destroy(producer)  # else it would keep trying to connect until the garbage collector finds it
            raise DriverError(f"cannot connect a producer to kafka at {self.url} ({exc}); check that the "
                              "broker runs") from None
        return producer

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        """Reports of every message need another handle (``delivery.report.only.error`` is fixed when a
        handle is made): this one is replaced before the first send. Not with acks=0, which has no answer."""
        if not self.confirmed:
            return False
        assert self.sent == 0, "watch_outcomes comes before the first send"
        self.report = report
        self.config = {**self.config, "delivery.report.only.error": False}
        old, self.producer = self.producer, self._connect()
        _destroy(old)
        self.poll_every = 1
        return True

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._failed(RuntimeError(str(err)))

    def _outcome(self, index: int, err: Any, _msg: Any) -> None:
        # A failure here is what librdkafka told the producer (a timeout may still have been stored): refused.
        report = self.report
        assert report is not None
        report(index, 1, err is None)

    def _client_error(self, err: Any) -> None:
        if err.fatal():
            self._failed(RuntimeError(str(err)))

    def send(self, payload: bytearray) -> None:
        self._produce(payload, None, self._partition())

    def send_keyed(self, payload: bytearray, key: bytes) -> None:
        if self.error is not None:
            raise DriverError(f"kafka failed to deliver a message: {self.error!r}")
        self._produce(payload, key, -1)  # librdkafka's partitioner (murmur2 like the Java client's) hashes it

    def _produce(self, payload: bytearray, key: bytes | None, partition: int) -> None:
        index = self.sent
        self.sent += 1
        extra = {} if self.report is None else {"on_delivery": functools.partial(self._outcome, index)}
        while True:
            try:
                self.producer.produce(self.topic, bytes(payload), key=key, partition=partition, **extra)
                break
            except BufferError:  # librdkafka's queue is full: let it send, then try again
                self.producer.poll(0.05)
            except Exception as exc:  # message too large, unknown partition, ...
                raise DriverError(f"kafka refused a message: {exc!r}") from None
        if not self.sent % self.poll_every:
            self.producer.poll(0)

    def flush(self, timeout: float) -> None:
        left = self.producer.flush(timeout)  # waits for every delivery report, serving callbacks
        if self.error is not None:
            raise DriverError(f"kafka failed to deliver a message: {self.error!r}")
        if left and self.report is None:  # watched, each unanswered send is counted as unconfirmed instead
            raise DriverError(f"kafka did not confirm {left} messages within {timeout:.0f} s")

    def close(self) -> None:
        """Deliver what is queued (up to 10 s; what is still queued then is purged), then destroy librdkafka's
        handle here and now. Left to the garbage collector (our callbacks make a reference cycle with it),
        the handle and its threads would outlive the worker into whatever runs next in this process and be
        destroyed at a random later point, in whichever thread happens to collect."""
        producer, self.producer = self.producer, None
        if producer is None:
            return
        with contextlib.suppress(Exception):
            if producer.flush(10):
                producer.purge()  # Producer.close would otherwise wait for them with no end
                producer.flush(0)
        _destroy(producer)


def _destroy(producer: Any) -> None:
    """Destroy a librdkafka producer handle now (newer confluent-kafka has ``close``; else the last
    reference going does it), whatever it still holds."""
    close = getattr(producer, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()


class ConfluentConsumer(AssignedConsumer):
    def __init__(self, driver: KafkaDriver, topic: str, partitions: list[int]) -> None:
        ck = _module()
        self.ck = ck
        self.consumer = ck.Consumer({
            **_common(driver),
            "group.id": f"mqbench-{uuid.uuid4().hex[:8]}",  # required by the client; never joined (assign)
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        })
        self.topic, self.partitions, self.url = topic, partitions, driver.url
        self.on_message: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        self.on_message = on_message
        # Start at the current end: knowable now, so nothing produced after start() is missed.
        assigned = [self.ck.TopicPartition(self.topic, p, self._end(p)) for p in self.partitions]
        if assigned:
            self.consumer.assign(assigned)

    def _end(self, partition: int) -> int:
        """The partition's high watermark. Right after the topic is created its leader may not be elected
        yet (NOT_LEADER_FOR_PARTITION): ask again until ``TIMEOUT`` has passed."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                _low, high = self.consumer.get_watermark_offsets(self.ck.TopicPartition(self.topic, partition), TIMEOUT)
                return int(high)
            except self.ck.KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise DriverError(f"cannot connect a consumer to kafka at {self.url} ({exc}); check that the "
                                      "broker runs") from None
                time.sleep(0.2)

    def fetch(self, on_message: Callable[[bytes], None], timeout: float) -> None:
        for msg in self.consumer.consume(FETCH_BATCH, timeout):
            if msg.error() is None:
                on_message(msg.value())
            elif msg.error().fatal():
                raise DriverError(f"kafka consumer failed: {msg.error()}")

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception:
            pass
