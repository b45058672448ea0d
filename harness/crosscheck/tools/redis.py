"""redis-benchmark (Debian's ``redis-tools``) running XADD against the harness's Redis instance.

Each XADD carries one field of ``size`` bytes, as the harness's Redis driver writes them, into a stream of its
own (deleted afterwards). Two rows with the row's settings: one client per producer of the case, unpipelined
(``-P 1``: each XADD waits for its reply) and pipelined as deep as the harness driver's ``pipeline`` option
(``-P window``); and the tool at its best (``BEST_CLIENTS`` clients, its default, each pipelining
``BEST_PIPELINE``: Redis's own benchmark page shows pipelining as the way to its peak, and one Redis thread
serves them all). redis-benchmark runs until stopped (``-n`` beyond any run); it prints the rate of each
quarter second, and the figure is the mean of those after its ramp, over ``seconds``. It has no consumer, so
its rate is a sender rate; its latency (mean round trip of a request, sent -> reply read, which with ``-P``
includes the wait behind the batch) is in the note.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Tools, executable
from harness.crosscheck.tools._steady import intervals_rate
from harness.drivers.base import BrokerEndpoint

MISSING = "redis-benchmark is not installed: apt-get install redis-tools (or run make brokers)"
TICK_S = 0.25  # redis-benchmark prints the rate of each quarter second
BEST_CLIENTS, BEST_PIPELINE = 50, 100
FOREVER = 2**31 - 1  # requests: more than any run sends
_TICK = re.compile(r"rps=([\d.]+) \(overall: [\d.naN-]+\) avg_msec=([\d.naN-]+)")


def parse_ticks(text: str) -> list[tuple[float, float, float]]:
    """redis-benchmark's progress lines (separated by carriage returns): (seconds since its start, requests/s
    over the quarter second, mean latency in ms). The lines carry no time: the n-th ends at n quarter seconds
    (the tool's timer), and the rate of each is over its own measured interval."""
    out = []
    for n, (rps, avg) in enumerate(_TICK.findall(text), start=1):
        latency = float(avg) if avg.replace(".", "", 1).isdigit() else float("nan")
        out.append((n * TICK_S, float(rps), latency))
    return out


class RedisBenchmark(Tool):
    """``redis-benchmark -P window XADD``: pipelined as deep as the harness's window; at its best, more
    clients and the same depth."""

    system = "redis"
    name = "redis-benchmark -P window"
    ramp = 1.0  # a C program: its first second holds the connections' start

    def pipeline(self, case: CrossCase) -> int:
        return case.window

    def clients(self, case: CrossCase) -> int:
        return case.producers

    def best(self, case: CrossCase) -> CrossCase | None:
        return dataclasses.replace(case, producers=BEST_CLIENTS, window=BEST_PIPELINE, best=True)

    def missing(self) -> str | None:
        return None if executable("redis-benchmark") else MISSING

    def version(self) -> str:
        exe = executable("redis-benchmark") or "redis-benchmark"
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
        return f"redis-benchmark {out[1]}" if len(out) > 1 else "redis-benchmark"

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe = executable("redis-benchmark")
        if exe is None:
            raise ToolMissing(MISSING)
        url = urlsplit(endpoint.url)
        depth = case.window if case.best else self.pipeline(case)
        clients = case.producers if case.best else self.clients(case)
        stream = f"mqbench-crosscheck-{uuid.uuid4().hex[:8]}"
        argv = [exe, "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 6379), "-c", str(clients),
                "-n", str(FOREVER), "-P", str(depth), "XADD", stream, "*", "v", "x" * case.size]
        if url.password:
            argv[1:1] = ["-a", url.password]
        try:
            with Tools(workdir, self.name) as tools:
                tools.measure_broker(broker_pids)
                proc = tools.start("tool", argv)
                tools.hold([proc], self.ramp + case.seconds + 2 * TICK_S)
                tools.stop(proc)
                cpu = tools.cpu_uses([proc])
        finally:
            _delete(endpoint.url, stream)
        ticks = parse_ticks(proc.output())
        rate, steady = intervals_rate([(t, rps) for t, rps, _ in ticks], self.ramp, self.ramp + case.seconds)
        if not steady:
            raise ToolFailed(f"{self.name} printed no rate after its {self.ramp:.0f} s ramp; its last output: "
                             f"{proc.tail() or '(none)'}")
        kept = [avg for t, _, avg in ticks if self.ramp < t <= self.ramp + case.seconds and avg == avg]
        latency = f"; mean request round trip {sum(kept) / len(kept):.2f} ms" if kept else ""
        shown = [a if a != url.password else "***" for a in argv[:-1]] + [f"<{case.size} B>"]
        return ToolResult(
            tool=self.version(), command=shown, sender_rate=rate, cpu=cpu,
            settings=f"{clients} client{'s' if clients != 1 else ''}, pipeline {depth}",
            steady_s=steady,
            note=f"XADD sender rate, mean of its quarter-second rates after a {self.ramp:g} s ramp; no consumer"
                 f"{latency}",
        )


class RedisBenchmarkUnpipelined(RedisBenchmark):
    """``redis-benchmark -P 1 XADD``: each request waits for its reply. A second reference with the row's
    settings; the tool's best is the pipelined tool's."""

    name = "redis-benchmark -P 1"

    def pipeline(self, case: CrossCase) -> int:
        return 1

    def best(self, case: CrossCase) -> CrossCase | None:
        return None


def _delete(url: str, stream: str) -> None:
    """Delete the tool's stream (it grows by every XADD); a failure to do so is not the tool's."""
    try:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=30)
        try:
            client.delete(stream)
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - the broker is torn down after the system's crosscheck anyway
        pass
