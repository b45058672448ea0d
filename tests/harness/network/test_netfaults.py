"""Network fault actions: what each applies and undoes, on a recording fake of the network and its proxy."""

from __future__ import annotations

from typing import Any

import pytest

from harness.network import Routes
from harness.runner._netfaults import NetworkFaults
from harness.scenario import Fault


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def proxy(self, name: str, upstream: int) -> int:
        return 41000

    def add_toxic(self, proxy: str, name: str, kind: str, attributes: dict[str, Any], stream: str) -> None:
        self.calls.append(("add", proxy, kind, attributes, stream))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self.calls.append(("remove", proxy, name))


class FakeNetwork:
    def __init__(self) -> None:
        self.tox = Recorder()
        self.calls: list[tuple[Any, ...]] = []

    def address(self, host: str | None) -> str:
        return "10.1.1.2"

    def toxiproxy(self, host: str | None) -> Recorder:
        return self.tox

    def set_link(self, host: str, up: bool) -> None:
        self.calls.append(("link", host, up))

    def shape(self, host: str, rate: str | None) -> None:
        self.calls.append(("shape", host, rate))


def faults() -> tuple[FakeNetwork, NetworkFaults]:
    net: Any = FakeNetwork()
    routes = Routes(net, "server")
    routes.rewrite("tcp://127.0.0.1:5000", "cons", {5000})
    routes.rewrite("tcp://127.0.0.1:6000", "cons", {6000})  # another case's proxy: not this case's
    return net, NetworkFaults(net, routes, {5000})


def test_delay_is_a_latency_toxic_each_way_on_this_cases_proxies_of_the_host() -> None:
    net, nf = faults()
    fault = Fault(at=1, action="delay", duration=1, host="cons", delay=0.02, jitter=0.005)
    nf.apply(fault)
    assert net.tox.calls == [("add", "cons-5000", "latency", {"latency": 20, "jitter": 5}, "upstream"),
                             ("add", "cons-5000", "latency", {"latency": 20, "jitter": 5}, "downstream")]
    nf.undo(fault)
    assert [c[0] for c in net.tox.calls[2:]] == ["remove", "remove"]


def test_partition_and_bandwidth_act_on_the_link() -> None:
    net, nf = faults()
    for fault in (Fault(at=1, action="partition", duration=1, host="cons"),
                  Fault(at=1, action="bandwidth", duration=1, host="cons", rate="10mbit")):
        nf.apply(fault)
        nf.undo(fault)
    assert net.calls == [("link", "cons", False), ("link", "cons", True),
                         ("shape", "cons", "10mbit"), ("shape", "cons", None)]


def test_a_host_without_proxied_connections_is_an_error() -> None:
    _, nf = faults()
    with pytest.raises(RuntimeError, match="no connection of host prod"):
        nf.apply(Fault(at=1, action="reset", duration=1, host="prod"))
