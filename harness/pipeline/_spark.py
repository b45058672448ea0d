"""The PySpark engine: the same computation as ``_pandas.py`` as a Spark job, for runs of any size.

The job reads every raw file of the selected runs at once, so it runs unchanged on a cluster as long as
the executors see the same paths (a shared file system or object store URLs). Only small tables come back
to the driver: one row per case and repetition, the per-second counts and the pooled distribution.

Percentiles: a case with at most ``exact_limit`` latency samples gets Spark's exact ``percentile`` (linear
interpolation, numpy's default); a larger case gets ``percentile_approx`` with ``accuracy``, whose answer
is a sample whose rank is within ``n / accuracy`` of the exact rank. Both aggregates run in one pass, each
fed only its own cases' values (the other side sees nulls, which cost nothing).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness.pipeline._errors import PipelineError
from harness.pipeline._finish import (
    DELAY_QUANTILES,
    DISTRIBUTION_QUANTILES,
    GROUP_KEYS,
    LAT_QUANTILES,
    concat_distributions,
)
from harness.runfolder.schema import CASE_KEYS, RAW_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

JAVA_HINT = "PySpark needs Java 17: install openjdk-17-jre-headless"


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return True
    return shutil.which("java") is not None


def spark_session(master: str | None = None, shuffle_partitions: int = 8) -> SparkSession:
    """The active Spark session, or a new one on ``master`` (default ``local[*]``) with the UI off.

    Raises :class:`PipelineError` with :data:`JAVA_HINT` when no JVM can be started.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if not _java_available():
        raise PipelineError(JAVA_HINT)
    builder = (
        SparkSession.builder.appName("mqbench-pipeline")
        .master(master or "local[*]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Local mode runs executors inside the driver JVM: the default 1g makes the cached rows spill.
        .config("spark.driver.memory", os.environ.get("MQBENCH_SPARK_DRIVER_MEMORY", "4g"))
    )
    try:
        return builder.getOrCreate()
    except Exception as exc:  # the JVM gateway failing to start surfaces as assorted exception types
        raise PipelineError(f"{JAVA_HINT} (Spark did not start: {str(exc).splitlines()[0][:200]})") from exc


def _spark_schema() -> object:
    from pyspark.sql import types as T

    mapping = {
        "string": T.StringType(),
        "int32": T.IntegerType(),
        "int64": T.LongType(),
        "double": T.DoubleType(),
        "bool": T.BooleanType(),
    }
    return T.StructType([T.StructField(f.name, mapping[str(f.type)], True) for f in RAW_SCHEMA])


def _percentiles(value: Column, large: Column, quantiles: Sequence[float], accuracy: int) -> Column:
    from pyspark.sql import functions as F

    exact = F.percentile(F.when(~large, value), list(quantiles))
    approx = F.percentile_approx(F.when(large, value), list(quantiles), accuracy).cast("array<double>")
    return F.coalesce(exact, approx)


def _join_flags(frame: DataFrame, flags: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Broadcast-join the per-case flags; null-safe so a missing key never drops rows silently."""
    from pyspark.sql import functions as F

    renamed = flags.select(
        *[F.col(k).alias(f"_f_{k}") for k in keys], *[c for c in flags.columns if c not in keys]
    )
    condition = [frame[k].eqNullSafe(renamed[f"_f_{k}"]) for k in keys]
    joined = frame.join(F.broadcast(renamed), on=condition, how="left")
    return joined.drop(*[f"_f_{k}" for k in keys])


def compute(
    spark: SparkSession, files: Sequence[Path], exact_limit: int, accuracy: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(case aggregates, per-second receipt counts, pooled latency distribution), as pandas frames."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    g = list(GROUP_KEYS)
    raw = spark.read.schema(_spark_schema()).parquet(*[str(f) for f in files])  # type: ignore[arg-type]
    # Every result below starts from these rows, the per-message units and the receipts: each is
    # computed once and cached, instead of re-reading the Parquet files for every table collected.
    df = (
        raw.where(~F.coalesce(F.col("warmup"), F.lit(False)))
        .drop("warmup", "t_ack")
        .withColumn("dcons", F.when(F.col("pattern") == "pubsub", F.col("consumer")).otherwise(F.lit(0)))
        .persist()
    )
    timed = F.col("t_recv").isNotNull() & F.col("t_send").isNotNull()
    counts = df.groupBy(*g).agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("producer").alias("producers"),
        F.countDistinct(F.when(F.col("consumer") >= 0, F.col("consumer"))).alias("consumers"),
        F.count(F.when(timed, F.lit(1))).alias("n_recv"),
        F.min(F.when(timed, F.col("t_recv"))).alias("t_recv_first"),
    )
    pooled = Window.partitionBy(*CASE_KEYS)
    flags = counts.select(
        *g,
        "t_recv_first",
        (F.col("n_recv") > exact_limit).alias("large"),
        (F.sum("n_recv").over(pooled) > exact_limit).alias("large_pooled"),
    ).cache()

    units = df.groupBy(*g, "producer", "seq", "dcons").agg(
        F.count("t_recv").alias("receipts"),
        F.min(F.when(F.col("t_recv").isNotNull(), F.struct("t_recv", "consumer"))).alias("first"),
        F.min("t_send").alias("t_send"),
        F.min("t_intended").alias("t_intended"),
        F.max(F.coalesce(F.col("send_failed"), F.lit(False)).cast("int")).alias("failed"),
    ).persist()
    delivery = units.groupBy(*g).agg(
        F.count(F.lit(1)).alias("expected"),
        F.count("first").alias("received_unique"),
        F.sum("receipts").alias("received"),
        F.sum("failed").alias("failed"),
        F.sum(F.when(F.col("first").isNotNull(), F.col("failed")).otherwise(F.lit(0))).alias("failed_received"),
    )
    firsts = units.where(F.col("first").isNotNull()).select(
        *g,
        "producer",
        "seq",
        F.col("first.consumer").alias("consumer"),
        F.col("first.t_recv").alias("t_recv"),
    )
    stream = (
        Window.partitionBy(*g, "producer", "consumer")
        .orderBy("t_recv", "seq")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    order = (
        firsts.withColumn("prev", F.max("seq").over(stream))
        .groupBy(*g)
        .agg(F.count(F.when(F.col("seq") < F.col("prev"), F.lit(1))).alias("out_of_order"))
    )

    messages = (
        units.groupBy(*g, "producer", "seq")
        .agg(F.min("t_send").alias("t_send"), F.min("t_intended").alias("t_intended"))
        .where(F.col("t_send").isNotNull())
    )
    delay = F.col("t_send") - F.col("t_intended")
    sender = (
        _join_flags(messages, flags, g)
        .groupBy(*g)
        .agg(
            F.count(F.lit(1)).alias("sent"),
            F.min("t_send").alias("t_send_first"),
            F.max("t_send").alias("t_send_last"),
            F.count(delay).alias("delay_count"),
            F.max(delay).alias("delay_max_ns"),
            _percentiles(delay, F.col("large"), DELAY_QUANTILES, accuracy).alias("delay_q_ns"),
        )
    )

    receipts = _join_flags(df.where(timed), flags, g).select(
        *g,
        "t_recv",
        "large",
        "large_pooled",
        "t_recv_first",
        (F.col("t_recv") - F.col("t_send")).alias("lat"),
        (F.col("t_recv") - F.col("t_intended")).alias("lat_int"),
    ).persist()
    latency = receipts.groupBy(*g).agg(
        F.count("lat").alias("lat_count"),
        F.min("t_recv").alias("t_recv_first"),
        F.max("t_recv").alias("t_recv_last"),
        F.sum("lat").alias("lat_sum_ns"),
        F.max("lat").alias("lat_max_ns"),
        _percentiles(F.col("lat"), F.col("large"), LAT_QUANTILES, accuracy).alias("lat_q_ns"),
        F.count("lat_int").alias("int_count"),
        F.max("lat_int").alias("int_max_ns"),
        _percentiles(F.col("lat_int"), F.col("large"), LAT_QUANTILES, accuracy).alias("int_q_ns"),
        F.max(F.col("large").cast("int")).alias("large"),
    )
    series = (
        receipts.withColumn("second", F.expr("(t_recv - t_recv_first) div 1000000000"))
        .groupBy(*g, "second")
        .agg(F.count(F.lit(1)).alias("msgs"))
    )
    distribution = receipts.groupBy(*CASE_KEYS).agg(
        F.count("lat").alias("lat_count"),
        _percentiles(F.col("lat"), F.col("large_pooled"), DISTRIBUTION_QUANTILES, accuracy).alias("lat_q_ns"),
        F.count("lat_int").alias("int_count"),
        _percentiles(F.col("lat_int"), F.col("large_pooled"), DISTRIBUTION_QUANTILES, accuracy).alias(
            "int_q_ns"
        ),
        F.max(F.col("large_pooled").cast("int")).alias("large"),
    )

    cases = _merge(
        [
            counts.drop("t_recv_first", "n_recv").toPandas(),
            delivery.toPandas(),
            order.toPandas(),
            sender.toPandas(),
            latency.toPandas(),
        ],
        g,
    )
    _method_columns(cases, accuracy)
    dist = distribution.toPandas()
    series_frame = series.toPandas()
    for cached in (receipts, units, flags, df):
        cached.unpersist()
    _method_columns(dist, accuracy)
    dist = concat_distributions(dist)
    return cases, series_frame, dist


def _merge(frames: Sequence[pd.DataFrame], keys: list[str]) -> pd.DataFrame:
    merged = frames[0]
    for frame in frames[1:]:
        merged = merged.merge(frame, on=keys, how="left")  # pandas matches NaN rate keys to each other
    counts = ["out_of_order", "sent", "delay_count", "lat_count", "int_count", "received", "received_unique",
              "failed", "failed_received"]
    merged[counts] = merged[counts].fillna(0).astype("int64")
    return merged


def _method_columns(frame: pd.DataFrame, accuracy: int) -> None:
    large = frame.pop("large").fillna(0).astype(bool) if "large" in frame else pd.Series(False, frame.index)
    frame["percentile_method"] = large.map({True: "approx", False: "exact"})
    frame["percentile_rank_error"] = large.map({True: 1.0 / accuracy, False: 0.0})
