"""Match a run's ratios with the baseline's and judge every metric. Pure functions, no IO.

Both sides are ratio tables from :func:`harness.regression._ratios.repetition_ratios`. A metric is
matched on :data:`METRIC_KEY` (scenario, pattern, system, variant, size, rate, metric). Every metric the
baseline holds must be measured by the run - otherwise the baseline belongs to another scenario and the
comparison would silently shrink. A metric the run measures but the baseline lacks is shown with the
verdict "no baseline" and never fails the check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.regression._errors import RegressionInputError
from harness.regression._ratios import METRIC_KEY, describe_key
from harness.regression._stats import Better, Comparison, Verdict, compare_ratios

#: Scenario fields that may differ between the baseline's run and this one without changing what a
#: ratio means (how often it was measured, which systems came along, prose).
IGNORED_SCENARIO_FIELDS = frozenset({"repetitions", "systems", "description", "source", "timeout"})


@dataclass(frozen=True)
class MetricResult:
    """One row of the check: one metric of one system in one case.

    ``value`` / ``reference_value`` are the medians of the absolute figures in this run (for
    information only: the verdict rests on the ratios). ``comparison`` is None without a baseline.
    """

    key: Mapping[str, Any]
    better: Better
    reference: str
    threshold: float
    value: float
    reference_value: float
    current_ratios: tuple[float, ...]
    comparison: Comparison | None

    @property
    def verdict(self) -> Verdict:
        return self.comparison.verdict if self.comparison else Verdict.NO_BASELINE

    @property
    def metric(self) -> str:
        return str(self.key["metric"])

    @property
    def system(self) -> str:
        return str(self.key["system"])

    def describe(self) -> str:
        """``mqcore receiver throughput at 1 KB (regress-queue)``."""
        return describe_key(dict(self.key))


def _key(values: Iterable[Any]) -> tuple[Any, ...]:
    # NaN != NaN, so "rate max" is keyed as None.
    return tuple(None if isinstance(v, float) and math.isnan(v) else v for v in values)


def _groups(ratios: pd.DataFrame) -> dict[tuple[Any, ...], pd.DataFrame]:
    return {_key(k): g for k, g in ratios.groupby(list(METRIC_KEY), dropna=False, sort=True)}


def _median(values: pd.Series) -> float:
    data = values.to_numpy(dtype="float64")
    data = data[np.isfinite(data)]
    return float(np.median(data)) if data.size else math.nan


def compare_runs(
    baseline: pd.DataFrame,
    current: pd.DataFrame,
    *,
    threshold: float = 0.10,
    alpha: float = 0.05,
    metric_thresholds: Mapping[str, float] | None = None,
    baseline_systems: Mapping[str, str] | None = None,
) -> list[MetricResult]:
    """Judge every metric of ``current`` against ``baseline`` (both ratio tables).

    ``metric_thresholds`` overrides ``threshold`` per metric column (e.g. ``{"lat_p99_us": 0.25}``).
    ``baseline_systems`` maps a system of this run onto the baseline system it is compared with (e.g.
    ``{"mqcore-delayed": "mqcore"}``); unmapped systems are compared with their own name.

    Raises :class:`RegressionInputError` when the two share no scenario or the run lacks a metric the
    baseline holds (a baseline for a different scenario).
    """
    thresholds = dict(metric_thresholds or {})
    mapping = dict(baseline_systems or {})
    base_scenarios = sorted(str(s) for s in baseline["scenario"].unique())
    cur_scenarios = sorted(str(s) for s in current["scenario"].unique())
    if not set(base_scenarios) & set(cur_scenarios):
        raise RegressionInputError(
            f"the baseline is for scenario(s) {', '.join(base_scenarios)} but the run measured "
            f"{', '.join(cur_scenarios)}; run the baseline's scenario or re-create it with 'mqbench baseline'"
        )
    matched = current.assign(system=current["system"].map(lambda s: mapping.get(s, s)))
    base_groups = _groups(baseline)
    cur_groups = _groups(matched)
    for key in base_groups:
        if key not in cur_groups:
            described = describe_key(dict(zip(METRIC_KEY, key, strict=True)))
            raise RegressionInputError(
                f"the baseline holds {described} but the run does not measure it, so the baseline is for "
                "a different scenario; run the same scenario or re-create it with 'mqbench baseline'"
            )
    results = []
    for key, group in _groups(current).items():
        base_key = _key(
            mapping.get(v, v) if name == "system" else v for name, v in zip(METRIC_KEY, key, strict=True)
        )
        metric = str(group["metric"].iloc[0])
        better = Better(str(group["better"].iloc[0]))
        limit = thresholds.get(metric, threshold)
        comparison = None
        if base_key in base_groups:
            comparison = compare_ratios(
                base_groups[base_key]["ratio"].to_numpy(dtype="float64"),
                group["ratio"].to_numpy(dtype="float64"),
                better,
                threshold=limit,
                alpha=alpha,
            )
        ratios = group["ratio"].to_numpy(dtype="float64")
        results.append(
            MetricResult(
                key=dict(zip(METRIC_KEY, group[list(METRIC_KEY)].iloc[0], strict=True)),
                better=better,
                reference=str(group["reference"].iloc[0]),
                threshold=limit,
                value=_median(group["value"]),
                reference_value=_median(group["reference_value"]),
                current_ratios=tuple(float(r) for r in ratios[np.isfinite(ratios)]),
                comparison=comparison,
            )
        )
    return results


def scenario_differences(
    baseline: Iterable[Mapping[str, Any]], current: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Fields in which a scenario of the same name differs between two manifests' scenario lists.

    Returns sentences like ``"regress-queue: message_sizes is [100, 1000] in the baseline, [100] now"``;
    fields in :data:`IGNORED_SCENARIO_FIELDS` and fields only one side records are not compared.
    """
    now = {str(s.get("name")): s for s in current}
    out = []
    for before in baseline:
        name = str(before.get("name"))
        after = now.get(name)
        if after is None:
            continue
        for fld in sorted(set(before) & set(after) - IGNORED_SCENARIO_FIELDS):
            if before[fld] != after[fld]:
                out.append(f"{name}: {fld} is {before[fld]!r} in the baseline, {after[fld]!r} now")
    return out


def regressions(results: Iterable[MetricResult]) -> list[MetricResult]:
    return [r for r in results if r.verdict is Verdict.REGRESSION]
