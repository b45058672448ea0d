"""RabbitMQ's replicated cluster: the configuration each node gets (no broker), the Erlang module through which
nodes sharing one address find each other (two bare Erlang nodes), the driver's variants and outcomes (a fake
channel), and a real three-node cluster with a quorum queue whose leader is killed or paused mid-flow."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pika
import pytest

from harness.brokers import ClusterControl, _process, provision
from harness.brokers import rabbitmq as rabbit
from harness.brokers._spec import NodeHost
from harness.drivers import broker
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError, Pattern, Role
from harness.drivers.rabbitmq import RabbitMQDriver, _RabbitProducer
from tests.harness.drivers.conformance import fill_payload, parse_payload, require_backend, topology
from tests.harness.drivers.node_faults import check_no_acknowledged_loss, pause, run_node_fault

SHAPE = ClusterShape(3, 3, 2)
DURABLE = {"queue_type": "quorum", "confirms": True, "manual_ack": True}
HOSTS = [NodeHost("10.9.0.1", "a"), NodeHost("10.9.0.2", "b"), NodeHost("10.9.0.3", "c")]


# -- configuration (no broker) --------------------------------------------------------------------------


@pytest.fixture
def launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(rabbit.RabbitMQProvisioner, "find_binary", lambda self: "/usr/lib/rabbitmq/bin/rabbitmq-server")
    monkeypatch.setattr(rabbit, "which", lambda *names: f"/usr/bin/{Path(names[0]).name}")
    monkeypatch.setattr(rabbit, "_compile", lambda erlc, out: None)
    monkeypatch.setattr(rabbit, "_service_user", lambda: None)
    return rabbit.RabbitMQProvisioner().prepare_cluster(tmp_path, SHAPE, HOSTS)


def test_each_node_listens_on_and_advertises_its_own_address(launch: Any) -> None:
    for i, (node, host) in enumerate(zip(launch.nodes, HOSTS, strict=True)):
        env = node.commands[-1].env
        assert env["RABBITMQ_NODENAME"].endswith(f"-{i}@{host.address}") and env["RABBITMQ_USE_LONGNAME"] == "true"
        assert env["RABBITMQ_NODE_IP_ADDRESS"] == host.address and node.url.startswith(f"amqp://guest:guest@{host.address}:")
        assert f"inet_dist_use_interface {{{host.address.replace('.', ',')}}}" in env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
        epmd = node.commands[0].argv
        assert epmd[-2:] == ("-address", host.address) and epmd[epmd.index("-port") + 1] == env["ERL_EPMD_PORT"]
        assert f"management.tcp.ip = {host.address}" in (launch.workdir / node.name / "rabbitmq.conf").read_text()
    assert launch.url == ",".join(n.url for n in launch.nodes)
    assert launch.extra["management"].split(",")[1].startswith(f"http://{HOSTS[1].address}:")


def test_nodes_share_a_cookie_and_each_owns_its_ports_and_epmd(launch: Any) -> None:
    envs = [n.commands[-1].env for n in launch.nodes]
    cookies = {(Path(e["HOME"]) / ".erlang.cookie").read_text() for e in envs}
    assert len(cookies) == 1 and len(cookies.pop()) >= 20
    assert all((Path(e["HOME"]) / ".erlang.cookie").stat().st_mode & 0o777 == 0o400 for e in envs)
    assert len({e["HOME"] for e in envs}) == 3 and len({e["RABBITMQ_MNESIA_BASE"] for e in envs}) == 3
    ports = [int(e[k]) for e in envs for k in ("RABBITMQ_NODE_PORT", "RABBITMQ_DIST_PORT", "ERL_EPMD_PORT")]
    assert len(set(ports)) == len(ports)
    # every node resolves every node's distribution port from the same table
    table = {envs[0]["MQBENCH_DIST_PORTS"]}
    assert table == {e["MQBENCH_DIST_PORTS"] for e in envs}
    assert table.pop().split() == [f"{e['RABBITMQ_NODENAME'].split('@')[0]}={e['RABBITMQ_DIST_PORT']}" for e in envs]
    for e in envs:
        assert "-epmd_module mqbench_epmd" in e["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
        assert (Path(e["HOME"]) / "enabled_plugins").read_text().strip() == "[rabbitmq_management]."


def test_erlang_schedulers_are_sized_for_a_shared_two_core_host(launch: Any) -> None:
    args = launch.nodes[0].commands[-1].env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"].split()
    assert {"+S", "1:1", "+sbwt", "none", "+sbwtdcpu", "+sbwtdio"} <= set(args)


def test_joiners_first_boot_waits_for_node_zero_and_a_restart_does_not(launch: Any, tmp_path: Path) -> None:
    seed = launch.nodes[0].commands[-1]
    assert seed.argv == ("/usr/lib/rabbitmq/bin/rabbitmq-server",)
    port = seed.env["RABBITMQ_NODE_PORT"]
    for node in launch.nodes[1:]:
        argv = node.commands[-1].argv
        assert argv[:2] == ("bash", "-c") and argv[-1] == "/usr/lib/rabbitmq/bin/rabbitmq-server"
        assert f"/dev/tcp/{HOSTS[0].address}/{port}" in argv[2]
    # the wait itself: it ends when node 0 takes connections, and is skipped when the node has its data
    listener = socket.create_server(("127.0.0.1", 0))
    script = rabbit.after_seed("true", "127.0.0.1", listener.getsockname()[1])[2]
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    (full / "node").mkdir(parents=True)

    def run(base: Path, timeout: float) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["bash", "-c", script, "true"], timeout=timeout,
                              env={**os.environ, "RABBITMQ_MNESIA_BASE": str(base)})

    assert run(empty, 10).returncode == 0
    listener.close()
    assert run(full, 10).returncode == 0
    with pytest.raises(subprocess.TimeoutExpired):
        run(empty, 1.5)  # node 0 gone and no data: it waits


def test_node_zero_forms_the_cluster_and_the_others_join_it() -> None:
    names = ["r-0@10.9.0.1", "r-1@10.9.0.2", "r-2@10.9.0.3"]
    seed, joiner = rabbit.cluster_config(names, 0, "10.9.0.1", 15672), rabbit.cluster_config(names, 2, "10.9.0.3", 15673)
    assert "classic_config.nodes" not in seed and "peer_discovery_backend = classic_config" in seed
    assert [line.split(" = ")[1] for line in joiner.splitlines() if "classic_config.nodes." in line] == names
    assert "cluster_partition_handling = pause_minority" in joiner and "management.tcp.port = 15673" in joiner


def test_leader_needs_the_management_api_of_a_cluster_started_here() -> None:
    endpoint = BrokerEndpoint("rabbitmq", "amqp://guest:guest@h:5672/%2F", "external")
    with pytest.raises(rabbit.ProbeError, match="management API is not known"):
        rabbit.RabbitMQProvisioner().leader(endpoint, "q")


# -- the driver's variants (no broker) ------------------------------------------------------------------


def _endpoint(shape: ClusterShape = SHAPE) -> BrokerEndpoint:
    return BrokerEndpoint("rabbitmq", "amqp://guest:guest@h:1/%2F,amqp://guest:guest@h:2/%2F", "external", shape=shape)


def test_quorum_queues_have_the_shapes_replicas_and_are_durable() -> None:
    driver = RabbitMQDriver(DURABLE, _endpoint())
    assert driver.queue_arguments() == {"x-queue-type": "quorum", "x-quorum-initial-group-size": 3}
    assert driver.durable and driver.guarantee() == "durable"
    assert driver.parity() == {"acks": "publisher confirms (a majority: 2 of 3 replicas)",
                               "fsync": "every write, in batches (Raft log), before the confirm"}
    plan = {"topology": {"pattern": "pubsub", "topics": 1, "producers": 1, "consumers": 2, "message_size": 10,
                         "run_tag": "x"}}
    assert driver.leader_resource(plan) == "mqbench-x-t0.c0"  # consumer 0's own quorum queue


def test_every_variant_states_its_parity() -> None:
    single = ClusterShape()
    seen = {}
    for options in ({}, {"persistent": True}, {"persistent": True, "confirms": True}, {"confirms": True},
                    {"queue_type": "quorum"}, {"queue_type": "stream", "confirms": True}):
        parity = RabbitMQDriver(options, _endpoint(single)).parity()
        assert set(parity) == {"acks", "fsync"} and all(parity.values())
        seen[str(options)] = (parity["acks"], parity["fsync"])
    assert len(set(seen.values())) == 6, seen


def test_shapes_a_queue_type_cannot_honour_are_refused_in_one_sentence() -> None:
    with pytest.raises(DriverError, match="classic queues keep one copy"):
        RabbitMQDriver({}, _endpoint())
    with pytest.raises(DriverError, match=r"majority of their 3 replicas \(2\).*use min_insync 2"):
        RabbitMQDriver(DURABLE, _endpoint(ClusterShape(3, 3, 3)))
    with pytest.raises(DriverError, match="streams serve the pubsub pattern only"):
        RabbitMQDriver({"queue_type": "stream"}, _endpoint()).create_topics(None, topology(Pattern.QUEUE, 1, 10))


class _FakeConnection:
    """Just enough of a BlockingConnection for a confirming producer: confirm mode is selected at once, and
    the confirms queued by ``confirm`` arrive at the next ``process_data_events``."""

    def __init__(self) -> None:
        self.published: list[bytes] = []
        self.frames: list[Any] = []
        self.on_confirm: Any = None
        impl = SimpleNamespace(basic_publish=lambda exchange, key, body, props: self.published.append(body),
                               confirm_delivery=self._select)
        self.chan = SimpleNamespace(_impl=impl)

    def _select(self, on_confirm: Any, on_ok: Any) -> None:
        self.on_confirm = on_confirm
        on_ok(None)

    def confirm(self, kind: Any, tag: int, multiple: bool) -> None:
        self.frames.append(SimpleNamespace(method=kind(delivery_tag=tag, multiple=multiple)))

    def channel(self) -> Any:
        return self.chan

    def process_data_events(self, time_limit: float = 0) -> None:
        """Deliver the queued confirms of what was published (the broker confirms nothing earlier)."""
        due = [f for f in self.frames if f.method.delivery_tag <= len(self.published)]
        self.frames = [f for f in self.frames if f not in due]
        for frame in due:
            self.on_confirm(frame)

    def close(self) -> None:
        pass


@pytest.fixture
def flat_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends count as flat out (never paced), so a producer waits only when its window is full."""
    monkeypatch.setattr(broker, "IDLE_NS", 10**18)


def test_confirms_and_nacks_are_reported_for_the_sends_they_cover(flat_out: None) -> None:
    driver = RabbitMQDriver({**DURABLE, "confirm_window": 100, "write_batch": 1}, _endpoint())
    conn = _FakeConnection()
    conn.confirm(pika.spec.Basic.Ack, 2, True)  # a lost predecessor's two messages, confirmed at once
    carry = [b"old-1", b"old-2"]
    producer = _RabbitProducer(conn, driver.opts, True, "", "q", carry)
    assert carry == [] and conn.published == [b"old-1", b"old-2"]
    outcomes: list[tuple[int, int, bool]] = []
    assert producer.watch_outcomes(lambda first, count, ok: outcomes.append((first, count, ok)))
    for i in range(6):
        producer.send(bytearray(f"m{i}".encode()))  # sends 0..5 are delivery tags 3..8
    conn.confirm(pika.spec.Basic.Ack, 4, False)  # send 1 alone
    conn.confirm(pika.spec.Basic.Ack, 5, True)  # sends 0 and 2 (1 is settled already)
    conn.confirm(pika.spec.Basic.Nack, 7, True)  # sends 3 and 4 refused
    conn.process_data_events()
    assert outcomes == [(1, 1, True), (0, 1, True), (2, 1, True), (3, 2, False)]
    producer.send(bytearray(b"m6"))  # a nack is an outcome, not an error, once outcomes are watched
    conn.confirm(pika.spec.Basic.Ack, 9, True)
    producer.flush(1.0)
    assert outcomes[4:] == [(5, 2, True)] and producer.confirmed == 9 and not producer.unconfirmed


def test_without_watching_a_nack_fails_the_next_send(flat_out: None) -> None:
    driver = RabbitMQDriver({**DURABLE, "confirm_window": 2, "write_batch": 1}, _endpoint())
    conn = _FakeConnection()
    producer = _RabbitProducer(conn, driver.opts, True, "", "q", [])
    producer.send(bytearray(b"a"))
    conn.confirm(pika.spec.Basic.Nack, 1, False)
    with pytest.raises(DriverError, match="basic.nack up to 1"):
        producer.send(bytearray(b"b"))
    one = RabbitMQDriver({"confirms": True, "confirm_window": 1}, _endpoint(ClusterShape())).opts
    assert not _RabbitProducer(_FakeConnection(), one, False, "", "q", []).watch_outcomes(print)  # synchronous


# -- Erlang distribution through mqbench_epmd (two bare Erlang nodes, no RabbitMQ) -----------------------


@pytest.mark.broker
def test_nodes_on_one_address_each_with_its_own_epmd_find_each_other(tmp_path: Path) -> None:
    erl, erlc, epmd = shutil.which("erl"), shutil.which("erlc"), shutil.which("epmd")
    if not (erl and erlc and epmd):
        if os.environ.get("CI") == "true":
            pytest.fail("Erlang (erl, erlc, epmd) is not installed")
        pytest.skip("Erlang (erl, erlc, epmd) is not installed")
    rabbit._compile(erlc, tmp_path)
    ports = rabbit.free_ports(4)
    env = {**os.environ, "HOME": str(tmp_path), "MQBENCH_DIST_PORTS": f"a={ports[0]} b={ports[1]}"}
    daemons = [subprocess.Popen([epmd, "-port", str(p), "-address", "127.0.0.1"]) for p in ports[2:]]
    try:
        def node(name: str, index: int, script: str) -> subprocess.Popen[str]:
            argv = [erl, "-noshell", "-pa", str(tmp_path), "-epmd_module", "mqbench_epmd", "-name", f"{name}@127.0.0.1",
                    "-setcookie", "mqbench", "-kernel", "inet_dist_listen_min", str(ports[index]),
                    "inet_dist_listen_max", str(ports[index]), "-eval", script]
            return subprocess.Popen(argv, env={**env, "ERL_EPMD_PORT": str(ports[2 + index])}, stdout=subprocess.PIPE,
                                    text=True)

        a = node("a", 0, "timer:sleep(30000), halt().")
        b = node("b", 1, "io:format(\"~p~n\", [net_kernel:connect_node('a@127.0.0.1')]), halt().")
        try:
            deadline = time.monotonic() + 20
            answer = ""
            while time.monotonic() < deadline and answer != "true":
                out, _ = b.communicate(timeout=30)
                answer = out.strip()
                if answer != "true":  # a had not started its distribution yet
                    time.sleep(0.5)
                    b = node("b", 1, "io:format(\"~p~n\", [net_kernel:connect_node('a@127.0.0.1')]), halt().")
            assert answer == "true", "node b did not reach node a through mqbench_epmd"
        finally:
            for p in (a, b):
                p.kill()
                p.wait()
    finally:
        for d in daemons:
            d.kill()
            d.wait()


# -- a real three-node cluster --------------------------------------------------------------------------


def _quorum_queue(control: ClusterControl) -> str:
    """The name of the run's quorum queue, as the management API lists it."""
    ep = control.endpoint
    assert ep is not None
    api = ep.extra["management"].split(",")
    for url in api:
        try:
            queues = rabbit._admin_get(url, "/api/queues?columns=name,type", rabbit._credentials(ep.url), 10)
        except OSError:
            continue
        return next(q["name"] for q in queues if q["type"] == "quorum")
    raise AssertionError("no node's management API answered")


def _online(control: ClusterControl, queue: str) -> list[str]:
    ep = control.endpoint
    assert ep is not None
    for url in ep.extra["management"].split(","):
        try:
            return list(rabbit._admin_get(url, f"/api/queues/%2F/{queue}?disable_stats=true",
                                          rabbit._credentials(ep.url), 10)["online"])
        except OSError:
            continue
    return []


@pytest.mark.broker
def test_killed_leader_loses_no_confirmed_message_and_rejoins_with_its_data(tmp_path: Path) -> None:
    require_backend("rabbitmq", "process")
    seen: dict[str, Any] = {}

    def kill_wait_restart(control: ClusterControl, node: int) -> None:
        queue = _quorum_queue(control)
        seen["marks"] = [str(control.endpoint.extra["node_names"]).split("@")[0].rsplit("-", 1)[0]]  # type: ignore[union-attr]
        seen["marks"] += [" ".join(n.commands[0].argv[1:3]) for n in control.launch.nodes]  # epmd -port P
        control.kill(node)
        killed = time.monotonic()
        while time.monotonic() - killed < 60:
            try:
                seen["after"] = control.leader(queue)
                break
            except rabbit.ProbeError:
                time.sleep(0.2)
        seen["pids_down"] = set(control.node_pids(node))
        control.start(node)  # waits until every node lists every node as a running member
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_online(control, queue)) < 3:
            time.sleep(0.5)
        seen["online"] = _online(control, queue)
        seen["restarted"] = control.leader(queue)

    history = run_node_fault("rabbitmq", DURABLE, SHAPE, kill_wait_restart, tmp_path)
    check_no_acknowledged_loss(history, "rabbitmq quorum queue, leader killed")
    assert history.leader in range(3)
    assert seen.get("after") in range(3) and seen["after"] != history.leader, seen
    assert seen["pids_down"] == set()
    assert len(seen["online"]) == 3, f"the restarted node's member did not rejoin the quorum queue: {seen}"
    assert seen["restarted"] in range(3)
    assert _process.live_pids() == []
    assert _processes_with(seen["marks"]) == [], "a node or epmd of the cluster outlived it"


def _processes_with(marks: list[str]) -> list[str]:
    """Command lines of running processes that contain one of ``marks``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmdline for m in marks):
            found.append(cmdline)
    return found


@pytest.mark.broker
def test_paused_leader_loses_no_confirmed_message(tmp_path: Path) -> None:
    require_backend("rabbitmq", "process")
    seen: dict[str, Any] = {}

    def pause_then_ask(control: ClusterControl, node: int) -> None:
        pause(8.0)(control, node)
        deadline = time.monotonic() + 60
        while "leader" not in seen and time.monotonic() < deadline:
            try:
                seen["leader"] = control.leader(_quorum_queue(control))
            except rabbit.ProbeError:
                time.sleep(0.2)

    history = run_node_fault("rabbitmq", DURABLE, SHAPE, pause_then_ask, tmp_path)
    check_no_acknowledged_loss(history, "rabbitmq quorum queue, leader paused")
    assert seen.get("leader") in range(3), "no node answered for the quorum queue's leader after the pause"
    assert _process.live_pids() == []


# -- streams (one node) ----------------------------------------------------------------------------------


def _receive(consumer: Any, want: int, quiet: float = 1.0) -> list[int]:
    """The seqs ``consumer`` delivers until ``want`` arrived and nothing more came for ``quiet`` s (or 30 s)."""
    got: list[int] = []
    consumer.start(lambda body: got.append(parse_payload(body, 100)[1]))
    deadline, last = time.monotonic() + 30, len(got)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        consumer.poll(0.1)
        if len(got) != last:
            last, quiet_since = len(got), time.monotonic()
        elif len(got) >= want and time.monotonic() - quiet_since > quiet:
            break
    consumer.close()
    return got


@pytest.mark.broker
def test_a_stream_consumer_made_again_resumes_after_what_it_received() -> None:
    require_backend("rabbitmq", "process")
    options = {"queue_type": "stream", "confirms": True}
    with provision("rabbitmq", backend="process") as endpoint:
        driver = RabbitMQDriver(options, endpoint)
        plan = driver.plan(topology(Pattern.PUBSUB, 1, 100))
        buf = bytearray(100)

        def send(seqs: range) -> None:
            producer = driver.create_producer(plan, Role(0, 0))
            for seq in seqs:
                fill_payload(buf, 0, seq)
                producer.send(buf)
            producer.flush(30)
            producer.close()

        try:
            send(range(500))
            assert _receive(driver.create_consumer(plan, Role(0, 0)), 500) == list(range(500))
            send(range(500, 1000))
            # made again on the same driver (as the runner does after a failure): from where it stopped
            assert _receive(driver.create_consumer(plan, Role(0, 0)), 500) == list(range(500, 1000))
            # a new subscriber reads the stream from its start
            fresh = RabbitMQDriver(options, endpoint).create_consumer(plan, Role(1, 0))
            assert _receive(fresh, 1000) == list(range(1000))
        finally:
            driver.teardown(plan)
