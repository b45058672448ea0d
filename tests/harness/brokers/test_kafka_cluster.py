"""Apache Kafka as a replicated cluster: the configuration of its nodes and the Metadata requests the
provisioner makes (no broker needed), then a real three-node KRaft cluster through ``provision``: it forms,
``leader`` answers and moves when the leader is killed, the node rejoins with its data; and a node fault on
the leader (kill, pause) in the middle of an ``acks: all`` flow loses no acknowledged message, through
kafka-python and confluent-kafka. Nothing of a cluster outlives its test.

The real-cluster cases need `make brokers` (the jars and a Java runtime); without them they skip, except in
CI (``CI=true``), where they fail with the reason. A cluster start costs 20-80 s on two shared cores.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.brokers import _jars, _kafka_wire, _process, broker_control, kafka, provision
from harness.brokers._base import ProbeError
from harness.brokers._cluster import ClusterControl
from harness.brokers._spec import NodeHost
from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError, Pattern
from harness.drivers.kafka import topic_replication
from tests.harness.drivers.conformance import require_backend, topology
from tests.harness.drivers.node_faults import check_no_acknowledged_loss, kill, pause, run_node_fault
from tests.harness.runner.test_jvm_worker import need_jvm

SHAPE = ClusterShape(nodes=3, replicas=3, min_insync=2)

# -- configuration (no broker) -------------------------------------------------------------------------


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.fixture
def jars(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provisioner that believes Java and the jars are here (nothing is started by these tests)."""
    monkeypatch.setattr(kafka.KafkaProvisioner, "find_binary", lambda self: "/usr/bin/java")
    monkeypatch.setattr(_jars, "classpath", lambda name: "/jars/*")


def test_a_cluster_is_one_quorum_of_combined_nodes_each_on_its_hosts_address(tmp_path: Path, jars: None) -> None:
    hosts = [NodeHost(f"10.7.0.{i + 2}", f"h{i}") for i in range(3)]
    launch = kafka.KafkaProvisioner().prepare_cluster(tmp_path, SHAPE, hosts)
    assert [n.name for n in launch.nodes] == ["node0", "node1", "node2"]
    props = [_props((tmp_path / f"node{i}" / "server.properties").read_text()) for i in range(3)]
    voters = props[0]["controller.quorum.voters"].split(",")
    assert [v.split("@")[0] for v in voters] == ["0", "1", "2"]
    for i, (node, p) in enumerate(zip(launch.nodes, props, strict=True)):
        address = hosts[i].address
        client_port = int(node.url.rsplit(":", 1)[1])
        assert node.address == address and node.url == f"kafka://{address}:{client_port}"
        assert p["node.id"] == str(i) and p["process.roles"] == "broker,controller"
        assert p["controller.quorum.voters"] == props[0]["controller.quorum.voters"]
        assert voters[i].startswith(f"{i}@{address}:")
        controller_port = int(voters[i].rsplit(":", 1)[1])
        assert p["listeners"] == f"PLAINTEXT://{address}:{client_port},CONTROLLER://{address}:{controller_port}"
        assert p["advertised.listeners"] == f"PLAINTEXT://{address}:{client_port}"
        assert p["log.dirs"] == str(tmp_path / f"node{i}" / "data")
        assert (p["default.replication.factor"], p["min.insync.replicas"]) == ("3", "2")
        assert p["unclean.leader.election.enable"] == "false"
        for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                    "share.coordinator.state.topic.replication.factor"):
            assert p[key] == "3", key
        for key in ("transaction.state.log.min.isr", "share.coordinator.state.topic.min.isr"):
            assert p[key] == "2", key
    ports = [int(v.rsplit(":", 1)[1]) for v in voters] + [int(n.url.rsplit(":", 1)[1]) for n in launch.nodes]
    assert len(set(ports)) == 6, "every node's two ports are distinct from every other's"
    assert launch.url == "kafka://" + ",".join(n.url.removeprefix("kafka://") for n in launch.nodes)
    assert launch.version == _jars.pinned_version("kafka")


def test_every_node_is_formatted_with_one_cluster_id_and_a_restart_does_not_reformat(tmp_path: Path, jars: None) -> None:
    launch = kafka.KafkaProvisioner().prepare_cluster(tmp_path, SHAPE, [NodeHost()] * 3)
    scripts = [node.commands[-1].argv[-1] for node in launch.nodes]
    ids = {script.split(" -t ", 1)[1].split()[0] for script in scripts}
    assert len(ids) == 1, "one cluster id on every node"
    for script in scripts:
        fmt, broker = script.split(" && exec ")
        assert "StorageTool format --ignore-formatted" in fmt  # a restart re-runs it and keeps the data
        assert "-Xmx512m" in broker and "kafka.Kafka" in broker
    assert all(node.address == "127.0.0.1" for node in launch.nodes)


def test_internal_topics_never_ask_for_more_replicas_than_nodes(tmp_path: Path) -> None:
    p = _props(kafka.cluster_properties(0, "127.0.0.1", 1, 2, "0@127.0.0.1:2,1@127.0.0.1:4", ClusterShape(2, 2, 1),
                                        tmp_path))
    assert p["offsets.topic.replication.factor"] == "2" and p["transaction.state.log.min.isr"] == "2"
    assert (p["default.replication.factor"], p["min.insync.replicas"]) == ("2", "1")


def test_a_shape_kafka_cannot_keep_is_refused_in_one_sentence(tmp_path: Path, jars: None) -> None:
    for shape in (ClusterShape(3, 4, 2), ClusterShape(3, 3, 4), ClusterShape(3, 3, 0)):
        with pytest.raises(DriverError, match=r"^a kafka cluster of 3 nodes cannot keep .* it needs [^\n]*$"):
            kafka.KafkaProvisioner().prepare_cluster(tmp_path, shape, [NodeHost()] * 3)


def test_topics_on_a_cluster_get_its_replicas_and_min_insync_and_no_unclean_election() -> None:
    assert topic_replication(None) == (1, {})
    assert topic_replication(ClusterShape()) == (1, {})
    assert topic_replication(SHAPE) == (3, {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})


def test_parity_says_what_each_acks_waits_for_and_that_kafka_does_not_fsync() -> None:
    cls = driver_class("kafka")
    cluster = BrokerEndpoint("kafka", "kafka://a:1,b:2,c:3", "process", shape=SHAPE)
    single = BrokerEndpoint("kafka", "kafka://a:1", "process")
    assert cls({"acks": "all"}, cluster).parity()["acks"] == \
        "every in-sync replica, at least 2 (acks=all, min.insync.replicas=2)"
    assert "only replica" in cls({"acks": "all"}, single).parity()["acks"]
    assert cls({"acks": "1"}, cluster).parity()["acks"] == "the leader's write (acks=1)"
    assert cls({"acks": "0"}, cluster).parity()["acks"] == "none (acks=0)"
    assert cls({}, single).parity()["fsync"].startswith("never (OS page cache")
    assert driver_class("tansu")({"acks": "all"}, single).parity()["fsync"] == "none (memory only)"
    assert cls({"acks": "all"}, single).idempotent() and not cls({"acks": "1"}, single).idempotent()
    assert not driver_class("tansu")({"acks": "all"}, single).idempotent()


def test_node_faults_run_on_the_kafka_java_client_and_leave_other_java_clients_out() -> None:
    """Kafka's Java client follows a new leader itself and reports its outcomes, so its rows run node
    faults; a Java client that does not say so is left out of them, and every one of kill/restart faults."""
    from harness.drivers.java import JVM_LIMITS
    from harness.runner import case as run
    from harness.scenario import parse_scenario

    base = {"pattern": "queue", "message_sizes": [100], "messages": 10, "cluster": {"nodes": 3}}
    node = parse_scenario({**base, "name": "node", "faults": [{"at": 1, "action": "kill-node", "node": "leader"}]})
    crash = parse_scenario({**base, "name": "crash", "faults": [{"at": 1, "action": "restart-broker"}]})
    assert not node.kills and crash.kills
    assert run.scenario_reason("kafka", node, "java") is None
    assert run.scenario_reason("rabbitmq", node, "java") == JVM_LIMITS
    assert run.scenario_reason("kafka", crash, "java") == JVM_LIMITS
    assert run.scenario_reason("kafka", node) is None


# -- the Metadata request, on bytes and against fake nodes ---------------------------------------------


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


def _ints(values: tuple[int, ...]) -> bytes:
    return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)


def metadata_answer(correlation: int, brokers: dict[int, int], topic: str | None = None, leader: int = -1,
                    epoch: int = 0) -> bytes:
    """A Metadata v7 answer (after the size prefix): ``brokers`` id -> port on 127.0.0.1, and partition 0 of
    ``topic`` led by ``leader`` at ``epoch``."""
    out = struct.pack(">ii", correlation, 0) + struct.pack(">i", len(brokers))
    for node, port in brokers.items():
        out += struct.pack(">i", node) + _string("127.0.0.1") + struct.pack(">i", port) + _string(None)
    out += _string("cluster-id") + struct.pack(">i", min(brokers, default=-1))
    if topic is None:
        return out + struct.pack(">i", 0)
    out += struct.pack(">i", 1) + struct.pack(">h", 0) + _string(topic) + b"\x00" + struct.pack(">i", 1)
    out += struct.pack(">hiii", 0, 0, leader, epoch) + _ints((0, 1, 2)) + _ints((0, 1, 2)) + _ints(())
    return out


def test_metadata_request_is_v7_of_the_named_topics_without_creating_them() -> None:
    message = _kafka_wire.metadata_request(5, ["t1"])
    (size,) = struct.unpack_from(">i", message)
    assert size == len(message) - 4
    api, version, correlation = struct.unpack_from(">hhi", message, 4)
    assert (api, version, correlation) == (3, 7, 5)
    assert message.endswith(struct.pack(">i", 1) + _string("t1") + b"\x00")


def test_metadata_answer_is_decoded_and_a_truncated_one_refused() -> None:
    answer = metadata_answer(9, {0: 9092, 1: 9093, 2: 9094}, "t1", leader=2, epoch=4)
    meta = _kafka_wire.parse_metadata(answer, 9)
    assert meta.brokers == {0: ("127.0.0.1", 9092), 1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9094)}
    assert meta.controller == 0 and meta.topic_errors == {"t1": 0}
    assert meta.partitions[("t1", 0)] == _kafka_wire.Partition(0, 2, 4, (0, 1, 2), (0, 1, 2))
    with pytest.raises(ProbeError, match="ended early"):
        _kafka_wire.parse_metadata(answer[:-6], 9)
    with pytest.raises(ProbeError, match="another request"):
        _kafka_wire.parse_metadata(answer, 8)


class FakeNode(threading.Thread):
    """A listener answering every Metadata request with ``answer(correlation)``; ``silent``: accepts and
    never answers (a paused node)."""

    def __init__(self, answer: bytes | None) -> None:
        super().__init__(daemon=True)
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.answer is None:
                self.held.append(conn)
                continue
            with conn:
                (size,) = struct.unpack(">i", conn.recv(4))
                request = b""
                while len(request) < size:
                    request += conn.recv(size - len(request))
                (correlation,) = struct.unpack_from(">i", request, 4)
                body = struct.pack(">i", correlation) + self.answer[4:]
                conn.sendall(struct.pack(">i", len(body)) + body)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def nodes() -> Iterator[list[FakeNode]]:
    """Node 0 saw an older election (leader 2, epoch 3), node 1 the newest (leader 1, epoch 4), node 2 is
    paused (answers nothing)."""
    made = [FakeNode(metadata_answer(0, {0: 1, 1: 2, 2: 3}, "t1", leader=2, epoch=3)),
            FakeNode(metadata_answer(0, {0: 1, 1: 2, 2: 3}, "t1", leader=1, epoch=4)),
            FakeNode(None)]
    for node in made:
        node.start()
    yield made
    for node in made:
        node.close()


def test_leader_takes_the_newest_election_any_node_knows_and_skips_a_silent_node(
        nodes: list[FakeNode], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "LEADER_TIMEOUT", 0.5)
    endpoint = BrokerEndpoint("kafka", "kafka://x", "process", shape=SHAPE,
                              nodes=tuple(f"kafka://127.0.0.1:{n.port}" for n in nodes))
    assert kafka.KafkaProvisioner().leader(endpoint, "t1") == 1
    with pytest.raises(ProbeError, match="no kafka node names a leader"):
        kafka.KafkaProvisioner().leader(endpoint, "other-topic")


def test_cluster_ready_waits_for_every_node_to_list_every_broker(monkeypatch: pytest.MonkeyPatch, jars: None,
                                                                 tmp_path: Path) -> None:
    whole = [FakeNode(metadata_answer(0, {0: 1, 1: 2, 2: 3})) for _ in range(3)]
    partial = FakeNode(metadata_answer(0, {0: 1, 2: 3}))
    for node in [*whole, partial]:
        node.start()
    try:
        launch = kafka.KafkaProvisioner().prepare_cluster(tmp_path, SHAPE, [NodeHost()] * 3)
        def pointed(fakes: list[FakeNode]) -> object:
            return replace(launch, nodes=tuple(replace(n, url=f"kafka://127.0.0.1:{f.port}")
                                               for n, f in zip(launch.nodes, fakes, strict=True)))
        assert kafka.KafkaProvisioner().cluster_ready(pointed(whole), 1.0) == ""  # type: ignore[arg-type]
        with pytest.raises(ProbeError, match=r"node1 lists brokers \[0, 2\], not yet \[1\]"):
            kafka.KafkaProvisioner().cluster_ready(pointed([whole[0], partial, whole[2]]), 1.0)  # type: ignore[arg-type]
    finally:
        for node in [*whole, partial]:
            node.close()


# -- a real cluster --------------------------------------------------------------------------------------
# One cluster for the module (a start costs 20-80 s here): each test leaves it whole again (a killed node
# restarted, which also shows that it rejoins with its data), and its teardown checks that nothing outlives it.


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerEndpoint]:
    require_backend("kafka", "process")
    before = set(_process.live_pids())
    logs = tmp_path_factory.mktemp("kafka-cluster-logs")
    with provision("kafka", backend="process", shape=SHAPE, logs_dir=logs) as endpoint:
        control = broker_control(endpoint)
        assert isinstance(control, ClusterControl)
        pids = set(control.pids())
        yield endpoint
        pids |= set(control.pids())
    assert set(_process.live_pids()) == before, "a node of the cluster is still registered as running"
    assert not [p for p in pids if _alive(p)], "a node's process outlived the cluster"
    assert broker_control(endpoint) is None
    assert all((logs / "kafka-cluster" / f"node{i}" / "logs" / "kafka.out").is_file() for i in range(3))
    assert not [p for p in logs.rglob("*.log") if p.stem.isdigit()], "Kafka's log segments (data) were kept as logs"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _control(endpoint: BrokerEndpoint) -> ClusterControl:
    control = broker_control(endpoint)
    assert isinstance(control, ClusterControl)
    return control


def _whole(control: ClusterControl) -> None:
    """Restart whatever node a test killed: the same commands, so the node rejoins with its data."""
    if not control.running():
        control.start()


def _leader_other_than(control: ClusterControl, topic: str, old: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            leader = control.leader(topic)
            if leader != old:
                return leader
        except ProbeError:
            pass  # mid-election
        assert time.monotonic() < deadline, f"the leader of {topic} was still node {old} {timeout:.0f} s after its kill"
        time.sleep(0.5)


def _node_log(control: ClusterControl, node: int) -> str:
    return (control.launch.workdir / f"node{node}" / "logs" / "kafka.out").read_text(errors="replace")


@pytest.mark.broker
@pytest.mark.timeout(600)
def test_three_nodes_form_a_cluster_whose_leader_moves_when_killed_and_rejoins(cluster: BrokerEndpoint) -> None:
    control = _control(cluster)
    assert control.nodes == 3 and control.running()
    assert cluster.shape == SHAPE and len(cluster.nodes) == 3
    assert cluster.version == _jars.pinned_version("kafka") and cluster.extra["startup_s"] > 0
    driver = driver_class("kafka")({"acks": "all"}, cluster)
    plan = driver.plan(topology(Pattern.QUEUE, 1, 100))
    try:
        topic = driver.leader_resource(plan)
        host, port = cluster.nodes[0].removeprefix("kafka://").split(":")
        deadline = time.monotonic() + 30  # a new topic reaches every broker's metadata soon, not at once
        while (topic, 0) not in (meta := _kafka_wire.metadata(host, int(port), [topic], 5.0)).partitions:
            assert time.monotonic() < deadline, f"node 0 did not know of {topic} 30 s after its creation"
            time.sleep(0.2)
        assert set(meta.brokers) == {0, 1, 2}
        assert sorted(meta.partitions[(topic, 0)].replicas) == [0, 1, 2], "the run's topic has 3 replicas"
        old = _leader_other_than(control, topic, -1, 30.0)
        control.kill(old)
        assert not control.node_running(old)
        assert _leader_other_than(control, topic, old, 90.0) != old
        control.start(old)  # waits until every node lists every broker again
        assert control.running()
        assert set(_kafka_wire.metadata(host, int(port), [], 5.0).brokers) == {0, 1, 2}
        assert "All of the log directories are already formatted." in _node_log(control, old), \
            "the restarted node was formatted again"
    finally:
        _whole(control)
        driver.teardown(plan)


@pytest.mark.broker
@pytest.mark.timeout(600)
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_a_fault_on_the_leader_loses_no_acknowledged_message_with_acks_all(
        client: str, fault: str, cluster: BrokerEndpoint, tmp_path: Path) -> None:
    control = _control(cluster)
    try:
        history = run_node_fault("kafka", {"acks": "all", "client": client}, SHAPE,
                                 kill if fault == "kill" else pause(5.0), tmp_path, cluster=cluster)
    finally:
        _whole(control)
    check_no_acknowledged_loss(history, f"kafka ({client}) acks=all, {fault} of the leader")
    assert history.sent and len(history.accepted) + len(history.refused) >= history.sent


# -- the Java client's outcomes, through the JVM worker ---------------------------------------------------


def run_jvm_producer(endpoint: BrokerEndpoint, options: dict[str, object], plan: dict[str, object], total: int,
                     rate: float | None, out: Path) -> tuple[bool, np.ndarray, np.ndarray]:
    """One JVM producer of ``total`` messages through the relay with the runner's ``Outcomes`` (in this
    thread, as in a worker process), released at once; returns whether it reported outcomes, ``t_ack`` of
    each send (0: none came) and the refused sends' numbers."""
    import queue
    from types import SimpleNamespace

    from harness.drivers.base import Role
    from harness.runner._context import WorkerContext, WorkerSpec
    from harness.runner._outcomes import Outcomes
    from harness.runner._records import read_errors, tracked
    from harness.runner.jvm import relay

    out.mkdir(parents=True, exist_ok=True)
    prefix = str(out / "producer-0")
    driver = driver_class("kafka", "java")(options, endpoint)
    spec = WorkerSpec(kind="producer", name="producer-0", slot=0, system="kafka",
                      driver="harness.drivers.java:KafkaJavaDriver", options=dict(options), broker=endpoint,
                      plan=dict(plan), role=Role(index=0, topic=0), size=100, payload="fixed", total=total,
                      duration_ns=None, rate=rate, capacity=total, out=prefix)
    ctx = WorkerContext(status=queue.Queue(), start=threading.Event(), stop=threading.Event(),
                        start_ns=SimpleNamespace(value=0), progress=[0])

    def runner() -> None:  # the runner's part: release the start, stop once the producer is done
        while True:
            status = ctx.status.get()
            if status[0] == "ready":
                ctx.start_ns.value = time.monotonic_ns()
                ctx.start.set()
            elif status[0] in ("done", "error"):
                ctx.stop.set()
                return

    threading.Thread(target=runner, daemon=True).start()
    outcomes = Outcomes(prefix, mapped_files=False)
    try:
        relay(spec, ctx, driver, outcomes)
    finally:
        outcomes.close()
    assert tracked(prefix) == outcomes.watched, "the records say whether outcomes were reported"
    with np.load(f"{prefix}.npz") as rec:
        t_ack = rec["t_ack"]
    return outcomes.watched, t_ack, read_errors(prefix)[:, 0]


@pytest.mark.broker
@pytest.mark.timeout(600)
def test_the_java_client_reports_every_sends_outcome_through_the_jvm_worker(cluster: BrokerEndpoint,
                                                                           tmp_path: Path) -> None:
    need_jvm()
    parent = driver_class("kafka")({"acks": "all"}, cluster)
    plan = parent.plan(topology(Pattern.QUEUE, 1, 100))
    try:
        assert plan["idempotence"] is True
        watched, t_ack, refused = run_jvm_producer(cluster, {"acks": "all", "client": "java"}, plan, 3000, None,
                                                   tmp_path / "p")
        assert watched and len(t_ack) == 3000 and (t_ack > 0).all() and not refused.size
        watched, t_ack, refused = run_jvm_producer(cluster, {"acks": "0", "client": "java"}, plan, 10, None,
                                                   tmp_path / "q")
        assert not watched and not (t_ack > 0).any()  # acks=0: the broker never answers
    finally:
        parent.teardown(plan)
