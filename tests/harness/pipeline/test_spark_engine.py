"""The Spark engine: exact path equals numpy, agrees with the pandas engine, approx path within its bound."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.metrics.compute import PERCENTILES
from harness.pipeline import Summary, summarize
from harness.runfolder.schema import percentile_column
from tests.harness.pipeline.reference import expected_summary, raw_rows, summary_by_case
from tests.harness.pipeline.synthetic import build_bulk_run

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
            if column.startswith(("lat_p", "lat_intended_p", "send_delay_p")):
                if math.isnan(value):
                    assert math.isnan(got[column])
                else:
                    assert got[column] == pytest.approx(value, rel=ROUNDING, abs=0), (key, column)
        assert got["percentile_method"] == "exact" and got["percentile_rank_error"] == 0.0


@pytest.mark.parametrize("table", ["per_repetition", "aggregate", "series", "distribution"])
def test_engines_agree(pandas_summary: Summary, spark_summary: Summary, table: str) -> None:
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


def _rank_ok(sorted_values: np.ndarray, value: float, q: float, bound: float) -> bool:
    """Is ``value`` a sample whose (1-based) rank is within ``bound`` ranks (+1 for discreteness) of q*n?"""
    n = len(sorted_values)
    first = np.searchsorted(sorted_values, value, side="left") + 1
    last = np.searchsorted(sorted_values, value, side="right")
    if first > last:
        return False  # not a sample at all
    target = q * n
    distance = 0.0 if first <= target <= last else min(abs(first - target), abs(last - target))
    return distance <= bound + 1


def test_approx_path_within_stated_bound(tmp_path: Path, spark: Any) -> None:
    run = build_bulk_run(tmp_path, 24_000, cases=4, seed=5)
    summary = summarize(run, engine="spark", spark=spark, exact_limit=1_000, approx_accuracy=200)
    per = summary.per_repetition
    assert set(per["percentile_method"]) == {"approx"}
    assert set(per["percentile_rank_error"]) == {1 / 200}
    for path in sorted((run / "raw").glob("*.parquet")):
        raw = pq.read_table(path).to_pandas()
        raw = raw[~raw["warmup"]]
        lat = np.sort((raw["t_recv"] - raw["t_send"]).to_numpy())
        row = per[
            (per["system"] == raw["system"].iloc[0])
            & (per["size"] == raw["size"].iloc[0])
            & (per["repetition"] == raw["repetition"].iloc[0])
        ].iloc[0]
        bound = row["percentile_rank_error"] * len(lat)
        for p in PERCENTILES:
            value = row[percentile_column(p)] * 1e3
            assert _rank_ok(lat, value, p / 100, bound), (path.name, p)
        assert row["lat_max_us"] * 1e3 == lat.max()  # the maximum is always exact
        assert row["sent"] == len(raw)


def test_spark_master_option_reuses_session(synthetic_run: Path, spark: Any) -> None:
    summary = summarize(synthetic_run, engine="spark", spark_master="local[2]")
    assert summary.engine == "spark" and len(summary.per_repetition) == 20
