"""Nodes of a cluster on hosts of their own: each node's processes run in its host's namespace, listen on
that host's address, and an isolated node is unreachable until its link is up again; nothing is left."""

from __future__ import annotations

import socket

import pytest

from harness.brokers import _provision, broker_control, provision
from harness.brokers._choice import BackendChoice
from harness.brokers._spec import NodeHost
from harness.drivers.base import ClusterShape
from harness.network import leftovers, network
from tests.harness.brokers.test_cluster import FakeCluster
from tests.harness.network.support import require_root


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0):
            return True
    except OSError:
        return False


def test_each_node_runs_on_its_own_host_and_can_be_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    require_root()
    prov = FakeCluster()
    monkeypatch.setattr(_provision, "provisioner", lambda system: prov)
    monkeypatch.setattr(_provision, "choose_backend", lambda *a, **k: BackendChoice("nats", "process", "test"))
    before = set(leftovers())
    with network(["n1", "n2", "n3"]) as net:
        assert net is not None
        hosts = [NodeHost(net.address(h), h, net.prefix_for(h)) for h in ("n1", "n2", "n3")]
        with provision("nats", shape=ClusterShape(3, 3, 2), node_hosts=hosts) as endpoint:
            control = broker_control(endpoint)
            assert control is not None
            addresses = [url.removeprefix("nats://").split(":") for url in endpoint.nodes]
            assert [a for a, _ in addresses] == [net.address(h) for h in ("n1", "n2", "n3")]
            assert all(_answers(a, int(p)) for a, p in addresses)
            # a node's port is only on its own host: not on this (root) namespace's loopback
            assert not _answers("127.0.0.1", int(addresses[0][1]))
            net.set_link(control.host(1) or "", up=False)  # what isolate-node does
            try:
                assert not _answers(*addresses[1][:1], int(addresses[1][1]))
                assert _answers(addresses[0][0], int(addresses[0][1]))
            finally:
                net.set_link("n2", up=True)
            assert _answers(addresses[1][0], int(addresses[1][1]))
    assert set(leftovers()) <= before
