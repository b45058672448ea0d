"""RabbitMQ's reference rows: PerfTest (``com.rabbitmq.perf.PerfTest``) and a plain pika publish loop.

PerfTest runs ``-x producers -y consumers -s size -C messages -D messages`` on its own queue, with the
case's guarantee: at-most-once is ``-a`` (auto-ack, no confirms); at-least-once adds ``-c window`` (that many
unconfirmed publishes, like the harness's ``confirm_window``) and ``-q prefetch`` with manual acks; durable
adds ``-f persistent``. Its latency is one-way: the producer writes a timestamp into the message and the
consumer, in the same JVM on this host, reads the clock on arrival (``System.nanoTime``).
The pika loop (``_pika_loop.py``) is the plain program a pika user writes; its publish rate is its figure.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from harness.brokers._jars import JVM_INSTALL, java, lib_dir, pinned_version
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Step, run_measured
from harness.drivers.base import BrokerEndpoint, Guarantee
from harness.runfolder import redact

PERFTEST_MISSING = f"RabbitMQ PerfTest is not fetched: {JVM_INSTALL} (harness/brokers/maven/perftest.xml)"
_RATE = re.compile(r"(sending|receiving) rate avg: ([\d.]+) msg/s")
_LATENCY = re.compile(r"consumer latency min/median/75th/95th/99th ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) (µs|ms)")


def parse_summary(text: str) -> dict[str, float]:
    """``send``/``receive`` msg/s and ``p50``/``p95``/``p99`` µs from PerfTest's closing summary lines."""
    out: dict[str, float] = {}
    for kind, value in _RATE.findall(text):
        out["send" if kind == "sending" else "receive"] = float(value)
    found = _LATENCY.findall(text)
    if found:
        *values, unit = found[-1]
        scale = 1000.0 if unit == "ms" else 1.0
        _min, p50, _p75, p95, p99 = (float(v) * scale for v in values)
        out.update(p50=p50, p95=p95, p99=p99)
    if "send" not in out and "receive" not in out:
        raise ValueError("no 'sending rate avg' / 'receiving rate avg' line")
    return out


def perftest_flags(case: CrossCase) -> list[str]:
    """PerfTest's flags for ``case`` (the connection and queue aside)."""
    total = case.messages * case.producers
    flags = ["-x", str(case.producers), "-y", str(case.consumers), "-s", str(case.size),
             "-C", str(case.messages), "-D", str(max(1, total // max(1, case.consumers)))]
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

    def missing(self) -> str | None:
        if java() is None:
            return f"PerfTest needs Java: {JVM_INSTALL}"
        return None if lib_dir("perftest") else PERFTEST_MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe, lib = java(), lib_dir("perftest")
        if exe is None or lib is None:
            raise ToolMissing(self.missing() or PERFTEST_MISSING)
        queue = f"mqbench-perftest-{uuid.uuid4().hex[:8]}"
        argv = [exe, "-Xmx512m", "-cp", f"{lib}/*", "com.rabbitmq.perf.PerfTest", "--uri", endpoint.url,
                "-u", queue, "--auto-delete", "true", *perftest_flags(case)]
        measured = run_measured(self.name, [Step("tool", argv)], workdir, broker_pids, timeout=300)
        try:
            got = parse_summary(measured.output("tool"))
        except ValueError as exc:
            raise ToolFailed(f"PerfTest printed no summary ({exc})") from None
        return ToolResult(
            tool=f"PerfTest {pinned_version('perftest')}", command=[redact(a) for a in argv],
            sender_rate=got.get("send", float("nan")), receiver_rate=got.get("receive", float("nan")),
            latency_p50_us=got.get("p50", float("nan")), latency_p99_us=got.get("p99", float("nan")),
            latency_kind="one-way", cpu=measured.cpu(),
            note="one-way latency: timestamp in the message, read by the consumer in the same JVM",
        )


class PlainPikaLoop(Tool):
    system = "rabbitmq"
    name = "plain pika loop"

    def missing(self) -> str | None:
        try:
            import pika  # noqa: F401
        except ImportError:
            return "the plain pika loop needs pika: pip install pika (it is a dependency of mqbench)"
        return None

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        queue = f"mqbench-pikaloop-{uuid.uuid4().hex[:8]}"
        argv = [sys.executable, "-m", "harness.crosscheck.tools._pika_loop", endpoint.url, queue,
                str(case.messages), str(case.size)]
        measured = run_measured(self.name, [Step("tool", argv)], workdir, broker_pids, timeout=300)
        try:
            got: dict[str, Any] = json.loads(measured.output("tool").strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise ToolFailed("the plain pika loop printed no result line") from None
        return ToolResult(
            tool="plain pika loop", command=[redact(a) for a in argv], sender_rate=float(got["published_per_s"]),
            cpu=measured.cpu(),
            note=(f"one BlockingConnection, basic_publish in a loop, no confirms; drained afterwards at "
                  f"{float(got['drained_per_s']):,.0f} msg/s (not beside the publisher)"),
        )
