"""A consumer that stopped receiving while messages were missing is a stall, with its length; for a queue,
whose missing messages were nobody's yet, each of its consumers that stopped counts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.drivers.base import Role
from harness.runner import _final_read, _workers
from harness.runner._context import WorkerSpec
from harness.runner._final_read import STALL_MIN, stalls

S = 1_000_000_000


def _rows(received: list[tuple[int, float]]) -> pd.DataFrame:
    """(consumer, t_recv in s) per received message."""
    return pd.DataFrame({"consumer": [c for c, _ in received], "t_recv": [int(t * S) for _, t in received]})


def test_a_queue_consumer_that_stopped_is_a_stall_with_its_length() -> None:
    rows = _rows([(0, 1), (0, 2), (1, 1), (1, 9.5)])
    absent = pd.DataFrame({"producer": [0, 0], "seq": [7, 8], "consumer": [-1, -1]})
    got = stalls(rows, absent, ended_ns=10 * S, start_ns=0, consumers=[0, 1, 2])
    assert got == {0: 8.0, 2: 10.0}  # 1 received until a second before the end; 2 never received at all


def test_a_pubsub_subscriber_missing_messages_stalls_alone() -> None:
    rows = _rows([(0, 9), (1, 3)])
    absent = pd.DataFrame({"producer": [0], "seq": [5], "consumer": [1]})
    assert stalls(rows, absent, ended_ns=10 * S, start_ns=0, consumers=[0, 1]) == {1: 7.0}


def test_nothing_missing_recently_is_no_stall() -> None:
    rows = _rows([(0, 10 - STALL_MIN / 2)])
    absent = pd.DataFrame({"producer": [0], "seq": [5], "consumer": [-1]})
    assert stalls(rows, absent, ended_ns=10 * S, start_ns=0, consumers=[0]) == {}


def _reader_launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, topics: int, resilient: bool) -> list[tuple[str, int, bool]]:
    """How ``final_read`` launches its readers for ``topics`` topics that miss messages: (process, roles,
    resilient) per process. Workers are not started (the launches are recorded, the wait ends at once)."""
    launched: list[tuple[str, int, bool]] = []
    monkeypatch.setattr(_workers.Workers, "launch", lambda w, s: launched.append((s.name, 1, s.resilient)))
    monkeypatch.setattr(_workers.Workers, "launch_group",
                        lambda w, name, specs: launched.append((name, len(specs), all(s.resilient for s in specs))))
    monkeypatch.setattr(_workers.Workers, "wait_ready", lambda w, names: None)
    monkeypatch.setattr(_final_read, "FINAL_MAX", 0.0)
    monkeypatch.setattr(_workers.Workers, "shutdown", lambda w, grace: None)

    def role(kind: str, i: int) -> WorkerSpec:
        return WorkerSpec(kind=kind, name=f"{kind}-{i}", slot=i, system="kafka", driver="harness.drivers.java:KafkaJavaDriver",
                          options={}, broker=None, plan={"topology": {"pattern": "queue"}}, role=Role(i, i), size=100,
                          payload="fixed", total=10, duration_ns=None, rate=None, capacity=1024,
                          out=str(tmp_path / f"{kind}-{i}"), resilient=resilient)

    producers, consumers = [role("producer", i) for i in range(topics)], [role("consumer", i) for i in range(topics)]
    absent = pd.DataFrame({"producer": range(topics), "seq": [3] * topics, "consumer": [-1] * topics})
    found = _final_read.final_read(producers, consumers, absent, tmp_path / "final-read")
    assert found.empty  # nothing was started, so nothing was read
    return launched


def test_a_final_read_of_many_topics_groups_its_readers_as_the_case_did(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader per topic that misses messages: each alone and reconnecting up to ONE_PROCESS_EACH of them;
    above, in as many processes as the case's consumers had (a JVM each for the Java clients), not a
    process per topic (1,000 JVMs after a 1,000-topic case); a case with faults keeps them alone."""
    few = _reader_launches(tmp_path / "few", monkeypatch, 3, resilient=False)
    assert few == [(f"final-read-{i}", 1, True) for i in range(3)]
    many = _reader_launches(tmp_path / "many", monkeypatch, _workers.ONE_PROCESS_EACH + 1, resilient=False)
    assert [n for n, _, _ in many] == [f"consumers-{i}" for i in range(_workers.JVM_ROLE_PROCESSES)]
    assert sum(k for _, k, _ in many) == _workers.ONE_PROCESS_EACH + 1 and not any(r for _, _, r in many)
    faulty = _reader_launches(tmp_path / "faulty", monkeypatch, _workers.ONE_PROCESS_EACH + 1, resilient=True)
    assert len(faulty) == _workers.ONE_PROCESS_EACH + 1 and all(k == 1 and r for _, k, r in faulty)
