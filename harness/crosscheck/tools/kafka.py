"""Apache Kafka's own performance tools (``kafka-tools``, the broker's release, fetched by `make brokers`).

One repetition, on a fresh topic:
1. ``ConsumerPerformance`` starts and joins its group; one warm-up record from ``ProducerPerformance`` shows
   that it has (a group join takes seconds, and would otherwise count as receiving time).
2. ``ProducerPerformance`` sends the case's messages (one process per producer, unthrottled, acks matching
   the guarantee, linger/batch as the harness's Kafka variants use) while the consumer reads them. The
   receiver rate is taken from the consumer's per-interval lines, from the first interval after the warm-up
   to the last: the steady part, as messages over seconds between those lines.
3. ``EndToEndLatency`` on another fresh topic: it sends one record, polls until it arrives, then the next, so
   its latency is one message's send-to-receipt time with nothing else in flight (unloaded), in whole ms.
"""

from __future__ import annotations

import math
import re
import statistics
import uuid
from datetime import datetime
from pathlib import Path

from harness.brokers import _jars
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolResult
from harness.crosscheck.tools._exec import Tools
from harness.crosscheck.tools._java import TOOL_HEAP, java_for, missing_jar
from harness.drivers.base import BrokerEndpoint
from harness.drivers.kafka import topic_replication

PACKAGE = "org.apache.kafka.tools."
ACKS = {"at-most-once": "0", "at-least-once": "1", "durable": "all"}
# The harness's Kafka variants' defaults (harness/drivers/kafka.py): the Java client's own since Kafka 4.0.
LINGER_MS, BATCH_SIZE = 5, 16384
REPORT_MS = 100  # ConsumerPerformance's interval lines: several even in a run of well under a second
IDLE_TIMEOUT_MS = 60_000  # a consumer that gets nothing for this long gives up (--timeout); the group join and
# the warm-up producer's JVM start come first, which took over 10 s on a loaded 2-core machine
LATENCY_RECORDS = 1000  # EndToEndLatency: one round trip at a time, a few ms each
JOIN_TIMEOUT_S = 120.0

_PRODUCED = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency.*?(\d+) ms 50th, (\d+) ms 95th, "
    r"(\d+) ms 99th", re.M)
_INTERVAL = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}), \d+, [\d.]+, [\d.]+, (\d+),", re.M)
_E2E = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+)")


def parse_produced(text: str) -> tuple[int, float, float]:
    """ProducerPerformance's closing line: (records sent, records/s, p50 ack latency in ms)."""
    found = _PRODUCED.findall(text)
    if not found:
        raise ValueError("no closing 'records sent' line")
    records, rate, _avg, p50, _p95, _p99 = found[-1]
    return int(records), float(rate), float(p50)


def parse_intervals(text: str) -> list[tuple[float, int]]:
    """ConsumerPerformance's --show-detailed-stats lines: (seconds since the epoch, records consumed so far)."""
    return [(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S:%f").timestamp(), int(count))
            for stamp, count in _INTERVAL.findall(text)]


def steady_rate(points: list[tuple[float, int]], after: int = 0) -> float:
    """Records per second between the first interval line with more than ``after`` records (the warm-up)
    and the last line; NaN with fewer than two such lines."""
    steady = [(t, n) for t, n in points if n > after]
    if len(steady) < 2 or steady[-1][0] <= steady[0][0]:
        return math.nan
    return (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])


def parse_latency(text: str) -> tuple[float, float]:
    """EndToEndLatency's percentiles line: (p50, p99) in ms."""
    found = _E2E.search(text)
    if found is None:
        raise ValueError("no 'Percentiles' line")
    return float(found.group(1)), float(found.group(2))


class KafkaPerf(Tool):
    system = "kafka"
    name = "kafka-tools"

    def missing(self) -> str | None:
        return missing_jar("kafka", "kafka-tools", "Kafka's perf tools")

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        jvm = [java_for(self), *TOOL_HEAP, "-cp", _jars.classpath("kafka")]
        bootstrap = endpoint.url.split("://", 1)[-1].rstrip("/")
        acks = ACKS.get(case.guarantee, "1")
        tag = uuid.uuid4().hex[:8]
        topic = f"crosscheck-{tag}"
        producer_props = ["--command-property", f"acks={acks}", f"linger.ms={LINGER_MS}", f"batch.size={BATCH_SIZE}"]
        total = case.messages * case.producers
        deadline_s = 60.0 + total / 1000  # generous: a thousand messages a second at the very least

        def produce(records: int) -> list[str]:
            return [*jvm, PACKAGE + "ProducerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--num-records", str(records), "--record-size", str(case.size), "--throughput", "-1",
                    *producer_props]

        consume = [*jvm, PACKAGE + "ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                   "--group", f"crosscheck-{tag}", "--num-records", str(total + 1), "--show-detailed-stats",
                   "--reporting-interval", str(REPORT_MS), "--timeout", str(IDLE_TIMEOUT_MS)]
        # EndToEndLatency refuses acks=0 (it waits for each send): at-most-once is measured with acks=1.
        latency = [*jvm, PACKAGE + "EndToEndLatency", "--bootstrap-server", bootstrap, "--topic", f"{topic}-latency",
                   "--num-records", str(min(LATENCY_RECORDS, case.messages)), "--producer-acks",
                   "1" if acks == "0" else acks,
                   "--record-size", str(case.size)]
        # The harness's topics on a broker of this shape (one replica, or the cluster's replicas and min ISR);
        # EndToEndLatency's own topic is created by the broker with its defaults, which are the same.
        replicas, configs = topic_replication(endpoint.shape)
        topic_configs = [arg for key, value in configs.items() for arg in ("--config", f"{key}={value}")]
        with Tools(workdir, f"{self.name} {_jars.pinned_version('kafka')}") as tools:
            tools.wait(tools.start("topic", [
                *jvm, PACKAGE + "TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
                "--partitions", str(case.consumers), "--replication-factor", str(replicas), *topic_configs]),
                timeout=60)
            consumers = [tools.start(f"consumer-{i}", consume) for i in range(case.consumers)]
            tools.wait(tools.start("warmup", produce(1)), timeout=60)
            # A line from any consumer: the group has formed (members join together).
            tools.await_output(consumers[:1], lambda _: any(parse_intervals(c.output()) for c in consumers),
                               JOIN_TIMEOUT_S, "ConsumerPerformance did not receive the warm-up record")
            tools.measure_broker(broker_pids)
            producers = [tools.start(f"producer-{i}", produce(case.messages)) for i in range(case.producers)]
            for proc in producers:
                tools.wait(proc, timeout=deadline_s)
            for proc in consumers:
                tools.wait(proc, timeout=deadline_s)
            cpu = tools.cpu_uses([*producers, *consumers])
            lat = tools.start("latency", latency)
            tools.wait(lat, timeout=deadline_s)
        produced = [parse_produced(p.output()) for p in producers]
        rates = [steady_rate(parse_intervals(c.output()), after=1) for c in consumers]
        if any(math.isnan(r) for r in rates):
            raise ToolFailed(f"{self.name}: a consumer printed fewer than two interval lines after the warm-up "
                             "record; give the case more messages")
        p50, p99 = parse_latency(lat.output())
        ack_p50 = statistics.median(p for _, _, p in produced)
        return ToolResult(
            tool=f"{self.name} {_jars.pinned_version('kafka')}",
            command=[*producers[0].argv, "&", *consumers[0].argv, ";", *lat.argv],
            receiver_rate=sum(rates),
            sender_rate=sum(rate for _, rate, _ in produced),
            latency_p50_us=p50 * 1000.0,
            latency_p99_us=p99 * 1000.0,
            latency_kind="one-way",
            cpu=cpu,
            note=("receiver rate: ConsumerPerformance's interval lines during the load; sender rate: "
                  "ProducerPerformance's records/sec; latency: EndToEndLatency, one record in flight at a "
                  f"time (send, poll until it arrives), whole ms, unloaded; under load the producer's ack "
                  f"p50 was {ack_p50:.0f} ms"),
        )
