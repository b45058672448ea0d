"""Confidence intervals across repetitions (Student t) on known cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from harness.pipeline import CI_METRICS, Summary, confidence_interval


def test_known_interval() -> None:
    mean, low, high = confidence_interval([10.0, 12.0, 14.0])
    half = 4.302652729749462 * 2.0 / math.sqrt(3)  # t(0.975, df=2) = 4.3027 (tables) * s / sqrt(n), s = 2
    assert mean == 12.0
    assert low == pytest.approx(12.0 - half, rel=1e-12)
    assert high == pytest.approx(12.0 + half, rel=1e-12)


def test_two_values_and_degenerate_cases() -> None:
    mean, low, high = confidence_interval([1.0, 3.0])
    assert (mean, low, high) == pytest.approx((2.0, 2.0 - 12.706204736174694, 2.0 + 12.706204736174694))
    assert confidence_interval([5.0])[0] == 5.0 and math.isnan(confidence_interval([5.0])[1])
    assert all(math.isnan(x) for x in confidence_interval([]))
    assert confidence_interval([1.0, math.nan, 3.0])[0] == 2.0


def test_aggregate_matches_scipy_per_case(pandas_summary: Summary) -> None:
    per, agg = pandas_summary.per_repetition, pandas_summary.aggregate
    assert len(agg) == 10 and set(agg["repetitions"]) == {2}
    row = agg.query("scenario == 'queue-2to1' and system == 'mqcore' and size == 64").iloc[0]
    reps = per.query("scenario == 'queue-2to1' and system == 'mqcore' and size == 64")
    assert row["lost"] == 1 and row["duplicated"] == 1 and row["out_of_order"] == 1
    for metric in CI_METRICS[:6]:
        values = reps[metric].to_numpy()
        low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
        assert row[f"{metric}_mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert row[f"{metric}_ci95_low"] == pytest.approx(low, rel=1e-9)
        assert row[f"{metric}_ci95_high"] == pytest.approx(high, rel=1e-9)
        assert np.isfinite(row[f"{metric}_ci95_low"])
