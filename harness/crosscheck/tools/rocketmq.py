"""Apache RocketMQ's benchmark tool (``rocketmq-example``, the broker's release, fetched by `make brokers`).

One repetition, on a fresh topic with one queue (as the harness's RocketMQ variants use): the benchmark
``Consumer`` (one process per consumer, one group) starts first and idles; the benchmark ``Producer`` sends
the case's messages (``-q``), one synchronous sender thread per producer (``-w``), as the harness's Java
client sends. Both print a line a second (``-ri 1000``) whose TPS is an average over their last ten one-second
snapshots. The Consumer runs until it is stopped: it is stopped by its pid once the producer has finished and
a line shows nothing consumed since the line before.

The receiver rate is the median TPS of the Consumer's lines whose whole ten-second window lies inside the
consumption (after the last idle line, before the first idle line at the end): the steady part. A run too short
to have such a line gives no figure (ToolFailed asks for more messages).
"""

from __future__ import annotations

import math
import re
import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.brokers import _jars
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolResult
from harness.crosscheck.tools._exec import ToolProcess, Tools
from harness.crosscheck.tools._java import TOOL_HEAP, java_for, missing_jar
from harness.drivers.base import BrokerEndpoint

PACKAGE = "org.apache.rocketmq.example.benchmark."
WINDOW_S = 10.0  # the tools average over their last ten snapshots, taken a second apart (plus alignment)
REPORT_MS = 1000
SETTLE_S = 2.0  # a line this close to the idle line at the end may still hold the last partial second
QUIET_LINES = 2  # idle lines after the producer finished that end the consumer
TIMEOUT_S = 60.0
# The tools ask the NameServer for the topic's route with a timeout near a second, which a loaded 2-core
# machine exceeds now and then: the Producer then ends normally having sent nothing (its thread died), the
# Consumer's start fails. Either is started again, up to this many times.
ATTEMPTS = 3

_CONSUMED = re.compile(
    r"^Current Time: (\S+ \S+) \| Consume TPS: (\d+) \|.*?MAX\(B2C\) RT\(ms\): (\d+) \| MAX\(S2C\) RT\(ms\): (\d+)",
    re.M)
_SENT = re.compile(r"^Current Time: \S+ \S+ \| Send TPS: (\d+) \|.*?Send Failed: (\d+)", re.M)
_MAIN_FAILED = 'Exception in thread "main"'
_COMPLETE = re.compile(r"^\[Complete\] Send Total: (\d+) \| Send TPS: (\d+) \|.*?Send Failed: (\d+)", re.M)


@dataclass(frozen=True)
class ConsumerLine:
    at: float  # seconds since the epoch
    tps: int
    busy: bool  # something was consumed since the line before (its per-line maximum latency is not 0)


def parse_consumer(text: str) -> list[ConsumerLine]:
    """The benchmark Consumer's per-second lines, in order."""
    return [ConsumerLine(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp(), int(tps),
                         int(b2c) > 0 or int(s2c) > 0)
            for stamp, tps, b2c, s2c in _CONSUMED.findall(text)]


def steady_consumer_rate(lines: list[ConsumerLine]) -> float:
    """Median TPS of the lines whose averaging window lies within the consumption; NaN when none does."""
    started = next((i for i, line in enumerate(lines) if line.tps > 0), None)
    if started is None:
        return math.nan
    begin = lines[started - 1].at if started > 0 else lines[started].at - 1.0  # the last idle line
    end = next((line.at for line in lines[started:] if not line.busy), math.inf)
    steady = [line.tps for line in lines[started:] if begin + WINDOW_S <= line.at <= end - SETTLE_S]
    return float(statistics.median(steady)) if steady else math.nan


def parse_producer(text: str) -> tuple[float, int, int]:
    """(median Send TPS of its lines, messages sent, send failures) from the benchmark Producer's output."""
    rates = [int(tps) for tps, _ in _SENT.findall(text)]
    complete = _COMPLETE.findall(text)
    if not complete:
        raise ValueError("no '[Complete] Send Total' line")
    total, last_tps, failed = (int(x) for x in complete[-1])
    return float(statistics.median(rates)) if rates else float(last_tps), total, failed


def _sent(text: str) -> int:
    """Messages a Producer run reports sent; 0 when it ended before its closing line (a NameServer timeout)."""
    try:
        return parse_producer(text)[1]
    except ValueError:
        return 0


def quiet_after(lines: list[ConsumerLine], since: float) -> bool:
    """True when the last QUIET_LINES lines printed after ``since`` consumed nothing."""
    after = [line for line in lines if line.at > since]
    return len(after) >= QUIET_LINES and not any(line.busy for line in after[-QUIET_LINES:])


class RocketBenchmark(Tool):
    system = "rocketmq"
    name = "rocketmq-example benchmark"

    def missing(self) -> str | None:
        return missing_jar("rocketmq", "rocketmq-example", "RocketMQ's benchmark tool")

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        from harness.drivers.rocketmq_admin import broker_addresses, create_topic

        java = java_for(self)
        version = _jars.pinned_version("rocketmq")
        tool = f"{self.name} {version}"
        namesrv = endpoint.url.split("://", 1)[-1].rstrip("/")
        tag = uuid.uuid4().hex[:8]
        topic = f"crosscheck-{tag}"
        # user.home: the tool's client logs go under ${user.home}/logs, kept in the workdir.
        jvm = [java, *TOOL_HEAP, *_jars.JAVA17_OPENS, f"-Duser.home={workdir}", "-cp", _jars.classpath("rocketmq")]
        try:
            for broker in broker_addresses(namesrv, TIMEOUT_S):
                create_topic(broker, topic, 1, TIMEOUT_S)
        except OSError as exc:
            raise ToolFailed(f"{tool}: could not create the topic through the NameServer at {namesrv}: {exc}") from None
        consume = [*jvm, PACKAGE + "Consumer", "-n", namesrv, "-t", topic, "-g", f"crosscheck-{tag}",
                   "-ri", str(REPORT_MS)]
        produce = [*jvm, PACKAGE + "Producer", "-n", namesrv, "-t", topic, "-s", str(case.size),
                   "-w", str(case.producers), "-q", str(case.messages * case.producers), "-ri", str(REPORT_MS)]
        deadline_s = TIMEOUT_S + case.messages * case.producers / 100  # at least a hundred messages a second
        with Tools(workdir, tool) as tools:
            consumers = [self._start_consumer(tools, f"consumer-{i}", consume) for i in range(case.consumers)]
            tools.measure_broker(broker_pids)
            for attempt in range(ATTEMPTS):
                producer = tools.start(f"producer-{attempt}", produce)
                tools.wait(producer, timeout=deadline_s)
                if _sent(producer.output()) > 0:
                    break
            else:
                raise ToolFailed(f"{tool}: the Producer sent nothing in {ATTEMPTS} attempts; its last "
                                 f"output: {producer.tail()}")
            done = time.time()
            tools.await_output(consumers, lambda out: quiet_after(parse_consumer(out), done), TIMEOUT_S,
                               "the Consumer was still receiving after the Producer finished")
            for proc in consumers:
                tools.stop(proc)
            cpu = tools.cpu_uses([producer, *consumers])
        sender_rate, sent, failed = parse_producer(producer.output())
        rates = [steady_consumer_rate(parse_consumer(c.output())) for c in consumers]
        received = [r for r in rates if not math.isnan(r)]
        if not received:
            raise ToolFailed(f"{tool}: the run was shorter than the tool's {WINDOW_S:.0f} s averaging window "
                             "plus its ramp; give the case more messages")
        return ToolResult(
            tool=tool,
            command=[*producer.argv, "&", *consumers[0].argv],
            receiver_rate=sum(received),
            sender_rate=sender_rate,
            cpu=cpu,
            note=(f"rates: median of the tools' per-second lines, each a {WINDOW_S:.0f} s moving average, over "
                  f"the steady part; {sent} sent, {failed} send failures; synchronous sends, one per producer"),
        )

    @staticmethod
    def _start_consumer(tools: Tools, role: str, argv: list[str]) -> ToolProcess:
        """A Consumer that has started and subscribed (it says "Consumer Started."); tried ATTEMPTS times."""
        for attempt in range(ATTEMPTS):
            proc = tools.start(f"{role}-{attempt}", argv)
            try:
                tools.await_output([proc], lambda out: "Consumer Started." in out or _MAIN_FAILED in out,
                                   TIMEOUT_S, "the Consumer did not start")
            except ToolFailed:
                if attempt == ATTEMPTS - 1:
                    raise
            if _MAIN_FAILED not in proc.output():
                return proc
            tools.stop(proc)
        raise tools.failed(proc)
