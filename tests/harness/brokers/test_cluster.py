"""The provisioning core of clusters, on a fake broker whose nodes are tiny TCP listeners: start, node faults
(kill, restart, pause, resume), a node that exits during the start, and nothing left running afterwards."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from harness.brokers import _process, _provision, broker_control, free_ports, provision
from harness.brokers._base import ProbeError, Provisioner
from harness.brokers._choice import BackendChoice
from harness.brokers._cluster import ClusterControl
from harness.brokers._spec import ClusterLaunch, Command, NodeHost, NodeLaunch
from harness.brokers.nats import NatsProvisioner
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError

SERVER = "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); " \
         "s.bind((sys.argv[2], int(sys.argv[1]))); s.listen(); [s.accept()[0].close() for _ in iter(int, 1)]"


class FakeCluster(NatsProvisioner):
    """Nodes that listen on one port each; the leader is the lowest node that answers."""

    max_nodes = 5
    ready_timeout = 10.0
    stop_grace = 0.5
    fail_node: int | None = None

    def prepare_cluster(self, workdir: Path, shape: ClusterShape, hosts: list[NodeHost]) -> ClusterLaunch:  # type: ignore[override]
        ports = free_ports(shape.nodes)
        nodes = []
        for i, (port, host) in enumerate(zip(ports, hosts, strict=True)):
            argv = (sys.executable, "-c", "import sys; sys.exit(7)") if i == self.fail_node else \
                   (sys.executable, "-c", SERVER, str(port), host.address)
            nodes.append(NodeLaunch(f"node{i}", (Command("fake", argv),), f"nats://{host.address}:{port}", host.address))
        return ClusterLaunch(tuple(nodes), ",".join(n.url for n in nodes), workdir, self.ready_timeout, self.stop_grace)

    def cluster_ready(self, launch: ClusterLaunch, timeout: float) -> str:
        return Provisioner.cluster_ready(self, launch, timeout)  # every node answers: the fake has no /jsz

    def probe(self, url: str, timeout: float) -> str:
        host, port = url.removeprefix("nats://").split(":")
        with socket.create_connection((host, int(port)), timeout=timeout):
            return "fake-1"

    def leader(self, endpoint: BrokerEndpoint, resource: str) -> int:
        for i, url in enumerate(endpoint.nodes):
            try:
                self.probe(url, 0.5)
                return i
            except OSError:
                continue
        raise ProbeError("no node answers")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    prov = FakeCluster()
    monkeypatch.setattr(_provision, "provisioner", lambda system: prov)
    monkeypatch.setattr(_provision, "choose_backend", lambda *a, **k: BackendChoice("nats", "process", "test"))
    return prov


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _state(pid: int, wanted: str) -> str:
    """The process's state once it is ``wanted`` (a signal takes effect soon after it is sent), or after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state == wanted or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def test_a_cluster_starts_its_nodes_and_node_faults_act_on_one_node(fake: FakeCluster, tmp_path: Path) -> None:
    shape = ClusterShape(nodes=3, replicas=3, min_insync=2)
    with provision("nats", shape=shape, logs_dir=tmp_path) as endpoint:
        assert endpoint.shape == shape and len(endpoint.nodes) == 3 and endpoint.url == ",".join(endpoint.nodes)
        control = broker_control(endpoint)
        assert isinstance(control, ClusterControl) and control.nodes == 3 and control.running()
        pids = list(endpoint.extra["pids"])
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        assert control.leader("t") == 0

        control.kill(0)
        assert not _alive(pids[0]) and all(_alive(p) for p in pids[1:])
        assert not control.node_running(0) and not control.running()
        assert control.leader("t") == 1  # the fake's leader moved to the next node that answers
        control.start(0)
        assert control.running() and control.leader("t") == 0
        (new0,) = control.node_pids(0)
        assert new0 != pids[0]

        control.pause(1)
        assert _state(pids[1], "T") == "T"
        control.resume(1)
        assert _state(pids[1], "S") in "SR"

        control.pause(2)  # left paused: the teardown must still stop it
        everything = control.pids()
    assert not any(_alive(p) for p in everything)
    assert not set(everything) & set(_process.live_pids())
    assert broker_control(endpoint) is None
    assert (tmp_path / "nats-cluster" / "node0" / "logs" / "fake.out").exists()


def test_a_node_that_exits_during_the_start_is_named_and_nothing_is_left(fake: FakeCluster, tmp_path: Path) -> None:
    fake.fail_node = 1
    before = set(_process.live_pids())
    with pytest.raises(DriverError, match=r"node1's fake exited with status 7.*logs are in"):
        with provision("nats", shape=ClusterShape(3, 3, 2), logs_dir=tmp_path):
            pass
    assert set(_process.live_pids()) == before


def test_a_cluster_larger_than_the_broker_runs_is_refused(fake: FakeCluster) -> None:
    with pytest.raises(DriverError, match="at most here"), provision("nats", shape=ClusterShape(7, 3, 2)):
        pass


def test_kill_without_a_node_is_the_whole_cluster(fake: FakeCluster) -> None:
    with provision("nats", shape=ClusterShape(2, 2, 2)) as endpoint:
        control = broker_control(endpoint)
        assert isinstance(control, ClusterControl)
        control.kill()
        assert not control.pids()
        control.start()
        assert control.running() and len(control.pids()) == 2
