"""FaultInjector with fake workers and a fake broker: what it does for each action and what it records."""

from __future__ import annotations

import time

import pytest

from harness.runner.faults import FaultInjector, Sampler, WorkerHooks, rss_bytes
from harness.scenario import Fault


class FakeBroker:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.up = True

    def kill(self) -> None:
        self.calls.append("kill")
        self.up = False

    def start(self) -> str:
        self.calls.append("start")
        self.up = True
        return "1.0"

    def running(self) -> bool:
        return self.up

    def pids(self) -> list[int]:
        return []


def injector(faults: list[Fault], broker: FakeBroker | None, needs_broker: bool, calls: list[str]) -> FaultInjector:
    hooks = WorkerHooks(
        kill=lambda name: calls.append(f"kill {name}") is None,
        relaunch=lambda name: calls.append(f"relaunch {name}"),
        mark_done=lambda name: calls.append(f"done {name}"),
    )
    return FaultInjector(faults, time.monotonic_ns(), hooks, broker, needs_broker, ["producer-0"], ["consumer-0", "consumer-1"])


def test_broker_and_worker_actions_are_carried_out_in_order() -> None:
    broker, calls = FakeBroker(), []
    inj = injector([Fault(0.0, "restart-peer"), Fault(0.01, "restart-consumer", target=1),
                    Fault(0.02, "kill-producer"), Fault(0.03, "kill-broker")], broker, True, calls)
    inj.start()
    inj.join(5)
    records = inj.stop()
    assert [r["carried_out_as"] for r in records] == ["restart-broker", "restart-consumer", "kill-producer", "kill-broker"]
    assert all(r["ok"] for r in records)
    assert broker.calls == ["kill", "start", "kill"]
    assert calls == ["kill consumer-1", "relaunch consumer-1", "kill producer-0", "done producer-0"]
    assert records[0]["t_back_ns"] > records[0]["t_fault_ns"] >= records[0]["t_planned_ns"]
    assert records[3]["t_back_ns"] is None
    assert inj.ensure_broker().startswith("the broker was left dead") and broker.calls[-1] == "start"


def test_brokerless_systems_restart_the_consumer_for_restart_peer_and_skip_broker_faults() -> None:
    calls: list[str] = []
    inj = injector([Fault(0.0, "restart-peer"), Fault(0.0, "kill-broker")], None, False, calls)
    inj.start()
    inj.join(5)
    records = inj.stop()
    assert records[0]["carried_out_as"] == "restart-consumer" and records[0]["ok"]
    assert calls == ["kill consumer-0", "relaunch consumer-0"]
    assert not records[1]["ok"] and "no broker" in records[1]["detail"]


def test_faults_after_the_end_are_recorded_as_not_reached() -> None:
    inj = injector([Fault(60.0, "restart-broker")], FakeBroker(), True, [])
    inj.start()
    records = inj.stop()
    assert len(records) == 1 and not records[0]["ok"] and records[0]["t_fault_ns"] is None
    assert "not reached" in records[0]["detail"]


def test_sampler_rows_and_rss() -> None:
    import os

    assert rss_bytes([os.getpid()]) > 0 and rss_bytes([2**22 + 12345]) == 0
    progress = [10, 4, 3]  # one producer, two subscribers
    sampler = Sampler(progress, 1, 2, time.monotonic_ns(), broker_pids=list, worker_pids=lambda: [os.getpid()],
                      depth=lambda: 7.0, interval=0.01)
    sampler.start()
    time.sleep(0.05)
    rows = sampler.stop()
    assert len(rows) >= 2
    assert rows[-1]["backlog"] == 10 * 2 - 7 and rows[-1]["queue_depth"] == 7.0
    assert rows[-1]["workers_rss_bytes"] > 0


def test_queue_depth_facts_come_from_the_brokers_provisioners() -> None:
    from harness.brokers import provisioner
    from harness.drivers.base import Pattern
    from harness.runner.faults import BROKERLESS_DEPTH_NOTE, DEPTH_NOT_SAMPLED, depth_probe

    assert DEPTH_NOT_SAMPLED["zmq"] == DEPTH_NOT_SAMPLED["mqcore"] == BROKERLESS_DEPTH_NOTE
    rabbitmq = provisioner("rabbitmq")
    assert rabbitmq is not None and DEPTH_NOT_SAMPLED["rabbitmq"] == rabbitmq.depth_note != ""
    assert DEPTH_NOT_SAMPLED.get("a-test-only-system", "") == ""
    plan = {"topology": {"pattern": Pattern.QUEUE.value, "topics": 1, "producers": 1, "consumers": 1,
                         "message_size": 100, "run_tag": "t"}}
    assert depth_probe("zmq", None, plan) is None  # no broker, nothing to ask
    assert depth_probe("rabbitmq", object(), plan) is None  # the provisioner has no cheap probe


def test_node_faults_act_on_the_node_the_role_names_at_that_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real (fake-broker) cluster of three processes: kill the leader, restart a follower, pause node 2;
    each record names its node, and the cluster is whole again after the restart and the pause."""
    from harness.brokers import _provision, broker_control, provision
    from harness.brokers._choice import BackendChoice
    from harness.drivers.base import ClusterShape
    from tests.harness.brokers.test_cluster import FakeCluster

    prov = FakeCluster()
    monkeypatch.setattr(_provision, "provisioner", lambda system: prov)
    monkeypatch.setattr(_provision, "choose_backend", lambda *a, **k: BackendChoice("nats", "process", "test"))
    calls: list[str] = []
    faults = [Fault(0.0, "restart-node", node="follower", down=0.1), Fault(0.05, "pause-node", node=2, duration=0.2),
              Fault(0.1, "kill-node", node="leader"), Fault(0.15, "restart-node", node=5)]
    with provision("nats", shape=ClusterShape(3, 3, 2)) as endpoint:
        control = broker_control(endpoint)
        hooks = WorkerHooks(kill=lambda name: True, relaunch=calls.append, mark_done=calls.append)
        inj = FaultInjector(faults, time.monotonic_ns(), hooks, control, True, ["producer-0"], ["consumer-0"],
                            leader_resource="t0")
        inj.start()
        inj.join(60)
        records = inj.stop()
        assert [(r["action"], r["node"], r["ok"]) for r in records] == [
            ("restart-node", 1, True),  # the fake's leader is node 0: the first follower is node 1
            ("pause-node", 2, True),
            ("kill-node", 0, True),
            ("restart-node", None, False),
        ]
        assert "the cluster has 3 nodes" in records[3]["detail"]
        assert records[0]["t_whole_ns"] >= records[0]["t_back_ns"] > records[0]["t_fault_ns"]
        assert records[1]["t_whole_ns"] is not None and records[1]["down_s"] == 0.2
        assert records[2]["t_back_ns"] is None and "the leader of t0" in records[2]["detail"]
        assert not control.running()
        assert inj.ensure_broker().startswith("the broker was left dead") and control.running()
    assert calls == []


def test_node_faults_on_one_node_or_no_broker_are_not_applicable() -> None:
    calls: list[str] = []
    for broker, needs in ((FakeBroker(), True), (None, False)):
        inj = injector([Fault(0.0, "kill-node")], broker, needs, calls)
        inj.start()
        inj.join(5)
        (record,) = inj.stop()
        assert not record["ok"] and record["detail"].startswith("not applicable")
