"""The pandas/numpy engine: the computation of one case's summary rows from its raw rows.

The pandas engine runs it case after case in this process; the Spark engine runs the same functions, one
case per task (``_spark.py``). Percentiles are exact: linear interpolation between two order statistics of
the sorted ns values (``harness.metrics.compute.quantiles_of_sorted``, equal to ``numpy.quantile``).

Definitions (non-warmup rows only):
* a *delivery unit* is (producer, seq) for queue and reqrep and (producer, seq, consumer) for pubsub;
  expected = units present in the raw rows (lost messages have a row with a null ``t_recv``);
* received = units received at least once, duplicated = receipts (rows with ``t_recv``) - received;
  failed = units whose send raised (``send_failed``), failed_received = those that arrived anyway;
  unconfirmed = units never received whose outcome never came back (``unconfirmed``), held = units never
  received that the final read found (``drained``);
  lost = expected - received - (failed - failed_received) - unconfirmed - held
  (``harness.metrics.compute.Delivery``; the case table's ``received`` column holds all receipts and
  ``received_unique`` the units);
* out of order = first receipts of a unit whose seq is below the highest seq already received from the
  same producer at the same consumer (receipts ordered by ``t_recv``, then seq, then consumer).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from harness.metrics.compute import quantiles_of_sorted
from harness.pipeline._tables import (
    DISTRIBUTION_QUANTILES,
    GROUP_KEYS,
    MEASURES,
    POOLED,
    Measure,
    concat_distributions,
)
from harness.runfolder import count_raw_rows, first_raw_row, read_raw_table
from harness.runfolder.schema import CASE_KEYS, RAW_SCHEMA

_STAMPS = ("t_intended", "t_send", "t_ack", "t_recv")


def raw_frame(table: pa.Table) -> pd.DataFrame:
    """Non-warmup rows of an Arrow table of raw records as a DataFrame; null stamps become 0 with a
    ``has_<stamp>`` flag beside them; a RAW_SCHEMA column the table lacks is all null.

    (Keeping stamps as int64 rather than float NaN keeps full ns precision on long-running hosts.)
    """
    if "warmup" in table.column_names:
        table = table.filter(pc.invert(pc.fill_null(table["warmup"], False)))
    columns: dict[str, object] = {}
    for field in RAW_SCHEMA:
        name = field.name
        column = table[name] if name in table.column_names else pa.nulls(len(table), field.type)
        if name in _STAMPS:
            columns[f"has_{name}"] = pc.is_valid(column).to_numpy(zero_copy_only=False)
            column = pc.fill_null(column, 0)
        elif name in ("send_failed", "warmup", "unconfirmed", "drained"):
            column = pc.fill_null(column, False)
        if pa.types.is_string(field.type):
            # a few distinct names per case: categorical codes group and filter far faster than str objects
            columns[name] = column.dictionary_encode().to_pandas()
        else:
            columns[name] = column.to_numpy(zero_copy_only=False)
    return pd.DataFrame(columns)


def load_raw(files: Sequence[Path | str]) -> pd.DataFrame:
    """:func:`raw_frame` of the raw rows of ``files``."""
    return raw_frame(read_raw_table(files))


Tables = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]


def concat_parts(parts: Sequence[Tables]) -> Tables:
    """The tables of several :func:`compute` calls (each over whole cases) as one set of tables."""
    parts = [part for part in parts if len(part[0])]
    if not parts:  # no measured rows at all: the tables of no rows, with their columns
        return compute(raw_frame(RAW_SCHEMA.empty_table()))
    return tuple(pd.concat(list(column), ignore_index=True) for column in zip(*parts, strict=True))  # type: ignore[return-value]


def case_groups(files: Sequence[Path | str]) -> list[list[Path | str]]:
    """``files`` grouped by case (``CASE_KEYS``, repetitions together), largest group first.

    A file holds one case and repetition (``CaseKey.raw_name``); its first row names the case. Every
    output row of :func:`compute` belongs to one case, so computing group by group gives the same tables
    as computing everything at once, with one case's rows in memory instead of the whole run's.
    """
    groups: dict[tuple[object, ...], list[Path | str]] = {}
    for f in files:
        first = first_raw_row(f, CASE_KEYS)
        # NaN (rate "max") never equals itself: key it as None so a case's repetitions meet.
        key = tuple(None if v != v else v for v in first.values()) if first else ("", str(f))
        groups.setdefault(key, []).append(f)
    return sorted(groups.values(), key=count_raw_rows, reverse=True)


def compute_group(files: Sequence[Path | str]) -> Tables:
    """:func:`compute` of the raw rows of ``files`` (one group of :func:`case_groups`)."""
    return compute(load_raw(files))


def compute_files(files: Sequence[Path | str]) -> Tables:
    """:func:`compute` over ``files``, one case at a time (a `make regress` run has ~5 million rows: ~8 GB
    at once)."""
    return concat_parts([compute_group(group) for group in case_groups(files)])


def _group_stats(ids: np.ndarray, values: np.ndarray, fractions: Sequence[float]) -> pd.DataFrame:
    """Per group id: count, sum, max and the given quantiles (exact, linear) of int64 ``values``."""
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
            "q": quantiles_of_sorted(chunk, fractions),
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
    # Rows carry only the case id and numbers from here on: every filter and sort below then moves a
    # handful of int64 columns instead of the seven key columns (most of the time on a large case).
    cid = raw.groupby(keys, dropna=False, sort=False, observed=True).ngroup()
    numbers = [c for c in raw.columns if c not in keys and c != "pattern"]
    df = raw[numbers].assign(cid=cid.to_numpy())
    cases = raw[keys].assign(cid=df["cid"]).drop_duplicates("cid").set_index("cid").sort_index()
    cases = cases.astype({k: object for k in keys if isinstance(cases[k].dtype, pd.CategoricalDtype)})
    cases["rows"] = df.groupby("cid").size()
    cases["producers"] = df.groupby("cid")["producer"].nunique()
    cases["consumers"] = df[df["consumer"] >= 0].groupby("cid")["consumer"].nunique()
    df["dcons"] = np.where(raw["pattern"].to_numpy() == "pubsub", df["consumer"], 0)
    unit = ["cid", "producer", "seq", "dcons"]

    cases["expected"] = df.drop_duplicates(unit).groupby("cid").size()
    rec = df[df["has_t_recv"]].sort_values(["t_recv", "seq", "consumer"], kind="mergesort")
    firsts = rec.drop_duplicates(unit, keep="first")
    cases["received"] = rec.groupby("cid").size()
    cases["received_unique"] = firsts.groupby("cid").size()
    failed = df[df["send_failed"]].drop_duplicates(unit)
    cases["failed"] = failed.groupby("cid").size()
    cases["failed_received"] = firsts[firsts["send_failed"]].groupby("cid").size()
    for flag, name in (("unconfirmed", "unconfirmed"), ("drained", "held")):
        flagged = df[df[flag].to_numpy() & ~df["send_failed"].to_numpy()]  # rare: only after faults
        if len(flagged):
            seen = flagged[unit].merge(firsts[unit], how="left", on=unit, indicator=True)["_merge"] == "both"
            flagged = flagged[~seen.to_numpy()].drop_duplicates(unit)
        cases[name] = flagged.groupby("cid").size()
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

    rec = rec[rec["has_t_send"]]
    cases["t_recv_first"] = rec.groupby("cid")["t_recv"].min()
    cases["t_recv_last"] = rec.groupby("cid")["t_recv"].max()
    levels = {"receipts": rec, "messages": messages}
    stats = []
    for measure in MEASURES:
        ids, values = _measured(levels[measure.level], measure)
        stats.append(_prefixed(_group_stats(ids, values, measure.fractions), measure.prefix, cases.index))
    cases = pd.concat([cases, *stats], axis=1)
    counts = ["consumers", "expected", "received", "received_unique", "failed", "failed_received", "out_of_order",
              "sent", "unconfirmed", "held"]
    cases[counts] = cases[counts].fillna(0).astype("int64")
    cases["percentile_method"] = "exact"
    cases["percentile_rank_error"] = 0.0

    second = (rec["t_recv"] - rec["cid"].map(cases["t_recv_first"]).astype("int64")) // 1_000_000_000
    series = rec.assign(second=second).groupby(["cid", "second"]).size().rename("msgs").reset_index()
    series = series.join(cases[keys], on="cid").drop(columns="cid")
    return cases.reset_index(drop=True), series, _distribution(levels, cases)


def _measured(rows: pd.DataFrame, measure: Measure, ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(group ids, ``later - earlier`` in ns) of the rows where both stamps of ``measure`` are set; ``ids``
    (one per row of ``rows``) defaults to the rows' case ids."""
    both = (rows[f"has_{measure.later}"] & rows[f"has_{measure.earlier}"]).to_numpy()
    values = (rows[measure.later] - rows[measure.earlier]).to_numpy()[both]
    return (rows["cid"].to_numpy() if ids is None else ids)[both], values


def _distribution(levels: dict[str, pd.DataFrame], cases: pd.DataFrame) -> pd.DataFrame:
    """Latency percentiles of each case pooled over its repetitions, from the raw rows: each of ``POOLED``
    over the rows of its level (end to end over the receipts, publish latency over the sent messages)."""
    keys = list(CASE_KEYS)
    pooled_id = cases.groupby(keys, dropna=False, sort=False).ngroup()
    measured = []
    for measure in POOLED:
        rows = levels[measure.level]
        measured.append(_measured(rows, measure, pooled_id.loc[rows["cid"]].to_numpy()))
    present = np.unique(np.concatenate([ids for ids, _ in measured])).astype(np.int64)
    pooled = cases[keys].groupby(pooled_id).first().loc[present]
    parts = [pooled]
    for measure, (ids, values) in zip(POOLED, measured, strict=True):
        parts.append(_prefixed(_group_stats(ids, values, DISTRIBUTION_QUANTILES), measure.prefix, pooled.index))
    pooled = pd.concat(parts, axis=1)
    pooled["percentile_method"] = "exact"
    pooled["percentile_rank_error"] = 0.0
    return concat_distributions(pooled)
