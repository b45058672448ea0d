"""The Spark engine: its percentiles equal numpy's, its tables equal the pandas engine's."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.pipeline import Summary, summarize
from tests.harness.pipeline.reference import expected_summary, raw_rows, summary_by_case
from tests.harness.pipeline.synthetic import build_bulk_run, build_run

pytestmark = pytest.mark.spark

# Spark's exact percentile interpolates as (hi - pos) * lo_value + (pos - lo) * hi_value, numpy as
# lo_value + (hi_value - lo_value) * frac: the same number up to the last bit of a double.
ROUNDING = 1e-13


def test_exact_path_equals_numpy(synthetic_run: Path, spark_summary: Summary) -> None:
    expected = expected_summary(raw_rows(synthetic_run))
    actual = summary_by_case(spark_summary.per_repetition)
    assert set(actual) == set(expected)
    for key, want in expected.items():
        got = actual[key]
        for column in (
            "sent",
            "expected",
            "received",
            "lost",
            "send_failed",
            "unconfirmed",
            "held",
            "duplicated",
            "out_of_order",
            "sender_msgs_per_s",
            "receiver_msgs_per_s",
            "lat_max_us",
            "lat_mean_us",
            "latency_kind",
        ):
            assert got[column] == want[column], (key, column)
        for column, value in want.items():
            if column in ("publish_max_us", "publish_count"):
                assert got[column] == value, (key, column)
            elif column.startswith(("lat_p", "lat_intended_p", "send_delay_p", "publish_p")):
                if math.isnan(value):
                    assert math.isnan(got[column])
                else:
                    assert got[column] == pytest.approx(value, rel=ROUNDING, abs=0), (key, column)
        assert got["percentile_method"] == "exact" and got["percentile_rank_error"] == 0.0


TABLES = ["per_repetition", "aggregate", "series", "distribution"]


@pytest.mark.parametrize("table", TABLES)
def test_engines_agree(pandas_summary: Summary, spark_summary: Summary, table: str) -> None:
    _assert_agree(pandas_summary, spark_summary, table)


def test_engines_agree_on_a_run_without_pubsub(tmp_path: Path, spark: Any) -> None:
    """Without pub/sub every message is one delivery unit, which the Spark engine counts without grouping
    units into messages: the same tables as the reference, losses, duplicates and failed sends included."""
    run = build_run(tmp_path, scenarios=("queue-2to1", "reqrep"))
    by_pandas = summarize([run], engine="pandas")
    by_spark = summarize([run], engine="spark", spark=spark)
    assert by_pandas.per_repetition[["lost", "duplicated", "send_failed", "out_of_order"]].to_numpy().sum(axis=0).min() > 0
    for table in TABLES:
        _assert_agree(by_pandas, by_spark, table)


def _assert_agree(pandas_summary: Summary, spark_summary: Summary, table: str) -> None:
    a: pd.DataFrame = getattr(pandas_summary, table)
    b: pd.DataFrame = getattr(spark_summary, table)
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for column in a.columns:
        if a[column].dtype.kind in "fiu":
            np.testing.assert_allclose(
                b[column].to_numpy(float),
                a[column].to_numpy(float),
                rtol=ROUNDING,
                atol=0,
                equal_nan=True,
                err_msg=f"{table}.{column}",
            )
        else:
            assert a[column].astype(str).tolist() == b[column].astype(str).tolist(), f"{table}.{column}"


def test_bulk_run_equals_pandas_engine(tmp_path: Path, spark: Any) -> None:
    """Many rows per case (one Spark task each): the tables equal the pandas engine's, exact percentiles."""
    run = build_bulk_run(tmp_path, 200_000, cases=4, seed=5)
    by_spark = summarize(run, engine="spark", spark=spark)
    by_pandas = summarize(run, engine="pandas")
    assert set(by_spark.per_repetition["percentile_method"]) == {"exact"}
    for name, frame in by_pandas.tables().items():
        pd.testing.assert_frame_equal(by_spark.tables()[name], frame, obj=name)


def test_spark_master_option_reuses_session(synthetic_run: Path, spark: Any) -> None:
    summary = summarize(synthetic_run, engine="spark", spark_master="local[2]")
    assert summary.engine == "spark" and len(summary.per_repetition) == 20


def test_a_repetition_that_measured_nothing_is_a_row_in_both_engines(tmp_path: Path, spark: Any) -> None:
    """A case the run completed whose raw rows are all warm-up (the run ended within its warm-up) is in the
    summary with nothing measured, not left out, and both engines say the same."""
    run = build_run(tmp_path, scenarios=("queue-2to1",), systems=("zmq",))
    emptied = run / "raw" / "queue-2to1-zmq-default-64-max-r1.parquet"
    table = pq.read_table(emptied)
    pq.write_table(table.set_column(table.schema.get_field_index("warmup"), "warmup",
                                    pa.array([True] * table.num_rows)), emptied)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["cases"] = [{"scenario": "queue-2to1", "system": "zmq", "variant": "default", "size": size,
                          "rate": None, "repetition": rep, "complete": True} for size in (64, 1024) for rep in (0, 1)]
    (run / "manifest.json").write_text(json.dumps(manifest))
    by_pandas = summarize(run, engine="pandas")
    by_spark = summarize(run, engine="spark", spark=spark)
    for summary in (by_pandas, by_spark):
        rows = summary_by_case(summary.per_repetition)
        assert len(rows) == 4
        empty = rows[("queue-2to1", "zmq", 64, "max", 1)]
        assert (empty["sent"], empty["received"], empty["lost"], empty["lat_count"]) == (0, 0, 0, 0)
        assert math.isnan(empty["receiver_msgs_per_s"]) and math.isnan(empty["lat_p50_us"])
        assert empty["complete"] and empty["label"] and (empty["producers"], empty["consumers"]) == (2, 1)
        assert rows[("queue-2to1", "zmq", 64, "max", 0)]["sent"] == 240
    pd.testing.assert_frame_equal(by_spark.per_repetition, by_pandas.per_repetition)
