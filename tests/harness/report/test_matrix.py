"""The measured feature matrix on synthetic summary and recovery rows: every cell's verdict follows the
numbers, and says which number decided it."""

from __future__ import annotations

import math

import pandas as pd

from harness.report.matrix import MATRIX_COLUMNS, NOT_MEASURED, feature_matrix, scenario_roles


def rep(scenario: str, system: str, variant: str = "default", pattern: str = "queue", **kw: float) -> dict:
    row = {"scenario": scenario, "system": system, "variant": variant, "pattern": pattern, "label": system,
           "guarantee": kw.pop("guarantee", "at-most-once"), "size": 100, "expected": 1000, "received": 1000,
           "lost": 0, "out_of_order": 0, "sender_msgs_per_s": 5000.0, "receiver_msgs_per_s": 5000.0,
           "lat_p50_us": 100.0, "lat_p99_us": 900.0}
    row.update(kw)
    return row


def rec(system: str, variant: str, action: str, lost: float, accepted: int = 500, refused: int = 0,
        recovery_s: float = 0.5) -> dict:
    return {"system": system, "variant": variant, "carried_out_as": action, "lost": lost, "accepted": accepted,
            "refused": refused, "duplicated": 0, "recovery_s": recovery_s,
            "guarantee": "durable" if variant == "durable" else "at-most-once"}


ROLES = scenario_roles([
    {"name": "base", "pattern": "queue"},
    {"name": "slow", "consumer_rate": 1000},
    {"name": "crash", "faults": [{"at": 1.0, "action": "restart-peer"}]},
])


def test_roles_from_scenario_descriptions() -> None:
    assert ROLES == {"base": "baseline", "slow": "slow-consumer", "crash": "faults"}


def test_cells_follow_the_numbers() -> None:
    per_rep = pd.DataFrame([
        rep("base", "zmq", receiver_msgs_per_s=90000.0, sender_msgs_per_s=95000.0),
        rep("slow", "zmq", pattern="pubsub", lost=400, expected=1000),
        rep("slow", "zmq", pattern="queue", lost=0, sender_msgs_per_s=1000.0),
        rep("base", "rabbitmq", variant="transient", receiver_msgs_per_s=8000.0, out_of_order=3),
        rep("base", "rabbitmq", variant="durable", guarantee="durable", receiver_msgs_per_s=2000.0),
        rep("crash", "rabbitmq", variant="durable", guarantee="at-most-once"),  # summaries may know only one
        rep("base", "kafka", receiver_msgs_per_s=1000.0, label="kafka (tansu)"),
    ])
    per_rep.loc[per_rep["system"] == "kafka", "label"] = "kafka (tansu)"
    recovery = pd.DataFrame([
        rec("zmq", "default", "restart-consumer", 120),
        rec("rabbitmq", "transient", "restart-broker", 205, refused=1),
        rec("rabbitmq", "durable", "restart-broker", 0, refused=2, recovery_s=9.5),
        rec("kafka", "default", "restart-broker", 300, recovery_s=math.nan),
    ])
    m = feature_matrix(per_rep, recovery, ROLES, {"zmq": True, "rabbitmq": False, "kafka": False})
    assert list(m.columns) == list(MATRIX_COLUMNS)
    by = m.set_index("system")
    assert by.loc["zmq", "needs a broker"].startswith("no")
    assert by.loc["rabbitmq", "needs a broker"] == "yes"
    assert by.loc["zmq", "persistence (broker crash)"].startswith("no broker") and "lost 120 of 500" in by.loc["zmq", "persistence (broker crash)"]
    assert by.loc["rabbitmq", "persistence (broker crash)"] == "yes — transient: lost 205 of 500; durable: lost 0 of 500"
    assert by.loc["kafka (tansu)", "persistence (broker crash)"].startswith("no") and "memory only" in by.loc["kafka (tansu)", "persistence (broker crash)"]
    assert by.loc["rabbitmq", "confirms / transactions"].startswith("yes — durable (durable)")
    assert "told of 3 failed sends" in by.loc["rabbitmq", "confirms / transactions"]
    assert by.loc["zmq", "confirms / transactions"].startswith("no")
    assert by.loc["zmq", "loss under slow consumer"].startswith("drops")
    assert "pubsub: lost 400 of 1,000 (40.0 %)" in by.loc["zmq", "loss under slow consumer"]
    assert "queue: lost 0 of 1,000" in by.loc["zmq", "loss under slow consumer"]
    assert by.loc["rabbitmq", "loss under slow consumer"] == NOT_MEASURED
    assert by.loc["rabbitmq", "ordering"].startswith("not kept — 3 of")
    assert by.loc["zmq", "ordering"].startswith("kept — 0 of 3,000")
    assert by.loc["rabbitmq", "recovery after crash"].startswith("yes") and "9.5 s" in by.loc["rabbitmq", "recovery after crash"]
    assert by.loc["kafka (tansu)", "recovery after crash"].startswith("no — default, broker restart: no delivery")
    assert by.loc["zmq", "throughput"].startswith("90,000 msg/s received, 95,000 sent")
    assert by.loc["rabbitmq", "throughput"].startswith("8,000 msg/s") and "transient" in by.loc["rabbitmq", "throughput"]
    assert by.loc["rabbitmq", "latency"] == "p50 100 µs, p99 900 µs (transient)"


def test_zero_loss_without_a_durable_variant_is_not_called_persistence() -> None:
    per_rep = pd.DataFrame([rep("crash", "nats")])
    recovery = pd.DataFrame([rec("nats", "default", "restart-broker", 0)])
    m = feature_matrix(per_rep, recovery, ROLES, {"nats": False})
    assert m.iloc[0]["persistence (broker crash)"] == "no loss seen, none promised — default: lost 0 of 500"


def test_system_without_any_evaluation_data_says_not_measured() -> None:
    per_rep = pd.DataFrame([rep("slow", "nats", lost=0)])
    m = feature_matrix(per_rep, pd.DataFrame(), ROLES, {"nats": False})
    row = m.iloc[0]
    assert row["persistence (broker crash)"] == NOT_MEASURED
    assert row["recovery after crash"] == NOT_MEASURED
    assert row["throughput"] == NOT_MEASURED
    assert row["loss under slow consumer"].startswith("none")


def test_network_cells_follow_the_numbers() -> None:
    def net(variant: str, action: str, lost: int, **kw: float) -> dict:
        row = {**rec("redis", variant, action, lost), "reordered": 0, "back_first_s": 1.25, "back_rate_s": 1.4,
               "latency_before_s": 0.0002, "latency_during_s": 0.0203, "latency_after_s": 0.0002,
               "injected_delay_s": 0.02}
        row.update(kw)
        return row

    recovery = pd.DataFrame([
        net("transient", "partition", 7),
        net("aof", "partition", 0),
        net("default", "delay", 0),
        net("default", "reset", 2, refused=1),
        net("default", "bandwidth", 3),
        rec("redis", "aof", "restart-broker", 0),
    ])
    m = feature_matrix(pd.DataFrame(), recovery, ROLES, {"redis": False}).set_index("system")
    row = m.loc["redis"]
    assert row["survives a partition without loss"].startswith("yes — transient: lost 7 of 500")
    assert "aof: lost 0 of 500" in row["survives a partition without loss"]
    assert "first delivery 1.25 s" in row["survives a partition without loss"]
    assert row["latency under delay"].startswith("default: p50 +20.1 ms with 20 ms injected")
    assert row["resets, bandwidth limit"].startswith("reset, default: lost 2 of 500, dup 0, producer told of 1")
    assert "bandwidth, default: lost 3 silently of 500" in row["resets, bandwidth limit"]
    assert "partition" not in row["recovery after crash"]  # crashes and network faults stay apart


def test_a_partition_every_variant_lost_in_is_a_no() -> None:
    recovery = pd.DataFrame([{**rec("zmq", "default", "partition", 3), "reordered": 0}])
    m = feature_matrix(pd.DataFrame(), recovery, ROLES, {"zmq": True}).set_index("system")
    assert m.loc["zmq", "survives a partition without loss"].startswith("no — default: lost 3 of 500")
    assert m.loc["zmq", "latency under delay"] == NOT_MEASURED


def test_recovery_table_shows_p50_and_p99_before_during_and_after_the_fault() -> None:
    from harness.report.evaluation import Evaluation, recovery_view

    row = {"scenario": "net", "label": "zmq", "variant": "default", "guarantee": "at-most-once",
           "repetition": 0, "action": "delay",
           "at_s": 1.0, "carried_out_as": "delay", "window_messages": 500, "refused": 0, "lost": 0,
           "duplicated": 0, "reordered": 0, "recovery_s": 0.1, "first_new_s": 0.01, "max_gap_s": 0.02,
           "latency_before_s": 0.0005, "latency_during_s": 0.0205, "latency_after_s": 0.0006,
           "latency_p99_before_s": 0.002, "latency_p99_during_s": 0.031, "latency_p99_after_s": math.nan}
    empty = pd.DataFrame()
    view = recovery_view(Evaluation(timeseries=empty, faults=empty, recovery=pd.DataFrame([row]), matrix=empty))
    assert view.loc[0, "p50 ms before/during/after"] == "0.5 / 20.5 / 0.6"
    assert view.loc[0, "p99 ms before/during/after"] == "2 / 31 / —"
