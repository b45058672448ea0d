"""The shapes both engines share: the case aggregate they reduce raw rows to, the quantiles they compute,
and the long tables (per-second series, pooled latency distribution) finished here.

Both engines (pandas and Spark) reduce raw rows to the same small *case aggregate* table — one row per case
and repetition holding integer counts, first/last stamps, sums and percentile values in ns — and everything
derived from it (rates, µs, labels, provenance) is computed once, by the summary (``_summary.py``). That is
why the two paths agree to the last bit on everything except the order statistics themselves.

Case aggregate columns (all stamps and latencies in ns):
``rows producers consumers sent t_send_first t_send_last expected received_unique received failed
failed_received out_of_order unconfirmed held t_recv_first t_recv_last percentile_method
percentile_rank_error`` and, for each of :data:`MEASURES` (``lat``, ``int``, ``delay``, ``pub``),
``<prefix>_count <prefix>_sum_ns <prefix>_max_ns <prefix>_q_ns``; the ``*_q_ns`` columns hold one value per
entry of the measure's ``fractions``. ``pub_*`` is the publish latency ``t_ack - t_send`` over the sent
messages whose acknowledgement was stamped (one row per (producer, seq)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from harness.metrics.compute import PERCENTILES
from harness.runfolder.schema import CASE_KEYS, SUMMARY_COLUMNS

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

#: ``latency_from`` of the distribution table's publish-latency rows: send to the system's acknowledgement.
PUBLISH_LATENCY_FROM = "publish (send to ack)"

#: The two sets of rows a measure is taken over. ``receipts``: every row whose ``t_recv`` and ``t_send`` are
#: stamped (duplicates included: each arrival has its latency); ``messages``: one row per sent message
#: (producer, seq) with ``t_send`` stamped (a pubsub message's rows at each subscriber count once).
Level = Literal["receipts", "messages"]


@dataclass(frozen=True)
class Measure:
    """A per-message duration the case aggregate summarises: ``later - earlier`` (two raw stamps, ns), over
    the rows of ``level`` where both are stamped: count, sum, max and the quantiles ``fractions``.

    Both engines compute every entry of :data:`MEASURES` the same way, so a new duration (as the publish
    latency ``t_ack - t_send`` at the ``messages`` level is) is one entry here plus its summary columns. With
    ``latency_from`` the measure is also pooled over repetitions into the distribution table under that
    label."""

    prefix: str
    later: str
    earlier: str
    level: Level
    fractions: tuple[float, ...]
    latency_from: str = ""


MEASURES: tuple[Measure, ...] = (
    Measure("lat", "t_recv", "t_send", "receipts", LAT_QUANTILES, "actual send"),
    Measure("int", "t_recv", "t_intended", "receipts", LAT_QUANTILES, "intended"),
    Measure("delay", "t_send", "t_intended", "messages", DELAY_QUANTILES),
    Measure("pub", "t_ack", "t_send", "messages", LAT_QUANTILES, PUBLISH_LATENCY_FROM),
)
POOLED: tuple[Measure, ...] = tuple(m for m in MEASURES if m.latency_from)


def empty_case_aggregate() -> dict[str, object]:
    """The case aggregate's values (keys and client counts aside) of a case without one measured row: zero
    counts; no stamps, sums, maxima or quantiles."""
    row: dict[str, object] = dict.fromkeys(
        ("rows", "sent", "expected", "received_unique", "received", "failed", "failed_received", "out_of_order",
         "unconfirmed", "held", *(f"{m.prefix}_count" for m in MEASURES)), 0)
    row.update(dict.fromkeys(("t_send_first", "t_send_last", "t_recv_first", "t_recv_last",
                              *(f"{m.prefix}_{v}_ns" for m in MEASURES for v in ("sum", "max"))), math.nan))
    row.update(dict.fromkeys((f"{m.prefix}_q_ns" for m in MEASURES), None))
    row.update(percentile_method="", percentile_rank_error=math.nan)
    return row

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
    """Long rows for every pooled measure of the pooled per-case arrays: end to end from the actual and from
    the intended send time, and publish latency (``PUBLISH_LATENCY_FROM``)."""
    parts = [explode_distribution(pooled, f"{m.prefix}_q_ns", f"{m.prefix}_count", m.latency_from) for m in POOLED]
    parts = [part for part in parts if not part.empty] or parts[:1]
    return pd.concat(parts, ignore_index=True)


def sort_cases(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Deterministic row order (NaN rates, i.e. "max", last) so both engines return identical tables."""
    return frame.sort_values(list(keys), na_position="last", kind="mergesort").reset_index(drop=True)
