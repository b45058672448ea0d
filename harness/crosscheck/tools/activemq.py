"""ActiveMQ Classic's own producer/consumer tool (``activemq producer`` / ``activemq consumer`` of Debian's
activemq 5.17, from ``activemq.jar``), over OpenWire: the broker's private instance listens for it on the
port in its endpoint's ``extra["openwire"]`` (harness/brokers/activemq.py).

One repetition, on a fresh queue: the consumer starts and waits; the producer sends without end (a count
beyond any run; one thread per producer, ``--parallelThreads``; persistent, hence each send confirmed by the
broker, for at-least-once and durable, non-persistent otherwise; client acknowledgement in batches of the
case's window for at-least-once and durable). Both are stopped after the ramp and the measured seconds. The
tool counts only at its end, so its figures come from its log lines: the consumer logs each message it
receives (``Received``), the producer each it sends (``Sent``, at debug level), with millisecond stamps;
those lines go to a buffered file of their own, not to the console. The receiver rate is the receipts in the
measured window (``ramp`` seconds after the first receipt, for ``seconds``) over its length; the sender
rate, the same of the sends. At its best: ``BEST_THREADS`` producer and consumer threads, the guarantee kept
(the tool has little else to tune; asynchronous sends would drop what a persistent send waits for).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from datetime import datetime
from pathlib import Path

from harness.brokers import _jars
from harness.brokers.activemq import HOME
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Tools
from harness.crosscheck.tools._java import TOOL_HEAP, java_for
from harness.crosscheck.tools._steady import events_rate
from harness.drivers.base import BrokerEndpoint

JAR = HOME / "bin" / "activemq.jar"
TIMEOUT_S = 60.0
FOREVER = 2_000_000_000  # messages: more than any run sends
BEST_THREADS = 2
# Console: everything but the per-message lines. Those go, with millisecond stamps, to a buffered file per
# process (${stamps.file}); the buffer is small, so what a stop loses is the last fraction of a second.
LOG4J = (
    "log4j.rootLogger=INFO, console\n"
    "log4j.appender.console=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %m%n\n"
    "log4j.appender.console.filter.1=org.apache.log4j.varia.StringMatchFilter\n"
    "log4j.appender.console.filter.1.StringToMatch= Received \n"
    "log4j.appender.console.filter.1.AcceptOnMatch=false\n"
    "log4j.appender.console.filter.2=org.apache.log4j.varia.StringMatchFilter\n"
    "log4j.appender.console.filter.2.StringToMatch= Sent: \n"
    "log4j.appender.console.filter.2.AcceptOnMatch=false\n"
    "log4j.appender.stamps=org.apache.log4j.FileAppender\n"
    "log4j.appender.stamps.File=${stamps.file}\n"
    "log4j.appender.stamps.BufferedIO=true\n"
    "log4j.appender.stamps.BufferSize=8192\n"
    "log4j.appender.stamps.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.stamps.layout.ConversionPattern=%d{ISO8601} %m%n\n"
    "log4j.logger.org.apache.activemq.util.ProducerThread=DEBUG, stamps\n"
    "log4j.logger.org.apache.activemq.util.ConsumerThread=INFO, stamps\n"
)
_STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
_RECEIVED = re.compile(_STAMP + r"\S+ Received ", re.M)
_SENT = re.compile(_STAMP + r"\S+ Sent: ", re.M)


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def receipts(text: str) -> list[float]:
    """The stamps (seconds since the epoch, sorted) of the consumer's ``Received`` lines."""
    return sorted(_stamp(s) for s in _RECEIVED.findall(text))


def sends(text: str) -> list[float]:
    """The stamps (seconds since the epoch, sorted) of the producer's ``Sent`` lines."""
    return sorted(_stamp(s) for s in _SENT.findall(text))


class ActiveMQPerf(Tool):
    system = "activemq"
    name = "activemq producer/consumer"
    ramp = 5.0  # JVMs: connections and the JIT

    def best(self, case: CrossCase) -> CrossCase | None:
        return dataclasses.replace(case, producers=BEST_THREADS, consumers=BEST_THREADS, best=True)

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
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "log4j.properties").write_text(LOG4J)

        def jvm(role: str) -> list[str]:
            return [java, *TOOL_HEAP, f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}",
                    f"-Dstamps.file={workdir / f'{role}-stamps.log'}", f"-Dactivemq.home={HOME}",
                    f"-Dactivemq.base={workdir}", f"-Dactivemq.conf={workdir}", f"-Dactivemq.data={workdir}",
                    "-jar", str(JAR)]

        queue = f"queue://crosscheck-{uuid.uuid4().hex[:8]}"
        confirmed = case.guarantee != "at-most-once"
        ack = (["--ackMode", "CLIENT_ACKNOWLEDGE", "--batchSize", str(case.window)] if confirmed
               else ["--ackMode", "AUTO_ACKNOWLEDGE"])
        consume = [*jvm("consumer"), "consumer", "--brokerUrl", str(openwire), "--destination", queue,
                   "--messageCount", str(FOREVER), "--parallelThreads", str(case.consumers), *ack]
        produce = [*jvm("producer"), "producer", "--brokerUrl", str(openwire), "--destination", queue,
                   "--messageCount", str(FOREVER), "--messageSize", str(case.size),
                   "--persistent", str(confirmed).lower(), "--parallelThreads", str(case.producers)]
        tool = f"{self.name} {endpoint.version or '5'}".strip()
        with Tools(workdir, tool) as tools:
            consumer = tools.start("consumer", consume)
            tools.await_output([consumer], lambda out: "are consumed" in out, TIMEOUT_S,
                               "the consumer did not say it waits for messages")
            tools.measure_broker(broker_pids)
            producer = tools.start("producer", produce)
            # the window starts at the first receipt: the producer's JVM starts first
            tools.await_output([producer], lambda out: "Started to calculate elapsed time" in out, TIMEOUT_S,
                               "the producer did not start sending")
            tools.hold([producer, consumer], self.ramp + case.seconds + 3.0)
            for proc in (producer, consumer):
                tools.stop(proc)
            cpu = tools.cpu_uses([producer, consumer])
        got = receipts(_read(workdir / "consumer-stamps.log"))
        put = sends(_read(workdir / "producer-stamps.log"))
        if len(got) < 2:
            raise ToolFailed(f"{tool}: the consumer logged {len(got)} receipts; its last output: {consumer.tail()}")
        received, steady = events_rate(got, got[0] + self.ramp, got[0] + self.ramp + case.seconds)
        if not steady or got[-1] < got[0] + self.ramp + case.seconds:
            raise ToolFailed(f"{tool}: the consumer's receipts did not last {self.ramp + case.seconds:g} s")
        sent, _ = events_rate(put, put[0] + self.ramp, put[0] + self.ramp + case.seconds) if put else (float("nan"), 0)
        return ToolResult(
            tool=tool,
            command=[*producer.argv, "&", *consumer.argv],
            receiver_rate=received,
            sender_rate=sent,
            cpu=cpu,
            settings=(f"{'persistent' if confirmed else 'non-persistent'}, {' '.join(ack[1::2][:1])}, "
                      f"{case.producers} producer thread(s), {case.consumers} consumer thread(s)"),
            steady_s=steady,
            note=(f"rates: the consumer's Received and the producer's Sent log lines (ms stamps) in the "
                  f"{case.seconds:g} s after a {self.ramp:g} s ramp"),
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
