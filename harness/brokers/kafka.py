"""Apache Kafka 4.x in KRaft mode from the Maven Central jars that `make brokers` fetches: one combined
broker+controller node, here or in an image (the pinned apache/kafka, or one built with the same jars), or a
cluster of such nodes (``prepare_cluster``) whose controllers form one static Raft quorum
(``controller.quorum.voters``).

The Kafka-protocol readiness probe (ApiVersions) lives here and is shared with Tansu (``tansu.py``); the
cluster's readiness and the leader of a partition come from Metadata requests (``_kafka_wire.py``).
"""

from __future__ import annotations

import base64
import shlex
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.brokers import _jars, _kafka_wire
from harness.brokers._base import ProbeError, Provisioner, host_port
from harness.brokers._ports import LOOPBACK, free_ports
from harness.brokers._spec import ClusterLaunch, Command, Launch, NodeHost, NodeLaunch, PinnedImage
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError

if TYPE_CHECKING:
    from harness.brokers._provision import Placement

IMAGE = f"apache/kafka:{_jars.pinned_version('kafka')}"  # the same release as the jars
# Sized for a 2-core machine: a fixed heap (Kafka keeps data in the page cache, not the heap), G1 with short
# pauses as Kafka's own start script sets it. One node gets 768 MiB; each node of a cluster 512 MiB, so that
# three of them, the clients and the harness share two cores and leave the page cache room.
GC = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent")
HEAP = ("-Xms768m", "-Xmx768m", *GC)
NODE_HEAP = ("-Xms512m", "-Xmx512m", *GC)
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
        _kafka_wire.api_versions(*host_port(url.split(",")[0], 9092), timeout)
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
    max_nodes = 5  # a Raft quorum of 3 or 5 controllers; more would only load two cores
    # Three nodes start together (six JVMs with the storage tool's): 20 s on a quiet machine, 80 s seen at a
    # load average of 30.
    cluster_ready_timeout = 240.0

    image = PinnedImage(IMAGE, {"binary": "java", "lib": "/opt/kafka/libs"})

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        port, controller_port = ports
        props = workdir / "server.properties"
        props.write_text(server_properties(port, controller_port, workdir / "data"))
        log4j = workdir / "log4j2.properties"
        log4j.write_text(LOG4J2)
        return (node_command(binary, props, log4j, new_cluster_id(), HEAP, self.jar_path()),)

    def prepare_cluster(self, workdir: Path, shape: ClusterShape, hosts: Sequence[NodeHost]) -> ClusterLaunch:
        """``shape.nodes`` combined broker+controller nodes, node i with ``node.id`` i on ``hosts[i].address``,
        all formatted with one cluster id; topics default to ``shape.replicas`` replicas and
        ``min.insync.replicas`` ``shape.min_insync``, and no out-of-sync replica is ever elected leader."""
        binary = self.find_binary()
        if binary is None:
            raise OSError(self.process_unavailable_reason())
        if not 1 <= shape.min_insync <= shape.replicas <= shape.nodes:
            raise DriverError(f"a kafka cluster of {shape.nodes} nodes cannot keep {shape.replicas} replicas with "
                              f"min.insync.replicas {shape.min_insync}: it needs 1 <= min in-sync <= replicas <= nodes")
        ports = free_ports(2 * shape.nodes)  # clients, controller: distinct even where nodes share an address
        addresses = [hosts[i].address for i in range(shape.nodes)]
        voters = ",".join(f"{i}@{addresses[i]}:{ports[2 * i + 1]}" for i in range(shape.nodes))
        cluster_id = new_cluster_id()
        nodes = []
        for i, address in enumerate(addresses):
            home = workdir / f"node{i}"
            home.mkdir(parents=True, exist_ok=True)
            props, log4j = home / "server.properties", home / "log4j2.properties"
            props.write_text(cluster_properties(i, address, ports[2 * i], ports[2 * i + 1], voters, shape, home / "data"))
            log4j.write_text(LOG4J2)
            nodes.append(NodeLaunch(f"node{i}", (node_command(binary, props, log4j, cluster_id, NODE_HEAP),),
                                    f"kafka://{address}:{ports[2 * i]}", address))
        return ClusterLaunch(
            nodes=tuple(nodes),
            url="kafka://" + ",".join(n.url.removeprefix("kafka://") for n in nodes),  # the bootstrap list
            workdir=workdir,
            ready_timeout=self.cluster_ready_timeout,
            stop_grace=self.stop_grace,
            version=_jars.pinned_version("kafka"),
        )

    def cluster_ready(self, launch: ClusterLaunch, timeout: float) -> str:
        """Every node answers Metadata and lists every node as a registered broker: a broker is listed only
        once the active controller has unfenced it, so a controller is elected too."""
        wanted = set(range(len(launch.nodes)))
        for node in launch.nodes:
            meta = _kafka_wire.metadata(*host_port(node.url, 9092), [], timeout)
            missing = wanted - set(meta.brokers)
            if missing:
                raise ProbeError(f"{node.name} lists brokers {sorted(meta.brokers)}, not yet {sorted(missing)}")
        return ""  # the protocol does not tell the version: ClusterLaunch.version (the jars') stands

    def leader(self, endpoint: BrokerEndpoint, resource: str) -> int:
        """The node leading partition 0 of topic ``resource``: every node is asked at once (a dead or paused
        one just does not answer within ``LEADER_TIMEOUT``), and the answer with the highest leader epoch
        wins, since a node may not have heard of the last election yet."""
        nodes = list(endpoint.nodes)

        def ask(url: str) -> _kafka_wire.Partition | None:
            try:
                meta = _kafka_wire.metadata(*host_port(url, 9092), [resource], LEADER_TIMEOUT)
            except (OSError, ProbeError):
                return None
            return meta.partitions.get((resource, 0))

        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            answers = [p for p in pool.map(ask, nodes) if p is not None and p.error == 0 and p.leader >= 0]
        if not answers:
            raise ProbeError(f"no kafka node names a leader of partition 0 of {resource!r} now")
        leader = max(answers, key=lambda p: p.epoch).leader
        if not 0 <= leader < len(nodes):
            raise ProbeError(f"kafka names broker {leader} as the leader of {resource!r}, which is no node of ours")
        return leader

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


LEADER_TIMEOUT = 2.0  # seconds a node gets to answer ``leader``'s Metadata request


def node_command(binary: str, props: Path, log4j: Path, cluster_id: str, heap: tuple[str, ...],
                 jars: str | None = None) -> Command:
    """One node: storage is formatted by the same command that then becomes the broker (exec): one process
    group to stop, and a restart (fault injection, a node fault) re-runs it harmlessly thanks to
    ``--ignore-formatted``, so the node comes back with its data and its cluster id. ``jars``: the ``-cp``
    (default: the jars here; an image's own folder when the launch is for an image)."""
    classpath = ("-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}", "-cp",
                 jars or _jars.classpath("kafka"))
    # The storage tool runs for a second: the client compiler only and the serial collector halve its CPU
    # (1.7 -> 0.8 s here), which counts when three nodes start at once on two cores.
    fmt = (binary, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *classpath, "kafka.tools.StorageTool",
           "format", "--ignore-formatted",
           "-t", cluster_id, "-c", str(props))
    broker = (binary, *heap, *classpath, "kafka.Kafka", str(props))
    return Command("kafka", ("/bin/sh", "-c", f"{shlex.join(fmt)} && exec {shlex.join(broker)}"))


def _node_settings(node_id: int, address: str, port: int, controller_port: int, voters: str, data: Path) -> dict[str, str]:
    """What every combined broker+controller node sets: its listeners on ``address``, the quorum, few threads."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{address}:{port},CONTROLLER://{address}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{address}:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Few threads for 2 cores (defaults: 3 network, 8 I/O).
        "num.network.threads": "2",
        "num.io.threads": "2",
    }


def server_properties(port: int, controller_port: int, data: Path) -> str:
    """A single combined broker+controller node, every listener and advertised address on loopback."""
    settings = _node_settings(1, LOOPBACK, port, controller_port, f"1@{LOOPBACK}:{controller_port}", data)
    # One node: every internal topic has one replica, or they are never created.
    settings.update({
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    })
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def cluster_properties(node_id: int, address: str, port: int, controller_port: int, voters: str,
                       shape: ClusterShape, data: Path) -> str:
    """Node ``node_id`` of a ``shape`` cluster whose controllers are ``voters`` (``id@host:port,...``)."""
    settings = _node_settings(node_id, address, port, controller_port, voters, data)
    internal = min(3, shape.nodes)  # Kafka's defaults (3 replicas, min ISR 2), capped by the cluster's size
    internal_isr = str(min(2, internal))
    settings.update({
        # The topics the run creates take these unless the driver says otherwise (it sets the same).
        "default.replication.factor": str(shape.replicas),
        "min.insync.replicas": str(shape.min_insync),
        "unclean.leader.election.enable": "false",  # Kafka's default, stated: acknowledged writes come first
        "offsets.topic.replication.factor": str(internal),
        "transaction.state.log.replication.factor": str(internal),
        "transaction.state.log.min.isr": internal_isr,
        "share.coordinator.state.topic.replication.factor": str(internal),
        "share.coordinator.state.topic.min.isr": internal_isr,
        "num.replica.fetchers": "1",  # Kafka's default: one fetcher thread per source broker
    })
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def new_cluster_id() -> str:
    """A random KRaft cluster id (a UUID in URL-safe base64, as ``kafka-storage random-uuid`` prints) that
    does not start with ``-``: the storage tool would take such an id for an option (1 in 64 did, failing a
    broker start in CI), which is why Kafka's own generator never makes one."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id
