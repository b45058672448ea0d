"""Apache Kafka 4.x in KRaft mode: one combined broker+controller node from the Maven Central jars that
`make brokers` fetches, here or in an image (the pinned apache/kafka, or one built with the same jars).

The Kafka-protocol readiness probe (ApiVersions) lives here and is shared with Tansu (``tansu.py``).
"""

from __future__ import annotations

import base64
import shlex
import struct
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.brokers import _jars
from harness.brokers._base import ProbeError, Provisioner, host_port
from harness.brokers._ports import LOOPBACK, free_ports
from harness.brokers._spec import Command, Launch, PinnedImage
from harness.brokers._wire import connect, recv_exact

if TYPE_CHECKING:
    from harness.brokers._provision import Placement

IMAGE = f"apache/kafka:{_jars.pinned_version('kafka')}"  # the same release as the jars
API_VERSIONS = 18
# Sized for a 2-core machine: a fixed 768 MiB heap (Kafka keeps data in the page cache, not the heap), G1
# with short pauses as Kafka's own start script sets it.
HEAP = ("-Xms768m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent")
# Kafka logs through slf4j -> log4j2; everything to the console, which is our log file.
LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class KafkaProtocolProbe(Provisioner):
    """Readiness of any broker that speaks the Kafka protocol."""

    advertises_address = True  # metadata names the brokers to connect to

    def probe(self, url: str, timeout: float) -> str:
        """ApiVersions v0 request; ready when the broker answers it without an error code."""
        host, port = host_port(url.split(",")[0], 9092)
        client_id = b"mqbench-probe"
        body = struct.pack(">hhih", API_VERSIONS, 0, 1, len(client_id)) + client_id
        with connect(host, port, timeout) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            answer = recv_exact(sock, size)
        correlation, error = struct.unpack(">ih", answer[:6])
        if correlation != 1 or error != 0:
            raise ProbeError(f"ApiVersions answered with error code {error}")
        return ""  # the Kafka protocol does not tell the broker's version


class KafkaProvisioner(_jars.JarsBroker, KafkaProtocolProbe):
    system = "kafka"
    schemes = ("kafka",)
    jars, display = "kafka", "Apache Kafka"
    depth_note = (
        "the consumers read assigned partitions outside any group, so there is no consumer lag; "
        "sent - received stands in"
    )
    url_template = "kafka://{host}:{port}"
    ports = 2  # clients, controller
    ready_timeout = 120.0
    stop_grace = 20.0
    image = PinnedImage(IMAGE, {"binary": "java", "lib": "/opt/kafka/libs"})

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        port, controller_port = ports
        props = workdir / "server.properties"
        props.write_text(server_properties(port, controller_port, workdir / "data"))
        log4j = workdir / "log4j2.properties"
        log4j.write_text(LOG4J2)
        classpath = ("-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}", "-cp", self.jar_path())
        cluster_id = new_cluster_id()
        # Storage is formatted by the same command that then becomes the broker (exec): one process group
        # to stop, and a restart (fault injection) re-runs it harmlessly thanks to --ignore-formatted.
        fmt = (binary, "-Xmx256m", *classpath, "kafka.tools.StorageTool", "format", "--ignore-formatted",
               "-t", cluster_id, "-c", str(props))
        broker = (binary, *HEAP, *classpath, "kafka.Kafka", str(props))
        return (Command("kafka", ("/bin/sh", "-c", f"{shlex.join(fmt)} && exec {shlex.join(broker)}")),)

    def place(self, launch: Launch, placement: Placement) -> Launch:
        """One more listener per client host, each advertising the address of that host's own route to it
        (Kafka metadata names the broker by the listener the request came in on); the inter-broker and
        controller listeners stay as they are."""
        if placement.advertise is None:
            return launch
        props = launch.workdir / "server.properties"
        shown = host_port(launch.url, 9092)[1]
        own = dict(zip(placement.clients, free_ports(len(placement.clients)), strict=True))
        names = {client: f"CLIENT{i}" for i, client in enumerate(own)}
        added = {
            "listeners": [f"{names[c]}://{LOOPBACK}:{p}" for c, p in own.items()],
            "advertised.listeners": [f"{names[c]}://{placement.advertise(c, shown, p)}" for c, p in own.items()],
            "listener.security.protocol.map": [f"{names[c]}:PLAINTEXT" for c in own],
        }
        settings = dict(line.split("=", 1) for line in props.read_text().splitlines() if "=" in line)
        for key, values in added.items():
            settings[key] = ",".join([settings[key], *values])
        props.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return replace(launch, extra={**launch.extra, "routed": "one listener per client host"})

    def binary_version(self, binary: str) -> str:
        return _jars.pinned_version("kafka")


def server_properties(port: int, controller_port: int, data: Path) -> str:
    """A single combined broker+controller node, every listener and advertised address on loopback."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
        "listeners": f"PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "1",
        # One node: every internal topic has one replica, or they are never created.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Few threads for 2 cores (defaults: 3 network, 8 I/O).
        "num.network.threads": "2",
        "num.io.threads": "2",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def new_cluster_id() -> str:
    """A random KRaft cluster id (a UUID in URL-safe base64, as ``kafka-storage random-uuid`` prints) that
    does not start with ``-``: the storage tool would take such an id for an option (1 in 64 did, failing a
    broker start in CI), which is why Kafka's own generator never makes one."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id
