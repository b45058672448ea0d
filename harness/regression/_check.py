"""Check a loaded run against a loaded baseline: every metric's ratio judged, or one sentence saying why
the two cannot be compared. No IO: the callers read the folders (``_files``) and print the results.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.regression._compare import MetricResult, compare_runs, scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import Baseline, RunData
from harness.regression._ratios import (
    DEFAULT_REFERENCE,
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
) -> tuple[list[MetricResult], list[str]]:
    """Compare a loaded run with a loaded baseline: (results, notes). Raises RegressionInputError."""
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
