"""Summary of one measured case and repetition from its raw rows (a pandas DataFrame in RAW_SCHEMA).

The runner uses it for the end-of-run table and ``summary.parquet``; the pipeline's pandas path uses the
same function, so both agree by construction (the Spark path is tested against it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.compute import (
    delivery,
    latency_percentiles,
    megabytes_per_second,
    message_keys,
    out_of_order,
    throughput,
)
from harness.metrics.records import PERCENTILES, percentile_column


def summarize_rows(rows: pd.DataFrame) -> dict[str, Any]:
    """Metrics of one case and repetition. ``rows`` holds that case's raw rows only (warmup included)."""
    if rows.empty:
        raise ValueError("no raw rows to summarise")
    pattern = str(rows["pattern"].iloc[0])
    size = int(rows["size"].iloc[0])
    m = rows[~rows["warmup"].to_numpy(dtype=bool)]
    keys = message_keys(m["producer"].to_numpy(), m["seq"].to_numpy())
    # Stamps stay int64 (ns since boot need more than float64's 53 bits); -1 marks a missing stamp.
    t_send = _stamps(m["t_send"])
    t_recv = _stamps(m["t_recv"])
    t_int = _stamps(m["t_intended"])
    arrived = (t_recv >= 0) & (t_send >= 0)

    # Sender side: each message once, whatever number of rows it has.
    _, first = np.unique(keys, return_index=True)
    sent_stamps = t_send[first]
    sent_stamps = sent_stamps[sent_stamps >= 0]

    out: dict[str, Any] = {"sent": int(first.size)}
    consumers = m["consumer"].to_numpy()
    if pattern == "pubsub":
        totals = np.zeros(5, dtype=np.int64)
        for c in np.unique(consumers[consumers >= 0]):
            mine = consumers == c
            order = np.argsort(t_recv[mine & arrived], kind="stable")
            d = delivery(keys[mine], keys[mine & arrived][order])
            totals += (d.expected, d.received, d.lost, d.duplicated, d.out_of_order)
        out.update(zip(("expected", "received", "lost", "duplicated", "out_of_order"), totals.tolist(), strict=True))
    else:
        order = np.argsort(t_recv[arrived], kind="stable")
        d = delivery(keys, keys[arrived][order])
        disorder = 0
        for c in np.unique(consumers[arrived]):
            mine = arrived & (consumers == c)
            disorder += out_of_order(keys[mine][np.argsort(t_recv[mine], kind="stable")])
        out.update(
            expected=d.expected, received=d.received, lost=d.lost, duplicated=d.duplicated, out_of_order=disorder
        )

    snd = throughput(sent_stamps)
    rcv = throughput(t_recv[arrived])
    out.update(
        sender_msgs_per_s=snd,
        sender_mb_per_s=megabytes_per_second(snd, size),
        receiver_msgs_per_s=rcv,
        receiver_mb_per_s=megabytes_per_second(rcv, size),
        latency_kind="round-trip" if pattern == "reqrep" else "one-way",
        latency_from="actual send",
    )

    lat = latency_percentiles(t_recv[arrived] - t_send[arrived])
    for p in PERCENTILES:
        out[percentile_column(p)] = lat[f"p{p:g}"]
    out["lat_max_us"] = lat["max"]
    out["lat_mean_us"] = lat["mean"]

    scheduled = arrived & (t_int >= 0)
    lat_i = latency_percentiles(t_recv[scheduled] - t_int[scheduled])
    for p in PERCENTILES:
        out[percentile_column(p, "lat_intended")] = lat_i[f"p{p:g}"]
    out["lat_intended_max_us"] = lat_i["max"]

    has_schedule = (t_int[first] >= 0) & (t_send[first] >= 0)
    delay = t_send[first][has_schedule] - t_int[first][has_schedule]
    if delay.size:
        q = np.percentile(delay, [50, 99]) / 1e3
        out.update(send_delay_p50_us=float(q[0]), send_delay_p99_us=float(q[1]), send_delay_max_us=delay.max() / 1e3)
    else:
        out.update(send_delay_p50_us=np.nan, send_delay_p99_us=np.nan, send_delay_max_us=np.nan)
    return out


def _stamps(column: pd.Series) -> np.ndarray:
    """A nullable stamp column as int64 with -1 for null."""
    return np.asarray(column.to_numpy(dtype=np.int64, na_value=-1))
