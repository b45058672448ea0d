"""Exact percentiles of a distributed column, without sorting it and without a group in one task.

A linear-interpolated quantile of n values needs two order statistics (``harness.metrics.compute
.order_ranks``). They are found in two passes over the values, both plain Spark SQL aggregations:

1. **Histogram.** Each value goes into a bucket ``floor(log2(1 + v) * 128)`` (negative values mirrored
   below zero): monotone in the value, about 0.5 % of the value wide, so a group has a few thousand
   buckets whatever its size. Counts per (case, bucket) are one aggregation; that small table comes back
   to the driver (Arrow), which sums the pooled groups' histograms, runs the cumulative counts and picks
   the bucket holding each wanted rank.
2. **Selection.** Only the rows in those buckets are kept (a broadcast semi-join) and counted per
   distinct value; the driver walks each picked bucket's sorted values to the wanted rank.

Because the bucket function is monotone, sorted order is bucket order, so the order statistics, and the
quantiles :func:`harness.metrics.compute.interpolate` makes of them, are those of a full sort: exact, the
same numbers as the pandas engine. What comes back to the driver is the picked buckets' distinct values:
at most a bucket's width (0.5 % of the value, in ns) each.

Groups are given at two levels: the case id ``cid`` of each row and a pooled id (a case's repetitions
together, for the distribution table) derived from it through ``pooled_of``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.metrics.compute import interpolate, order_ranks

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Buckets per doubling of the value: 128 makes a bucket about 0.54 % of its value wide.
BUCKETS_PER_OCTAVE = 128


@dataclass(frozen=True)
class Wanted:
    """Quantiles ``fractions`` of measure ``m`` over the ``n`` values of group ``group`` at ``level``
    (``"cid"``: one case and repetition; ``"pid"``: a case pooled over its repetitions)."""

    level: str
    group: int
    m: int
    n: int
    fractions: tuple[float, ...]


def bucket(v: Column) -> Column:
    """The histogram bucket of ``v``: monotone non-decreasing in ``v`` (log2 is), ~0.54 % wide."""
    from pyspark.sql import functions as F

    scale = float(BUCKETS_PER_OCTAVE)
    up = F.floor(F.log2(v.cast("double") + 1.0) * scale)
    down = -F.floor(F.log2(1.0 - v.cast("double")) * scale) - 1
    return F.when(v >= 0, up).otherwise(down).cast("long")


def exact_quantiles(values: DataFrame, pooled_of: Mapping[int, int], wanted: Sequence[Wanted]
                    ) -> dict[tuple[str, int, int], list[float]]:
    """The quantiles of every :class:`Wanted`, keyed by (level, group, m): two Spark queries over ``values``.

    ``values`` has columns ``cid`` (long), ``m`` (int) and ``v`` (long, no nulls); ``pooled_of`` maps each
    ``cid`` to its pooled group id."""
    from pyspark.sql import functions as F

    wanted = [w for w in wanted if w.n > 0]
    if not wanted:
        return {}
    spark = values.sparkSession
    # 1. the histogram per case (a few thousand buckets each) comes back whole; the driver adds the pooled
    # groups' histograms up and finds the bucket holding each wanted rank
    hist = values.groupBy("cid", "m", bucket(F.col("v")).alias("b")).agg(F.count(F.lit(1)).alias("n")).toPandas()
    hist = hist.astype({"cid": "int64", "m": "int64", "b": "int64", "n": "int64"})
    pooled = hist.assign(g=hist["cid"].map(pooled_of)).groupby(["g", "m", "b"], as_index=False)["n"].sum()
    levels: dict[str, pd.DataFrame] = {"cid": hist.rename(columns={"cid": "g"}), "pid": pd.DataFrame(pooled)}
    spans: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}
    for level, frame in levels.items():
        for key, part in frame.sort_values(["g", "m", "b"]).groupby(["g", "m"], sort=False):
            g, m = (int(x) for x in key)  # type: ignore[union-attr, call-overload]
            spans[(level, g, m)] = (part["b"].to_numpy(np.int64), np.cumsum(part["n"].to_numpy(np.int64)))
    picked_rows = set()
    for w in wanted:
        buckets, ends = spans[(w.level, w.group, w.m)]
        for lo, hi, _ in order_ranks(w.n, w.fractions):
            for rank in (lo, hi):
                i = int(np.searchsorted(ends, rank, "right"))
                start = int(ends[i - 1]) if i else 0
                picked_rows.add((w.level, w.group, w.m, int(buckets[i]), start, rank))
    picked = pd.DataFrame(sorted(picked_rows), columns=["level", "g", "m", "b", "start", "rank"])

    # 2. the values of the picked buckets, per case id (a pooled group's bucket is read in each of its cases)
    cases_of: dict[int, list[int]] = defaultdict(list)
    for cid, pid in pooled_of.items():
        cases_of[pid].append(cid)
    keys = {(g, m, b) for level, g, m, b, _, _ in picked_rows if level == "cid"}
    keys |= {(cid, m, b) for level, g, m, b, _, _ in picked_rows if level == "pid" for cid in cases_of[g]}
    targets = spark.createDataFrame(pd.DataFrame(sorted(keys), columns=["cid", "m", "b"]),
                                    schema="cid long, m int, b long")
    counted = (values.withColumn("b", bucket(F.col("v")))
               .join(F.broadcast(targets), ["cid", "m", "b"], "left_semi")
               .groupBy("cid", "m", "b", "v").agg(F.count(F.lit(1)).alias("n"))
               .toPandas())
    return _read_ranks(wanted, picked, counted, pooled_of)


def _read_ranks(wanted: Sequence[Wanted], picked: pd.DataFrame, counted: pd.DataFrame,
                pooled_of: Mapping[int, int]) -> dict[tuple[str, int, int], list[float]]:
    """Order statistics from the picked buckets' value counts, interpolated into quantiles."""
    counted = counted.assign(pid=counted["cid"].map(pooled_of))
    buckets: dict[tuple[str, int, int, int], tuple[np.ndarray, np.ndarray]] = {}
    for level in ("cid", "pid"):
        summed = counted.groupby([level, "m", "b", "v"], sort=True)["n"].sum().reset_index()
        for key, part in summed.groupby([level, "m", "b"], sort=False):
            g, m, b = (int(x) for x in key)  # type: ignore[union-attr, call-overload]
            buckets[(level, g, m, b)] = (part["v"].to_numpy(np.int64),
                                                        np.cumsum(part["n"].to_numpy(np.int64)))
    at: dict[tuple[str, int, int, int], int] = {}
    for level, g, m, b, start, rank in picked.itertuples(index=False):
        values, ends = buckets[(level, int(g), int(m), int(b))]
        at[(level, int(g), int(m), int(rank))] = int(values[np.searchsorted(ends, int(rank) - int(start), "right")])
    out = {}
    for w in wanted:
        key = (w.level, w.group, w.m)
        out[key] = [interpolate(at[(*key, lo)], at[(*key, hi)], weight) for lo, hi, weight in order_ranks(w.n, w.fractions)]
    return out
