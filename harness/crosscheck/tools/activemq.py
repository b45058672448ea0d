"""ActiveMQ Classic's own producer/consumer tool (``activemq producer`` / ``activemq consumer`` of Debian's
activemq 5.17, from ``activemq.jar``), over OpenWire: the broker's private instance listens for it on the
port in its endpoint's ``extra["openwire"]`` (harness/brokers/activemq.py).

One repetition, on a fresh queue: the consumer starts and waits for the case's messages; the producer sends
them (one thread per producer, ``--parallelThreads``; persistent, hence each send confirmed by the broker,
for at-least-once and durable, non-persistent otherwise; client acknowledgement in batches of the case's
window for at-least-once and durable). Both exit by themselves. Their log lines carry millisecond wall-clock
stamps: the sender rate is the producer's messages over its own elapsed time; the receiver rate is the
messages over the span from the producer's first send to the consumer's last receipt. The consumer logs
every message it receives; those lines are filtered out of its log (log4j), not counted.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from pathlib import Path

from harness.brokers import _jars
from harness.brokers.activemq import HOME
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Tools
from harness.crosscheck.tools._java import TOOL_HEAP, java_for
from harness.drivers.base import BrokerEndpoint

JAR = HOME / "bin" / "activemq.jar"
TIMEOUT_S = 60.0
# Console logging with millisecond stamps, without the consumer's line per received message.
LOG4J = (
    "log4j.rootLogger=INFO, console\n"
    "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %m%n\n"
    "log4j.appender.console.filter.1=org.apache.log4j.varia.StringMatchFilter\n"
    "log4j.appender.console.filter.1.StringToMatch= Received \n"
    "log4j.appender.console.filter.1.AcceptOnMatch=false\n"
)
_STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
_STARTED = re.compile(_STAMP + r"\S+ Started to calculate elapsed time", re.M)
_ELAPSED = re.compile(r"Elapsed time in milli second : (\d+) milli seconds")
_PRODUCED = re.compile(r" Produced: (\d+) messages")
_CONSUMED = re.compile(_STAMP + r"\S+ Consumed: (\d+) messages", re.M)


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse_producer(text: str) -> tuple[float, int, float]:
    """(first send as seconds since the epoch, messages produced, sender msg/s) over every producer thread."""
    starts = [_stamp(s) for s in _STARTED.findall(text)]
    produced = [int(n) for n in _PRODUCED.findall(text)]
    elapsed = [int(ms) for ms in _ELAPSED.findall(text)]
    if not starts or not produced or not elapsed:
        raise ValueError("no 'Started to calculate elapsed time' / 'Produced' / 'Elapsed time' lines")
    # Threads send side by side: their messages over the longest thread's time.
    return min(starts), sum(produced), sum(produced) / (max(elapsed) / 1000.0) if max(elapsed) else float("nan")


def parse_consumer(text: str) -> tuple[float, int]:
    """(last thread's end as seconds since the epoch, messages consumed over every consumer thread)."""
    found = _CONSUMED.findall(text)
    if not found:
        raise ValueError("no 'Consumed: N messages' line")
    return max(_stamp(s) for s, _ in found), sum(int(n) for _, n in found)


class ActiveMQPerf(Tool):
    system = "activemq"
    name = "activemq producer/consumer"

    def missing(self) -> str | None:
        if _jars.java() is None:
            return "no Java runtime for ActiveMQ's producer/consumer tool; run `make brokers`"
        if not JAR.is_file():
            return f"ActiveMQ's {JAR} is missing; install the Debian package activemq (`make brokers`)"
        return None

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        java = java_for(self)
        openwire = endpoint.extra.get("openwire")
        if not openwire:
            raise ToolMissing("the ActiveMQ broker offers no OpenWire URL (only a private instance started by "
                              "mqbench does); ActiveMQ's producer/consumer tool speaks only OpenWire")
        if case.messages * case.producers % case.consumers:
            raise ToolFailed(f"{self.name}: each consumer thread waits for the same count, so the messages "
                             f"({case.messages * case.producers}) must split evenly over {case.consumers} consumers")
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "log4j.properties").write_text(LOG4J)
        jvm = [java, *TOOL_HEAP, f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}",
               f"-Dactivemq.home={HOME}", f"-Dactivemq.base={workdir}", f"-Dactivemq.conf={workdir}",
               f"-Dactivemq.data={workdir}", "-jar", str(JAR)]
        queue = f"queue://crosscheck-{uuid.uuid4().hex[:8]}"
        confirmed = case.guarantee != "at-most-once"
        total = case.messages * case.producers
        ack = (["--ackMode", "CLIENT_ACKNOWLEDGE", "--batchSize", str(case.window)] if confirmed
               else ["--ackMode", "AUTO_ACKNOWLEDGE"])
        consume = [*jvm, "consumer", "--brokerUrl", str(openwire), "--destination", queue,
                   "--messageCount", str(total // case.consumers), "--parallelThreads", str(case.consumers), *ack]
        # Each producer thread sends --messageCount: the case's messages per producer.
        produce = [*jvm, "producer", "--brokerUrl", str(openwire), "--destination", queue,
                   "--messageCount", str(case.messages), "--messageSize", str(case.size),
                   "--persistent", str(confirmed).lower(), "--parallelThreads", str(case.producers)]
        deadline_s = TIMEOUT_S + total / 100  # at least a hundred messages a second
        tool = f"{self.name} {endpoint.version or '5'}".strip()
        with Tools(workdir, tool) as tools:
            consumer = tools.start("consumer", consume)
            tools.await_output([consumer], lambda out: "are consumed" in out, TIMEOUT_S,
                               "the consumer did not say it waits for messages")
            tools.measure_broker(broker_pids)
            producer = tools.start("producer", produce)
            tools.wait(producer, timeout=deadline_s)
            tools.wait(consumer, timeout=TIMEOUT_S)
            cpu = tools.cpu_uses([producer, consumer])
        first_send, produced, sender_rate = parse_producer(producer.output())
        last_receipt, consumed = parse_consumer(consumer.output())
        if last_receipt <= first_send:
            raise ToolFailed(f"{tool}: the consumer's last receipt is not after the producer's first send")
        return ToolResult(
            tool=tool,
            command=[*producer.argv, "&", *consumer.argv],
            receiver_rate=consumed / (last_receipt - first_send),
            sender_rate=sender_rate,
            cpu=cpu,
            note=(f"receiver rate: {consumed} messages from the producer's first send to the consumer's last "
                  f"receipt (ms log stamps); sender rate: its messages over its own elapsed time; "
                  f"{'persistent' if confirmed else 'non-persistent'} sends, {produced} sent"),
        )
