"""The performance-regression check: compare a run with a committed baseline using ratios measured in
the same run (e.g. mqcore / zmq), several repetitions and a significance test.

Layers (statistics are pure functions; only ``_files`` touches the disk; the subcommands that print are
``harness/commands/regress.py`` and ``baseline.py``)::

    _stats     compare_ratios(baseline, current, better, threshold, alpha) -> Comparison   (numbers)
    _ratios    repetition_ratios(summary, reference) -> per-repetition ratio table         (pandas)
    _compare   compare_runs(baseline_ratios, current_ratios, ...) -> [MetricResult]        (pandas)
    _check     check(run, baseline, ...) -> ([MetricResult], notes)                         (pandas)
    _baseline  record_baseline(sources, out, reference): pool runs, write the folder        (via _files)
    _files     read_run_data, read_source, read_baseline, write_baseline                         (IO)

See docs/regression.md for use in CI.
"""

from harness.regression._baseline import RecordedBaseline, pool, prepare, record_baseline
from harness.regression._check import check, is_reported_only
from harness.regression._compare import MetricResult, compare_runs, regressions, scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import Baseline, RunData, read_baseline, read_run_data, write_baseline
from harness.regression._ratios import (
    DEFAULT_REFERENCE,
    METRIC_KEY,
    METRICS,
    METRICS_BY_PATTERN,
    MetricSpec,
    describe_key,
    repetition_ratios,
    require_repetitions,
    split_reference,
    usable_ratios,
)
from harness.regression._stats import MIN_REPETITIONS, Better, Comparison, Verdict, compare_ratios

__all__ = [
    "DEFAULT_REFERENCE",
    "METRIC_KEY",
    "METRICS",
    "METRICS_BY_PATTERN",
    "MIN_REPETITIONS",
    "Baseline",
    "Better",
    "Comparison",
    "MetricResult",
    "MetricSpec",
    "RecordedBaseline",
    "RegressionInputError",
    "RunData",
    "Verdict",
    "check",
    "is_reported_only",
    "compare_ratios",
    "compare_runs",
    "describe_key",
    "pool",
    "prepare",
    "read_baseline",
    "read_run_data",
    "record_baseline",
    "regressions",
    "repetition_ratios",
    "require_repetitions",
    "scenario_differences",
    "split_reference",
    "usable_ratios",
    "write_baseline",
]
