"""The pandas/numpy engine: the whole computation in one process, for runs that fit in memory.

It follows the Spark engine step for step (see ``_spark.py``) and is the reference for it: percentiles
are ``numpy.quantile`` with linear interpolation on the ns values, always exact.

Definitions (non-warmup rows only):
* a *delivery unit* is (producer, seq) for queue and reqrep and (producer, seq, consumer) for pubsub;
  expected = units present in the raw rows (lost messages have a row with a null ``t_recv``);
* received = units received at least once, duplicated = receipts (rows with ``t_recv``) - received;
  failed = units whose send raised (``send_failed``), failed_received = those that arrived anyway;
  lost = expected - received - (failed - failed_received) (``harness.metrics.compute.Delivery``; the case
  table's ``received`` column holds all receipts and ``received_unique`` the units);
* out of order = first receipts of a unit whose seq is below the highest seq already received from the
  same producer at the same consumer (receipts ordered by ``t_recv``, then seq, then consumer).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from harness.metrics.compute import quantiles
from harness.pipeline._finish import (
    DELAY_QUANTILES,
    DISTRIBUTION_QUANTILES,
    GROUP_KEYS,
    LAT_QUANTILES,
    concat_distributions,
)
from harness.runfolder import read_raw_table
from harness.runfolder.schema import CASE_KEYS, RAW_SCHEMA

_EMPTY = (pd.DataFrame(), pd.DataFrame(), pd.DataFrame())

_STAMPS = ("t_intended", "t_send", "t_ack", "t_recv")


def load_raw(files: Sequence[Path]) -> pd.DataFrame:
    """Non-warmup raw rows as a DataFrame; null stamps become 0 with a ``has_<stamp>`` flag beside them.

    (Keeping stamps as int64 rather than float NaN keeps full ns precision on long-running hosts.)
    """
    table = read_raw_table(files)
    table = table.filter(pc.invert(pc.fill_null(table["warmup"], False)))
    columns: dict[str, object] = {}
    for name in RAW_SCHEMA.names:
        column = table[name]
        if name in _STAMPS:
            columns[f"has_{name}"] = pc.is_valid(column).to_numpy(zero_copy_only=False)
            column = pc.fill_null(column, 0)
        elif name == "send_failed":
            column = pc.fill_null(column, False)
        columns[name] = column.to_numpy(zero_copy_only=False)
    return pd.DataFrame(columns)


def compute_files(files: Sequence[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """:func:`compute` over ``files``, one case (its repetitions together) at a time.

    Every output row belongs to one case (``CASE_KEYS``), so computing case by case gives the same tables
    as computing everything at once, while memory holds one case's rows instead of the whole run's (a
    `make regress` run has ~5 million rows: ~8 GB at once).
    """
    groups: dict[tuple[object, ...], list[Path]] = {}
    for f in files:
        first = read_raw_table([f], CASE_KEYS).slice(0, 1).to_pylist()
        # NaN (rate "max") never equals itself: key it as None so a case's repetitions meet.
        key = tuple(None if v != v else v for v in first[0].values()) if first else ("", str(f))
        groups.setdefault(key, []).append(f)
    parts = [compute(load_raw(group)) for group in groups.values()]
    parts = [part for part in parts if len(part[0])]
    if not parts:
        return compute(load_raw(files)) if files else _EMPTY
    return tuple(pd.concat(list(column), ignore_index=True) for column in zip(*parts, strict=True))  # type: ignore[return-value]


def _group_stats(ids: np.ndarray, values: np.ndarray, fractions: Sequence[float]) -> pd.DataFrame:
    """Per group id: count, sum, max and the given quantiles (numpy linear) of int64 ``values``."""
    if len(ids) == 0:
        return pd.DataFrame(columns=["count", "sum", "max", "q"])
    order = np.lexsort((values, ids))
    ids, values = ids[order], values[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    rows = {}
    for group, chunk in zip(ids[starts], np.split(values, starts[1:]), strict=True):
        rows[group] = {
            "count": len(chunk),
            "sum": int(chunk.sum(dtype=np.int64)),
            "max": int(chunk[-1]),
            "q": quantiles(chunk, fractions),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def _prefixed(stats: pd.DataFrame, prefix: str, index: pd.Index) -> pd.DataFrame:
    renamed = stats.rename(
        columns={
            "count": f"{prefix}_count",
            "sum": f"{prefix}_sum_ns",
            "max": f"{prefix}_max_ns",
            "q": f"{prefix}_q_ns",
        }
    )
    renamed = renamed.reindex(index)
    renamed[f"{prefix}_count"] = pd.to_numeric(renamed[f"{prefix}_count"]).fillna(0).astype("int64")
    return renamed


def compute(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(case aggregates, per-second receipt counts, pooled latency distribution) of non-warmup rows."""
    keys = list(GROUP_KEYS)
    df = raw.copy()
    df["cid"] = df.groupby(keys, dropna=False, sort=False).ngroup()
    cases = df.groupby("cid")[keys].first()
    cases["rows"] = df.groupby("cid").size()
    cases["producers"] = df.groupby("cid")["producer"].nunique()
    cases["consumers"] = df[df["consumer"] >= 0].groupby("cid")["consumer"].nunique()
    df["dcons"] = np.where(df["pattern"] == "pubsub", df["consumer"], 0)
    unit = ["cid", "producer", "seq", "dcons"]

    cases["expected"] = df.drop_duplicates(unit).groupby("cid").size()
    rec = df[df["has_t_recv"]].sort_values(["t_recv", "seq", "consumer"], kind="mergesort")
    firsts = rec.drop_duplicates(unit, keep="first")
    cases["received"] = rec.groupby("cid").size()
    cases["received_unique"] = firsts.groupby("cid").size()
    failed = df[df["send_failed"]].drop_duplicates(unit)
    cases["failed"] = failed.groupby("cid").size()
    cases["failed_received"] = firsts[firsts["send_failed"]].groupby("cid").size()
    stream = firsts.sort_values(["cid", "producer", "consumer", "t_recv", "seq"], kind="mergesort")
    seq = stream["seq"].to_numpy()
    bounds = stream[["cid", "producer", "consumer"]].to_numpy()
    new_stream = np.r_[True, (bounds[1:] != bounds[:-1]).any(axis=1)] if len(stream) else np.array([], bool)
    running = stream.groupby(["cid", "producer", "consumer"], sort=False)["seq"].cummax().to_numpy()
    previous = np.r_[np.iinfo(np.int64).min, running[:-1]] if len(stream) else running
    late = (~new_stream) & (seq < previous)
    cases["out_of_order"] = pd.Series(late, index=stream.index).groupby(stream["cid"]).sum()

    messages = df[df["has_t_send"]].drop_duplicates(["cid", "producer", "seq"])
    cases["sent"] = messages.groupby("cid").size()
    cases["t_send_first"] = messages.groupby("cid")["t_send"].min()
    cases["t_send_last"] = messages.groupby("cid")["t_send"].max()
    scheduled = messages[messages["has_t_intended"]]
    delay = _group_stats(
        scheduled["cid"].to_numpy(),
        (scheduled["t_send"] - scheduled["t_intended"]).to_numpy(),
        DELAY_QUANTILES,
    )

    rec = rec[rec["has_t_send"]]
    cases["t_recv_first"] = rec.groupby("cid")["t_recv"].min()
    cases["t_recv_last"] = rec.groupby("cid")["t_recv"].max()
    lat = _group_stats(rec["cid"].to_numpy(), (rec["t_recv"] - rec["t_send"]).to_numpy(), LAT_QUANTILES)
    timed = rec[rec["has_t_intended"]]
    lat_int = _group_stats(
        timed["cid"].to_numpy(), (timed["t_recv"] - timed["t_intended"]).to_numpy(), LAT_QUANTILES
    )
    cases = pd.concat(
        [
            cases,
            _prefixed(lat, "lat", cases.index),
            _prefixed(lat_int, "int", cases.index),
            _prefixed(delay, "delay", cases.index),
        ],
        axis=1,
    )
    counts = ["consumers", "expected", "received", "received_unique", "failed", "failed_received", "out_of_order",
              "sent"]
    cases[counts] = cases[counts].fillna(0).astype("int64")
    cases["percentile_method"] = "exact"
    cases["percentile_rank_error"] = 0.0

    second = (rec["t_recv"] - rec["cid"].map(cases["t_recv_first"]).astype("int64")) // 1_000_000_000
    series = rec.assign(second=second).groupby(["cid", "second"]).size().rename("msgs").reset_index()
    series = series.join(cases[keys], on="cid").drop(columns="cid")
    return cases.reset_index(drop=True), series, _distribution(rec)


def _distribution(rec: pd.DataFrame) -> pd.DataFrame:
    """Latency percentiles of each case pooled over its repetitions, from the raw rows."""
    keys = list(CASE_KEYS)
    pid = rec.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
    pooled = rec.assign(pid=pid).groupby("pid")[keys].first()
    lat = _group_stats(pid, (rec["t_recv"] - rec["t_send"]).to_numpy(), DISTRIBUTION_QUANTILES)
    timed = rec["has_t_intended"].to_numpy()
    lat_int = _group_stats(
        pid[timed], (rec["t_recv"] - rec["t_intended"]).to_numpy()[timed], DISTRIBUTION_QUANTILES
    )
    pooled = pd.concat(
        [pooled, _prefixed(lat, "lat", pooled.index), _prefixed(lat_int, "int", pooled.index)], axis=1
    )
    pooled["percentile_method"] = "exact"
    pooled["percentile_rank_error"] = 0.0
    return concat_distributions(pooled)
