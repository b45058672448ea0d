"""Apache RocketMQ's benchmark tool (``rocketmq-example``, the broker's release, fetched by `make brokers`).

One repetition, on a fresh topic with one queue (as the harness's RocketMQ variants use): the benchmark
``Consumer`` (one process per consumer, one group) starts first and idles; the benchmark ``Producer`` sends
without end (``-q 0``) with synchronous sends. Both print a line a second (``-ri 1000``) whose TPS is an
average over their last ten one-second snapshots. Both are stopped by their pids after the ramp, one ten-second
window and the measured seconds.

The receiver rate is the mean TPS of the Consumer's lines whose whole ten-second window lies inside the
steady part; the sender rate, the same of the Producer's lines. The steady part begins ``ramp`` seconds after
consumption began, or once the Consumer has caught up with the Producer if that is later (``caught_up``): the
Consumer's rebalance can assign it the queue many seconds after the first sends (23 s here once), and it then
drains that backlog at up to four times the rate the Producer sends at, which is not the broker's steady
rate (a Consumer that does not catch up in ``DRAIN_S`` is the slower side, and is measured while behind). It
ends at the Producer's stop. With the row's settings the Producer has one sender thread per producer
(``-w``), as the harness's Java client sends; at its best, the tool's own default of ``BEST_THREADS``
synchronous senders, which keeps many sends in flight where one waits for each reply: one run a repetition,
for every variant. A variant that sends asynchronously (``send: async``) is measured against that best run
only (``ASYNC_UNMATCHED``), and a one-way variant not at all: the tool has no one-way sends.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.brokers import _jars
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolResult
from harness.crosscheck.tools._exec import ToolProcess, Tools
from harness.crosscheck.tools._java import TOOL_HEAP, java_for, missing_jar
from harness.crosscheck.tools._steady import window_rates
from harness.drivers.base import BrokerEndpoint

PACKAGE = "org.apache.rocketmq.example.benchmark."
WINDOW_S = 10.0  # the tools average over their last ten snapshots, taken a second apart
REPORT_MS = 1000
BEST_THREADS = 64  # the benchmark Producer's default -w
# The Producer's asynchronous mode (-y) pauses only while its client's executor queues 10,000 sends, not
# while sends await the broker's answer (the 5.5.0 client's backpressure for async sends is off by default
# and the tool does not turn it on): on a broker here its sends timed out by the hundred thousand in the
# first second, it sent nothing, and it ran out of heap (docs/truthfulness.md has the runs).
ASYNC_UNMATCHED = ("the benchmark Producer's asynchronous mode (-y) has no bound on sends awaiting the broker's "
                   "answer and sent nothing here (its sends timed out and it ran out of heap), so an async row is "
                   "measured against the tool at its best only")
TIMEOUT_S = 60.0
SENDING_S = 45.0  # for a Producer's first sends (its JVM's start on a loaded machine included)
# A Consumer line in which no message had waited this long between its send and its consumption: the Consumer
# has no backlog left (a drain's oldest messages are as old as the drain is long; a Consumer that keeps up sees
# tens of milliseconds here, the JIT's first seconds a few hundred).
CAUGHT_UP_MS = 1000
DRAIN_S = 120.0  # for a Consumer to catch up with a backlog its late queue assignment left it
# The tools ask the NameServer for the topic's route with a timeout near a second, which a loaded 2-core
# machine exceeds now and then: a Producer thread then dies having sent nothing, the Consumer's start fails.
# Either is started again, up to this many times.
ATTEMPTS = 3

_CONSUMED = re.compile(
    r"^Current Time: (\S+ \S+) \| Consume TPS: (\d+) \|.*?MAX\(B2C\) RT\(ms\): (\d+) \| MAX\(S2C\) RT\(ms\): (\d+)",
    re.M)
_SENT = re.compile(r"^Current Time: (\S+ \S+) \| Send TPS: (\d+) \|.*?Send Failed: (\d+)", re.M)
_MAIN_FAILED = 'Exception in thread "main"'


@dataclass(frozen=True)
class ConsumerLine:
    at: float  # seconds since the epoch
    tps: int
    busy: bool  # something was consumed since the line before (its per-line maximum latency is not 0)
    oldest_ms: int  # the longest send-to-consume time since the line before (MAX(S2C))


def parse_consumer(text: str) -> list[ConsumerLine]:
    """The benchmark Consumer's per-second lines, in order."""
    return [ConsumerLine(_stamp(stamp), int(tps), int(b2c) > 0 or int(s2c) > 0, int(s2c))
            for stamp, tps, b2c, s2c in _CONSUMED.findall(text)]


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def consumption_began(lines: list[ConsumerLine]) -> float:
    """When the Consumer began receiving: the time of its last idle line before its first busy one (NaN when
    it received nothing)."""
    started = next((i for i, line in enumerate(lines) if line.tps > 0), None)
    if started is None:
        return math.nan
    return lines[started - 1].at if started > 0 else lines[started].at - REPORT_MS / 1000


def caught_up(lines: list[ConsumerLine]) -> float:
    """When the Consumer had caught up with the Producer: the time of its first busy line in which no message
    consumed had waited ``CAUGHT_UP_MS`` or longer since its send (NaN until then)."""
    return next((line.at for line in lines if line.busy and line.oldest_ms < CAUGHT_UP_MS), math.nan)


def steady_start(lines: list[ConsumerLine], ramp: float) -> float:
    """Where the Consumer's steady part begins: ``ramp`` seconds after consumption began, or when it caught
    up if that is later (NaN before consumption began). A Consumer that has not caught up (``run`` waits
    ``DRAIN_S`` for it) is the slower side, and what it takes while behind is its steady rate: its steady part
    begins ``ramp`` seconds after consumption began."""
    began, level = consumption_began(lines), caught_up(lines)
    if math.isnan(began):
        return math.nan
    return began + ramp if math.isnan(level) else max(began + ramp, level)


def steady_consumer_rate(lines: list[ConsumerLine], start: float, end: float) -> tuple[float, float]:
    """(mean TPS, seconds covered) of the lines whose averaging window lies between ``start`` (the steady
    part's, ``steady_start``; NaN: none) and ``end`` (seconds since the epoch)."""
    return window_rates([(line.at, line.tps) for line in lines], start, end, WINDOW_S)


def parse_sent(text: str) -> list[tuple[float, int, int]]:
    """The benchmark Producer's per-second lines: (seconds since the epoch, Send TPS, send failures so far)."""
    return [(_stamp(at), int(tps), int(failed)) for at, tps, failed in _SENT.findall(text)]


class RocketBenchmark(Tool):
    system = "rocketmq"
    name = "rocketmq-example benchmark"
    ramp = 5.0  # JVMs: route lookups, the first sends, the JIT
    window = WINDOW_S

    def applies(self, case: CrossCase) -> bool:
        return case.options.get("send", "sync") in ("sync", "async")

    def unmatched(self, case: CrossCase) -> str | None:
        return ASYNC_UNMATCHED if case.options.get("send") == "async" else None

    def best(self, case: CrossCase) -> CrossCase | None:
        # options={}: one best run a repetition serves every variant, whatever its client or send mode
        return dataclasses.replace(case, producers=BEST_THREADS, consumers=1, options={}, best=True)

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
                   "-w", str(case.producers), "-q", "0", "-ri", str(REPORT_MS)]
        with Tools(workdir, tool) as tools:
            consumers = [self._start_consumer(tools, f"consumer-{i}", consume) for i in range(case.consumers)]
            tools.measure_broker(broker_pids)
            for attempt in range(ATTEMPTS):
                producer = tools.start(f"producer-{attempt}", produce)
                try:
                    tools.await_output([producer], lambda out: any(tps > 0 for _, tps, _ in parse_sent(out)),
                                       SENDING_S, "the Producer sent nothing")
                    break
                except ToolFailed:  # its sender threads died on a route lookup: nothing is being sent
                    tools.stop(producer)
            else:
                raise ToolFailed(f"{tool}: the Producer sent nothing in {ATTEMPTS} attempts of {SENDING_S:.0f} s; "
                                 f"its last output: {producer.tail()}")
            # The window counts from consumption's start, or from when the Consumer caught up: its queue is
            # assigned by its rebalance, which can come many seconds after the first sends.
            tools.await_output(consumers, lambda out: any(line.tps > 0 for line in parse_consumer(out)), SENDING_S,
                               "the Consumer received nothing of what the Producer sent")
            deadline = time.monotonic() + DRAIN_S
            while (behind := [c for c in consumers if math.isnan(caught_up(parse_consumer(c.output())))]) \
                    and time.monotonic() < deadline:
                tools.hold([producer, *consumers], 0.5)
            # decided once: the Producer's figure and each Consumer's are taken from these
            starts = [steady_start(parse_consumer(c.output()), self.ramp) for c in consumers]
            start = max(starts)
            tools.hold([producer, *consumers], max(0.0, start - time.time()) + self.window + case.seconds + 2.0)
            stopped = time.time()
            for proc in [producer, *consumers]:
                tools.stop(proc)
            cpu = tools.cpu_uses([producer, *consumers])
        sent = parse_sent(producer.output())
        sender_rate, _ = window_rates([(t, tps) for t, tps, _ in sent], start, stopped, WINDOW_S)
        failed = sent[-1][2] if sent else 0
        rates = [steady_consumer_rate(parse_consumer(c.output()), first, stopped)
                 for c, first in zip(consumers, starts, strict=True)]
        if any(not covered for _, covered in rates):
            raise ToolFailed(f"{tool}: no Consumer line's {WINDOW_S:.0f} s average lies within the steady part "
                             f"({self.ramp:g} s after consumption began or from when it caught up, to the "
                             f"Producer's stop)")
        return ToolResult(
            tool=tool,
            command=[*producer.argv, "&", *consumers[0].argv],
            receiver_rate=sum(r for r, _ in rates),
            sender_rate=sender_rate,
            cpu=cpu,
            settings=f"{case.producers} synchronous sender thread(s), {case.consumers} consumer(s)",
            steady_s=min(covered for _, covered in rates),
            note=(f"rates: means of the tools' per-second lines, each a {WINDOW_S:.0f} s moving average, whose "
                  f"window lies in the steady part; {failed} send failures"
                  + (f"; {len(behind)} Consumer(s) did not catch up with the Producer in {DRAIN_S:.0f} s (every "
                     f"second, a message that had waited {CAUGHT_UP_MS} ms or more): the slower side, measured "
                     f"while behind" if behind else "")),
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
