"""A deliberately plain reference: the summary numbers recomputed case by case from the raw rows with
numpy, written independently of ``harness.pipeline`` so the tests compare two implementations."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from harness.metrics.compute import PERCENTILES
from harness.runfolder.schema import percentile_column


def raw_rows(run: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted((run / "raw").glob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return rows


def case_key(row: dict[str, Any]) -> tuple[Any, ...]:
    rate = row["rate"]
    return (
        row["scenario"],
        row["system"],
        row["size"],
        "max" if math.isnan(rate) else rate,
        row["repetition"],
    )


def expected_summary(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    cases: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        if not row["warmup"]:
            cases.setdefault(case_key(row), []).append(row)
    return {key: _one_case(case) for key, case in cases.items()}


def _one_case(rows: list[dict[str, Any]]) -> dict[str, Any]:
    pubsub = rows[0]["pattern"] == "pubsub"
    size = rows[0]["size"]
    unit = (
        (lambda r: (r["producer"], r["seq"], r["consumer"]))
        if pubsub
        else (lambda r: (r["producer"], r["seq"]))
    )
    expected = {unit(r) for r in rows}
    received = [r for r in rows if r["t_recv"] is not None]
    delivered = {unit(r) for r in received}
    failed = {unit(r) for r in rows if r.get("send_failed")}  # the producer was told: not lost
    unconfirmed = {unit(r) for r in rows if r.get("unconfirmed") and not r.get("send_failed")} - {
        unit(r) for r in rows if r["t_recv"] is not None}  # never told either way: not accepted
    held = {unit(r) for r in rows if r.get("drained") and not r.get("send_failed")} - {
        unit(r) for r in rows if r["t_recv"] is not None}  # the final read found it: not lost
    sends = {(r["producer"], r["seq"]): r["t_send"] for r in rows}
    intended = {(r["producer"], r["seq"]): r["t_intended"] for r in rows if r["t_intended"] is not None}
    # out of order: first receipts in t_recv order, per (producer, consumer) stream
    seen: set[tuple[Any, ...]] = set()
    highest: dict[tuple[int, int], int] = {}
    late = 0
    for r in sorted(received, key=lambda r: (r["t_recv"], r["seq"], r["consumer"])):
        if unit(r) in seen:
            continue
        seen.add(unit(r))
        stream = (r["producer"], r["consumer"])
        if stream in highest and r["seq"] < highest[stream]:
            late += 1
        highest[stream] = max(highest.get(stream, r["seq"]), r["seq"])
    lat = np.array([r["t_recv"] - r["t_send"] for r in received], dtype=np.int64)
    lat_int = np.array(
        [r["t_recv"] - r["t_intended"] for r in received if r["t_intended"] is not None], dtype=np.int64
    )
    t_send = np.array(sorted(sends.values()), dtype=np.int64)
    t_recv = np.array([r["t_recv"] for r in received], dtype=np.int64)
    out: dict[str, Any] = {
        "sent": len(sends),
        "expected": len(expected),
        "received": len(delivered),
        "lost": len(expected - delivered - failed - unconfirmed - held),
        "send_failed": len(failed),
        "unconfirmed": len(unconfirmed),
        "held": len(held),
        "duplicated": len(received) - len(delivered),
        "out_of_order": late,
        # n stamps bound n - 1 intervals (the README's throughput definition)
        "sender_msgs_per_s": (len(sends) - 1) * 1e9 / float(t_send.max() - t_send.min()),
        "receiver_msgs_per_s": (len(received) - 1) * 1e9 / float(t_recv.max() - t_recv.min()),
        "lat_max_us": float(lat.max()) / 1e3,
        "lat_mean_us": float(lat.sum()) / len(lat) / 1e3,
        "latency_kind": "round-trip" if rows[0]["pattern"] == "reqrep" else "one-way",
    }
    out["sender_mb_per_s"] = out["sender_msgs_per_s"] * size / 1e6
    out["receiver_mb_per_s"] = out["receiver_msgs_per_s"] * size / 1e6
    for p in PERCENTILES:
        out[percentile_column(p)] = float(np.percentile(lat, p)) / 1e3
        out[percentile_column(p, "lat_intended")] = (
            float(np.percentile(lat_int, p)) / 1e3 if len(lat_int) else math.nan
        )
    acked = {(r["producer"], r["seq"]): r["t_ack"] - r["t_send"] for r in rows
             if r.get("t_ack") is not None and r["t_send"] is not None}
    if acked:  # publish latency: once per sent message, whatever reached the consumers
        pub = np.array(list(acked.values()), dtype=np.int64)
        for p in PERCENTILES:
            out[percentile_column(p, "publish")] = float(np.percentile(pub, p)) / 1e3
        out["publish_max_us"] = float(pub.max()) / 1e3
        out["publish_count"] = len(pub)
    if intended:
        delay = np.array([sends[k] - v for k, v in intended.items()], dtype=np.int64)
        out["send_delay_p50_us"] = float(np.percentile(delay, 50)) / 1e3
        out["send_delay_p99_us"] = float(np.percentile(delay, 99)) / 1e3
        out["send_delay_max_us"] = float(delay.max()) / 1e3
    return out


def summary_by_case(frame: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The pipeline's per-repetition table keyed like :func:`expected_summary`."""
    return {case_key(row): row for row in frame.to_dict("records")}
