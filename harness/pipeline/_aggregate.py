"""Across repetitions: mean and Student-t confidence interval per case. Pure functions, no IO.

The interval describes the spread of the per-repetition values (each computed from raw rows); for latency
it is the interval of the mean of per-repetition p50/p99, which is labelled as such, never presented as a
percentile of the pooled stream (that one is in ``Summary.distribution``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from harness.metrics.bound import NO_BROKER, client_bound
from harness.runfolder.schema import CASE_KEYS, VARIANT_LABELS

#: Per-repetition columns that get a mean and a confidence interval.
CI_METRICS: tuple[str, ...] = (
    "sender_msgs_per_s",
    "receiver_msgs_per_s",
    "sender_mb_per_s",
    "receiver_mb_per_s",
    "lat_p50_us",
    "lat_p99_us",
    "lat_intended_p50_us",
    "lat_intended_p99_us",
    "publish_p50_us",
    "publish_p99_us",
    "broker_cpu_pct",
    "client_cpu_pct",
    "harness_cpu_pct",
    "cpu_total_s",
    "clients_cpu_pct",
)
#: Per case, from its repetitions: the busiest worker (most often), CPU notes, and the CPU-based label judged
#: on the mean figures (``harness.metrics.bound``), so that the label matches the means a report prints.
CPU_LABELS: tuple[str, ...] = ("client_cpu_role", "cpu_note", "client_bound")
#: Per-repetition counts summed over repetitions.
SUMMED: tuple[str, ...] = ("sent", "expected", "received", "lost", "send_failed", "unconfirmed", "held", "duplicated",
                           "out_of_order")
LEVEL = 0.95


def confidence_interval(
    values: Sequence[float] | np.ndarray, level: float = LEVEL
) -> tuple[float, float, float]:
    """(mean, low, high) of the Student-t interval for the mean of ``values``, NaNs ignored.

    One value gives (value, NaN, NaN): there is no spread to estimate. No values give all NaN.
    """
    data = np.asarray(values, dtype="float64")
    data = data[~np.isnan(data)]
    if data.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(data.mean())
    if data.size == 1:
        return (mean, math.nan, math.nan)
    half = (
        float(stats.t.ppf(0.5 + level / 2, df=data.size - 1)) * float(data.std(ddof=1)) / math.sqrt(data.size)
    )
    return (mean, mean - half, mean + half)


def aggregate_columns() -> list[str]:
    names = [*CASE_KEYS, *VARIANT_LABELS, "latency_kind", "repetitions", "complete", *SUMMED]
    for metric in CI_METRICS:
        names += [f"{metric}_mean", f"{metric}_ci95_low", f"{metric}_ci95_high"]
    return [*names, *CPU_LABELS]


def aggregate(per_repetition: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """One row per case: repetition count, summed delivery counts, mean and CI of ``CI_METRICS``."""
    columns = aggregate_columns()
    if per_repetition.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for _, group in per_repetition.groupby(list(CASE_KEYS), dropna=False, sort=True):
        first = group.iloc[0]
        row: dict[str, object] = {k: first[k] for k in (*CASE_KEYS, *VARIANT_LABELS, "latency_kind")}
        row["repetitions"] = int(group["repetition"].nunique())
        row["complete"] = bool(group["complete"].all())
        for name in SUMMED:
            row[name] = int(group[name].sum())
        for metric in CI_METRICS:
            # a summary from before a metric existed (CPU) has no column for it: NaN
            values = group[metric].to_numpy(dtype="float64") if metric in group else np.array([])
            mean, low, high = confidence_interval(values, level)
            row.update({f"{metric}_mean": mean, f"{metric}_ci95_low": low, f"{metric}_ci95_high": high})
        row.update(_cpu_labels(group, row))
        rows.append(row)
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(list(CASE_KEYS), na_position="last", kind="mergesort").reset_index(drop=True)


def _cpu_labels(group: pd.DataFrame, row: dict[str, object]) -> dict[str, str]:
    roles = group.get("client_cpu_role", pd.Series(dtype=str)).dropna().astype(str)
    roles = roles[roles != ""]
    role = str(roles.mode().iloc[0]) if not roles.empty else ""
    notes = [str(n) for n in dict.fromkeys(group.get("cpu_note", pd.Series(dtype=str)).dropna().astype(str)) if n]
    cores = group["cpu_cores"].max() if "cpu_cores" in group else math.nan
    label = client_bound(row["client_cpu_pct_mean"], row["broker_cpu_pct_mean"], role,  # type: ignore[arg-type]
                         brokerless=bool(notes) and all(n.startswith(NO_BROKER) for n in notes),
                         clients_pct=row["clients_cpu_pct_mean"], cores=cores,  # type: ignore[arg-type]
                         total_pct=np.nansum([row[f"{m}_cpu_pct_mean"] for m in ("clients", "broker", "harness")]))
    return {"client_cpu_role": role, "cpu_note": "; ".join(notes), "client_bound": label or ""}
