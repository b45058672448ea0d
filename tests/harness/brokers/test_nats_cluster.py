"""NATS JetStream clusters: the generated configuration and the JetStream API request over a bare socket
(no broker: fake nodes), then real three-node clusters through ``provision``: one forms, ``leader`` answers
and moves when the stream's leader is killed, a restarted node rejoins and the whole cluster restarts with
its data; a kill and a pause of the stream leader in the middle of a flow lose no acknowledged message (R3).
Nothing is left running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest

from harness.brokers import ClusterControl, broker_control, provision
from harness.brokers._base import ProbeError, command_output
from harness.brokers._process import live_pids
from harness.brokers._spec import ImageFiles, NodeHost
from harness.brokers.nats import NatsProvisioner, jetstream_request
from harness.drivers.base import BrokerEndpoint, ClusterShape, Pattern, Role
from harness.drivers.nats import NatsDriver
from tests.harness.drivers import node_faults
from tests.harness.drivers.conformance import fill_payload, require_backend, topology
from tests.harness.drivers.node_faults import check_no_acknowledged_loss, kill, pause, run_node_fault

T = TypeVar("T")
R3 = ClusterShape(3, 3, 2)
BINARY = "/usr/sbin/nats-server"


# -- configuration, no broker ---------------------------------------------------------------------


@pytest.fixture
def prov(monkeypatch: pytest.MonkeyPatch) -> NatsProvisioner:
    monkeypatch.setattr(NatsProvisioner, "find_binary", lambda self: BINARY)
    return NatsProvisioner()


def test_each_node_listens_on_and_advertises_its_own_address(prov: NatsProvisioner, tmp_path: Path) -> None:
    hosts = [NodeHost("10.77.0.1", "h1"), NodeHost("10.77.0.2", "h2"), NodeHost("10.77.0.3", "h3")]
    launch = prov.prepare_cluster(tmp_path, R3, hosts)
    assert launch.url == ",".join(n.url for n in launch.nodes)
    configs = [(tmp_path / f"node{i}" / "nats.conf").read_text() for i in range(3)]
    routes_of = [re.findall(r"nats-route://(\S+)", text) for text in configs]
    listens = [re.search(r"cluster \{.*?listen: (\S+)", text, re.S).group(1) for text in configs]  # type: ignore[union-attr]
    for i, (node, text) in enumerate(zip(launch.nodes, configs, strict=True)):
        address, port = hosts[i].address, urlsplit(node.url).port
        assert node.url == f"nats://{address}:{port}" and node.address == address
        assert f"listen: {address}:{port}" in text and f"client_advertise: {address}:{port}" in text
        assert f"advertise: {listens[i]}" in text and listens[i].startswith(f"{address}:")
        assert f'server_name: "node{i}"' in text  # JetStream's identity of the node: the same after a restart
        assert f'store_dir: "{tmp_path / f"node{i}" / "jetstream"}"' in text
        assert "127.0.0.1" not in text
        assert sorted(routes_of[i]) == sorted(listens[:i] + listens[i + 1 :])  # every other node, not itself
        # a restart runs the same command: nothing is formatted or wiped
        assert node.commands[0].argv == (BINARY, "--config", str(tmp_path / f"node{i}" / "nats.conf"))
    assert len({re.search(r'name: "(mqbench-\w+)"', t).group(1) for t in configs}) == 1  # type: ignore[union-attr]
    assert [urlsplit(u).hostname for u in launch.extra["monitor"].split(",")] == [h.address for h in hosts]
    ports = [urlsplit(n.url).port for n in launch.nodes] + [int(x.rsplit(":", 1)[1]) for x in listens]
    assert len(set(ports)) == 6
    other = prov.prepare_cluster(tmp_path / "other", R3, hosts)  # another run's cluster never joins this one
    assert other.extra["cluster_name"] != launch.extra["cluster_name"]


def test_a_single_node_and_the_container_run_jetstream_too(prov: NatsProvisioner, tmp_path: Path) -> None:
    (command,) = prov.commands(BINARY, tmp_path, [4222])
    text = (tmp_path / "nats.conf").read_text()
    assert command.argv == (BINARY, "--config", str(tmp_path / "nats.conf"))
    assert f'store_dir: "{tmp_path / "jetstream"}"' in text and "cluster" not in text
    inside = tmp_path / "in-image"  # the containers backend runs the same launch with the image's binary
    inside.mkdir()
    launch = prov.prepare_in_image(inside, ImageFiles({"binary": "/nats-server"}))
    assert launch.commands[0].argv == ("/nats-server", "--config", str(inside / "nats.conf"))
    assert f'store_dir: "{inside / "jetstream"}"' in (inside / "nats.conf").read_text()


class _FakeNode:
    """A NATS server as far as ``leader`` and ``jetstream_request`` see it: its INFO, PONG, and one canned
    answer to any request, written in pieces (as TCP may deliver it)."""

    def __init__(self, name: str, answer: bytes | None) -> None:
        self.name, self.answer = name, answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"nats://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b'INFO {"server_name":"%s","version":"2.9.10"}\r\n' % self.name.encode())
                data = b""
                while b"PING" not in data and data.count(b"\r\n") < 4:  # a greeting's PING, or a whole request
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                if b"PING" in data:
                    conn.sendall(b"PONG\r\n")
                inbox = re.search(rb"SUB (\S+) 1", data)
                if inbox and self.answer is not None:
                    reply = (b"MSG %s 1 %d\r\n" % (inbox.group(1), len(self.answer))) + self.answer + b"\r\n"
                    for i in range(0, len(reply), 7):
                        conn.sendall(reply[i : i + 7])
                        time.sleep(0.001)
                elif inbox:
                    status = b"NATS/1.0 503\r\n\r\n"
                    conn.sendall(b"HMSG %s 1 %d %d\r\n%s\r\n" % (inbox.group(1), len(status), len(status), status))

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept: a close alone does not, on Linux
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), f"the fake {self.name} still serves after its close"


@pytest.fixture
def fake_nodes() -> Iterator[list[_FakeNode]]:
    info = json.dumps({"config": {"name": "s"}, "cluster": {"name": "c", "leader": "node2"}}).encode()
    nodes = [_FakeNode("node0", info), _FakeNode("node1", info), _FakeNode("node2", None)]
    yield nodes
    for node in nodes:
        node.close()


def test_the_leader_is_the_node_whose_server_name_the_stream_names(fake_nodes: list[_FakeNode]) -> None:
    endpoint = BrokerEndpoint("nats", ",".join(n.url for n in fake_nodes), "process", shape=R3,
                              nodes=tuple(n.url for n in fake_nodes))
    assert NatsProvisioner().leader(endpoint, "s") == 2
    answer, server = jetstream_request([fake_nodes[1].url], "$JS.API.STREAM.INFO.s", b"", 2)
    assert server == "node1" and answer["cluster"]["leader"] == "node2"
    with pytest.raises(ProbeError, match="503"):  # nothing serves the API yet
        jetstream_request([fake_nodes[2].url], "$JS.API.STREAM.INFO.s", b"", 2)


# -- real clusters -----------------------------------------------------------------------------------


def _eventually(probe: Callable[[], T], accept: Callable[[T], bool] = lambda _: True, timeout: float = 30.0) -> T:
    """``probe()``'s first value that ``accept`` takes, retrying while it raises ProbeError (an election)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
            if accept(value):
                return value
        except ProbeError:
            pass
        assert time.monotonic() < deadline, f"no accepted answer within {timeout:.0f} s"
        time.sleep(0.2)


def _stored(endpoint: BrokerEndpoint, stream: str) -> int:
    info, _ = jetstream_request(list(endpoint.nodes), f"$JS.API.STREAM.INFO.{stream}", b"", 3)
    if "error" in info or not (info.get("cluster") or {}).get("leader"):
        raise ProbeError(f"stream {stream} is not served yet: {info.get('error')}")
    return int(info["state"]["messages"])


@pytest.mark.broker
def test_a_cluster_forms_its_leader_moves_and_it_restarts_with_its_data(tmp_path: Path) -> None:
    require_backend("nats", "process")
    before = set(live_pids())
    prov = NatsProvisioner()
    with provision("nats", backend="process", shape=R3, logs_dir=tmp_path) as endpoint:
        control = broker_control(endpoint)
        assert isinstance(control, ClusterControl) and control.nodes == 3 and endpoint.version
        assert endpoint.url == ",".join(endpoint.nodes) and len(endpoint.nodes) == 3
        pids = control.pids()
        driver = NatsDriver({"jetstream": True}, endpoint)
        plan = driver.plan(topology(Pattern.QUEUE, 1, 100))
        stream = driver.leader_resource(plan)
        producer = driver.create_producer(plan, Role(0, 0))
        buf = bytearray(100)
        for seq in range(300):
            fill_payload(buf, 0, seq)
            producer.send(buf)
        producer.flush(30)  # unwatched: a refused publish would raise here
        producer.close()

        leader = _eventually(lambda: prov.leader(endpoint, stream))
        assert leader in range(3) and control.leader(stream) == leader
        control.kill(leader)
        moved = _eventually(lambda: prov.leader(endpoint, stream), lambda node: node != leader)
        assert moved in set(range(3)) - {leader}
        control.start(leader)  # the same command again: it rejoins with its own store
        assert control.running()

        control.kill()  # every node down: what the stream holds now comes from the nodes' own disks
        control.start()
        assert _eventually(lambda: _stored(endpoint, stream), lambda n: n == 300) == 300
        everything = control.pids()
        driver.teardown(plan)
    assert not set(pids + everything) & set(live_pids())
    assert set(live_pids()) == before
    assert not any(_alive(p) for p in pids + everything)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.broker
@pytest.mark.parametrize(("name", "fault"), [("kill", kill), ("pause", pause(5.0))])
def test_a_fault_on_the_stream_leader_loses_no_acknowledged_message(name: str, fault: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    require_backend("nats", "process")
    # What the consumer was handed while its node was stopped or its consumer's leader moved comes again only
    # after the ack wait (5 s), and a consumer leader's election takes 4-9 s: the final read waits 20 s
    # without a receipt before it gives up (the runner's final read counts such a stall as held, not lost).
    monkeypatch.setattr(node_faults, "STALL", 20.0)
    before = set(live_pids())
    history = run_node_fault("nats", {"jetstream": True}, R3, fault, tmp_path)
    assert set(live_pids()) == before
    assert history.leader in range(3)
    told = len(history.accepted | history.refused)
    assert told == 4000, (f"{4000 - told} sends got no outcome (accepted {len(history.accepted)}, refused "
                          f"{len(history.refused)}; {history.notes})")
    lost = history.lost
    if lost and name == "pause" and _server_version() < (2, 9, 21):
        # nats-server 2.9.10 (Debian's): in some runs (7 of about 160 here) the paused leader, once resumed,
        # stores the publishes it had been sent (which the producer was refused) at the sequence numbers the
        # new leader gave acknowledged ones, and the durable consumer, reading that replica, delivers those
        # instead: the acknowledged messages are never delivered. Only that pattern is excused, and visibly.
        in_their_place = history.refused & set(history.received)
        assert len(in_their_place) >= len(lost), (
            f"{len(lost)} acknowledged messages lost, and not as the known divergence of 2.9 replicas "
            f"(only {len(in_their_place)} refused ones delivered in their place)")
        pytest.xfail(f"nats-server {'.'.join(map(str, _server_version()))} lost {len(lost)} acknowledged messages "
                     f"after a pause of the stream leader: {len(in_their_place)} refused publishes were delivered "
                     "in their place (diverged replicas; docs/brokers.md)")
    check_no_acknowledged_loss(history, f"nats JetStream R3, {name} of the stream leader")


def _server_version() -> tuple[int, ...]:
    """The installed nats-server's version, e.g. (2, 9, 10)."""
    text = command_output(NatsProvisioner().find_binary() or "nats-server", "--version")
    found = re.search(r"v(\d+)\.(\d+)\.(\d+)", text)
    assert found, f"nats-server --version said {text!r}"
    return tuple(int(x) for x in found.groups())


# -- the whole path: mqbench compare with a cluster and a node fault ------------------------------


@pytest.mark.parametrize("fault, hosts", [
    ({"at": "2s", "action": "restart-node", "node": "leader", "down": "2s"}, None),
    ({"at": "2s", "action": "isolate-node", "node": "leader", "duration": "2s"}, ["n1", "n2", "n3"]),
], ids=["restart-leader", "isolate-leader-on-hosts"])
def test_compare_accounts_for_a_node_fault_and_leaves_nothing(
    tmp_path: Path, fault: dict[str, Any], hosts: list[str] | None
) -> None:
    """A scenario as a user writes it (``cluster:``, a node fault, optionally ``hosts:``) through ``compare``:
    the recovery row names the node and its role, every send in the fault's window has an outcome, no
    acknowledged message is lost, and no node, namespace or link of the run is left."""
    require_backend("nats", "process")
    from harness.compare import compare
    from harness.scenario import parse_scenario
    from tests.harness.network.support import assert_nothing_left, snapshot
    from tests.harness.runner.test_runner_e2e import quiet

    if hosts and os.geteuid() != 0:
        pytest.skip("network hosts need root (network namespaces)")
    spec: dict[str, Any] = {
        "name": "nf", "pattern": "queue", "systems": ["nats"], "message_sizes": [100], "duration": "8s",
        "rate": 200, "warmup": 0, "timeout": 30, "cluster": {"nodes": 3}, "faults": [fault],
        "variants": {"nats": [{"name": "r3", "jetstream": True}]},
    }
    if hosts:
        spec["hosts"] = {"nodes": hosts}
    before_pids, before_net = set(live_pids()), snapshot()
    out = compare([parse_scenario(spec, "nf.yaml")], systems=["nats"], out_root=tmp_path, console=quiet(),
                  write_report=False)
    assert set(live_pids()) == before_pids
    assert_nothing_left(before_net)
    assert out.complete, out.problems
    import pandas as pd

    (row,) = pd.read_parquet(out.run_dir / "recovery.parquet").to_dict("records")
    assert row["action"] == fault["action"] and row["node_role"] == "leader" and row["node"] in range(3)
    assert row["down_s"] == pytest.approx(2.0)
    assert row["accepted"] + row["refused"] == row["window_messages"] > 0
    assert row["lost"] == 0, row
    assert row["whole_s"] >= 2.0  # the cluster was not whole again before the node came back
    variant = json.loads((out.run_dir / "manifest.json").read_text())["variants"]["nats/r3"]
    assert (variant["nodes"], variant["replicas"]) == ("3", "3") and "3 nodes" in variant["parity"]
