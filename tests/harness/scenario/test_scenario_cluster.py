"""The broker's shape in a scenario (``cluster:``) and the node faults: parsed, defaulted where a broker can
cluster, refused in one line naming the field where it cannot."""

from __future__ import annotations

import pytest

from harness.brokers import _base
from harness.drivers.base import SINGLE_NODE, ClusterShape
from harness.scenario import Fault, ScenarioError, parse_scenario

BASE = {"name": "c", "pattern": "queue", "message_sizes": [100], "messages": 100}


@pytest.fixture(autouse=True)
def kafka_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka runs as a cluster; Mosquitto cannot (the provisioners' declarations decide, not this test)."""
    from harness.brokers.kafka import KafkaProvisioner
    from harness.brokers.mqtt import MosquittoProvisioner

    monkeypatch.setattr(KafkaProvisioner, "max_nodes", 5)
    monkeypatch.setattr(MosquittoProvisioner, "max_nodes", 1)
    monkeypatch.setattr(MosquittoProvisioner, "cluster_note", "Mosquitto has no clustering")
    assert _base.Provisioner.max_nodes == 1


def test_a_scenario_cluster_shapes_the_brokers_that_can_and_says_why_for_the_others() -> None:
    sc = parse_scenario({**BASE, "cluster": {"nodes": 3}, "systems": ["kafka", "mqtt", "zmq"]}, "c.yaml")
    assert sc.cluster == ClusterShape(3, 3, 2)  # replicas default to min(nodes, 3), min in-sync to a majority
    (kafka,) = sc.variants_for("kafka")
    (mqtt,) = sc.variants_for("mqtt")
    (zmq,) = sc.variants_for("zmq")
    assert kafka.cluster == ClusterShape(3, 3, 2) and kafka.cluster_note == ""
    assert mqtt.cluster == SINGLE_NODE and mqtt.cluster_note == "Mosquitto has no clustering"
    assert zmq.cluster == SINGLE_NODE and zmq.cluster_note == ""


def test_a_variant_gives_its_own_shape_and_the_manifest_describes_it() -> None:
    sc = parse_scenario({**BASE, "cluster": {"nodes": 3}, "variants": {"kafka": [
        {"name": "one", "acks": "all", "cluster": {"nodes": 1}},
        {"name": "rf5", "acks": "all", "cluster": {"nodes": 5, "replicas": 5, "min_insync": 3}},
        {"name": "inherits", "acks": "all"},
    ]}}, "c.yaml")
    one, rf5, inherits = sc.variants["kafka"]
    assert one.cluster == SINGLE_NODE and "cluster" not in one.options
    assert rf5.cluster == ClusterShape(5, 5, 3)
    assert inherits.cluster == ClusterShape(3, 3, 2)
    described = sc.as_dict()
    assert described["cluster"] == {"nodes": 3, "replicas": 3, "min_insync": 2}
    assert described["variants"]["kafka"][1]["cluster"] == {"nodes": 5, "replicas": 5, "min_insync": 3}
    assert "cluster" not in described["variants"]["kafka"][0]


def test_node_faults_are_parsed_with_their_node() -> None:
    sc = parse_scenario({**BASE, "hosts": {"nodes": ["n1", "n2", "n3"], "consumers": "c"}, "faults": [
        {"at": "4s", "action": "kill-node"},
        {"at": 1, "action": "restart-node", "node": 2, "down": "2s"},
        {"at": 2, "action": "pause-node", "node": "follower", "duration": "3s"},
        {"at": 3, "action": "isolate-node", "duration": "1s"},
    ]}, "c.yaml")
    assert sc.faults == (
        Fault(at=1.0, action="restart-node", node=2, down=2.0),
        Fault(at=2.0, action="pause-node", node="follower", duration=3.0),
        Fault(at=3.0, action="isolate-node", node="leader", duration=1.0),
        Fault(at=4.0, action="kill-node", node="leader"),
    )
    assert sc.hosts.names() == ("c", "n1", "n2", "n3")
    assert sc.as_dict()["hosts"]["nodes"] == ["n1", "n2", "n3"]
    assert sc.as_dict()["faults"][1] == {"at": 2.0, "action": "pause-node", "target": 0, "down": 0.0,
                                         "node": "follower", "duration": 3.0}


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"cluster": {"nodes": 3, "replicas": 4}}, "cluster.replicas", "cannot exceed the nodes"),
        ({"cluster": {"nodes": 3, "min_insync": 4}}, "cluster.min_insync", "cannot exceed the replicas"),
        ({"cluster": {"nodes": 9}}, "cluster.nodes", "at most 7"),
        ({"cluster": {"nodes": 3, "racks": 2}}, "cluster.racks", "not a cluster field"),
        ({"cluster": 3}, "cluster", "must be a mapping"),
        ({"variants": {"mqtt": {"cluster": {"nodes": 3}}}}, "variants.mqtt.cluster", "Mosquitto has no clustering"),
        ({"variants": {"zmq": {"cluster": {"nodes": 2}}}}, "variants.zmq.cluster", "brokerless"),
        ({"faults": [{"at": 1, "action": "kill-node", "node": "boss"}]}, "faults[0].node", "leader, follower"),
        ({"faults": [{"at": 1, "action": "pause-node"}]}, "faults[0].duration", "required for pause-node"),
        ({"faults": [{"at": 1, "action": "kill-node", "duration": 1}]}, "faults[0].duration", "only pause-node"),
        ({"faults": [{"at": 1, "action": "kill-node", "down": 1}]}, "faults[0].down", "only restart-node"),
        ({"faults": [{"at": 1, "action": "kill-node", "target": 1}]}, "faults[0].target", "a node action has"),
        ({"faults": [{"at": 1, "action": "isolate-node", "duration": 1}]}, "faults[0].action", "hosts: {nodes"),
        ({"faults": [{"at": 1, "action": "kill-broker", "node": 1}]}, "faults[0].node", "only node actions"),
        ({"hosts": {"nodes": ["a"]}}, "hosts.nodes", "two or more"),
        ({"hosts": {"nodes": ["a", "a"]}}, "hosts.nodes", "a host of its own"),
        ({"hosts": {"nodes": ["a", "b"], "consumers": "a"}}, "hosts.nodes", "also given a role"),
    ],
)
def test_wrong_shapes_and_node_faults_name_the_field(extra: dict, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**BASE, **extra}, "c.yaml")
    message = str(err.value)
    assert message.startswith(f"c.yaml: field '{field}':") and words in message, message
    assert "\n" not in message
