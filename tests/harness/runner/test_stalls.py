"""A consumer that stopped receiving while messages were missing is a stall, with its length; for a queue,
whose missing messages were nobody's yet, each of its consumers that stopped counts."""

from __future__ import annotations

import pandas as pd

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
