"""MQTT references: Mosquitto's own clients with the row's settings, and our Paho client at its best.

Mosquitto ships no benchmark. ``MosquittoClients`` is ``mosquitto_sub`` beside ``mosquitto_pub -l`` (Debian's
``mosquitto-clients``): one subscriber per consumer (``-F %U``: it prints each arrival's wall-clock stamp),
started first and ending itself after the run (``-W``), then one publisher per producer publishing lines of
``size - 1`` bytes (+ newline) from ``yes`` as fast as its socket takes them (``-l``: one message per line),
stopped after the ramp and the measured seconds. QoS is the harness variant's. Each subscriber gets every
message (no shared subscription), so with several consumers the tool's case is fan-out, not a queue.
Receiver rate = arrivals within the measured window over its length (per subscriber, averaged). No sender
rate (a publisher fed by ``yes`` is stopped, not finished, and counts nothing) and no latency (the payload
carries no send stamp). The subscriber prints every message, so its figure is a floor for what the broker
serves: it varied from 4.7k to 76k msg/s between repetitions of one run here.

``PahoBench`` is ``tools/mqttbench`` (Eclipse Paho for Go, built into ``.brokers/bin`` by ``make brokers``;
no Go MQTT benchmark is served by the module proxy here: github.com/krylovsk/mqtt-benchmark and
github.com/inovex/mqtt-stresser answer "not available"), the design of mqtt-benchmark: publishers publishing
as fast as the broker takes them with up to ``window`` publishes unconfirmed, subscribers that count and print
their counts every 50 ms. It runs with the row's settings and at its best (the row's QoS and shape, 1,000
publishes in flight), and is the MQTT row's reference at its best. Receiver rate: each subscriber's count
growth over the measured window (averaged); sender rate: the publishers' messages over their run.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.tools._exec import Tools, built_tool, executable
from harness.crosscheck.tools._steady import counts_rate, events_rate
from harness.drivers.base import BrokerEndpoint

MISSING = "mosquitto_pub/mosquitto_sub are not installed: apt-get install mosquitto-clients (or run make brokers)"
MISSING_PAHO = "tools/mqttbench is not built: run make brokers (it needs Go: apt-get install golang-go)"
SUBSCRIBE_SETTLE = 0.5  # seconds for the subscribers to subscribe before the publishers start
SUBSCRIBER_GRACE_S = 3  # the subscribers end themselves this long after the publishers are stopped
TIMED_OUT = 27  # mosquitto_sub's exit status when -W ends it (MOSQ_ERR_TIMEOUT)
BEST_WINDOW = 1000  # publishes in flight unconfirmed per publisher, at its best
PAHO_GRACE_S = 2.0  # the subscribers stay this long after the publishers end


def broker_address(endpoint: BrokerEndpoint) -> tuple[str, int]:
    """The MQTT broker's host and port, from its endpoint URL."""
    url = urlsplit(endpoint.url)
    return url.hostname or "127.0.0.1", url.port or 1883


def arrival_stamps(text: str) -> list[float]:
    """The arrival stamps (seconds since the epoch) of ``mosquitto_sub -F %U`` lines, in order."""
    return [float(line) for line in text.split() if line.replace(".", "", 1).isdigit()]


def paho_counts(text: str) -> tuple[dict[int, list[tuple[float, float]]], list[tuple[int, float]]]:
    """From ``mqttbench``'s output: each subscriber's (time, messages so far) points, in order, and each
    publisher's (messages, seconds)."""
    subs: dict[int, list[tuple[float, float]]] = {}
    pubs: list[tuple[int, float]] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "sub":
            subs.setdefault(int(parts[1]), []).append((float(parts[2]), float(parts[3])))
        elif len(parts) == 4 and parts[0] == "pub":
            pubs.append((int(parts[2]), float(parts[3])))
    return subs, pubs


class MosquittoClients(Tool):
    system = "mqtt"
    name = "mosquitto_pub/sub"
    ramp = 1.0

    def best(self, case: CrossCase) -> CrossCase | None:
        return None  # it prints every message: a floor, not the broker's capacity (PahoBench is the best)

    def missing(self) -> str | None:
        return None if executable("mosquitto_pub") and executable("mosquitto_sub") else MISSING

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        pub, sub = executable("mosquitto_pub"), executable("mosquitto_sub")
        yes = executable("yes")
        if pub is None or sub is None or yes is None:
            raise ToolMissing(MISSING)
        host, port = broker_address(endpoint)
        where = ["-h", host, "-p", str(port)]
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


class PahoBench(Tool):
    system = "mqtt"
    name = "mqttbench (Paho Go)"
    ramp = 1.0

    def best(self, case: CrossCase) -> CrossCase | None:
        # the row's QoS and shape with 1,000 publishes in flight: when the row already has that, one run serves both
        return dataclasses.replace(case, window=BEST_WINDOW)

    def missing(self) -> str | None:
        return None if built_tool("mqttbench") else MISSING_PAHO

    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        exe = built_tool("mqttbench")
        if exe is None:
            raise ToolMissing(MISSING_PAHO)
        host, port = broker_address(endpoint)
        qos = int(case.options.get("qos", 0))
        publishing = self.ramp + case.seconds + 1.0
        argv = [exe, "-broker", f"tcp://{host}:{port}",
                "-topic", f"mqbench/crosscheck/{uuid.uuid4().hex[:8]}", "-qos", str(qos), "-size", str(case.size),
                "-pubs", str(case.producers), "-subs", str(case.consumers), "-seconds", f"{publishing:g}",
                "-window", str(case.window), "-grace", f"{PAHO_GRACE_S:g}"]
        with Tools(workdir, self.name) as tools:
            tools.measure_broker(broker_pids)
            proc = tools.start("tool", argv)
            tools.wait(proc, publishing + PAHO_GRACE_S + 60)  # + connecting, and a broker slow to confirm
            cpu = tools.cpu_uses([proc])
        subs, pubs = paho_counts(proc.output())
        if len(subs) != case.consumers or any(points[-1][1] < 2 for points in subs.values()):
            raise ToolFailed(f"mqttbench: a subscriber received fewer than 2 messages ({proc.output()[-300:]!r})")
        figures = []
        for points in subs.values():
            first = next(t for t, n in points if n > 0)  # within 50 ms of the first arrival
            figures.append(counts_rate(points, first + self.ramp, first + self.ramp + case.seconds))
        if any(not steady for _, steady in figures):
            raise ToolFailed(f"mqttbench's subscribers did not receive for {self.ramp + case.seconds:g} s")
        return ToolResult(
            tool=self.name, command=argv,
            receiver_rate=sum(r for r, _ in figures) / len(figures),
            sender_rate=sum(n / s for n, s in pubs) if pubs and all(s > 0 for _, s in pubs) else math.nan,
            cpu=cpu,
            settings=f"QoS {qos}, {case.producers} publisher(s), {case.consumers} subscriber(s), "
                     f"{case.window} publishes in flight",
            steady_s=min(s for _, s in figures),
            note=(f"QoS {qos}; receiver rate per subscriber from its counts (every 50 ms) after a {self.ramp:g} s "
                  "ramp, averaged; sender rate over the publishers' whole run; no latency"),
        )
