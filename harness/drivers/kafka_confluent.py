"""The Kafka driver's producer and consumer through confluent-kafka (librdkafka), option
``client: confluent-kafka``. Same topics, partitioning and offsets as the kafka-python path
(``harness.drivers.kafka``); librdkafka batches and sends on its own threads.

The producer asks for delivery reports of failed messages only (``delivery.report.only.error``), served by
``poll(0)`` every ``CONFLUENT_POLL_EVERY`` sends, when librdkafka's queue is full, and in ``flush``. The
consumer takes up to ``FETCH_BATCH`` messages per ``consume`` call; it never joins its (unique, unused)
group: partitions are assigned at their end offsets as of ``start()``.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from harness.drivers.base import DriverError
from harness.drivers.kafka import (
    ACKS,
    CONFLUENT_POLL_EVERY,
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
        ck = _module()
        opts = driver.opts
        acks = ACKS[opts.acks]
        config = {
            **_common(driver),
            "acks": str(acks) if acks != "all" else "all",
            "partitioner": "murmur2_random",  # the Java client's partitioner, for keyed messages
            "linger.ms": opts.linger_ms,
            "batch.size": opts.batch_size,
            "compression.type": opts.compression,
            "enable.idempotence": False,  # needs InitProducerId, which Tansu may lack (as kafka-python)
            "message.max.bytes": 8 * 1024 * 1024,
            "delivery.report.only.error": True,
            "on_delivery": self._report,
            "error_cb": self._client_error,
        }
        self.producer = ck.Producer(config)
        self.kafka_error = ck.KafkaError
        self.sent = 0
        # librdkafka connects lazily: ask for the topic now, so that a broker that is not there says so here.
        try:
            self.producer.list_topics(topic, timeout=TIMEOUT)
        except ck.KafkaException as exc:
            self.close()  # else the handle would keep trying to connect until the garbage collector finds it
            raise DriverError(f"cannot connect a producer to kafka at {driver.url} ({exc}); check that the "
                              "broker runs") from None

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._failed(RuntimeError(str(err)))

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
        while True:
            try:
                if key is None:
                    self.producer.produce(self.topic, bytes(payload), partition=partition)
                else:
                    self.producer.produce(self.topic, bytes(payload), key=key)
                break
            except BufferError:  # librdkafka's queue is full: let it send, then try again
                self.producer.poll(0.05)
            except Exception as exc:  # message too large, unknown partition, ...
                raise DriverError(f"kafka refused a message: {exc!r}") from None
        self.sent += 1
        if not self.sent % CONFLUENT_POLL_EVERY:
            self.producer.poll(0)

    def flush(self, timeout: float) -> None:
        left = self.producer.flush(timeout)  # waits for every delivery report, serving callbacks
        if self.error is not None:
            raise DriverError(f"kafka failed to deliver a message: {self.error!r}")
        if left:
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
        close = getattr(producer, "close", None)  # newer confluent-kafka; else dropping the last reference
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
