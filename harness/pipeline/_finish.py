"""Turn the engines' raw counts and order statistics into the summary tables.

Both engines (pandas and Spark) reduce raw rows to the same small *case aggregate* table — one row per case
and repetition holding integer counts, first/last stamps, sums and percentile values in ns — and everything
derived from it (rates, µs, labels, provenance) is computed here once. That is why the two paths agree to
the last bit on everything except the order statistics themselves.

Case aggregate columns (all stamps and latencies in ns):
``rows producers consumers sent t_send_first t_send_last expected received_unique received failed
failed_received out_of_order lat_count t_recv_first t_recv_last lat_sum_ns lat_max_ns lat_q_ns int_count int_max_ns int_q_ns
delay_count delay_max_ns delay_q_ns percentile_method percentile_rank_error``; the ``*_q_ns`` columns hold
one value per entry of ``LAT_QUANTILES`` / ``DELAY_QUANTILES``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.metrics.compute import PERCENTILES, Delivery, rate
from harness.pipeline._cpu import clock_uncertainty_us, cpu_columns
from harness.runfolder import RunInfo
from harness.runfolder.schema import CASE_KEYS, SUMMARY_COLUMNS, VARIANT_LABELS, percentile_column

#: One summary row per (case, repetition).
GROUP_KEYS: tuple[str, ...] = (*CASE_KEYS, "repetition")

#: Quantiles as fractions, computed as numpy does (``p / 100``) so both engines ask for the same floats.
LAT_QUANTILES: tuple[float, ...] = tuple(p / 100 for p in PERCENTILES)
DELAY_PERCENTILES: tuple[float, ...] = (50.0, 99.0)
DELAY_QUANTILES: tuple[float, ...] = tuple(p / 100 for p in DELAY_PERCENTILES)

#: Percentiles of the pooled latency distribution (the "nines" figure); 100 is the maximum.
DISTRIBUTION_PERCENTILES: tuple[float, ...] = (
    0.0,
    10.0,
    25.0,
    50.0,
    75.0,
    90.0,
    95.0,
    99.0,
    99.5,
    99.9,
    99.95,
    99.99,
    99.995,
    99.999,
    100.0,
)
DISTRIBUTION_QUANTILES: tuple[float, ...] = tuple(p / 100 for p in DISTRIBUTION_PERCENTILES)

#: Columns beyond SUMMARY_COLUMNS: sample counts, how percentiles were computed, latency provenance.
EXTRA_COLUMNS: tuple[str, ...] = (
    "lat_count",
    "sender_span_s",
    "receiver_span_s",
    "percentile_method",  # "exact" (numpy-linear), both engines
    "percentile_rank_error",  # 0 when exact (kept so stored summaries keep their columns)
    "clock",
    "clock_resolution_ns",
    "stamped_by",  # "client": both stamps taken by the harness's workers, never by a broker
)
PER_REPETITION_COLUMNS: tuple[str, ...] = (*SUMMARY_COLUMNS, *EXTRA_COLUMNS)

SERIES_COLUMNS: tuple[str, ...] = (*GROUP_KEYS, "second", "msgs", "mb")
DISTRIBUTION_COLUMNS: tuple[str, ...] = (
    *CASE_KEYS,
    "latency_from",
    "percentile",
    "latency_us",
    "samples",
    "percentile_method",
    "percentile_rank_error",
)


def _rate(count: pd.Series, first: pd.Series, last: pd.Series) -> pd.Series:
    """msgs/s at one endpoint, :func:`harness.metrics.compute.rate` per case."""
    span = (last - first).astype("float64")  # subtract first: ns stamps need more than float64's 53 bits
    return pd.Series(rate(count.to_numpy(), span.to_numpy()), index=count.index)


def _quantile_columns(frame: pd.DataFrame, source: str, names: Sequence[str], count: str) -> pd.DataFrame:
    values = np.full((len(frame), len(names)), np.nan)
    for i, (q, n) in enumerate(zip(frame[source], frame[count], strict=True)):
        if n and q is not None and len(q) == len(names):
            values[i] = np.asarray(q, dtype="float64") / 1e3
    return pd.DataFrame(values, columns=list(names), index=frame.index)


def finish_per_repetition(cases: pd.DataFrame, runs: Sequence[RunInfo], cpu: pd.DataFrame | None = None,
                          clocks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Build the per-repetition summary (``PER_REPETITION_COLUMNS``) from the engines' case aggregates and
    the runs' CPU tables (``cpu``, ``CPU_TABLE_COLUMNS``) and clock tables (``clocks``,
    ``CLOCK_TABLE_COLUMNS``); each None or empty when none was recorded."""
    if cases.empty:
        return pd.DataFrame(columns=list(PER_REPETITION_COLUMNS))
    by_id = {run.run_id: run for run in runs}
    c = cases.reset_index(drop=True)
    out = c[list(GROUP_KEYS)].copy()
    info = [by_id.get(r) for r in c["run_id"]]
    labels = [
        i.describe(s, v) if i else {k: (s if k == "label" else "") for k in VARIANT_LABELS}
        for i, s, v in zip(info, c["system"], c["variant"], strict=True)
    ]
    for key in VARIANT_LABELS:
        out[key] = [lab[key] for lab in labels]
    for name in ("producers", "consumers", "sent"):
        out[name] = c[name].astype("int64")
    accounts = [
        Delivery.from_counts(*(int(x) for x in r))
        for r in c[["expected", "received_unique", "received", "failed", "failed_received", "out_of_order"]]
        .itertuples(index=False)
    ]
    for name in ("expected", "received", "lost", "send_failed", "duplicated", "out_of_order"):
        out[name] = pd.Series([getattr(d, name) for d in accounts], index=c.index, dtype="int64")
    out["sender_msgs_per_s"] = _rate(c["sent"], c["t_send_first"], c["t_send_last"])
    out["receiver_msgs_per_s"] = _rate(c["lat_count"], c["t_recv_first"], c["t_recv_last"])
    out["sender_mb_per_s"] = out["sender_msgs_per_s"] * c["size"] / 1e6
    out["receiver_mb_per_s"] = out["receiver_msgs_per_s"] * c["size"] / 1e6
    out["latency_kind"] = np.where(c["pattern"] == "reqrep", "round-trip", "one-way")
    out["latency_from"] = "actual send"
    lat = _quantile_columns(c, "lat_q_ns", [percentile_column(p) for p in PERCENTILES], "lat_count")
    lat_int = _quantile_columns(
        c, "int_q_ns", [percentile_column(p, "lat_intended") for p in PERCENTILES], "int_count"
    )
    delay = _quantile_columns(c, "delay_q_ns", ["send_delay_p50_us", "send_delay_p99_us"], "delay_count")
    out = pd.concat([out, lat], axis=1)
    has_lat = c["lat_count"] > 0
    out["lat_max_us"] = (c["lat_max_ns"].astype("float64") / 1e3).where(has_lat)
    out["lat_mean_us"] = c["lat_sum_ns"].astype("float64") / c["lat_count"].where(has_lat) / 1e3
    out["clock_uncertainty_us"] = clock_uncertainty_us(out, pd.DataFrame() if clocks is None else clocks)
    out = pd.concat([out, lat_int], axis=1)
    out["lat_intended_max_us"] = (c["int_max_ns"].astype("float64") / 1e3).where(c["int_count"] > 0)
    out = pd.concat([out, delay], axis=1)
    out["send_delay_max_us"] = (c["delay_max_ns"].astype("float64") / 1e3).where(c["delay_count"] > 0)
    keys = c[["scenario", "system", "variant", "size", "rate", "repetition"]].itertuples(index=False)
    out["complete"] = [bool(i.case_complete(*k)) if i else False for i, k in zip(info, keys, strict=True)]
    out = pd.concat([out, cpu_columns(out, pd.DataFrame() if cpu is None else cpu)], axis=1)
    out["lat_count"] = c["lat_count"].astype("int64")
    out["sender_span_s"] = (c["t_send_last"] - c["t_send_first"]).astype("float64") / 1e9
    out["receiver_span_s"] = (c["t_recv_last"] - c["t_recv_first"]).astype("float64") / 1e9
    out["percentile_method"] = c["percentile_method"].astype(str)
    out["percentile_rank_error"] = c["percentile_rank_error"].astype("float64")
    out["clock"] = [i.clock if i else "CLOCK_MONOTONIC (time.monotonic_ns)" for i in info]
    out["clock_resolution_ns"] = [i.clock_resolution_ns if i else float("nan") for i in info]
    out["stamped_by"] = "client"
    out = out[list(PER_REPETITION_COLUMNS)]
    return sort_cases(out, GROUP_KEYS)


def finish_series(series: pd.DataFrame) -> pd.DataFrame:
    """Zero-fill the per-second receipt counts so a stall shows as 0, and add MB per second."""
    if series.empty:
        return pd.DataFrame(columns=list(SERIES_COLUMNS))
    keys = list(GROUP_KEYS)
    frames = []
    for _, group in series.groupby(keys, dropna=False, sort=False):
        last = int(group["second"].max())
        filled = group.set_index("second")["msgs"].reindex(range(last + 1), fill_value=0)
        frame = pd.DataFrame({"second": filled.index.astype("int64"), "msgs": filled.to_numpy(dtype="int64")})
        for key in keys:
            frame[key] = group[key].iloc[0]
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    out["mb"] = out["msgs"] * out["size"] / 1e6
    return sort_cases(out[list(SERIES_COLUMNS)], (*GROUP_KEYS, "second"))


def finish_distribution(dist: pd.DataFrame) -> pd.DataFrame:
    """Order the pooled-distribution long table; values arrive in ns and leave in µs."""
    if dist.empty:
        return pd.DataFrame(columns=list(DISTRIBUTION_COLUMNS))
    out = dist.copy()
    out["latency_us"] = out.pop("latency_ns").astype("float64") / 1e3
    return sort_cases(out[list(DISTRIBUTION_COLUMNS)], (*CASE_KEYS, "latency_from", "percentile"))


def explode_distribution(cases: pd.DataFrame, source: str, count: str, latency_from: str) -> pd.DataFrame:
    """Long rows (one per percentile) from per-case arrays of ``DISTRIBUTION_QUANTILES`` values in ns."""
    rows = []
    for record in cases.to_dict("records"):
        values = record[source]
        if not record[count] or values is None:
            continue
        for p, v in zip(DISTRIBUTION_PERCENTILES, values, strict=True):
            row = {k: record[k] for k in CASE_KEYS}
            row.update(
                latency_from=latency_from,
                percentile=p,
                latency_ns=float(v),
                samples=int(record[count]),
                percentile_method=record["percentile_method"],
                percentile_rank_error=float(record["percentile_rank_error"]),
            )
            rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            *CASE_KEYS,
            "latency_from",
            "percentile",
            "latency_ns",
            "samples",
            "percentile_method",
            "percentile_rank_error",
        ],
    )


def concat_distributions(pooled: pd.DataFrame) -> pd.DataFrame:
    """Long rows for both latency origins ("actual send" and "intended") of the pooled per-case arrays."""
    parts = [
        explode_distribution(pooled, "lat_q_ns", "lat_count", "actual send"),
        explode_distribution(pooled, "int_q_ns", "int_count", "intended"),
    ]
    parts = [part for part in parts if not part.empty] or parts[:1]
    return pd.concat(parts, ignore_index=True)


def sort_cases(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Deterministic row order (NaN rates, i.e. "max", last) so both engines return identical tables."""
    return frame.sort_values(list(keys), na_position="last", kind="mergesort").reset_index(drop=True)
