"""End to end: ``crosscheck`` of MQTT starts Mosquitto through the harness's provisioning and runs, interleaved
with the harness's case, Mosquitto's own clients with the row's settings and ``tools/mqttbench`` (Paho for
Go) with the row's settings and at its best; the best row is ``mqttbench``'s, since Mosquitto's clients print
every message (a floor, not the broker's capacity).

Needs mosquitto, mosquitto-clients and the built ``mqttbench`` (``make brokers``); without them it skips,
except in CI (``CI=true``), where it fails with the reason.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from rich.console import Console

from harness.brokers import provisioner
from harness.crosscheck.run import crosscheck
from harness.crosscheck.tools.mqtt import MosquittoClients, PahoBench, paho_counts
from harness.scenario import load_scenarios


def _require_mqtt() -> None:
    prov = provisioner("mqtt")
    reason = ((prov.process_unavailable_reason() if prov else "no mqtt provisioner")
              or MosquittoClients().missing() or PahoBench().missing())
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def test_mqtt_crosscheck_takes_its_best_from_the_paho_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _require_mqtt()
    monkeypatch.setattr(MosquittoClients, "ramp", 0.5)
    monkeypatch.setattr(PahoBench, "ramp", 0.5)
    scenario = tmp_path / "cc.yaml"
    scenario.write_text("name: cc\npattern: queue\nsystems: [mqtt]\nmessage_sizes: [100]\nduration: 2s\n"
                        "warmup: 100\nrate: max\nrepetitions: 1\nvariants:\n  mqtt: {qos: 1}\n")
    outcome = crosscheck(load_scenarios(str(scenario)), systems=["mqtt"], out_root=tmp_path / "results",
                         backend="process", console=Console(file=open(os.devnull, "w")), write_report=False)
    assert outcome.complete, outcome.problems
    rows = outcome.rows
    got = sorted(zip(rows["tool"], rows["reference"], strict=True))
    assert got == [("mosquitto_pub/sub", "matched"), (PahoBench.name, "best"), (PahoBench.name, "matched")]
    assert (rows["status"] == "ok").all() and (rows["rate_kind"] == "receiver").all()
    for r in rows.itertuples():
        assert r.tool_rate > 0 and math.isclose(r.R, r.harness_rate / r.tool_rate)
        assert r.tool_steady_s >= 2.0 - 0.1 and "QoS 1" in r.tool_settings
    best = rows[rows["reference"] == "best"].iloc[0]
    assert "1000 publishes in flight" in best.tool_settings


def test_paho_counts_reads_subscriber_points_and_publisher_totals() -> None:
    text = ("sub 0 100.000000 0\nsub 1 100.000000 0\nsub 0 100.050000 120\nsub 1 100.050000 118\n"
            "pub 0 5000 2.500000\nmqttbench: something on stderr\n")
    subs, pubs = paho_counts(text)
    assert subs == {0: [(100.0, 0.0), (100.05, 120.0)], 1: [(100.0, 0.0), (100.05, 118.0)]}
    assert pubs == [(5000, 2.5)]
