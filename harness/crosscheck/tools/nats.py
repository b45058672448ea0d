"""``nats bench`` (natscli v0.5.0, built by ``make brokers`` into ``.brokers/bin``) for Core NATS and, for a
JetStream variant (driver option ``jetstream``), in its JetStream mode.

Core NATS: ``nats bench sub SUBJECT --msgs n --clients consumers`` starts first, then ``nats bench pub SUBJECT
--msgs n --clients producers``, both with ``--size`` of the case, on a subject of their own. The subscriber's
figure is the receiver rate; the publisher's the sender rate. Core NATS is at-most-once and has no window,
so only the size and the counts are matched. With several clients nats bench prints "aggregated stats": each
subscriber gets every message (no queue group), so the figure sums what the subscribers received.

JetStream: a stream of its own (the variant's storage, the endpoint's replicas) is created first over the
NATS protocol, then ``nats bench js fetch`` (its durable pull consumer, explicit acks, ``--batch`` = the
variant's ``fetch``; several clients share the consumer, as the harness's queue consumers do) starts, then
``nats bench js pub async`` (``--batch`` = the variant's ``window``: that many publishes, then it waits for
their acks). The stream is deleted afterwards.

Either way the tool with the row's settings is also the tool at its best ("as is": nothing to tune beyond
what the row sets), one run serving both. nats bench counts messages, it cannot be told a time, and its
figure spans its whole run (a Go program: no warm-up to leave out). So the run is sized from the rate
measured last (by a short first run when there is none): ``seconds`` at that rate, plus a fifth; a run that
still ends sooner is made again, longer. nats bench's publisher "latency" is the duration of each publish
call in the client, not a message's travel, so it is not reported as message latency.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from harness.brokers._base import ProbeError
from harness.brokers.nats import jetstream_request, node_urls
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Measured, Step, built_tool, run_measured
from harness.drivers.base import BrokerEndpoint
from harness.runfolder import redact

VERSION = "v0.5.0"  # the Makefile's NATSCLI pin
MISSING = "nats bench (natscli) is not built: run make brokers (go install github.com/nats-io/natscli/nats@v0.5.0)"
SUBSCRIBE_SETTLE = 0.5  # seconds for the subscriber to subscribe before the publisher starts
PROBE_MSGS = 100_000  # the first run, whose rate sizes the next
MARGIN = 1.2  # a sized run aims this much beyond ``seconds``
ATTEMPTS = 3  # runs of a repetition, the probe included, before it gives up being long enough
# "... publisher stats:", "... subscriber aggregated stats:", "... durable consumer (fetch) stats:"
_STATS = re.compile(r"(publisher|subscriber|consumer \(fetch\)) (?:aggregated )?stats: ([\d,.]+) msgs/sec")
STREAM_TIMEOUT = 10.0  # seconds for the stream's creation or deletion


def parse_stats(text: str) -> dict[str, float]:
    """``publisher`` / ``subscriber`` msg/s from nats bench's closing "stats:" lines (a JetStream
    consumer's figure counts as the subscriber's)."""
    found = {("publisher" if kind == "publisher" else "subscriber"): float(value.replace(",", ""))
             for kind, value in _STATS.findall(text)}
    if not found:
        raise ValueError("no 'stats: N msgs/sec' line")
    return found


def sized(rate: float, seconds: float) -> int:
    """Messages that last ``seconds`` (and a margin) at ``rate`` msgs/s."""
    return max(PROBE_MSGS, int(rate * seconds * MARGIN))


class NatsBench(Tool):
    system = "nats"
    name = "nats bench"
    ramp = 0.0  # its figure is its whole run

    def __init__(self) -> None:
        self._rate: dict[tuple[object, ...], float] = {}  # subscriber msg/s measured last, per case

    def best(self, case: CrossCase) -> CrossCase | None:
        return case  # as is: the row's settings are all it has

    def missing(self) -> str | None:
        return None if built_tool("nats") else MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe = built_tool("nats")
        if exe is None:
            raise ToolMissing(MISSING)
        key = case.key()
        for attempt in range(ATTEMPTS):
            messages = sized(self._rate[key], case.seconds) if key in self._rate else PROBE_MSGS
            measured, received, sent, note = self._once(exe, case, endpoint, workdir / f"run-{attempt}",
                                                        broker_pids, messages)
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
            steady_s=messages / received, note=note,
        )

    def _once(self, exe: str, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int],
              messages: int) -> tuple[Measured, float, float, str]:
        """One run of ``messages`` in all: what it measured, the receiver and sender rates, and its note."""
        if case.options.get("jetstream"):
            return self._jetstream(exe, case, endpoint, workdir, broker_pids, messages)
        subject = f"mqbench.crosscheck.{uuid.uuid4().hex[:8]}"
        common = ["--msgs", str(messages), "--size", f"{case.size}B", "--no-progress"]
        sub = [exe, "-s", endpoint.url, "bench", "sub", subject, *common, "--clients", str(case.consumers)]
        pub = [exe, "-s", endpoint.url, "bench", "pub", subject, *common, "--clients", str(case.producers)]
        return self._measure(sub, pub, workdir, broker_pids, messages,
                             "Core NATS, at-most-once; pub and sub together, the whole run; publish-call times are "
                             "not message latency")

    def _jetstream(self, exe: str, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int],
                   messages: int) -> tuple[Measured, float, float, str]:
        stream = f"mqbench-crosscheck-{uuid.uuid4().hex[:8]}"
        storage, replicas = str(case.options.get("storage", "file")), endpoint.shape.replicas
        urls = list(endpoint.nodes) or node_urls(endpoint.url)
        config = {"name": stream, "subjects": [stream], "storage": storage, "num_replicas": replicas}
        try:
            answer, _ = jetstream_request(urls, f"$JS.API.STREAM.CREATE.{stream}", json.dumps(config).encode(),
                                          STREAM_TIMEOUT)
        except (OSError, ProbeError) as exc:
            raise ToolFailed(f"nats bench: the stream {stream} could not be created: {exc}") from None
        if "error" in answer:
            raise ToolFailed(f"nats bench: the stream {stream} could not be created: {answer['error']}")
        try:
            common = ["--msgs", str(messages), "--size", f"{case.size}B", "--no-progress", "--stream", stream]
            fetch = [exe, "-s", endpoint.url, "bench", "js", "fetch", *common, "--clients", str(case.consumers),
                     "--batch", str(case.options.get("fetch", 500)), "--acks", "explicit"]
            pub = [exe, "-s", endpoint.url, "bench", "js", "pub", "async", stream, *common,
                   "--clients", str(case.producers), "--batch", str(case.options.get("window", case.window))]
            return self._measure(fetch, pub, workdir, broker_pids, messages,
                                 f"JetStream, {storage} storage, {replicas} replica{'s' if replicas > 1 else ''}: "
                                 "async publish acked per batch, fetch with explicit acks, together, the whole run")
        finally:
            try:
                jetstream_request(urls, f"$JS.API.STREAM.DELETE.{stream}", b"", STREAM_TIMEOUT)
            except (OSError, ProbeError):
                pass  # the broker is going away with the run anyway

    def _measure(self, consumer: list[str], producer: list[str], workdir: Path, broker_pids: list[int],
                 messages: int, note: str) -> tuple[Measured, float, float, str]:
        timeout = 60.0 + messages / 10_000  # ten thousand messages a second at the very least
        measured = run_measured(self.name, [Step("consumer", consumer), Step("producer", producer)], workdir,
                                broker_pids, timeout=timeout, settle=SUBSCRIBE_SETTLE)
        try:
            received = parse_stats(measured.output("consumer"))["subscriber"]
            sent = parse_stats(measured.output("producer"))["publisher"]
        except (ValueError, KeyError) as exc:
            raise ToolFailed(f"nats bench printed no rate ({exc})") from None
        if received <= 0:
            raise ToolFailed("nats bench's subscriber received nothing")
        return measured, received, sent, note
