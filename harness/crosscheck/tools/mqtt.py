"""Mosquitto's own clients as the MQTT reference: ``mosquitto_sub`` beside ``mosquitto_pub -l``.

No Go MQTT benchmark is served by the Go module proxy here (github.com/krylovsk/mqtt-benchmark and
github.com/inovex/mqtt-stresser both answer "not available"), so the row uses Debian's
``mosquitto-clients``: one subscriber per consumer (``-F %U``: it prints each arrival's wall-clock stamp),
started first and ending itself after the run (``-W``), then one publisher per producer publishing lines of
``size - 1`` bytes (+ newline) from ``yes`` as fast as its socket takes them (``-l``: one message per line),
stopped after the ramp and the measured seconds. QoS is the harness variant's. Each subscriber gets every
message (no shared subscription), so with several consumers the tool's case is fan-out, not a queue.
Receiver rate = arrivals within the measured window over its length (per subscriber, averaged). No sender
rate (a publisher fed by ``yes`` is stopped, not finished, and counts nothing) and no latency (the payload
carries no send stamp). The clients have nothing to tune beyond QoS, which is the row's guarantee: the tool with the row's
settings is also its best, one run serving both. The subscriber prints every message, so its figure is a
floor for what the broker serves.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Tools, executable
from harness.crosscheck.tools._steady import events_rate
from harness.drivers.base import BrokerEndpoint

MISSING = "mosquitto_pub/mosquitto_sub are not installed: apt-get install mosquitto-clients (or run make brokers)"
SUBSCRIBE_SETTLE = 0.5  # seconds for the subscribers to subscribe before the publishers start
SUBSCRIBER_GRACE_S = 3  # the subscribers end themselves this long after the publishers are stopped
TIMED_OUT = 27  # mosquitto_sub's exit status when -W ends it (MOSQ_ERR_TIMEOUT)


def arrival_stamps(text: str) -> list[float]:
    """The arrival stamps (seconds since the epoch) of ``mosquitto_sub -F %U`` lines, in order."""
    return [float(line) for line in text.split() if line.replace(".", "", 1).isdigit()]


class MosquittoClients(Tool):
    system = "mqtt"
    name = "mosquitto_pub/sub"
    ramp = 1.0

    def best(self, case: CrossCase) -> CrossCase | None:
        return case

    def missing(self) -> str | None:
        return None if executable("mosquitto_pub") and executable("mosquitto_sub") else MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        pub, sub = executable("mosquitto_pub"), executable("mosquitto_sub")
        yes = executable("yes")
        if pub is None or sub is None or yes is None:
            raise ToolMissing(MISSING)
        url = urlsplit(endpoint.url)
        where = ["-h", url.hostname or "127.0.0.1", "-p", str(url.port or 1883)]
        qos = str(int(case.options.get("qos", 0)))
        topic = f"mqbench/crosscheck/{uuid.uuid4().hex[:8]}"
        publishing = self.ramp + case.seconds + 1.0
        subscribed = int(SUBSCRIBE_SETTLE + publishing + SUBSCRIBER_GRACE_S + 1)
        line = "x" * max(1, case.size - 1)
        publish = ["sh", "-c", f"{shlex.quote(yes)} {line} | exec "
                   f"{shlex.join([pub, *where, '-t', topic, '-q', qos, '-l'])}"]
        with Tools(workdir, self.name) as tools:
            tools.measure_broker(broker_pids)
            consumers = [tools.start(f"consumer-{c}", [sub, *where, "-t", topic, "-q", qos, "-F", "%U",
                                                       "-W", str(subscribed)]) for c in range(case.consumers)]
            time.sleep(SUBSCRIBE_SETTLE)
            producers = [tools.start(f"producer-{p}", publish) for p in range(case.producers)]
            tools.hold(producers, publishing)
            for proc in producers:
                tools.stop(proc)
            deadline = time.monotonic() + subscribed + 30  # -W: they end by themselves, "Timed out"
            while any(tools.poll(proc) is None for proc in consumers) and time.monotonic() < deadline:
                time.sleep(0.1)
            for proc in consumers:
                if tools.poll(proc) not in (0, TIMED_OUT):
                    raise tools.failed(proc) if proc.status is not None else ToolFailed(
                        f"mosquitto_sub did not end {subscribed} s after it started, as -W tells it to")
            cpu = tools.cpu_uses([*producers, *consumers])
        figures = []
        for proc in consumers:
            stamps = arrival_stamps(proc.output())
            if len(stamps) < 2:
                raise ToolFailed(f"mosquitto_sub received {len(stamps)} messages")
            figures.append(events_rate(stamps, stamps[0] + self.ramp, stamps[0] + self.ramp + case.seconds))
        if any(not steady for _, steady in figures):
            raise ToolFailed(f"mosquitto_sub's arrivals did not last {self.ramp + case.seconds:g} s")
        return ToolResult(
            tool=f"mosquitto clients {self.version()}".strip(),
            command=[*consumers[0].argv, "|", *producers[0].argv],
            receiver_rate=sum(r for r, _ in figures) / len(figures), cpu=cpu,
            settings=f"QoS {qos}, {case.producers} publisher(s), {case.consumers} subscriber(s)",
            steady_s=min(s for _, s in figures),
            note=(f"QoS {qos}; mosquitto_pub -l fed by yes, mosquitto_sub -F %U; receiver rate per subscriber, "
                  f"arrivals after a {self.ramp:g} s ramp; no latency"),
        )

    def version(self) -> str:
        exe = executable("mosquitto_pub") or "mosquitto_pub"
        try:
            out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
        except OSError:
            return ""
        found = re.search(r"version ([\d.]+)", out)
        return found.group(1) if found else ""
