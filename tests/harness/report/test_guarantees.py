"""The report's guarantees section on a hand-made summary: every broker row's parity, and the cost of each
guarantee as a ratio to the same system's at-most-once row (brokerless rows beside them)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.pipeline import Summary
from harness.report import guarantees
from harness.runfolder import RunInfo

PARITY = {
    "kafka/acks0": ("at-most-once", "1", "1", "none (acks=0)"),
    "kafka/acks-all": ("durable", "1", "1", "acks=all"),
    "kafka/rf3": ("durable", "3", "3", "acks=all"),
    "zmq/default": ("at-most-once", "0", "0", "none"),
}
RATE = {"kafka/acks0": 100_000.0, "kafka/acks-all": 50_000.0, "kafka/rf3": 25_000.0, "zmq/default": 400_000.0}
P99 = {"kafka/acks0": 1_000.0, "kafka/acks-all": 2_000.0, "kafka/rf3": 8_000.0, "zmq/default": 100.0}


def summary() -> Summary:
    variants = {}
    rows = []
    for key, (guarantee, nodes, replicas, acks) in PARITY.items():
        system, variant = key.split("/")
        label = "kafka (kafka-python)" if system == "kafka" else "zmq (pyzmq)"
        parity = "no broker (library)" if nodes == "0" else f"{nodes} node(s); acks: {acks}; fsync: never"
        variants[key] = {"system": system, "variant": variant, "label": label, "guarantee": guarantee,
                         "parity": parity, "nodes": nodes, "replicas": replicas, "acks": acks, "fsync": "never"}
        rows.append({"run_id": "r", "scenario": "replicated", "pattern": "queue", "system": system,
                     "variant": variant, "size": 1024, "rate": float("nan"), "label": label,
                     "guarantee": guarantee, "nodes": nodes, "replicas": replicas, "parity": parity,
                     "receiver_msgs_per_s_mean": RATE[key], "lat_p99_us_mean": P99[key]})
    run = RunInfo(Path("r"), "r", True, variants=variants)
    empty = pd.DataFrame()
    return Summary(pd.DataFrame(rows), pd.DataFrame(rows), empty, empty, (run,), "pandas")


def test_parity_lists_every_broker_row_and_no_library() -> None:
    table = guarantees.parity_table(summary())
    assert sorted(table["variant"]) == ["acks-all", "acks0", "rf3"]
    rf3 = table[table["variant"] == "rf3"].iloc[0]
    assert (rf3["nodes"], rf3["replicas"], rf3["a send waits for"], rf3["guarantee"]) == ("3", "3", "acks=all", "durable")


def test_the_cost_of_a_guarantee_is_a_ratio_to_the_same_systems_at_most_once_row() -> None:
    table = guarantees.cost_table(summary()).set_index("system")
    kafka = table.loc["kafka (kafka-python)"]
    assert kafka["at-most-once: msgs/s"].startswith("100") and "×" not in kafka["at-most-once: msgs/s"]
    assert "×0.50 [acks-all]" in kafka["single-node durable: msgs/s"]
    assert "×0.25 [rf3]" in kafka["replicated durable: msgs/s"]
    assert "×8.00 [rf3]" in kafka["replicated durable: p99"]
    zmq = table.loc["zmq (pyzmq) (no broker)"]
    assert zmq["single-node durable: msgs/s"] == zmq["replicated durable: msgs/s"] == "—"
    html, markdown = guarantees.render(summary())  # type: ignore[misc]
    assert "The cost of a guarantee" in html and "×0.25" in markdown
