"""Endpoint-based metrics on synthetic data with known answers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from harness.metrics.compute import (
    delivery,
    latency_percentiles,
    message_keys,
    out_of_order,
    rate,
    throughput,
)
from harness.pipeline import summarize
from harness.runfolder import RunFolder
from harness.runfolder.schema import HOST_COLUMNS, RAW_SCHEMA, percentile_column


def test_throughput_counts_intervals() -> None:
    # 11 stamps 100 ms apart: 10 intervals in 1 s -> 10 msgs/s
    stamps = np.arange(11) * 100_000_000 + 5_000_000_000_000
    assert throughput(stamps) == pytest.approx(10.0)
    assert math.isnan(throughput([1]))
    assert math.isnan(throughput([7, 7]))


def test_rate_is_the_same_definition_element_wise() -> None:
    out = rate([11, 1, 2], [1_000_000_000, 0, 0])
    assert out[0] == pytest.approx(10.0) and math.isnan(out[1]) and math.isnan(out[2])


def test_percentiles_match_numpy_linear() -> None:
    lat = np.arange(1, 10_001) * 1000  # 1..10000 µs in ns
    p = latency_percentiles(lat)
    assert p["p50"] == pytest.approx(5000.5)
    assert p["p99"] == pytest.approx(np.percentile(lat, 99) / 1e3)
    assert p["p99.99"] == pytest.approx(np.percentile(lat, 99.99) / 1e3)
    assert p["max"] == 10_000 and p["mean"] == pytest.approx(5000.5)
    assert all(math.isnan(v) for v in latency_percentiles([]).values())


def test_delivery_accounting() -> None:
    expected = message_keys([0] * 6, range(6))
    # 3 and 5 never arrive, 2 arrives twice, 1 arrives after 2
    arrived = message_keys([0, 0, 0, 0, 0], [0, 2, 1, 2, 4])
    d = delivery(expected, arrived)
    assert (d.expected, d.received, d.lost, d.duplicated, d.out_of_order) == (6, 4, 2, 1, 1)


def test_failed_sends_are_not_lost() -> None:
    expected = message_keys([0] * 6, range(6))
    arrived = message_keys([0] * 4, [0, 1, 2, 4])
    # the producer was told that 3 and 4 failed; 4 arrived anyway, 5 was accepted and never came
    d = delivery(expected, arrived, failed_keys=message_keys([0, 0], [3, 4]))
    assert (d.received, d.lost, d.send_failed, d.accepted) == (4, 1, 2, 4)


def test_out_of_order_is_per_producer() -> None:
    # interleaved producers each in order: nothing out of order
    keys = message_keys([0, 1, 0, 1], [0, 0, 1, 1])
    assert out_of_order(keys) == 0
    assert out_of_order(message_keys([1, 1, 1], [5, 3, 4])) == 2


def _rows(pattern: str, **cols: object) -> pd.DataFrame:
    n = len(cols["seq"])  # type: ignore[arg-type]
    base = {
        "run_id": "r", "scenario": "s", "pattern": pattern, "system": "zmq", "variant": "default",
        "repetition": 0, "size": 100, "rate": float("nan"), "t_intended": [None] * n, "t_ack": [None] * n,
    }
    base.update(cols)
    df = pd.DataFrame(base)
    for c in ("t_intended", "t_send", "t_ack", "t_recv"):
        df[c] = df[c].astype("Int64")
    assert set(df.columns) == set(RAW_SCHEMA.names) - {"send_failed", "unconfirmed", "drained", *HOST_COLUMNS}  # write_raw adds those
    return df


def summarize_rows(tmp: Path, rows: pd.DataFrame, errors: pd.DataFrame | None = None) -> dict[str, Any]:
    """The pipeline's summary row of one case written into a fresh run folder."""
    run = RunFolder.create(tmp, "metrics")
    run.write_raw("case.parquet", rows, errors)
    frame = summarize(run.path, engine="pandas").per_repetition
    assert len(frame) == 1
    return dict(frame.iloc[0])


def test_summary_queue_known_answer(tmp_path: Path) -> None:
    t0 = 10**15  # near 2**53: stamps must not lose precision
    seq = [0, 1, 2, 3, 4]
    df = _rows(
        "queue",
        producer=[0] * 5, consumer=[0, 0, 0, -1, 0], seq=seq, warmup=[True, False, False, False, False],
        t_send=[t0 + i * 1000 for i in seq],
        t_recv=[t0 + 500, t0 + 1000 + 7, t0 + 2000 + 9, None, t0 + 4000 + 11],
    )
    s = summarize_rows(tmp_path, df)
    assert (s["sent"], s["expected"], s["received"], s["lost"], s["duplicated"]) == (4, 4, 3, 1, 0)
    # latencies 7, 9, 11 ns -> p50 9 ns = 0.009 µs, exactly, despite stamps around 1e15
    assert s[percentile_column(50)] == pytest.approx(0.009)
    assert s["lat_max_us"] == pytest.approx(0.011)
    # receiver: 3 arrivals over 3004 ns -> 2 intervals
    assert s["receiver_msgs_per_s"] == pytest.approx(2 / 3004e-9)
    assert s["sender_msgs_per_s"] == pytest.approx(3 / 3000e-9)
    assert s["sender_mb_per_s"] == pytest.approx(s["sender_msgs_per_s"] * 100 / 1e6)
    assert s["latency_kind"] == "one-way"


def test_summary_pubsub_counts_each_consumer(tmp_path: Path) -> None:
    t0 = 1_000_000
    df = _rows(
        "pubsub",
        producer=[0] * 5, consumer=[0, 0, 1, 1, 1], seq=[0, 1, 0, 1, 1], warmup=[False] * 5,
        t_send=[t0, t0 + 10, t0, t0 + 10, t0 + 10], t_recv=[t0 + 5, None, t0 + 6, t0 + 16, t0 + 17],
    )
    s = summarize_rows(tmp_path, df)
    assert (s["sent"], s["expected"], s["received"], s["lost"], s["duplicated"]) == (2, 4, 3, 1, 1)


def test_summary_reqrep_is_round_trip(tmp_path: Path) -> None:
    df = _rows(
        "reqrep", producer=[0, 0], consumer=[0, 0], seq=[0, 1], warmup=[False, False],
        t_send=[0, 100], t_recv=[40, 160],
    )
    s = summarize_rows(tmp_path, df)
    assert s["latency_kind"] == "round-trip"
    assert s[percentile_column(50)] == pytest.approx(0.05)


def test_intended_latency_and_send_delay(tmp_path: Path) -> None:
    df = _rows(
        "queue", producer=[0, 0], consumer=[0, 0], seq=[0, 1], warmup=[False, False],
        t_intended=[0, 1000], t_send=[10, 1500], t_recv=[20, 1510],
    )
    s = summarize_rows(tmp_path, df)
    assert s["send_delay_max_us"] == pytest.approx(0.5)
    assert s["lat_intended_max_us"] == pytest.approx(0.51)
    assert s["lat_max_us"] == pytest.approx(0.01)


def test_summary_keeps_failed_sends_apart_from_loss(tmp_path: Path) -> None:
    df = _rows(
        "queue", producer=[0] * 4, consumer=[0, -1, -1, 0], seq=[0, 1, 2, 3], warmup=[False] * 4,
        t_send=[0, 10, 20, 30], t_recv=[5, None, None, 35],
    )
    told = pd.DataFrame({"producer": [0], "seq": [1], "t_ns": [10]})
    s = summarize_rows(tmp_path, df, told)
    assert (s["expected"], s["received"], s["lost"], s["send_failed"]) == (4, 2, 1, 1)
