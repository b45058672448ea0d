"""End to end: ``crosscheck`` starts Redis through the harness's provisioning, runs the harness case and
redis-benchmark (unpipelined and pipelined with the row's settings, then at its best) on it, interleaved,
each for a fixed time, writes the rows, and stops everything.

Needs redis-server and redis-benchmark (``make brokers``); without them it skips, except in CI (``CI=true``),
where it fails with the reason.
"""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from rich.console import Console

from harness.brokers import provisioner
from harness.crosscheck.run import CrossOutcome, crosscheck
from harness.crosscheck.tools.redis import RedisBenchmark
from harness.runfolder import RunFolder
from harness.runfolder.schema import CROSSCHECK, CROSSCHECK_COLUMNS
from harness.scenario import load_scenarios


def _require_redis() -> None:
    prov = provisioner("redis")
    reason = (prov.process_unavailable_reason() if prov else "no redis provisioner") or RedisBenchmark().missing()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _crosscheck(tmp_path: Path, repetitions: int) -> CrossOutcome:
    """``crosscheck`` of Redis, 100 B, 2 s a side, on a broker of its own."""
    scenario = tmp_path / "cc.yaml"
    scenario.write_text("name: cc\npattern: queue\nsystems: [redis]\nmessage_sizes: [100]\nduration: 2s\n"
                        f"warmup: 100\nrate: max\nrepetitions: {repetitions}\n")
    return crosscheck(load_scenarios(str(scenario)), systems=["redis"], out_root=tmp_path / "results",
                      backend="process", console=Console(file=open(os.devnull, "w")), write_report=False)


def test_redis_crosscheck_runs_both_sides_on_one_broker_and_stops_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _require_redis()
    monkeypatch.setattr(RedisBenchmark, "ramp", 0.5)
    outcome = _crosscheck(tmp_path, repetitions=2)
    assert outcome.complete, outcome.problems
    rows = outcome.rows
    assert tuple(rows.columns) == CROSSCHECK_COLUMNS
    got = sorted(zip(rows["tool"], rows["reference"], strict=True))
    assert got == sorted([("redis-benchmark -P 1", "matched"), ("redis-benchmark -P window", "matched"),
                          ("redis-benchmark -P window", "best")] * 2)
    assert sorted(rows["repetition"]) == [0, 0, 0, 1, 1, 1]
    assert (rows["status"] == "ok").all() and (rows["rate_kind"] == "sender").all()
    for r in rows.itertuples():
        assert r.harness_rate > 0 and r.tool_rate > 0 and math.isclose(r.R, r.harness_rate / r.tool_rate)
        assert r.cpu_tool_s > 0 and r.cpu_harness_s > 0
        assert r.tool_steady_s >= 2.0 - 0.3 and r.tool_settings  # the scenario's 2 s, in quarter-second ticks
    # the pipelined tool row uses the harness driver's pipeline depth (its default window); its best, more clients
    matched = rows[(rows["tool"] == "redis-benchmark -P window") & (rows["reference"] == "matched")]
    best = rows[rows["reference"] == "best"]
    assert set(matched["command"].str.contains("-P 100")) == {True} and set(matched["command"].str.contains("-c 1 "))
    assert set(best["command"].str.contains("-c 50 ")) == {True} and not best["client_bound"].any()
    run = RunFolder.open(outcome.run_dir)
    assert len(run.read_table(CROSSCHECK)) == 6 and (outcome.run_dir / f"{CROSSCHECK}.csv").is_file()
    # the broker is gone: nothing listens on its port any more
    url = urlsplit(run.manifest["crosscheck_brokers"]["redis"]["url"])
    with pytest.raises(OSError), socket.create_connection((url.hostname, url.port), timeout=1):
        pass


def test_a_tool_without_a_run_with_the_rows_settings_gives_a_not_run_row_and_runs_at_its_best(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Tool.unmatched`` (RocketMQ's tool for an async row): the variant's row with the row's settings says why
    it was not run, its run at its best is made all the same, and the crosscheck is complete."""
    _require_redis()
    from harness.crosscheck.tools.redis import RedisBenchmarkUnpipelined

    monkeypatch.setattr(RedisBenchmark, "ramp", 0.5)
    monkeypatch.setattr(RedisBenchmark, "unmatched", lambda self, case: "it has no such mode")
    monkeypatch.setattr(RedisBenchmarkUnpipelined, "unmatched", lambda self, case: None)
    outcome = _crosscheck(tmp_path, repetitions=1)
    assert outcome.complete, outcome.problems
    rows = outcome.rows.set_index(["tool", "reference"])
    assert sorted(rows.index) == [("redis-benchmark -P 1", "matched"), ("redis-benchmark -P window", "best"),
                                  ("redis-benchmark -P window", "matched")]
    not_run = rows.loc[("redis-benchmark -P window", "matched")]
    assert not_run["status"] == "not run" and not_run["note"] == "it has no such mode"
    assert math.isnan(not_run["tool_rate"]) and not_run["variant"] == "default"
    for key in (("redis-benchmark -P 1", "matched"), ("redis-benchmark -P window", "best")):
        assert rows.loc[key]["status"] == "ok" and rows.loc[key]["tool_rate"] > 0
