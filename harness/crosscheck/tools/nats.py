"""``nats bench`` (natscli v0.5.0, built by ``make brokers`` into ``.brokers/bin``) for Core NATS.

``nats bench sub SUBJECT --msgs n --clients consumers`` starts first, then ``nats bench pub SUBJECT --msgs n
--clients producers``, both with ``--size`` of the case, on a subject of their own. The subscriber's
figure is the receiver rate; the publisher's the sender rate. Core NATS is at-most-once and has no window,
so only the size and the counts are matched, and the tool with the row's settings is also the tool at its
best ("as is": one publisher, one subscriber, nothing to tune), one run serving both. With several clients
nats bench prints "aggregated stats": each subscriber gets every message (no queue group), so the figure
sums what the subscribers received.

nats bench counts messages, it cannot be told a time, and its figure spans its whole run (a Go program: no
warm-up to leave out). So the run is sized from the rate measured last (by a short first run when there is
none): ``seconds`` at that rate, plus a fifth; a run that still ends sooner is made again, longer. nats
bench's publisher "latency" is the duration of each publish call in the client, not a message's travel,
so it is not reported as message latency.

A JetStream variant of the nats driver is checked by its own tool (``nats bench js``), registered beside
this one: ``applies`` keeps this one to Core NATS variants.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from harness.brokers._jars import cache_dir
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Measured, Step, executable, run_measured
from harness.drivers.base import BrokerEndpoint
from harness.runfolder import redact

VERSION = "v0.5.0"  # the Makefile's NATSCLI pin
MISSING = "nats bench (natscli) is not built: run make brokers (go install github.com/nats-io/natscli/nats@v0.5.0)"
SUBSCRIBE_SETTLE = 0.5  # seconds for the subscriber to subscribe before the publisher starts
PROBE_MSGS = 100_000  # the first run, whose rate sizes the next
MARGIN = 1.2  # a sized run aims this much beyond ``seconds``
ATTEMPTS = 3  # runs of a repetition, the probe included, before it gives up being long enough
_STATS = re.compile(r"(publisher|subscriber) (?:aggregated )?stats: ([\d,.]+) msgs/sec")


def parse_stats(text: str) -> dict[str, float]:
    """``publisher`` / ``subscriber`` msg/s from nats bench's closing "stats:" lines."""
    found = {kind: float(value.replace(",", "")) for kind, value in _STATS.findall(text)}
    if not found:
        raise ValueError("no 'stats: N msgs/sec' line")
    return found


def sized(rate: float, seconds: float) -> int:
    """Messages that last ``seconds`` (and a margin) at ``rate`` msgs/s."""
    return max(PROBE_MSGS, int(rate * seconds * MARGIN))


def _nats() -> str | None:
    return executable("nats", cache_dir() / "bin")


class NatsBench(Tool):
    system = "nats"
    name = "nats bench"
    ramp = 0.0  # its figure is its whole run

    def __init__(self) -> None:
        self._rate: dict[tuple[object, ...], float] = {}  # subscriber msg/s measured last, per case

    def applies(self, case: CrossCase) -> bool:
        return not case.options.get("jetstream")

    def best(self, case: CrossCase) -> CrossCase | None:
        return case  # as is: the row's settings are all it has

    def missing(self) -> str | None:
        return None if _nats() else MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe = _nats()
        if exe is None:
            raise ToolMissing(MISSING)
        key = case.key()
        for attempt in range(ATTEMPTS):
            messages = sized(self._rate[key], case.seconds) if key in self._rate else PROBE_MSGS
            measured, received, sent = self._once(exe, case, endpoint, workdir / f"run-{attempt}", broker_pids,
                                                  messages)
            self._rate[key] = received
            if messages / received >= case.seconds:
                break
        else:
            raise ToolFailed(f"nats bench: {ATTEMPTS} runs stayed shorter than {case.seconds:g} s; the last sent "
                             f"{messages:,} messages at {received:,.0f} msg/s")
        return ToolResult(
            tool=f"nats bench (natscli {VERSION})", command=[redact(a) for a in measured.done[-1].argv],
            receiver_rate=received, sender_rate=sent, cpu=measured.cpu(),
            settings=f"{case.producers} publisher(s), {case.consumers} subscriber(s), {messages:,} messages",
            steady_s=messages / received,
            note="Core NATS, at-most-once; pub and sub together, the whole run; publish-call times are not message "
                 "latency",
        )

    def _once(self, exe: str, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int],
              messages: int) -> tuple[Measured, float, float]:
        subject = f"mqbench.crosscheck.{uuid.uuid4().hex[:8]}"
        common = ["--msgs", str(messages), "--size", f"{case.size}B", "--no-progress"]
        sub = [exe, "-s", endpoint.url, "bench", "sub", subject, *common, "--clients", str(case.consumers)]
        pub = [exe, "-s", endpoint.url, "bench", "pub", subject, *common, "--clients", str(case.producers)]
        timeout = 60.0 + messages / 10_000  # ten thousand messages a second at the very least
        measured = run_measured(self.name, [Step("consumer", sub), Step("producer", pub)], workdir, broker_pids,
                                timeout=timeout, settle=SUBSCRIBE_SETTLE)
        try:
            received = parse_stats(measured.output("consumer"))["subscriber"]
            sent = parse_stats(measured.output("producer"))["publisher"]
        except (ValueError, KeyError) as exc:
            raise ToolFailed(f"nats bench printed no rate ({exc})") from None
        if received <= 0:
            raise ToolFailed("nats bench's subscriber received nothing")
        return measured, received, sent
