"""The scenario's ``hosts:`` and network fault actions: parsed, described, and errors naming the field."""

from __future__ import annotations

import pytest

from harness.drivers import SYSTEMS
from harness.scenario import Fault, Hosts, ScenarioError, load_scenarios, parse_scenario

BASE = {"name": "n", "pattern": "queue", "message_sizes": [100], "duration": "3s", "rate": 500,
        "hosts": {"broker": "server", "producers": "prod", "consumers": "cons"}}


def test_hosts_and_network_faults_are_parsed_and_described() -> None:
    sc = parse_scenario({**BASE, "faults": [
        {"at": "2s", "action": "delay", "delay": "20ms", "jitter": "5ms", "duration": "3s"},
        {"at": "1s", "action": "partition", "host": "producers", "duration": "2s"},
        {"at": "6s", "action": "bandwidth", "host": "server", "rate": "10mbit", "duration": 1},
        {"at": "8s", "action": "reset", "duration": "500ms"},
    ]}, "n.yaml")
    assert sc.hosts == Hosts(broker="server", producers="prod", consumers="cons")
    assert sc.hosts.names() == ("server", "prod", "cons")
    part, delay, bandwidth, reset = sc.faults
    assert part == Fault(at=1.0, action="partition", duration=2.0, host="prod")  # a role names its host
    assert (delay.host, delay.delay, delay.jitter, delay.duration) == ("cons", 0.02, 0.005, 3.0)  # default host
    assert (bandwidth.host, bandwidth.rate) == ("server", "10mbit")
    assert reset.network and not Fault(at=1, action="kill-broker").network
    described = sc.as_dict()
    assert described["hosts"] == {"broker": "server", "producers": "prod", "consumers": "cons"}
    assert described["faults"][1]["delay"] == 0.02 and described["faults"][1]["duration"] == 3.0


def test_without_hosts_nothing_changes() -> None:
    sc = parse_scenario({k: v for k, v in BASE.items() if k != "hosts"}, "n.yaml")
    assert sc.hosts == Hosts() and sc.hosts.names() == ()


def test_the_shipped_network_scenarios_are_valid_and_cover_every_system() -> None:
    scenarios = load_scenarios("scenarios/network.yaml")
    assert all(set(sc.systems) == set(SYSTEMS) for sc in scenarios)
    actions = {f.action for sc in scenarios for f in sc.faults}
    assert actions == {"delay", "bandwidth", "partition", "reset"}
    assert all(f.host == "cons" for sc in scenarios for f in sc.faults)


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"hosts": ["a"]}, "hosts", "mapping"),
        ({"hosts": {"client": "a"}}, "hosts.client", "broker, producers, consumers"),
        ({"hosts": {"broker": "Bad Name"}}, "hosts.broker", "host name"),
        ({"faults": [{"at": 1, "action": "partition"}]}, "faults[0].duration", "required"),
        ({"faults": [{"at": 1, "action": "delay", "duration": 1}]}, "faults[0].delay", "required"),
        ({"faults": [{"at": 1, "action": "partition", "duration": 1, "host": "elsewhere"}]}, "faults[0].host",
         "one of the hosts"),
        ({"faults": [{"at": 1, "action": "bandwidth", "duration": 1, "rate": "fast"}]}, "faults[0].rate", "10mbit"),
        ({"faults": [{"at": 1, "action": "reset", "duration": 1, "rate": "1mbit"}]}, "faults[0].rate", "only"),
        ({"faults": [{"at": 1, "action": "kill-broker", "duration": 1}]}, "faults[0].duration", "network actions"),
    ],
)
def test_errors_name_the_field(extra: dict, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**BASE, **extra}, "n.yaml")
    assert f"'{field}'" in str(err.value) and words in str(err.value)


def test_network_faults_need_hosts() -> None:
    spec = {k: v for k, v in BASE.items() if k != "hosts"}
    with pytest.raises(ScenarioError, match="hosts:"):
        parse_scenario({**spec, "faults": [{"at": 1, "action": "reset", "duration": 1}]}, "n.yaml")
