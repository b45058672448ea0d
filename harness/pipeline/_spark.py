"""The Spark engine: Spark SQL over the raw records, read as one DataFrame (``spark.read.parquet``).

It reduces the raw rows to the same case aggregate, series and pooled distribution as the pandas engine
(``_tables.py``) with aggregations only; only those small tables come back to the driver (as Arrow
batches). No step needs a case in one task or in memory: every operator is a hash aggregation, a
broadcast join or a sort of bounded blocks, and Spark spills what does not fit to disk.

* **Rows.** Non-warmup rows, each tagged with a 64-bit case id (``xxhash64`` of the case and repetition
  keys; the driver checks that no two cases share one); the pooled id (a case over its repetitions) is
  given on the driver, from the per-case table's keys, so no row hashes its keys twice. The raw
  files are read by each query that needs them, only the columns it uses: no in-memory copy of the rows.
* **Per case** (one aggregation, by case keys, producer and consumer): row count, first and last receipt,
  count, sum and max of every receipt-level measure; producers and consumers.
* **Delivery units** (one shuffle): rows are partitioned by (case, producer, block of 65,536 seqs), so
  every row of a delivery unit (producer, seq[, subscriber]) meets in one partition, and aggregated to one
  row per unit: receipts, first receipt (``min`` of (t_recv, consumer)), failed, flagged unconfirmed or
  drained (on a row whose send did not raise), stamps. Expected, received, duplicated, failed, unconfirmed
  and held counts are sums over units (unconfirmed and held: flagged units never received); a message
  (producer, seq) is a group of units in the same partition, so sent counts and message-level measures
  need no second shuffle: one query sums units into messages and messages into the case's counts.
* **Out of order** (same partitions): a first receipt is late iff a higher seq of its stream (producer,
  consumer) arrived strictly earlier — the pandas engine's running-max rule restated. Within a block a
  window ordered by seq gives the earliest receipt of the higher seqs; across blocks a small per-block
  table of earliest receipts (one row per 65,536 seqs) gives the carry, broadcast back.
* **Percentiles**: exact, by histogram and selection (``_exact.py``), every entry of ``MEASURES`` at once
  (receipt-level values from the rows and message-level values from the units, as one union): two queries.
* **Series**: receipts per (case, whole seconds since the case's first receipt), one aggregation.

Paths are local files or URIs every executor can read (``hdfs://``, ``s3a://``): on a cluster the raw
files must be on storage the executors share (docs/cluster.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness.pipeline import _pandas
from harness.pipeline._errors import PipelineError
from harness.pipeline._exact import Wanted, exact_quantiles
from harness.pipeline._tables import (
    DISTRIBUTION_QUANTILES,
    GROUP_KEYS,
    MEASURES,
    POOLED,
    Measure,
    concat_distributions,
)
from harness.runfolder import count_raw_rows
from harness.runfolder.schema import CASE_KEYS, RAW_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

Tables = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]

#: Seqs per block of the delivery-unit shuffle: a block is the unit of the out-of-order scan.
BLOCK = 1 << 16
#: Raw rows per shuffle partition aimed at (adaptive execution merges smaller ones).
ROWS_PER_PARTITION = 1_000_000

_STAMPS = ("t_intended", "t_send", "t_ack", "t_recv")
_COUNTS = ("rows", "producers", "consumers", "sent", "expected", "received_unique", "received", "failed",
           "failed_received", "out_of_order", "unconfirmed", "held")
#: Row flags of a unit never received: (raw column, case aggregate column), as the pandas engine counts them.
_FLAGS = (("unconfirmed", "unconfirmed"), ("drained", "held"))


def spark_schema() -> object:
    """RAW_SCHEMA as a Spark schema: a column an older file lacks reads as null."""
    from pyspark.sql import types as T

    mapping = {"string": T.StringType(), "int32": T.IntegerType(), "int64": T.LongType(),
               "double": T.DoubleType(), "bool": T.BooleanType()}
    return T.StructType([T.StructField(f.name, mapping[str(f.type)], True) for f in RAW_SCHEMA])


def read_raw(spark: SparkSession, files: Sequence[Path | str]) -> DataFrame:
    """The non-warmup raw rows of ``files`` (RAW_SCHEMA) with ``cid``, the id of their case and repetition."""
    from pyspark.sql import functions as F

    raw = spark.read.schema(spark_schema()).parquet(*[str(f) for f in files])  # type: ignore[arg-type]
    return raw.where(~F.coalesce(F.col("warmup"), F.lit(False))).select(
        case_id(GROUP_KEYS).alias("cid"), *RAW_SCHEMA.names)


def case_id(keys: Sequence[str]) -> Column:
    """A 64-bit id of ``keys`` (``xxhash64``); rate "max" (NaN, or null once through pandas) hashed as -1."""
    from pyspark.sql import functions as F

    return F.xxhash64(*[F.coalesce(F.nanvl(F.col(k), F.lit(-1.0)), F.lit(-1.0)) if k == "rate" else F.col(k)
                        for k in keys])


def read_rows(spark: SparkSession, files: Sequence[Path | str]) -> DataFrame:
    """:func:`read_raw` reduced to what the computation uses: ``cid producer consumer seq``, the case
    keys (only the per-case query reads them: Spark prunes the columns a query does not use), the stamps, ``send_failed`` (0/1), ``unconfirmed`` and ``drained`` (0/1, on rows whose send did not
    raise) and ``dcons`` (the subscriber of a pubsub delivery unit, else 0)."""
    from pyspark.sql import functions as F

    failed = F.coalesce(F.col("send_failed"), F.lit(False))
    return read_raw(spark, files).select(
        "cid", "producer", "consumer", "seq", *GROUP_KEYS, *_STAMPS,
        failed.cast("int").alias("send_failed"),
        *[(F.coalesce(F.col(flag), F.lit(False)) & ~failed).cast("int").alias(flag) for flag, _ in _FLAGS],
        F.when(F.col("pattern") == "pubsub", F.col("consumer")).otherwise(F.lit(0)).alias("dcons"),
    )


def _value(measure: Measure, where: Column | None = None) -> Column:
    """``later - earlier`` where both are stamped (and ``where`` holds), else null."""
    from pyspark.sql import functions as F

    both = F.col(measure.later).isNotNull() & F.col(measure.earlier).isNotNull()
    return F.when(both if where is None else both & where, F.col(measure.later) - F.col(measure.earlier))


def _scalars(measure: Measure, where: Column | None = None) -> list[Column]:
    from pyspark.sql import functions as F

    v = _value(measure, where)
    return [F.count(v).alias(f"{measure.prefix}_count"), F.sum(v).alias(f"{measure.prefix}_sum_ns"),
            F.max(v).alias(f"{measure.prefix}_max_ns")]


def _values(frame: DataFrame, measures: Sequence[tuple[int, Measure]], where: Column | None = None) -> DataFrame:
    """Long (cid, m, v) rows of the given measures (index m in MEASURES) where they are defined."""
    from pyspark.sql import functions as F

    pairs = F.array(*[F.struct(F.lit(i).alias("m"), _value(m, where).alias("v")) for i, m in measures])
    return (frame.select("cid", F.explode(pairs).alias("x"))
            .select("cid", F.col("x.m").alias("m"), F.col("x.v").alias("v")).where(F.col("v").isNotNull()))


def compute(spark: SparkSession, files: Sequence[Path | str]) -> Tables:
    """(case aggregates, per-second receipt counts, pooled latency distribution), as pandas frames.

    Five Spark queries: per case; the delivery units (the one shuffle, its result kept for the percentiles)
    with their counts and out of order; the histogram and the selection of the exact percentiles (every
    measure at once); the series. The raw files are read by each query that needs them (Parquet column
    reads are cheaper than Spark's in-memory cache of 13 columns)."""
    from pyspark.sql import functions as F

    # PySpark warns, with the JVM's stack trace, before it raises an error that ends a collection as Arrow
    # batches (a cancelled job, when a Ctrl-C stops the summary, among them): the error alone is enough
    warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization", category=UserWarning)
    rows = read_rows(spark, files)
    cases = _per_case(rows)
    if cases.empty:
        return _pandas.concat_parts([])
    pooled_of = dict(zip(cases["cid"], cases["pid"], strict=True))
    receipt = F.col("t_recv").isNotNull() & F.col("t_send").isNotNull()
    at_receipts = [(i, m) for i, m in enumerate(MEASURES) if m.level == "receipts"]
    at_messages = [(i, m) for i, m in enumerate(MEASURES) if m.level == "messages"]
    units, messages = _delivery(spark, rows, cases, files)
    try:
        values = _values(rows, at_receipts, receipt)
        if at_messages:
            values = values.unionByName(_values(messages, at_messages))
        quantiles = _quantiles(values, cases, [*at_receipts, *at_messages], pooled_of)
    finally:
        units.unpersist()
    first = spark.createDataFrame(cases.loc[cases["lat_count"] > 0, ["cid", "t_recv_first"]].astype("int64"))
    series = (rows.where(receipt).select("cid", "t_recv").join(F.broadcast(first), "cid")
              .select("cid", F.expr("(t_recv - t_recv_first) div 1000000000").alias("second"))
              .groupBy("cid", "second").agg(F.count(F.lit(1)).alias("msgs")).toPandas())
    for i, m in enumerate(MEASURES):
        cases[f"{m.prefix}_q_ns"] = pd.Series([quantiles.get(("cid", int(c), i)) for c in cases["cid"]],
                                               index=cases.index, dtype=object)
    cases["percentile_method"] = "exact"
    cases["percentile_rank_error"] = 0.0
    keys = list(GROUP_KEYS)
    series = series.astype({"second": "int64", "msgs": "int64"}).join(cases.set_index("cid")[keys], on="cid")
    return (cases.drop(columns=["cid", "pid", "t_recv_base"]), series.drop(columns="cid"),
            _distribution(cases, quantiles))


def _per_case(rows: DataFrame) -> pd.DataFrame:
    """One row per case and repetition: its keys, ids, row count, producers and consumers, first and last
    receipt and the receipt-level measures' count, sum and max. One aggregation by (case, producer,
    consumer) with the case's keys, summed up here (a case has a few producers and consumers)."""
    from pyspark.sql import functions as F

    receipt = F.col("t_recv").isNotNull() & F.col("t_send").isNotNull()
    at_receipts = [m for m in MEASURES if m.level == "receipts"]
    parts = rows.groupBy("cid", "producer", "consumer", *GROUP_KEYS).agg(
        F.count(F.lit(1)).alias("rows"),
        F.min("t_recv").alias("t_recv_base"),
        F.max("t_recv").alias("t_recv_max"),
        F.min(F.when(receipt, F.col("t_recv"))).alias("t_recv_first"),
        F.max(F.when(receipt, F.col("t_recv"))).alias("t_recv_last"),
        *[c for m in at_receipts for c in _scalars(m, receipt)],
    ).toPandas()
    if parts.empty:
        return parts
    if parts["consumer"].max() >= 1 << 16:
        raise PipelineError("a consumer index above 65535 in the raw rows; summarise this run with --engine pandas")
    keys = parts[["cid", *GROUP_KEYS]].drop_duplicates()
    if keys["cid"].duplicated().any():
        raise PipelineError("two cases of these runs share a 64-bit case id (a hash collision); summarise them "
                            "with --engine pandas")
    sums = ["rows", *(f"{m.prefix}_{x}" for m in at_receipts for x in ("count", "sum_ns"))]
    by = parts.groupby("cid", sort=False)
    cases = by[sums].sum()
    cases = cases.join(by[["t_recv_base", "t_recv_first"]].min()).join(
        by[["t_recv_max", "t_recv_last", *(f"{m.prefix}_max_ns" for m in at_receipts)]].max())
    cases["producers"] = by["producer"].nunique()
    cases["consumers"] = parts[parts["consumer"] >= 0].groupby("cid")["consumer"].nunique()
    span = (cases["t_recv_max"] - cases["t_recv_base"]).max()
    if span == span and span >= 1 << 47:
        raise PipelineError("a case whose receipts span more than 39 hours; summarise this run with --engine pandas")
    cases = cases.join(keys.set_index("cid"), how="left")
    cases["pid"] = cases.groupby(list(CASE_KEYS), sort=False, dropna=False).ngroup().astype("int64")
    cases = cases.reset_index().drop(columns="t_recv_max")
    for m in at_receipts:
        cases[f"{m.prefix}_count"] = cases[f"{m.prefix}_count"].fillna(0).astype("int64")
    return cases


def _delivery(spark: SparkSession, rows: DataFrame, cases: pd.DataFrame, files: Sequence[Path | str]
              ) -> tuple[DataFrame, DataFrame]:
    """Delivery accounting, out of order, sender figures and the message-level measures' count, sum and max
    into ``cases`` (in place). One shuffle by (case, producer, seq block), its delivery units kept (the
    caller unpersists them); returns them and the messages (one row per (case, producer, seq) sent)."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    at_messages = [(i, m) for i, m in enumerate(MEASURES) if m.level == "messages"]
    stamps = sorted({"t_send", *(s for _, m in at_messages for s in (m.later, m.earlier))} - {"t_recv"})
    base = spark.createDataFrame(cases.loc[cases["t_recv_base"].notna(), ["cid", "t_recv_base"]].astype("int64"))
    partitions = max(spark.sparkContext.defaultParallelism, count_raw_rows(files) // ROWS_PER_PARTITION)
    # the first receipt of a unit: the smallest (t_recv, consumer), packed in one long so that the
    # aggregation keeps fixed-width buffers (t_recv relative to the case's first receipt: < 2**47 ns)
    first_key = (F.col("t_recv") - F.col("t_recv_base")) * (1 << 16) + F.col("consumer")
    units = (
        rows.join(F.broadcast(base), "cid", "left")
        .select("cid", "producer", "seq", "dcons", "t_recv", "send_failed", *(f for f, _ in _FLAGS), *stamps,
                F.expr(f"seq div {BLOCK}").alias("block"), first_key.alias("first_key"))
        .repartition(partitions, "cid", "producer", "block")
        .groupBy("cid", "producer", "block", "seq", "dcons")
        .agg(F.count("t_recv").alias("receipts"), F.min("first_key").alias("first_key"),
             F.max("send_failed").alias("failed"), *[F.max(f).alias(f) for f, _ in _FLAGS],
             *[F.min(s).alias(s) for s in stamps])
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    received = F.col("first_key").isNotNull()
    if (cases["pattern"] == "pubsub").any():
        # a message (producer, seq) is a group of units in one partition: no second shuffle
        messages = units.groupBy("cid", "producer", "block", "seq").agg(
            F.count(F.lit(1)).alias("units"), F.count("first_key").alias("received_unique"),
            F.sum("receipts").alias("received"), F.sum("failed").alias("failed"),
            F.count(F.when(received & (F.col("failed") > 0), F.lit(1))).alias("failed_received"),
            *[F.count(F.when(~received & (F.col(flag) > 0), F.lit(1))).alias(name) for flag, name in _FLAGS],
            *[F.min(s).alias(s) for s in stamps])
    else:
        # without pub/sub every message is one delivery unit (no subscriber in its key): the same columns
        # as the grouping above would give, without its second hash aggregation of one group per message
        def one(condition: Column) -> Column:
            return F.when(condition, F.lit(1)).otherwise(F.lit(0)).cast("long")

        messages = units.select(
            "cid", "producer", "block", "seq", F.lit(1).cast("long").alias("units"),
            one(received).alias("received_unique"), F.col("receipts").alias("received"),
            F.col("failed").cast("long").alias("failed"),
            one(received & (F.col("failed") > 0)).alias("failed_received"),
            *[one(~received & (F.col(flag) > 0)).alias(name) for flag, name in _FLAGS], *stamps)
    sent = F.col("t_send").isNotNull()
    counts = messages.groupBy("cid").agg(
        F.sum("units").alias("expected"),
        *[F.sum(c).alias(c) for c in ("received_unique", "received", "failed", "failed_received",
                                      *(name for _, name in _FLAGS))],
        F.count(F.when(sent, F.lit(1))).alias("sent"), F.min("t_send").alias("t_send_first"),
        F.max("t_send").alias("t_send_last"), *[c for _, m in at_messages for c in _scalars(m, sent)],
    )
    # a first receipt is late iff a higher seq of its stream (producer, consumer) arrived earlier
    firsts = units.where(received).select(
        "cid", "producer", "block", "seq", (F.col("first_key") % (1 << 16)).alias("consumer"),
        F.expr("first_key div 65536").alias("t"))
    stream = ["cid", "producer", "consumer"]
    higher = Window.partitionBy(*stream, "block").orderBy(F.desc("seq")).rowsBetween(Window.unboundedPreceding, -1)
    blocks = firsts.groupBy(*stream, "block").agg(F.min("t").alias("earliest"))
    after = Window.partitionBy(*stream).orderBy(F.desc("block")).rowsBetween(Window.unboundedPreceding, -1)
    carry = blocks.select(*stream, "block", F.min("earliest").over(after).alias("carry"))
    order = (firsts.withColumn("in_block", F.min("t").over(higher))
             .join(F.broadcast(carry), [*stream, "block"])
             .where(F.least("in_block", "carry") < F.col("t"))
             .groupBy("cid").agg(F.count(F.lit(1)).alias("out_of_order")))
    # one query for both (the first materialises the kept units)
    both = counts.unionByName(order, allowMissingColumns=True).toPandas()
    for part in (both[both["out_of_order"].isna()].drop(columns="out_of_order"),
                 both.loc[both["out_of_order"].notna(), ["cid", "out_of_order"]]):
        merged = cases.merge(part, on="cid", how="left")
        for column in part.columns.drop("cid"):
            cases[column] = merged[column].to_numpy()
    for column in _COUNTS:
        cases[column] = cases[column].fillna(0).astype("int64")
    for _, m in at_messages:
        cases[f"{m.prefix}_count"] = cases[f"{m.prefix}_count"].fillna(0).astype("int64")
    return units, messages.where(sent)


def _quantiles(values: DataFrame, cases: pd.DataFrame, measures: Sequence[tuple[int, Measure]],
               pooled_of: dict[int, int]) -> dict[tuple[str, int, int], list[float]]:
    """Exact quantiles of ``measures`` per case and, for the pooled ones, per case over its repetitions."""
    wanted = [Wanted("cid", int(c), i, int(n), m.fractions)
              for i, m in measures for c, n in zip(cases["cid"], cases[f"{m.prefix}_count"], strict=True)]
    for i, m in measures:
        if m in POOLED:
            totals = cases.groupby("pid")[f"{m.prefix}_count"].sum()
            wanted += [Wanted("pid", int(p), i, int(n), DISTRIBUTION_QUANTILES)  # type: ignore[call-overload]
                       for p, n in totals.items()]
    return exact_quantiles(values, pooled_of, wanted)


def _distribution(cases: pd.DataFrame, quantiles: dict[tuple[str, int, int], list[float]]) -> pd.DataFrame:
    by = cases.groupby("pid", sort=False)
    pooled = by[list(CASE_KEYS)].first()
    for i, m in enumerate(MEASURES):
        if m in POOLED:
            pooled[f"{m.prefix}_count"] = by[f"{m.prefix}_count"].sum()
            pooled[f"{m.prefix}_q_ns"] = pd.Series([quantiles.get(("pid", int(p), i)) for p in pooled.index],
                                                   index=pooled.index, dtype=object)
    pooled["percentile_method"] = "exact"
    pooled["percentile_rank_error"] = 0.0
    return concat_distributions(pooled.reset_index(drop=True))
