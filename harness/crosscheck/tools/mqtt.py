"""Mosquitto's own clients as the MQTT reference: ``mosquitto_sub -C`` beside ``mosquitto_pub -l``.

No Go MQTT benchmark is served by the Go module proxy here (github.com/krylovsk/mqtt-benchmark and
github.com/inovex/mqtt-stresser both answer "not available"), so the row uses Debian's
``mosquitto-clients``: one subscriber per consumer (``-C n -F %U``: it prints each arrival's wall-clock
stamp in ns), started first, then one publisher per producer reading ``messages`` lines of ``size - 1``
bytes (+ newline) from a file (``-l``: one message per line, as fast as the socket takes them). QoS is the
harness variant's. Each subscriber gets every message (no shared subscription), so with several consumers
the tool's case is fan-out, not a queue. Receiver rate = messages between the first and the last arrival stamp; sender rate =
messages / the publisher's lifetime (connect included). No latency: the payload carries no send stamp.
"""

from __future__ import annotations

import math
import re
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Step, executable, run_measured
from harness.drivers.base import BrokerEndpoint

MISSING = "mosquitto_pub/mosquitto_sub are not installed: apt-get install mosquitto-clients (or run make brokers)"
SUBSCRIBE_SETTLE = 0.5  # seconds for the subscribers to subscribe before the publishers start


def receiver_rate(stamps: str) -> tuple[int, float]:
    """(messages, msg/s between the first and last arrival) from ``mosquitto_sub -F %U`` lines."""
    values = [float(line) for line in stamps.split() if line.replace(".", "", 1).isdigit()]
    if len(values) < 2 or values[-1] <= values[0]:
        return len(values), math.nan
    return len(values), (len(values) - 1) / (values[-1] - values[0])


class MosquittoClients(Tool):
    system = "mqtt"
    name = "mosquitto_pub/sub"

    def missing(self) -> str | None:
        return None if executable("mosquitto_pub") and executable("mosquitto_sub") else MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        pub, sub = executable("mosquitto_pub"), executable("mosquitto_sub")
        if pub is None or sub is None:
            raise ToolMissing(MISSING)
        url = urlsplit(endpoint.url)
        where = ["-h", url.hostname or "127.0.0.1", "-p", str(url.port or 1883)]
        qos = str(int(case.options.get("qos", 0)))
        topic = f"mqbench/crosscheck/{uuid.uuid4().hex[:8]}"
        workdir.mkdir(parents=True, exist_ok=True)
        lines = workdir / "payload.txt"
        lines.write_bytes((b"x" * max(0, case.size - 1) + b"\n") * case.messages)
        expected = case.messages * case.producers
        timeout = 120.0
        steps = [Step(f"consumer-{c}", [sub, *where, "-t", topic, "-q", qos, "-C", str(expected), "-F", "%U",
                                        "-W", str(int(timeout))]) for c in range(case.consumers)]
        steps += [Step(f"producer-{p}", [pub, *where, "-t", topic, "-q", qos, "-l"], stdin=lines)
                  for p in range(case.producers)]
        measured = run_measured(self.name, steps, workdir, broker_pids, timeout=timeout, settle=SUBSCRIBE_SETTLE)
        received = [receiver_rate(f.output()) for f in measured.done if f.role.startswith("consumer")]
        if not received or any(n < expected for n, _ in received):
            raise ToolFailed(f"mosquitto_sub received {min(n for n, _ in received)} of {expected} messages")
        senders = [f for f in measured.done if f.role.startswith("producer")]
        return ToolResult(
            tool=f"mosquitto clients {self.version()}".strip(), command=[*steps[0].argv, "|", *steps[-1].argv],
            receiver_rate=sum(r for _, r in received) / len(received),
            sender_rate=sum(case.messages / f.wall_s for f in senders), cpu=measured.cpu(),
            note=f"QoS {qos}; mosquitto_pub -l, mosquitto_sub -C; receiver rate per subscriber; no latency",
        )

    def version(self) -> str:
        exe = executable("mosquitto_pub") or "mosquitto_pub"
        try:
            out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
        except OSError:
            return ""
        found = re.search(r"version ([\d.]+)", out)
        return found.group(1) if found else ""
