"""Check a loaded run against a loaded baseline: every metric's ratio judged, or one sentence saying why
the two cannot be compared. No IO: the callers read the folders (``_files``) and print the results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import pandas as pd

from harness.regression._compare import MetricResult, compare_runs, scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import Baseline, RunData
from harness.regression._ratios import (
    DEFAULT_REFERENCE,
    METRIC_KEY,
    describe_key,
    repetition_ratios,
    require_repetitions,
    split_reference,
    usable_ratios,
)
from harness.regression._stats import MIN_REPETITIONS


def check(
    run_data: RunData,
    baseline: Baseline,
    *,
    reference: str = DEFAULT_REFERENCE,
    threshold: float = 0.10,
    alpha: float = 0.05,
    metric_thresholds: Mapping[str, float] | None = None,
    baseline_systems: Mapping[str, str] | None = None,
    report_only: Sequence[tuple[str, str | None]] = (),
) -> tuple[list[MetricResult], list[str]]:
    """Compare a loaded run with a loaded baseline: (results, notes). Raises RegressionInputError.

    Metrics of a ``report_only`` system (and variant, when one is named) are not held to the minimum of
    repetitions: one with too few is left out with a note, where a gated one ends the check."""
    if not run_data.manifest.get("complete", False):
        raise RegressionInputError(
            f"{run_data.path}: the run is marked incomplete in its manifest (interrupted?); run it again"
        )
    base = usable_ratios(baseline.summary, f"baseline {baseline.path}", reference)
    known = set(base["scenario"])
    current = repetition_ratios(run_data.summary, *split_reference(reference))
    measured = set(current["scenario"])
    if not known & measured:
        raise RegressionInputError(
            f"the baseline is for scenario(s) {', '.join(sorted(known))} but the run measured "
            f"{', '.join(sorted(measured)) or 'nothing comparable'}; run the baseline's scenario or "
            "re-create the baseline with 'mqbench baseline'"
        )
    notes = []
    ignored = sorted(measured - known)
    if ignored:
        notes.append(f"Not in the baseline, not checked: scenario(s) {', '.join(ignored)}.")
        current = current[current["scenario"].isin(known)]
    short = _short_reported(current, report_only)
    if short:
        notes.append(f"Reported only, too few repetitions measured to report (fewer than {MIN_REPETITIONS}): "
                     f"{'; '.join(describe_key(dict(zip(METRIC_KEY, key, strict=True))) for key in short)}.")
        mapping = dict(baseline_systems or {})  # the run's system -> the baseline's
        current = _without(current, short)
        base = _without(base, [(*key[:2], mapping.get(str(key[2]), key[2]), *key[3:]) for key in short])
    require_repetitions(current, f"run {run_data.path}", MIN_REPETITIONS)
    differences = scenario_differences(
        baseline.environment.get("scenarios") or [], run_data.manifest.get("scenarios") or []
    )
    if differences:
        raise RegressionInputError(
            f"the baseline is for a different scenario ({differences[0]}); run the baseline's scenario "
            "or re-create the baseline with 'mqbench baseline'"
        )
    results = compare_runs(
        base,
        current,
        threshold=threshold,
        alpha=alpha,
        metric_thresholds=metric_thresholds,
        baseline_systems=baseline_systems,
    )
    env = baseline.environment
    if (env.get("host") or {}).get("hostname") != (run_data.manifest.get("host") or {}).get("hostname"):
        notes.append(
            "Baseline and run come from different hosts: the ratios cancel most of that, "
            "the absolute figures do not."
        )
    return results, notes


def is_reported_only(system: str, variant: object, reported: Sequence[tuple[str, str | None]]) -> bool:
    """Whether a metric of ``system``/``variant`` belongs to a system (and variant, when one is named) given
    to ``--report-only``."""
    return any(system == name and (wanted is None or variant == wanted) for name, wanted in reported)


def _short_reported(ratios: pd.DataFrame, reported: Sequence[tuple[str, str | None]]) -> list[tuple[object, ...]]:
    """The metric keys of report-only systems with fewer than MIN_REPETITIONS usable ratios in ``ratios``."""
    if not reported or ratios.empty:
        return []
    usable = pd.Series(np.isfinite(ratios["ratio"].astype("float64")), index=ratios.index)
    counts = usable.groupby([ratios[k] for k in METRIC_KEY], dropna=False, sort=True).sum()
    keys = [cast(tuple[object, ...], key) for key, n in counts.items() if n < MIN_REPETITIONS]
    return [key for key in keys if is_reported_only(str(key[2]), key[3], reported)]


def _without(ratios: pd.DataFrame, keys: Sequence[tuple[object, ...]]) -> pd.DataFrame:
    """``ratios`` without the rows of the metric ``keys``."""
    rows = pd.MultiIndex.from_frame(ratios[list(METRIC_KEY)])
    return ratios[~rows.isin(pd.MultiIndex.from_tuples(list(keys), names=list(METRIC_KEY)))]
