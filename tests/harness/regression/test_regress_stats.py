"""The regression check's statistics on synthetic data with fixed seeds: pure functions, no files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.regression import (
    Better,
    RegressionInputError,
    Verdict,
    compare_ratios,
    compare_runs,
    regressions,
    repetition_ratios,
    require_repetitions,
    scenario_differences,
)
from tests.harness.regression.test_regress_synthetic import QUEUE, REQREP, scenario_dicts, summary_frame


def ratios_of(values: np.ndarray | list[float]) -> np.ndarray:
    return np.asarray(values, dtype="float64")


# --- compare_ratios: one metric ------------------------------------------------------------------------


@pytest.mark.parametrize("better", list(Better))
def test_a_2x_slowdown_is_a_regression(better: Better) -> None:
    rng = np.random.default_rng(1)
    base = 0.4 * rng.lognormal(0, 0.05, 5)
    factor = 0.5 if better is Better.HIGHER else 2.0
    current = 0.4 * factor * rng.lognormal(0, 0.05, 5)
    result = compare_ratios(base, current, better)
    assert result.verdict is Verdict.REGRESSION
    assert result.worsening > 0.4
    assert result.p_value == pytest.approx(1 / 252)  # 5 vs 5, complete separation: the exact minimum


def test_lower_is_better_direction() -> None:
    base = ratios_of([2.0, 2.1, 1.9, 2.05, 1.95])
    assert compare_ratios(base, base * 2, Better.LOWER).verdict is Verdict.REGRESSION
    assert compare_ratios(base, base * 2, Better.HIGHER).verdict is Verdict.IMPROVED
    assert compare_ratios(base, base / 2, Better.LOWER).verdict is Verdict.IMPROVED


@pytest.mark.parametrize("better", list(Better))
def test_an_improvement_is_not_a_regression(better: Better) -> None:
    rng = np.random.default_rng(2)
    base = rng.lognormal(0, 0.05, 6)
    factor = 1.5 if better is Better.HIGHER else 1 / 1.5
    result = compare_ratios(base, factor * rng.lognormal(0, 0.05, 6), better)
    assert result.verdict is Verdict.IMPROVED
    assert result.worsening < 0
    assert result.p_value < 0.05


def test_a_3_percent_wiggle_passes_for_every_seed() -> None:
    for seed in range(100):
        rng = np.random.default_rng(seed)
        base = rng.lognormal(0, 0.05, 5)
        current = 0.97 * rng.lognormal(0, 0.05, 5)
        assert compare_ratios(base, current, Better.HIGHER).verdict is not Verdict.REGRESSION, seed


@pytest.mark.parametrize("sigma", [0.05, 0.10, 0.20])
def test_noise_alone_rarely_fails(sigma: float) -> None:
    """No true change, ratio noise up to 20 % per repetition: false alarms stay at or below 1 %."""
    seeds = 300
    alarms = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        base, current = rng.lognormal(0, sigma, 5), rng.lognormal(0, sigma, 5)
        alarms += compare_ratios(base, current, Better.HIGHER).verdict is Verdict.REGRESSION
    assert alarms / seeds <= 0.01


def test_a_change_below_the_threshold_is_ok_even_when_significant() -> None:
    base = ratios_of([1.00, 1.01, 0.99, 1.00, 1.01])
    current = base * 0.95  # clearly different, but only 5 % worse
    result = compare_ratios(base, current, Better.HIGHER, threshold=0.10)
    assert result.verdict is Verdict.OK
    assert compare_ratios(base, current, Better.HIGHER, threshold=0.02).verdict is Verdict.REGRESSION


def test_a_big_but_noisy_change_is_not_significant() -> None:
    base = ratios_of([1.0, 0.5, 1.5, 0.7, 1.3])
    current = ratios_of([0.8, 0.4, 1.4, 0.75, 1.2])  # median 1.0 -> 0.8, but the spread swamps it
    result = compare_ratios(base, current, Better.HIGHER)
    assert result.change == pytest.approx(-0.2)
    assert result.verdict is Verdict.NOT_SIGNIFICANT


def test_identical_ratios_are_ok() -> None:
    same = ratios_of([0.5] * 5)
    result = compare_ratios(same, same, Better.LOWER)
    assert result.verdict is Verdict.OK
    assert result.change == 0.0
    assert result.p_value > 0.99


def test_non_finite_ratios_are_dropped_then_counted() -> None:
    good = ratios_of([1.0, 1.1, 0.9, 1.05, 0.95])
    with_nan = np.append(good, math.nan)
    assert compare_ratios(good, with_nan, Better.HIGHER).current_median == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least 5"):
        compare_ratios(good, ratios_of([1.0, 1.0, 1.0, 1.0, math.nan]), Better.HIGHER)


@pytest.mark.parametrize(("threshold", "alpha"), [(0.0, 0.05), (1.0, 0.05), (0.1, 0.0), (0.1, 1.5)])
def test_out_of_range_parameters_are_rejected(threshold: float, alpha: float) -> None:
    good = ratios_of([1.0] * 5)
    with pytest.raises(ValueError):
        compare_ratios(good, good, Better.HIGHER, threshold=threshold, alpha=alpha)


# --- repetition_ratios: summary rows -> ratios --------------------------------------------------------


def test_ratios_pair_systems_within_each_repetition() -> None:
    ratios = repetition_ratios(summary_frame(5, noise=0.0), "zmq")
    assert set(ratios["system"]) == {"mqcore"}
    assert set(ratios["metric"]) == {"receiver_msgs_per_s", "sender_msgs_per_s", "lat_p50_us", "lat_p99_us"}
    receiver = ratios[ratios["metric"] == "receiver_msgs_per_s"]
    assert len(receiver) == 3 * 6  # three sizes, six repetitions
    assert np.allclose(receiver["ratio"], 0.4)  # the shared machine factor cancels
    p99 = ratios[ratios["metric"] == "lat_p99_us"]
    assert set(p99["scenario"]) == {REQREP} and np.allclose(p99["ratio"], 3.0)
    assert ratios["rate"].isna().all()  # "rate max" survives the join


def test_missing_reference_repetition_gives_nan_and_too_few_repetitions() -> None:
    frame = summary_frame(5)
    frame = frame[~((frame["system"] == "zmq") & (frame["repetition"] == 0) & (frame["size"] == 1000))]
    ratios = repetition_ratios(frame, "zmq")
    assert ratios["ratio"].isna().sum() == 2  # receiver and sender at 1 KB, repetition 0
    require_repetitions(ratios, "run x", minimum=5)  # 5 of 6 left: still enough
    with pytest.raises(RegressionInputError, match=r"run x: .* at least 6 .* 1 KB .* has 5"):
        require_repetitions(ratios, "run x", minimum=6)


def test_zero_or_missing_values_do_not_make_ratios() -> None:
    frame = summary_frame(5)
    frame.loc[(frame["system"] == "mqcore") & (frame["repetition"] == 1), "lat_p50_us"] = 0.0
    ratios = repetition_ratios(frame, "zmq")
    assert ratios.loc[ratios["metric"] == "lat_p50_us", "ratio"].isna().sum() == 1


def test_reference_problems_are_input_errors() -> None:
    frame = summary_frame(5)
    with pytest.raises(RegressionInputError, match="'nats' was not measured .*mqcore, zmq"):
        repetition_ratios(frame, "nats")
    with pytest.raises(RegressionInputError, match="only the reference system"):
        repetition_ratios(frame[frame["system"] == "zmq"], "zmq")
    two = pd.concat([frame, frame[frame["system"] == "zmq"].assign(variant="tuned")])
    with pytest.raises(RegressionInputError, match="several variants .*--reference zmq:VARIANT"):
        repetition_ratios(two, "zmq")
    assert not repetition_ratios(two, "zmq", "tuned").empty
    with pytest.raises(RegressionInputError, match="lacks the column"):
        repetition_ratios(frame.drop(columns=["repetition"]), "zmq")


# --- compare_runs: a whole run against the baseline ---------------------------------------------------


def check(baseline_seed: int, current: pd.DataFrame, **kwargs: object) -> list:  # type: ignore[type-arg]
    base = repetition_ratios(summary_frame(baseline_seed), "zmq")
    return compare_runs(base, repetition_ratios(current, "zmq"), **kwargs)  # type: ignore[arg-type]


def test_a_run_2x_slower_fails_on_every_metric() -> None:
    results = check(0, summary_frame(1, slowdown=2.0))
    assert len(results) == 8  # receiver + sender at 3 sizes, RTT p50 + p99
    assert all(r.verdict is Verdict.REGRESSION for r in results)


def test_one_slow_metric_is_named() -> None:
    results = check(0, summary_frame(1, slowdown=1.6, slow_metrics={"receiver_msgs_per_s"}))
    found = regressions(results)
    assert {r.metric for r in found} == {"receiver_msgs_per_s"}
    assert "mqcore receiver throughput at 64 KiB (regress-queue)" in {r.describe() for r in found}


def test_whole_runs_of_noise_rarely_fail() -> None:
    """Eight metrics per run, a busy machine (+-20 %) and 4 % noise per system: < 5 % of runs fail.

    Each run is checked against the next seed's run as its baseline (independent draws)."""
    runs = 30
    ratios = [repetition_ratios(summary_frame(seed, noise=0.04), "zmq") for seed in range(runs + 1)]
    failed = sum(bool(regressions(compare_runs(ratios[i + 1], ratios[i]))) for i in range(runs))
    assert failed / runs <= 0.05


def test_a_3_percent_wiggle_run_passes() -> None:
    for seed in range(5):
        assert not regressions(check(50 + seed, summary_frame(seed, slowdown=1.03))), seed


def test_metric_threshold_overrides_the_default() -> None:
    current = summary_frame(1, slowdown=1.3, slow_metrics={"lat_p99_us"})
    assert {r.metric for r in regressions(check(0, current))} == {"lat_p99_us"}
    assert not regressions(check(0, current, metric_thresholds={"lat_p99_us": 0.5}))


def test_a_new_system_has_no_baseline_and_never_fails() -> None:
    current = summary_frame(1, systems=("mqcore", "zmq", "nats"), slowdown=1.0)
    results = check(0, current)
    assert {r.verdict for r in results if r.system == "nats"} == {Verdict.NO_BASELINE}
    assert not regressions(results)


def test_baseline_systems_maps_a_renamed_system() -> None:
    current = summary_frame(1, slowdown=2.0).replace({"system": {"mqcore": "mqcore-delayed"}})
    results = check(0, current, baseline_systems={"mqcore-delayed": "mqcore"})
    assert {r.system for r in regressions(results)} == {"mqcore-delayed"}
    with pytest.raises(RegressionInputError, match="baseline holds mqcore"):
        check(0, current)  # unmapped: the baseline's mqcore is simply missing from the run


def test_a_baseline_for_another_scenario_is_an_input_error() -> None:
    other = summary_frame(1, scenario_names={QUEUE: "other-queue", REQREP: "other-reqrep"})
    with pytest.raises(RegressionInputError, match="baseline is for scenario"):
        check(0, other)
    fewer_sizes = summary_frame(1, sizes=(100, 1000))
    with pytest.raises(RegressionInputError, match="64 KiB .* different scenario"):
        check(0, fewer_sizes)


def test_scenario_differences_name_the_field() -> None:
    before = scenario_dicts(6)
    after = scenario_dicts(8, sizes=(100, 1000))
    differences = scenario_differences(before, after)
    assert differences == [f"{QUEUE}: message_sizes is [100, 1000, 65536] in the baseline, [100, 1000] now"]
    assert scenario_differences(before, scenario_dicts(10)) == []  # repetitions may differ
