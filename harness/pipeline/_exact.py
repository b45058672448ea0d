"""Exact percentiles of a distributed column, without sorting it and without a group in one task.

A linear-interpolated quantile of n values needs two order statistics (``harness.metrics.compute
.order_ranks``). They are found in two passes over the values, both plain Spark SQL aggregations:

1. **Histogram.** Each value goes into a bucket ``floor(log2(1 + v) * 128)`` (negative values mirrored
   below zero): monotone in the value, about 0.5 % of the value wide, so a group has a few thousand
   buckets whatever its size. Counts per (group, bucket) are summed over all rows; a window over the
   buckets of a group (a few thousand rows) gives where each bucket starts in sorted order, and a
   broadcast join with the wanted ranks picks the bucket holding each of them.
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
    """The quantiles of every :class:`Wanted`, keyed by (level, group, m).

    ``values`` has columns ``cid`` (long), ``m`` (int) and ``v`` (long, no nulls); ``pooled_of`` maps each
    ``cid`` to its pooled group id."""
    from pyspark.sql import functions as F

    wanted = [w for w in wanted if w.n > 0]
    if not wanted:
        return {}
    spark = values.sparkSession
    ranks = sorted({(w.level, w.group, w.m, r) for w in wanted for lo, hi, _ in order_ranks(w.n, w.fractions)
                    for r in (lo, hi)})
    rank_frame = spark.createDataFrame(pd.DataFrame(ranks, columns=["level", "g", "m", "rank"]))
    pooled = spark.createDataFrame(pd.DataFrame(list(pooled_of.items()), columns=["cid", "pid"]))

    hist = values.groupBy("cid", "m", bucket(F.col("v")).alias("b")).agg(F.count(F.lit(1)).alias("n"))
    levels = hist.select(F.lit("cid").alias("level"), F.col("cid").alias("g"), "m", "b", "n")
    if any(w.level == "pid" for w in wanted):
        by_pid = (hist.join(F.broadcast(pooled), "cid").groupBy("pid", "m", "b").agg(F.sum("n").alias("n"))
                  .select(F.lit("pid").alias("level"), F.col("pid").alias("g"), "m", "b", "n"))
        levels = levels.unionByName(by_pid)
    from pyspark.sql import Window

    order = Window.partitionBy("level", "g", "m").orderBy("b").rowsBetween(Window.unboundedPreceding, 0)
    spans = levels.withColumn("end", F.sum("n").over(order)).withColumn("start", F.col("end") - F.col("n"))
    hit = spans.join(F.broadcast(rank_frame), ["level", "g", "m"]).where(
        (F.col("rank") >= F.col("start")) & (F.col("rank") < F.col("end")))
    picked = hit.select("level", "g", "m", "b", "start", "rank").toPandas()

    # the buckets to read, per case id (a pooled group's bucket is read in each of its cases)
    cases_of: dict[int, list[int]] = defaultdict(list)
    for cid, pid in pooled_of.items():
        cases_of[pid].append(cid)
    keys = {(int(g), int(m), int(b)) for level, g, m, b in picked[["level", "g", "m", "b"]].itertuples(index=False)
            if level == "cid"}
    keys |= {(cid, int(m), int(b)) for level, g, m, b in picked[["level", "g", "m", "b"]].itertuples(index=False)
             if level == "pid" for cid in cases_of[int(g)]}
    targets = spark.createDataFrame(pd.DataFrame(sorted(keys), columns=["cid", "m", "b"]))
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
