"""``nats bench`` (natscli v0.5.0, built by ``make brokers`` into ``.brokers/bin``) for Core NATS.

``nats bench sub SUBJECT --msgs n --clients consumers`` starts first, then ``nats bench pub SUBJECT --msgs n
--clients producers``, both with ``--size`` of the case, on a subject of their own. The subscriber's
figure is the receiver rate; the publisher's the sender rate. Core NATS is at-most-once and has no window,
so only the size and the counts are matched. With several clients nats bench prints "aggregated stats":
each subscriber gets every message (no queue group), so the figure sums what the subscribers received. nats bench's publisher "latency" is the duration of each publish
call in the client, not a message's travel, so it is not reported as message latency.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from harness.brokers._jars import cache_dir
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Step, executable, run_measured
from harness.drivers.base import BrokerEndpoint
from harness.runfolder import redact

VERSION = "v0.5.0"  # the Makefile's NATSCLI pin
MISSING = "nats bench (natscli) is not built: run make brokers (go install github.com/nats-io/natscli/nats@v0.5.0)"
SUBSCRIBE_SETTLE = 0.5  # seconds for the subscriber to subscribe before the publisher starts
_STATS = re.compile(r"(publisher|subscriber) (?:aggregated )?stats: ([\d,.]+) msgs/sec")


def parse_stats(text: str) -> dict[str, float]:
    """``publisher`` / ``subscriber`` msg/s from nats bench's closing "stats:" lines."""
    found = {kind: float(value.replace(",", "")) for kind, value in _STATS.findall(text)}
    if not found:
        raise ValueError("no 'stats: N msgs/sec' line")
    return found


def _nats() -> str | None:
    return executable("nats", cache_dir() / "bin")


class NatsBench(Tool):
    system = "nats"
    name = "nats bench"

    def missing(self) -> str | None:
        return None if _nats() else MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe = _nats()
        if exe is None:
            raise ToolMissing(MISSING)
        subject = f"mqbench.crosscheck.{uuid.uuid4().hex[:8]}"
        common = ["--msgs", str(case.messages * case.producers), "--size", f"{case.size}B", "--no-progress"]
        sub = [exe, "-s", endpoint.url, "bench", "sub", subject, *common, "--clients", str(case.consumers)]
        pub = [exe, "-s", endpoint.url, "bench", "pub", subject, *common, "--clients", str(case.producers)]
        measured = run_measured(self.name, [Step("consumer", sub), Step("producer", pub)], workdir, broker_pids,
                                timeout=120, settle=SUBSCRIBE_SETTLE)
        try:
            received = parse_stats(measured.output("consumer"))["subscriber"]
            sent = parse_stats(measured.output("producer"))["publisher"]
        except (ValueError, KeyError) as exc:
            raise ToolFailed(f"nats bench printed no rate ({exc})") from None
        return ToolResult(
            tool=f"nats bench (natscli {VERSION})", command=[redact(a) for a in pub], receiver_rate=received,
            sender_rate=sent, cpu=measured.cpu(),
            note="Core NATS, at-most-once; pub and sub together; publish-call times are not message latency",
        )
