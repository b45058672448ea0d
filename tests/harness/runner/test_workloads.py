"""Workloads through the runner: the pacing of rate profiles and of a backlog's drain, keyed sends, payload
bodies, the backlog release, and end to end with the `zmq` driver: a backlog held and drained (PUSH blocks at
its high-water mark: noted), a rate profile followed, and a topic sweep whose many roles share a few worker
processes (CI's small version of the thousand-topic run)."""

from __future__ import annotations

import json
import os
import time
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from harness.compare import compare
from harness.runner import _workers
from harness.runner._backlog import BacklogRelease
from harness.runner._send import KeyedSend, Profile, Schedule, compressible_body
from harness.scenario import load_scenarios, parse_scenario


def test_profile_paces_each_step_at_its_rate_and_repeats() -> None:
    profile = Profile(((1000.0, 1.0), (0.0, 0.5), (4000.0, 0.5)))  # 1,000 in 1 s, a pause, 2,000 in 0.5 s
    at = profile.at(np.arange(6000)) / 1e9
    assert at[999] == pytest.approx(0.999)
    assert at[1000] == pytest.approx(1.5)  # after the pause
    assert at[2999] == pytest.approx(1.5 + 1999 / 4000)
    assert at[3000] == pytest.approx(2.0)  # the second round
    assert np.all(np.diff(at) >= 0)


def test_backlog_schedule_switches_to_the_drain_rate_at_the_release() -> None:
    release = SimpleNamespace(value=0)
    schedule = Schedule(t0=1_000_000_000, total=100, deadline=2**62, period=1e6, drain=0.5, release=release)
    assert not schedule.released(10)
    release.value = 5
    assert schedule.released(20)
    first, at = schedule.switched or (0, 0)
    assert first == 20 and at >= schedule.t0 + 20 * 1_000_000
    intended = schedule.intended(40)
    assert intended[19] == schedule.t0 + 19 * 1_000_000  # before: the case's rate
    assert intended[30] == at + 10 * 2_000_000  # after: half of it
    assert schedule.due(30) == intended[30]


def test_compressible_bodies_compress_by_about_their_ratio() -> None:
    for ratio in (0.0, 0.5, 0.9):
        body = bytes(compressible_body(64 * 1024, ratio))
        kept = len(zlib.compress(body, 6)) / len(body)
        assert kept == pytest.approx(1 - ratio, abs=0.05), ratio


def test_keyed_send_chooses_keys_in_turn_or_at_random() -> None:
    sent: list[bytes] = []
    producer = SimpleNamespace(acks_synchronously=False, send=lambda b: None,
                               send_keyed=lambda b, k: sent.append(k), flush=lambda t: None, close=lambda: None)
    turn = KeyedSend(producer, False, False, "round-robin", 4, index=1)
    for seq in range(6):
        turn(bytearray(8), seq, 0)
    assert sent == [b"k1", b"k2", b"k3", b"k0", b"k1", b"k2"]
    sent.clear()
    rand = KeyedSend(producer, False, False, "random", 16, index=3)
    for seq in range(2000):
        rand(bytearray(8), seq, 0)
    assert set(sent) == {b"k%d" % i for i in range(16)}
    assert turn.direct is None  # keys never go through the full-speed loops


def test_backlog_release_waits_for_the_backlog_or_a_blocked_producer() -> None:
    progress = [0, 0]  # one producer, one consumer
    release = SimpleNamespace(value=0)
    watcher = BacklogRelease(progress, 1, 1, target=500, release_ns=release, producers_done=lambda: False)
    watcher.start()
    progress[0] = 300
    time.sleep(0.1)
    assert not release.value
    progress[0] = 520
    watcher.join(2)
    assert release.value and watcher.built >= 500 and not watcher.note
    blocked = BacklogRelease([40, 0], 1, 1, 500, SimpleNamespace(value=0), lambda: False)
    blocked.run()  # the producer's count never moves: a high-water mark
    assert "blocked at a backlog of 40" in blocked.note


def quiet() -> Console:
    return Console(file=open(os.devnull, "w"), width=160)  # noqa: SIM115 - closed with the process


def test_backlog_on_zmq_is_held_then_drained_and_the_high_water_mark_noted(tmp_path: Path) -> None:
    # 2,500 messages of 10 kB: more than PUSH's high-water mark of 100 and the sockets' buffers hold
    sc = parse_scenario({"name": "bl", "pattern": "queue", "message_sizes": [10_000], "messages": 3000,
                         "warmup": 0, "rate": 3000, "backlog": {"messages": 2500, "drain_rate": 0.5},
                         "variants": {"zmq": {"sndhwm": 100, "rcvhwm": 100}}}, "test.yaml")
    out = compare([sc], systems=["zmq"], out_root=tmp_path, console=quiet(), write_report=False)
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    record = manifest["cases"][0]["backlog"]
    assert "blocked" in record["note"]  # PUSH blocks at its high-water mark: no broker holds a backlog
    raw = pd.read_parquet(next((out.run_dir / "raw").glob("*.parquet")))
    assert raw["t_recv"].min() >= record["release_ns"]  # nothing was received before the release
    assert raw["t_recv"].notna().all()  # blocked, not dropped: everything arrives
    drain = pd.read_parquet(out.run_dir / "backlog.parquet").iloc[0]
    assert drain["drain_s"] > 0 and drain["built"] == record["built"]
    after = raw[raw["t_send"] > record["release_ns"] + 200_000_000].sort_values("seq")
    gaps = np.diff(after["t_intended"].to_numpy(np.int64))
    assert np.median(gaps) == pytest.approx(1e9 / 1500, rel=0.01)  # the drain rate: half of 3,000/s


def test_rate_profile_on_zmq_follows_the_steps(tmp_path: Path) -> None:
    sc = parse_scenario({"name": "steps", "pattern": "queue", "message_sizes": [100], "duration": "3s",
                         "warmup": 0, "rate_profile": [[500, "1s"], [2000, "1s"]]}, "test.yaml")
    out = compare([sc], systems=["zmq"], out_root=tmp_path, console=quiet(), write_report=False)
    assert out.complete, out.problems
    timeline = pd.read_parquet(out.run_dir / "timeline.parquet")
    offered = timeline.set_index("second")["offered"]
    assert offered[0] == 500 and offered[1] == 2000  # intended sends per second follow the steps
    assert 0 < offered[2] <= 500  # the third second's: those sent before the duration's end (a loaded
    # machine's producer may run behind its schedule and miss the last few)
    assert float(out.summary["rate"].iloc[0]) == pytest.approx(1250.0)  # the profile's mean, the case's rate


def test_topic_sweep_shares_worker_processes_and_gives_the_topic_figure(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_workers, "ONE_PROCESS_EACH", 8)  # 20 topics: 40 roles in 2 x 2 processes
    monkeypatch.setattr(_workers, "ROLE_PROCESSES", 2)
    path = tmp_path / "sweep.yaml"
    path.write_text("name: sweep\npattern: queue\nmessage_sizes: [100]\nmessages: 300\nwarmup: 0\nrate: 2000\n"
                    "topics: [2, 20]\nproducers_per_topic: 1\nconsumers_per_topic: 1\n")
    scenarios = load_scenarios(path)
    assert [s.name for s in scenarios] == ["sweep-2t", "sweep-20t"] and scenarios[1].producers == 20
    launched: list[str] = []
    original = _workers.Workers.launch_group

    def spy(self: Any, name: str, specs: Any) -> None:
        launched.append(name)
        original(self, name, specs)

    monkeypatch.setattr(_workers.Workers, "launch_group", spy)
    out = compare(scenarios, systems=["zmq"], out_root=tmp_path / "results", console=quiet())
    assert out.complete, out.problems
    assert sorted(launched) == ["consumers-0", "consumers-1", "producers-0", "producers-1"]
    per = out.summary.set_index("scenario")
    assert per.loc["sweep-20t", "received"] == 20 * 300 and per.loc["sweep-20t", "lost"] == 0
    topics = pd.read_parquet(out.run_dir / "topics.parquet").set_index("scenario")
    assert topics.loc["sweep-20t", "topics_received"] == 20
    assert (out.run_dir / "figures" / "workload_topics.png").is_file()
    cpu = pd.read_csv(out.run_dir / "cpu.csv")
    assert {"consumers-0", "producers-1"} <= set(cpu["role"])  # CPU per worker process, as for any worker
