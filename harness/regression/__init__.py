"""CI performance-regression check: compare a run with a committed baseline using ratios measured in
the same run (e.g. mqcore / zmq), several repetitions and a significance test.

Layers (statistics are pure functions; only ``_files`` touches the disk; one module per subcommand)::

    _stats     compare_ratios(baseline, current, better, threshold, alpha) -> Comparison   (numbers)
    _ratios    repetition_ratios(summary, reference) -> per-repetition ratio table         (pandas)
    _compare   compare_runs(baseline_ratios, current_ratios, ...) -> [MetricResult]        (pandas)
    _table     results_table(results), verdict_line(results)                               (rich)
    _files     read_run, read_baseline, write_baseline                                     (IO)
    regress    `mqbench regress`:  add_parser(subparsers), run(args) -> int, main(argv) -> int
    baseline   `mqbench baseline`: add_parser(subparsers), run(args) -> int, main(argv) -> int

See docs/regression.md for use in CI.
"""

from harness.regression._compare import MetricResult, compare_runs, regressions, scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import Baseline, RunData, read_baseline, read_run, write_baseline
from harness.regression._ratios import (
    METRICS,
    METRICS_BY_PATTERN,
    MetricSpec,
    repetition_ratios,
    require_repetitions,
)
from harness.regression._stats import MIN_REPETITIONS, Better, Comparison, Verdict, compare_ratios

__all__ = [
    "METRICS",
    "METRICS_BY_PATTERN",
    "MIN_REPETITIONS",
    "Baseline",
    "Better",
    "Comparison",
    "MetricResult",
    "MetricSpec",
    "RegressionInputError",
    "RunData",
    "Verdict",
    "compare_ratios",
    "compare_runs",
    "read_baseline",
    "read_run",
    "regressions",
    "repetition_ratios",
    "require_repetitions",
    "scenario_differences",
    "write_baseline",
]
