"""Apache Kafka's own performance tools (``kafka-tools``, the broker's release, fetched by `make brokers`).

One repetition, on a fresh topic (deleted afterwards: a run at the tools' best writes gigabytes):
1. ``ConsumerPerformance`` starts and joins its group; warm-up records from ``ProducerPerformance``, a few a
   second for a few seconds, show that it has (a group join takes seconds, and would otherwise count as
   receiving time). Spread out because ConsumerPerformance prints an interval line only for a record that
   comes a whole interval after its last line (or its start): a single record read within a second of
   joining would print none.
2. ``ProducerPerformance`` sends without end (one process per producer, unthrottled, acks matching the
   guarantee) while the consumer reads; both are stopped after the ramp and the measured seconds. The
   receiver rate is the consumers' growth in records between their interval lines (one a second) in the
   measured window, which starts ``ramp`` seconds after the first record read; the sender rate, the mean of
   the producer's per-second lines after its ramp.
3. With the row's settings, ``EndToEndLatency`` on another fresh topic: it sends one record, polls until it
   arrives, then the next, so its latency is one message's send-to-receipt time with nothing else in flight
   (unloaded), in whole ms.

The row's settings are the harness's Kafka variants' (``linger.ms`` 5, ``batch.size`` 16384: the Java client's
own defaults since Kafka 4.0), one producer and one consumer per the case. At its best the producer batches
as Kafka's performance guidance has it (``linger.ms=10``, ``batch.size=131072``; 962k msg/s of 100 B here
against 376k with the defaults, docs/brokers.md), with the row's acks, and each tool has the machine to
itself, as when Kafka's tools are run to find what a broker carries: ProducerPerformance alone for the ramp
and the measured seconds, then ConsumerPerformance alone reading what it wrote from the start. The receiver
figure is then the lesser of the two rates (a queue carries no more than is written, nor more than is
read), the sender figure the producer's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import statistics
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.brokers import _jars
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolResult
from harness.crosscheck.tools._exec import Tools
from harness.crosscheck.tools._java import TOOL_HEAP, java_for, missing_jar
from harness.crosscheck.tools._steady import counts_rate, intervals_rate
from harness.drivers.base import BrokerEndpoint
from harness.drivers.kafka import topic_replication

PACKAGE = "org.apache.kafka.tools."
ACKS = {"at-most-once": "0", "at-least-once": "1", "durable": "all"}
# The harness's Kafka variants' defaults (harness/drivers/kafka.py): the Java client's own since Kafka 4.0.
LINGER_MS, BATCH_SIZE = 5, 16384
BEST_LINGER_MS, BEST_BATCH_SIZE = 10, 131072
REPORT_MS = 1000  # the producer's and consumers' interval lines
FOREVER = 2_000_000_000  # records: more than any run sends (ProducerPerformance sizes its latency sample by it)
IDLE_TIMEOUT_MS = 60_000  # a consumer that gets nothing for this long gives up (--timeout)
WARMUP_RECORDS, WARMUP_RATE = 30, 10  # records, records/s: three seconds, enough for an interval line
LATENCY_RECORDS = 500  # EndToEndLatency: one round trip at a time, a few ms each (tens on a loaded machine)
JOIN_TIMEOUT_S = 120.0
CONSUMER_RAMP_S = 2.0  # ConsumerPerformance alone, reading a backlog: its JIT's first seconds left out
BACKLOG_IDLE_MS = 15_000  # ...and it ends once nothing more came for this long (the backlog is read)

_PRODUCED_INTERVAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), ([\d.]+) ms avg "
                                r"latency", re.M)
_INTERVAL = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}), \d+, [\d.]+, [\d.]+, (\d+),", re.M)
_E2E = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+)")


def parse_producer_intervals(text: str) -> list[tuple[float, float, float]]:
    """ProducerPerformance's interval lines (one per ``--reporting-interval``): (seconds since its start as
    the n-th line's end, records/s over the interval, mean ack latency in ms)."""
    return [(n * REPORT_MS / 1000, float(rate), float(avg))
            for n, (_, rate, avg) in enumerate(_PRODUCED_INTERVAL.findall(text), start=1)]


def produced_records(text: str) -> int:
    """Records ProducerPerformance's interval lines say were sent (those of a last, unprinted interval aside)."""
    return sum(int(n) for n, _, _ in _PRODUCED_INTERVAL.findall(text))


def parse_intervals(text: str) -> list[tuple[float, int]]:
    """ConsumerPerformance's --show-detailed-stats lines: (seconds since the epoch, records consumed so far)."""
    return [(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S:%f").timestamp(), int(count))
            for stamp, count in _INTERVAL.findall(text)]


def steady_rate(points: list[tuple[float, int]], after: int, ramp: float, seconds: float) -> tuple[float, float]:
    """(records/s, seconds covered) between the interval lines of the measured window: from ``ramp`` seconds
    after the first line with more than ``after`` records (the warm-up) to ``seconds`` later."""
    first = next((t for t, n in points if n > after), None)
    if first is None:
        return math.nan, 0.0
    return counts_rate([(t, float(n)) for t, n in points], first + ramp, first + ramp + seconds)


def parse_latency(text: str) -> tuple[float, float]:
    """EndToEndLatency's percentiles line: (p50, p99) in ms."""
    found = _E2E.search(text)
    if found is None:
        raise ValueError("no 'Percentiles' line")
    return float(found.group(1)), float(found.group(2))


class KafkaPerf(Tool):
    system = "kafka"
    name = "kafka-tools"
    ramp = 5.0  # JVMs: the producer's first batches and both JITs

    def best(self, case: CrossCase) -> CrossCase | None:
        return dataclasses.replace(case, producers=1, consumers=1, options={}, best=True)

    def missing(self) -> str | None:
        return missing_jar("kafka", "kafka-tools", "Kafka's perf tools")

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        if case.best:
            return self._alone(case, endpoint, workdir, broker_pids)
        jvm = [java_for(self), *TOOL_HEAP, "-cp", _jars.classpath("kafka")]
        bootstrap = endpoint.url.split("://", 1)[-1].rstrip("/")
        acks = ACKS.get(case.guarantee, "1")
        linger, batch = (BEST_LINGER_MS, BEST_BATCH_SIZE) if case.best else (LINGER_MS, BATCH_SIZE)
        settings = f"acks={acks} linger.ms={linger} batch.size={batch}"
        tag = uuid.uuid4().hex[:8]
        topic = f"crosscheck-{tag}"
        producer_props = ["--command-property", *settings.split()]

        def produce(records: int, rate: int = -1) -> list[str]:
            return [*jvm, PACKAGE + "ProducerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--num-records", str(records), "--record-size", str(case.size), "--throughput", str(rate),
                    "--reporting-interval", str(REPORT_MS), *producer_props]

        consume = [*jvm, PACKAGE + "ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--group", f"crosscheck-{tag}", "--num-records", str(FOREVER), "--show-detailed-stats",
                   "--reporting-interval", str(REPORT_MS), "--timeout", str(IDLE_TIMEOUT_MS)]
        # EndToEndLatency refuses acks=0 (it waits for each send): at-most-once is measured with acks=1.
        latency = [*jvm, PACKAGE + "EndToEndLatency", "--bootstrap-server", bootstrap, "--topic", f"{topic}-latency",
                   "--num-records", str(LATENCY_RECORDS), "--producer-acks", "1" if acks == "0" else acks,
                   "--record-size", str(case.size)]
        lat = None
        with Tools(workdir, f"{self.name} {_jars.pinned_version('kafka')}") as tools, \
                _Topics(bootstrap, endpoint) as topics:
            topics.create(topic, case.consumers)
            try:
                consumers = [tools.start(f"consumer-{i}", consume) for i in range(case.consumers)]
                tools.wait(tools.start("warmup", produce(WARMUP_RECORDS, WARMUP_RATE)), timeout=60)
                # A line from any consumer: the group has formed (members join together).
                tools.await_output(consumers[:1], lambda _: any(parse_intervals(c.output()) for c in consumers),
                                   JOIN_TIMEOUT_S, "ConsumerPerformance did not receive the warm-up records")
                tools.measure_broker(broker_pids)
                producers = [tools.start(f"producer-{i}", produce(FOREVER)) for i in range(case.producers)]
                # the window starts at the first record read after the warm-up (the producers' JVMs start first)
                tools.await_output(consumers[:1], lambda _: any(n > WARMUP_RECORDS for c in consumers
                                                                for _, n in parse_intervals(c.output())),
                                   JOIN_TIMEOUT_S, "ConsumerPerformance read nothing from ProducerPerformance")
                tools.hold([*producers, *consumers], self.ramp + case.seconds + 2.5)
                for proc in [*producers, *consumers]:
                    tools.stop(proc)
                cpu = tools.cpu_uses([*producers, *consumers])
            finally:
                topics.delete(topic)
            if not case.best:
                lat = tools.start("latency", latency)
                try:
                    tools.wait(lat, timeout=120)
                finally:
                    topics.delete(f"{topic}-latency")
        rates = [steady_rate(parse_intervals(c.output()), WARMUP_RECORDS, self.ramp, case.seconds)
                 for c in consumers]
        if any(not covered for _, covered in rates):
            raise ToolFailed(f"{self.name}: a consumer's interval lines did not cover {self.ramp:g} s of ramp and "
                             f"{case.seconds:g} s measured")
        sent = [intervals_rate([(t, r) for t, r, _ in parse_producer_intervals(p.output())], self.ramp,
                               self.ramp + case.seconds) for p in producers]
        acks_ms = [avg for p in producers for t, _, avg in parse_producer_intervals(p.output())
                   if self.ramp < t <= self.ramp + case.seconds]
        note = ("receiver rate: ConsumerPerformance's records between its per-second lines in the measured window; "
                "sender rate: ProducerPerformance's per-second lines after its ramp")
        if acks_ms:
            note += f"; under load the producer's mean ack latency was {statistics.median(acks_ms):.0f} ms"
        p50 = p99 = math.nan
        if lat is not None:
            p50, p99 = (v * 1000.0 for v in parse_latency(lat.output()))
            note += ("; latency: EndToEndLatency, one record in flight at a time (send, poll until it arrives), "
                     "whole ms, unloaded")
        return ToolResult(
            tool=f"{self.name} {_jars.pinned_version('kafka')}",
            command=[*producers[0].argv, "&", *consumers[0].argv, *([";", *lat.argv] if lat is not None else [])],
            receiver_rate=sum(r for r, _ in rates),
            sender_rate=sum(r for r, _ in sent) if all(s for _, s in sent) else math.nan,
            latency_p50_us=p50, latency_p99_us=p99, latency_kind="one-way" if lat is not None else "",
            cpu=cpu, settings=f"{settings}, {case.producers} producer(s), {case.consumers} consumer(s)",
            steady_s=min(s for _, s in rates), note=note,
        )


    def _alone(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        """At its best: ProducerPerformance alone, then ConsumerPerformance alone on what it wrote."""
        jvm = [java_for(self), *TOOL_HEAP, "-cp", _jars.classpath("kafka")]
        bootstrap = endpoint.url.split("://", 1)[-1].rstrip("/")
        settings = f"acks={ACKS.get(case.guarantee, '1')} linger.ms={BEST_LINGER_MS} batch.size={BEST_BATCH_SIZE}"
        tag = uuid.uuid4().hex[:8]
        topic = f"crosscheck-{tag}"
        produce = [*jvm, PACKAGE + "ProducerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--num-records", str(FOREVER), "--record-size", str(case.size), "--throughput", "-1",
                   "--reporting-interval", str(REPORT_MS), "--command-property", *settings.split()]
        with Tools(workdir, f"{self.name} {_jars.pinned_version('kafka')}") as tools, \
                _Topics(bootstrap, endpoint) as topics:
            topics.create(topic, 1)
            try:
                tools.measure_broker(broker_pids)
                producer = tools.start("producer-0", produce)
                # its lines count from its first send (the JVM's start comes before)
                tools.await_output([producer], lambda out: bool(parse_producer_intervals(out)), JOIN_TIMEOUT_S,
                                   "ProducerPerformance printed no interval line")
                tools.hold([producer], self.ramp + case.seconds + 1.5)
                tools.stop(producer)
                written = produced_records(producer.output())
                consumer = tools.start("consumer-0", [
                    *jvm, PACKAGE + "ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--group", f"crosscheck-{tag}", "--num-records", str(written), "--show-detailed-stats",
                    "--reporting-interval", str(REPORT_MS), "--timeout", str(BACKLOG_IDLE_MS)])
                tools.wait(consumer, timeout=JOIN_TIMEOUT_S + 4 * (self.ramp + case.seconds))
                cpu = tools.cpu_uses([producer, consumer])
            finally:
                topics.delete(topic)
        sent, sent_s = intervals_rate([(t, r) for t, r, _ in parse_producer_intervals(producer.output())],
                                      self.ramp, self.ramp + case.seconds)
        points = parse_intervals(consumer.output())
        first = next((t for t, n in points if n > 0), None)
        if first is None or not sent_s:
            raise ToolFailed(f"{self.name}: ProducerPerformance's or ConsumerPerformance's lines held no rate")
        read, read_s = counts_rate([(t, float(n)) for t, n in points], first + CONSUMER_RAMP_S, points[-1][0])
        how = f"ConsumerPerformance {read:,.0f} records/s over {read_s:.0f} s"
        if not read_s:
            # It read the whole backlog within its ramp (a fast machine reads seconds of writing in one or
            # two): its rate over the whole process, JVM start included, is a floor of its steady rate.
            # The floor above the producer's rate settles the lesser; below it, nothing can be said.
            read, read_s = written / consumer.wall_s, consumer.wall_s
            if read < sent:
                raise ToolFailed(f"{self.name}: ConsumerPerformance read the {written:,} records within its "
                                 f"{CONSUMER_RAMP_S:g} s ramp and slower than they were written: no steady figure")
            how = (f"ConsumerPerformance at least {read:,.0f} records/s (the whole backlog within its "
                   f"{CONSUMER_RAMP_S:g} s ramp, its JVM's start included)")
        return ToolResult(
            tool=f"{self.name} {_jars.pinned_version('kafka')}",
            command=[*producer.argv, ";", *consumer.argv],
            receiver_rate=min(sent, read), sender_rate=sent, cpu=cpu,
            settings=f"{settings}, producer alone then consumer alone",
            steady_s=sent_s if sent <= read else read_s,
            note=(f"each tool alone: ProducerPerformance {sent:,.0f} records/s over {sent_s:.0f} s after its ramp, "
                  f"then {how} reading the {written:,} it wrote; the receiver figure is the lesser"),
        )


class _Topics:
    """The tools' topics, made and deleted through kafka-python's admin client (a JVM per topic command
    would take seconds each on a loaded machine), replicated as the harness's topics are on a broker of the
    endpoint's shape (one replica, or the cluster's replicas and min ISR); EndToEndLatency's own topic is
    created by the broker with its defaults, which are the same."""

    def __init__(self, bootstrap: str, endpoint: BrokerEndpoint) -> None:
        self.bootstrap = bootstrap
        self.replicas, self.configs = topic_replication(endpoint.shape)
        self.admin: Any = None

    def __enter__(self) -> _Topics:
        from kafka.admin import KafkaAdminClient

        try:
            self.admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)
        except Exception as exc:  # noqa: BLE001 - kafka-python raises many kinds; one sentence says which
            raise ToolFailed(f"kafka-tools: no admin connection to {self.bootstrap}: {exc!r}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.admin.close()

    def create(self, name: str, partitions: int) -> None:
        from kafka.admin import NewTopic

        try:
            self.admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=self.replicas,
                                               topic_configs=dict(self.configs))], timeout_ms=30000)
        except Exception as exc:  # noqa: BLE001
            raise ToolFailed(f"kafka-tools: could not create the topic {name}: {exc!r}") from None

    def delete(self, name: str) -> None:
        """Delete ``name`` (a run at the tools' best writes gigabytes); one that is not there is no error."""
        with contextlib.suppress(Exception):
            self.admin.delete_topics([name], timeout_ms=30000)
