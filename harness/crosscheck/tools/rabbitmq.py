"""RabbitMQ's reference rows: PerfTest (``com.rabbitmq.perf.PerfTest``) and a plain pika publish loop.

PerfTest runs on its own queue for ``-z`` seconds (its ramp and the measured ones) and prints a line each
second (``-i 1``); its figures are the time-weighted means of the lines after the ramp. With the row's
settings: ``-x producers -y consumers -s size`` and the case's guarantee: at-most-once is ``-a`` (auto-ack, no
confirms); at-least-once adds ``-c window`` (that many unconfirmed publishes, like the harness's
``confirm_window``) and ``-q prefetch`` with manual acks; durable adds ``-f persistent``. At its best:
``BEST_PRODUCERS`` producers and ``BEST_CONSUMERS`` consumers on the one queue, the same guarantee, and for
confirmed publishing the windows its documentation suggests for throughput (``-c 1000 -q 1000``, acks of
100 messages at a time, ``-A 100``). Its latency is one-way: the producer writes a timestamp into the
message and the consumer, in the same JVM on this host, reads the clock on arrival (``System.nanoTime``);
the figures are the medians of its per-second median and 99th percentile.
The pika loop (``_pika_loop.py``) is the plain program a pika user writes; its publish rate over the
measured seconds is its figure. It is a reference for the client, not the broker's own tool: no best run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.brokers._jars import JVM_INSTALL, java, lib_dir, pinned_version
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Step, run_measured
from harness.crosscheck.tools._steady import intervals_rate
from harness.drivers.base import BrokerEndpoint, Guarantee
from harness.runfolder import redact

PERFTEST_MISSING = f"RabbitMQ PerfTest is not fetched: {JVM_INSTALL} (harness/brokers/maven/perftest.xml)"
_SECOND = re.compile(r"time:? ([\d.]+) ?s, sent: ([\d.]+) msg/s, received: ([\d.]+) msg/s(?:, min/median/75th/95th/99th "
                     r"consumer latency: ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) (µs|ms))?")
BEST_PRODUCERS, BEST_CONSUMERS = 2, 2
BEST_WINDOW, BEST_ACK_EVERY = 1000, 100


@dataclass(frozen=True)
class Second:
    """One of PerfTest's per-second lines: its time since the start and the rates and latency over it."""

    at: float
    sent: float
    received: float
    p50_us: float = math.nan
    p99_us: float = math.nan


def parse_seconds(text: str) -> list[Second]:
    """PerfTest's per-second lines (``-i 1``), in order."""
    out = []
    for at, sent, received, *lat in _SECOND.findall(text):
        p50 = p99 = math.nan
        if lat[-1]:
            scale = 1000.0 if lat[-1] == "ms" else 1.0
            p50, p99 = float(lat[1]) * scale, float(lat[4]) * scale
        out.append(Second(float(at), float(sent), float(received), p50, p99))
    return out


def steady(lines: list[Second], ramp: float, seconds: float) -> dict[str, float]:
    """``send``/``receive`` msg/s (time-weighted means), ``p50``/``p99`` µs (medians of the lines) and
    ``steady_s`` over the lines after ``ramp`` up to ``ramp + seconds``."""
    start, end = ramp, ramp + seconds
    send, span = intervals_rate([(x.at, x.sent) for x in lines], start, end)
    receive, _ = intervals_rate([(x.at, x.received) for x in lines], start, end)
    kept = [x for x, before in zip(lines, [0.0, *(y.at for y in lines)], strict=False) if start <= before < end]
    p50 = [x.p50_us for x in kept if x.p50_us == x.p50_us]
    p99 = [x.p99_us for x in kept if x.p99_us == x.p99_us]
    return {"send": send, "receive": receive, "steady_s": span,
            "p50": statistics.median(p50) if p50 else math.nan, "p99": statistics.median(p99) if p99 else math.nan}


def perftest_flags(case: CrossCase) -> list[str]:
    """PerfTest's flags for ``case`` (the connection, queue and run time aside)."""
    flags = ["-x", str(case.producers), "-y", str(case.consumers), "-s", str(case.size)]
    if case.guarantee == Guarantee.AT_MOST_ONCE:
        return [*flags, "-a"]
    prefetch = int(case.options.get("prefetch", 0) or case.window)
    flags += ["-c", str(case.window), "-q", str(prefetch), "-A", str(int(case.options.get("ack_every", 1)))]
    if case.guarantee == Guarantee.DURABLE:
        flags += ["-f", "persistent"]
    return flags


class PerfTest(Tool):
    system = "rabbitmq"
    name = "PerfTest"
    ramp = 5.0  # a JVM: connections, then its JIT warm-up

    def best(self, case: CrossCase) -> CrossCase | None:
        options = {} if case.guarantee == Guarantee.AT_MOST_ONCE else {"prefetch": BEST_WINDOW,
                                                                       "ack_every": BEST_ACK_EVERY}
        return dataclasses.replace(case, producers=BEST_PRODUCERS, consumers=BEST_CONSUMERS, window=BEST_WINDOW,
                                   options=options, best=True)

    def missing(self) -> str | None:
        if java() is None:
            return f"PerfTest needs Java: {JVM_INSTALL}"
        return None if lib_dir("perftest") else PERFTEST_MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe, lib = java(), lib_dir("perftest")
        if exe is None or lib is None:
            raise ToolMissing(self.missing() or PERFTEST_MISSING)
        queue = f"mqbench-perftest-{uuid.uuid4().hex[:8]}"
        flags = perftest_flags(case)
        argv = [exe, "-Xmx512m", "-cp", f"{lib}/*", "com.rabbitmq.perf.PerfTest", "--uri", endpoint.url,
                "-u", queue, "--auto-delete", "true", *flags, "-i", "1", "-z", str(math.ceil(self.ramp + case.seconds + 2))]
        measured = run_measured(self.name, [Step("tool", argv)], workdir, broker_pids,
                                timeout=120 + self.ramp + case.seconds)
        got = steady(parse_seconds(measured.output("tool")), self.ramp, case.seconds)
        if not got["steady_s"]:
            raise ToolFailed(f"PerfTest printed no per-second line after its {self.ramp:g} s ramp; its last output: "
                             f"{measured.done[0].tail() or '(none)'}")
        return ToolResult(
            tool=f"PerfTest {pinned_version('perftest')}", command=[redact(a) for a in argv],
            sender_rate=got["send"], receiver_rate=got["receive"], latency_p50_us=got["p50"],
            latency_p99_us=got["p99"], latency_kind="one-way", cpu=measured.cpu(),
            settings=" ".join(flags), steady_s=got["steady_s"],
            note=(f"means of its per-second rates after a {self.ramp:g} s ramp; one-way latency: timestamp in the "
                  "message, read by the consumer in the same JVM, medians of its per-second p50 and p99"),
        )


class PlainPikaLoop(Tool):
    system = "rabbitmq"
    name = "plain pika loop"
    ramp = 1.0

    def missing(self) -> str | None:
        try:
            import pika  # noqa: F401
        except ImportError:
            return "the plain pika loop needs pika: pip install pika (it is a dependency of mqbench)"
        return None

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        queue = f"mqbench-pikaloop-{uuid.uuid4().hex[:8]}"
        argv = [sys.executable, "-m", "harness.crosscheck.tools._pika_loop", endpoint.url, queue,
                str(self.ramp), str(case.seconds), str(case.size)]
        measured = run_measured(self.name, [Step("tool", argv)], workdir, broker_pids,
                                timeout=120 + self.ramp + case.seconds)
        try:
            got: dict[str, Any] = json.loads(measured.output("tool").strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise ToolFailed("the plain pika loop printed no result line") from None
        return ToolResult(
            tool="plain pika loop", command=[redact(a) for a in argv], sender_rate=float(got["published_per_s"]),
            cpu=measured.cpu(), settings="one BlockingConnection, basic_publish, no confirms",
            steady_s=float(got["seconds"]),
            note=f"one BlockingConnection, basic_publish in a loop, no confirms; publish rate after a {self.ramp:g} s "
                 "ramp; the queue is purged afterwards",
        )
