"""Kafka protocol through kafka-python: Apache Kafka (system ``kafka``) and Tansu (system ``tansu``).

Topics have ``partitions`` partitions. A producer spreads its messages round-robin over the partitions
(ordered per partition only). Consumers never join a consumer group (group subscription receives nothing
on Tansu, see BROKERS.md): they ``assign()`` partitions and start at the partitions' end offsets as of
``start()``, so every message produced after ``start`` returns is read. pubsub: each consumer reads every
partition of its topic; queue: a topic's partitions are split among its consumers, consumer ``i`` being
on topic ``i % topics`` (the runner's round-robin). Pull-style: ``on_message`` runs inside ``poll``.

Two Python clients (option ``client``): kafka-python (pure Python; CRC32C through the ``crc32c`` package)
and confluent-kafka (librdkafka), named in the label (``kafka (confluent-kafka)``). Producers batch as the
Java client does by default (``linger_ms`` 5, ``batch_size`` 16384) and hear of each failed message only
(kafka-python: an errback unless acks=0; librdkafka: ``delivery.report.only.error``), unless the runner
watches outcomes (``Producer.watch_outcomes``): then each send's acknowledgement or failure is reported.

On a cluster (``BrokerEndpoint.shape``) topics get ``shape.replicas`` replicas, ``min.insync.replicas``
``shape.min_insync`` and no unclean leader election. Producers ride through a leader's death as Kafka's
maintainers advise (KIP-91): retries without a count (every client's default) bounded by
``delivery.timeout.ms`` (``DELIVERY_TIMEOUT_MS``), and, with acks=all on Apache Kafka, the idempotent
producer, so that a retried batch is written once and in order.
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import (
    Capabilities,
    ClusterShape,
    Consumer,
    DriverError,
    Guarantee,
    Pattern,
    Producer,
    Role,
    Topology,
    topology_from_plan,
)
from harness.drivers.broker import BrokerDriver, connect, guarantee, topic
from harness.drivers.options import option

ACKS = {"0": 0, "1": 1, "all": "all", "-1": "all"}
CLIENTS = ("kafka-python", "confluent-kafka")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
KEYS = "record key: the partition by its hash (murmur2)"
CONFLUENT_POLL_EVERY = 1000  # confluent-kafka producer: serve librdkafka's events once per this many sends
# kafka-python backs off exponentially up to 30 s between attempts to reach a broker, and its metadata refresh
# shares that backoff: after a broker restart (which raises the partitions' leader epoch) a consumer keeps
# getting FENCED_LEADER_EPOCH until its next metadata refresh, up to ~36 s after the broker is back. The Java
# client's default cap (reconnect.backoff.max.ms) is 1 s.
RECONNECT_BACKOFF_MAX_MS = 1000
# How long a message may take, retries included, before its send fails: the Java client's default, set for
# every client (librdkafka's own is 300 s). A leader's failover (~10-20 s here) fits well within it.
DELIVERY_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class KafkaOptions:
    acks: str = option("1", choices=ACKS)  # 0, 1 or all
    linger_ms: int = option(5, minimum=0)  # the Java client's default since Kafka 4.0
    batch_size: int = option(16384, minimum=1)
    partitions: int = option(1, minimum=1)
    client: str = option("kafka-python", choices=CLIENTS)
    # the producer's batch compression (compression.type); kafka-python needs the lz4 / zstandard packages
    compression: str = option("none", choices=COMPRESSIONS)


class KafkaDriver(BrokerDriver):
    name = "kafka"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE})
    client_packages = ("kafka-python",)
    client = "kafka-python"
    client_module = "kafka"
    options_type = KafkaOptions
    opts: KafkaOptions
    capabilities = Capabilities(flush=True, keys=KEYS)

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        assert self.broker is not None
        if ACKS[self.opts.acks] == 0 and self.name == "tansu":
            # Seen with Tansu 0.6: it answers acks=0 produce requests, which kafka-python takes for a
            # protocol error ("No in-flight-request found for server response"), dropping messages.
            raise DriverError(
                "tansu option acks=0 does not work on Tansu; use acks 1 or all, or Apache Kafka"
            )
        self.bootstrap = self.url.split("://", 1)[-1].rstrip("/").split(",")

    def client_name(self) -> str:
        return str(self.opts.client)  # kafka-python or confluent-kafka

    def versions(self) -> dict[str, str]:
        out = super().versions()
        if self.opts.client == "confluent-kafka":
            import confluent_kafka

            out["confluent-kafka"] = confluent_kafka.version()[0]
            out["librdkafka"] = confluent_kafka.libversion()[0]
        return out

    def guarantee(self) -> Guarantee:
        acks = ACKS[self.opts.acks]
        # Tansu's memory storage loses everything on restart, so nothing run on it is durable.
        return guarantee(acks != 0, durable=acks == "all" and self.name != "tansu")

    def parity(self) -> dict[str, str]:
        acks = ACKS[self.opts.acks]
        shape = self.broker.shape if self.broker is not None else None
        if acks == 0:
            waits = "none (acks=0)"
        elif acks == 1:
            waits = "the leader's write (acks=1)"
        elif shape is not None and shape.replicas > 1:
            waits = f"every in-sync replica, at least {shape.min_insync} (acks=all, min.insync.replicas={shape.min_insync})"
        else:
            waits = "the leader's write, the only replica (acks=all)"
        if self.name == "tansu":
            return {"acks": waits, "fsync": "none (memory only)"}
        # Kafka never forces a message to disk by default (log.flush.interval.messages is unbounded): it
        # relies on replication and the OS page cache, which survives a crash of the broker but not of the
        # machine.
        return {"acks": waits, "fsync": "never (OS page cache; durability from replication)"}

    def idempotent(self) -> bool:
        """The idempotent producer (Kafka's default since 3.0): with acks=all on Apache Kafka only, since it
        needs acks=all and InitProducerId, which Tansu may lack."""
        return ACKS[self.opts.acks] == "all" and self.name == "kafka"

    # -- parent ----------------------------------------------------------------------------------

    def admin(self) -> Any:
        from kafka.admin import KafkaAdminClient

        return connect(
            "kafka", self.url, lambda: KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)
        )

    def create_topics(self, admin: Any, topology: Topology) -> dict[str, Any]:
        from kafka.admin import NewTopic

        partitions = self.opts.partitions
        names = [topology.topic_name(i) for i in range(topology.topics)]
        replicas, configs = topic_replication(self.broker.shape if self.broker is not None else None)
        topics = [NewTopic(name, num_partitions=partitions, replication_factor=replicas, topic_configs=dict(configs))
                  for name in names]
        try:
            admin.create_topics(topics, timeout_ms=30000)
        except Exception as exc:
            raise DriverError(f"kafka could not create the run's topics: {exc!r}") from None
        # The Java client reads the plan, not the options' meaning: what it must set is decided here once.
        return {"partitions": partitions, "idempotence": self.idempotent(), "delivery_timeout_ms": DELIVERY_TIMEOUT_MS}

    def delete_topics(self, admin: Any, topology: Topology) -> None:
        admin.delete_topics([topology.topic_name(i) for i in range(topology.topics)], timeout_ms=10000)

    # -- workers ---------------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        if self.opts.client == "confluent-kafka":
            from harness.drivers.kafka_confluent import ConfluentProducer

            return ConfluentProducer(self, topic(plan, role), int(plan["partitions"]), role.index)
        return _KafkaProducer(self, topic(plan, role), int(plan["partitions"]), role.index)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        partitions = consumer_partitions(topology_from_plan(plan), role, int(plan["partitions"]))
        if self.opts.client == "confluent-kafka":
            from harness.drivers.kafka_confluent import ConfluentConsumer

            return ConfluentConsumer(self, topic(plan, role), partitions)
        return _KafkaConsumer(self, topic(plan, role), partitions)


def topic_replication(shape: ClusterShape | None) -> tuple[int, dict[str, str]]:
    """Replication factor and topic configs for the run's topics on a broker of ``shape``: one replica on one
    node; on a cluster ``shape.replicas`` of them, ``min.insync.replicas`` and no unclean leader election
    (an out-of-sync replica never becomes leader, so no acknowledged write is thrown away)."""
    if shape is None or shape.replicas <= 1:
        return 1, {}
    return shape.replicas, {"min.insync.replicas": str(shape.min_insync), "unclean.leader.election.enable": "false"}


class TansuDriver(KafkaDriver):
    """The same client against Tansu, a Kafka-compatible broker with memory-only storage."""

    name = "tansu"


def consumer_partitions(topology: Topology, role: Role, partitions: int) -> list[int]:
    """The partitions consumer ``role`` reads: all of them (pubsub), or its share (queue)."""
    if topology.pattern is not Pattern.QUEUE:
        return list(range(partitions))
    peers = [c for c in range(topology.consumers) if c % topology.topics == role.topic]
    rank = peers.index(role.index) if role.index in peers else role.index % max(1, len(peers))
    return [p for p in range(partitions) if p % len(peers) == rank]


class RoundRobinProducer(Producer):
    """What both clients' producers share: partitions in turn, and the first failure a client reported
    (possibly on its own thread), raised by the next send or flush. When outcomes are watched
    (``report`` set), a failed message is reported as refused instead and the producer goes on: the
    client retries (and, idempotent, re-establishes its sequence) by itself. ``sent`` numbers the sends."""

    def __init__(self, topic: str, partitions: int, index: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.next_partition = index % partitions  # producers start on different partitions
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.report: Callable[[int, int, bool], None] | None = None
        self.sent = 0

    def _failed(self, exc: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = exc

    def _partition(self) -> int:
        """The partition of the next message; raises DriverError once a message failed."""
        if self.error is not None:
            raise DriverError(f"kafka failed to deliver a message: {self.error!r}")
        partition = self.next_partition
        self.next_partition = (partition + 1) % self.partitions
        return partition


class _KafkaProducer(RoundRobinProducer):
    def __init__(self, driver: KafkaDriver, topic: str, partitions: int, index: int) -> None:
        from kafka import KafkaProducer

        super().__init__(topic, partitions, index)
        opts = driver.opts
        self.producer = connect("kafka", driver.url, lambda: KafkaProducer(
            bootstrap_servers=driver.bootstrap,
            acks=ACKS[opts.acks],
            linger_ms=opts.linger_ms,
            batch_size=opts.batch_size,
            compression_type=None if opts.compression == "none" else opts.compression,
            enable_idempotence=driver.idempotent(),
            delivery_timeout_ms=DELIVERY_TIMEOUT_MS,  # retries: unbounded (the default) within this time
            max_request_size=8 * 1024 * 1024,
            reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
        ), what="a producer ")
        try:
            # The topic's metadata now, before the case starts: else the first (timed) send waits for it, and
            # with a thousand topics the broker's answers come late enough for sends to time out.
            self.producer.partitions_for(topic)
        except Exception as exc:  # noqa: BLE001 - kafka-python raises many kinds; one sentence says which
            self.producer.close(timeout=0)
            raise DriverError(f"kafka at {driver.url} gave no metadata for topic {topic}: {exc!r}") from None
        self.confirmed = ACKS[opts.acks] != 0  # with acks=0 there is no answer to hear a failure from

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        """Each send's future reports its outcome (callback or errback, on the client's IO thread); not
        with acks=0, whose futures resolve without any answer from the broker."""
        if not self.confirmed:
            return False
        self.report = report
        return True

    def _outcome(self, index: int, accepted: bool, _result: object) -> None:
        report = self.report
        assert report is not None
        report(index, 1, accepted)

    def send(self, payload: bytearray) -> None:
        self._send(payload, None, self._partition())

    def send_keyed(self, payload: bytearray, key: bytes) -> None:
        if self.error is not None:
            raise DriverError(f"kafka failed to deliver a message: {self.error!r}")
        self._send(payload, key, None)  # no partition given: the client's partitioner hashes the key

    def _send(self, payload: bytearray, key: bytes | None, partition: int | None) -> None:
        index = self.sent
        self.sent += 1
        try:
            # The client batches asynchronously, so it gets its own copy of the reused buffer.
            future = self.producer.send(self.topic, value=bytes(payload), key=key, partition=partition)
        except Exception as exc:  # buffer full for max_block_ms, message too large, ...
            raise DriverError(f"kafka refused a message: {exc!r}") from None
        if self.report is not None:
            future.add_callback(self._outcome, index, True)
            future.add_errback(self._outcome, index, False)
        elif self.confirmed:
            future.add_errback(self._failed)

    def flush(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout=timeout)
        except Exception:  # timed out: the runner counts what did not arrive
            pass
        if self.error is not None:
            raise DriverError(f"kafka failed to deliver a message: {self.error!r}")

    def close(self) -> None:
        try:
            self.producer.close(timeout=10)
        except Exception:
            pass


class AssignedConsumer(Consumer):
    """What both clients' consumers share: ``poll`` passes what ``fetch`` gets to ``on_message``, and waits
    out its timeout when this consumer has no partition."""

    partitions: list[int]
    on_message: Callable[[bytes], None] | None = None

    def poll(self, timeout: float) -> None:
        on_message = self.on_message
        assert on_message is not None, "start() first"
        if not self.partitions:  # more consumers than partitions: this one has nothing to read
            time.sleep(timeout)
            return
        self.fetch(on_message, timeout)

    @abstractmethod
    def fetch(self, on_message: Callable[[bytes], None], timeout: float) -> None:
        """Receive for at most about ``timeout`` seconds."""


class _KafkaConsumer(AssignedConsumer):
    def __init__(self, driver: KafkaDriver, topic: str, partitions: list[int]) -> None:
        from kafka import KafkaConsumer

        self.consumer = connect("kafka", driver.url, lambda: KafkaConsumer(
            bootstrap_servers=driver.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_bytes=64 * 1024 * 1024,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            reconnect_backoff_max_ms=RECONNECT_BACKOFF_MAX_MS,
        ), what="a consumer ")
        self.topic, self.partitions = topic, partitions
        self.on_message: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        from kafka import TopicPartition

        self.on_message = on_message
        assigned = [TopicPartition(self.topic, p) for p in self.partitions]
        self.consumer.assign(assigned)
        if assigned:
            # Start at the current end: knowable now, so nothing produced after start() is missed.
            for tp, offset in self.consumer.end_offsets(assigned).items():
                self.consumer.seek(tp, offset)

    def fetch(self, on_message: Callable[[bytes], None], timeout: float) -> None:
        batches = self.consumer.poll(timeout_ms=max(1, int(timeout * 1000)))
        for records in batches.values():
            for record in records:
                on_message(record.value)

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception:
            pass
