"""End to end through the real runner: a slow consumer on pyzmq (PUB/SUB drops, PUSH/PULL does not), and a
Redis broker SIGKILLed and started again mid-run (faults, recovery, time series, report section).

Bounded in size and time; no assertion depends on how fast this machine is. In CI (CI=true) a missing
broker fails instead of skipping.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from harness.brokers import _containers
from harness.brokers._process import live_pids
from harness.compare import compare
from harness.scenario import parse_scenario
from tests.harness.drivers.conformance import require_backend


def quiet() -> Console:
    return Console(file=open(os.devnull, "w"), width=160)  # noqa: SIM115 - closed with the process


def run(tmp_path: Path, specs: list[dict], report: bool = False, backend: str = "auto"):  # type: ignore[no-untyped-def]
    scenarios = [parse_scenario(s, "test.yaml") for s in specs]
    return compare(scenarios, out_root=tmp_path, console=quiet(), write_report=report, backend=backend)


def test_slow_consumer_pubsub_drops_and_push_pull_does_not(tmp_path: Path) -> None:
    common = {"message_sizes": [1000], "messages": 10000, "warmup": 0, "consumer_rate": 4000, "systems": ["zmq"]}
    out = run(tmp_path, [{"name": "slow-pubsub", "pattern": "pubsub", **common},
                         {"name": "slow-queue", "pattern": "queue", **common}], report=True)
    assert out.complete, out.problems
    by = out.summary.set_index("scenario")
    assert by.loc["slow-pubsub", "lost"] > 0  # PUB drops at the HWM: loss
    assert by.loc["slow-queue", "lost"] == 0  # PUSH blocks the sender instead
    assert by.loc["slow-queue", "received"] == 10000
    series = sorted((out.run_dir / "timeseries").glob("*.parquet"))
    assert len(series) == 2
    ts = pd.read_parquet(series[0])
    assert {"t_ns", "seconds", "sent", "received", "backlog", "broker_rss_bytes", "workers_rss_bytes",
            "queue_depth", "system", "scenario"} <= set(ts.columns)
    assert ts["sent"].is_monotonic_increasing and ts["workers_rss_bytes"].gt(0).all()
    assert not (out.run_dir / "faults.parquet").exists()
    matrix = pd.read_csv(out.run_dir / "feature_matrix.csv").set_index("system")
    assert matrix.loc["zmq (pyzmq)", "loss under slow consumer"].startswith("drops")
    assert (out.run_dir / "figures" / "evaluation_backlog.png").exists()


@pytest.mark.parametrize("backend", ["process", "containers"])
def test_redis_killed_and_restarted_mid_run(tmp_path: Path, backend: str) -> None:
    """The broker proper killed and started again on its port and data directory: a local process, or its
    container (the command run again in a new one)."""
    require_backend("redis", backend)
    spec = {
        "name": "crash", "pattern": "queue", "message_sizes": [100], "duration": "2s", "rate": 400, "warmup": 0,
        "consumer_rate": 200, "systems": ["redis"],
        "variants": {"redis": [{"name": "transient"}, {"name": "aof", "aof": True}]},
        "faults": [{"at": "0.8s", "action": "restart-broker"}],
    }
    before = set(live_pids())  # e.g. the conformance suite's session-wide broker, when run in one session
    containers_before = set(_containers.live_names())
    out = run(tmp_path, [spec], report=True, backend=backend)
    assert out.complete, out.problems
    assert set(live_pids()) <= before  # the broker this run provisioned (and restarted) is stopped
    assert set(_containers.live_names()) <= containers_before

    faults = pd.read_parquet(out.run_dir / "faults.parquet")
    assert list(faults["variant"]) == ["transient", "aof"]
    assert faults["ok"].all() and (faults["carried_out_as"] == "restart-broker").all()
    assert (faults["t_back_ns"] > faults["t_fault_ns"]).all() and (faults["t_fault_ns"] > faults["t_start_ns"]).all()
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert len(manifest["faults"]) == 2 and manifest["systems"]["redis"]["backend"] == backend

    recovery = pd.read_csv(out.run_dir / "recovery.csv").set_index("variant")
    assert recovery.loc["aof", "lost"] == 0  # AOF with fsync always: nothing accepted is lost
    assert recovery.loc["transient", "lost"] > 0  # the stream was in memory only, with a backlog in it
    assert recovery["recovery_s"].notna().all()  # both deliver again after the restart
    assert (recovery["window_messages"] > 0).all()
    # one accounting: the summary, the recovery table and the labels agree per variant (one fault per case,
    # so the fault's window is the whole case)
    summary = out.summary.set_index("variant")
    for variant in ("transient", "aof"):
        assert summary.loc[variant, "lost"] == recovery.loc[variant, "lost"]
        assert summary.loc[variant, "send_failed"] == recovery.loc[variant, "refused"]
        assert summary.loc[variant, "expected"] - summary.loc[variant, "send_failed"] == recovery.loc[variant, "accepted"]
        assert summary.loc[variant, "guarantee"] == recovery.loc[variant, "guarantee"]
        assert summary.loc[variant, "guarantee"] == manifest["variants"][f"redis/{variant}"]["guarantee"]

    assert len(list((out.run_dir / "timeseries").glob("*.parquet"))) == 2
    html = (out.run_dir / "report.html").read_text()
    assert "Measured feature matrix" in html and "Recovery and durability" in html
    assert (out.run_dir / "figures" / "evaluation_backlog.png").exists()
    assert (out.run_dir / "feature_matrix.csv").exists()


def test_worker_faults_continue_the_records(tmp_path: Path) -> None:
    spec = {
        "name": "workers", "pattern": "queue", "message_sizes": [100], "duration": "2s", "rate": 1000, "warmup": 0,
        "consumers": 2, "systems": ["zmq"],
        "faults": [{"at": "0.6s", "action": "restart-producer", "down": "0.1s"},
                   {"at": "1.2s", "action": "kill-consumer", "target": 1}],
    }
    out = run(tmp_path, [spec])
    assert out.complete, out.problems
    faults = pd.read_parquet(out.run_dir / "faults.parquet")
    assert list(faults["carried_out_as"]) == ["restart-producer", "kill-consumer"] and faults["ok"].all()
    (raw,) = (out.run_dir / "raw").glob("*.parquet")
    df = pd.read_parquet(raw)
    sent = int(out.summary["sent"].iloc[0])
    # the restarted producer went on from the killed one's last stamped sequence number; a message sent by the
    # killed one just before it could stamp it is sent again (one duplicate at most)
    assert sorted(df["seq"].unique()) == list(range(sent))
    assert len(df) - sent <= 1
    assert df["t_send"].notna().all()
    recovery = pd.read_csv(out.run_dir / "recovery.csv")
    assert len(recovery) == 2 and (recovery["window_messages"] > 0).all()
