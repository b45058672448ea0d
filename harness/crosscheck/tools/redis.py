"""redis-benchmark (Debian's ``redis-tools``) running XADD against the harness's Redis instance.

One client (``-c 1``) per producer of the case, each XADD carrying one field of ``size`` bytes, as the
harness's Redis driver writes them. Two rows: unpipelined (``-P 1``, each XADD waits for its reply) and
pipelined ``-P window`` (the harness driver's ``pipeline`` option). redis-benchmark has no consumer, so its
rate is a sender rate, and its latency is the round trip of one request (sent -> reply read), which with
``-P`` includes the wait behind the rest of the batch.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Step, executable, run_measured
from harness.drivers.base import BrokerEndpoint

MISSING = "redis-benchmark is not installed: apt-get install redis-tools (or run make brokers)"


def parse_csv(text: str) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) from ``redis-benchmark --csv`` output (its one result row)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    if not rows or "rps" not in rows[-1]:
        raise ValueError("no result row in redis-benchmark's CSV output")
    row = rows[-1]
    return float(row["rps"]), float(row["p50_latency_ms"]), float(row["p99_latency_ms"])


class RedisBenchmark(Tool):
    """``redis-benchmark -P window XADD``: pipelined as deep as the harness's window."""

    system = "redis"
    name = "redis-benchmark -P window"

    def pipeline(self, case: CrossCase) -> int:
        return case.window

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
        depth = self.pipeline(case)
        argv = [exe, "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 6379), "-c", str(case.producers),
                "-n", str(case.messages * case.producers), "-P", str(depth), "--csv",
                "XADD", f"mqbench-crosscheck-{depth}", "*", "v", "x" * case.size]
        if url.password:
            argv[1:1] = ["-a", url.password]
        measured = run_measured(self.name, [Step("tool", argv)], workdir, broker_pids, timeout=300)
        text = measured.output("tool")
        try:
            rps, p50, p99 = parse_csv(text)
        except (ValueError, KeyError) as exc:
            raise ToolFailed(f"{self.name} printed no rate ({exc})") from None
        shown = [a if a != url.password else "***" for a in argv[:-1]] + [f"<{case.size} B>"]
        return ToolResult(
            tool=self.version(), command=shown, sender_rate=rps, latency_p50_us=p50 * 1000.0,
            latency_p99_us=p99 * 1000.0 if not math.isnan(p99) else math.nan, latency_kind="round trip",
            cpu=measured.cpu(),
            note=f"XADD sender rate, {case.producers} client(s), pipeline {depth}; no consumer",
        )


class RedisBenchmarkUnpipelined(RedisBenchmark):
    """``redis-benchmark -P 1 XADD``: each request waits for its reply."""

    name = "redis-benchmark -P 1"

    def pipeline(self, case: CrossCase) -> int:
        return 1
