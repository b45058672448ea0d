"""``mqbench regress RUN_DIR``: compare a run's ratios with the committed baseline.

Exit status: 0 nothing regressed, 1 at least one regression (named in the last line), 2 unusable input
(one sentence on stderr). ``harness.regress.add_parsers`` registers it on ``mqbench``'s subparsers
(``func=run``, called as ``run(args, console)``); ``main(argv)`` runs it standalone.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from harness.regression._cli import (
    DEFAULT_BASELINE,
    EXIT_OK,
    EXIT_REGRESSION,
    console,
    fail,
    reference_option,
    split_reference,
)
from harness.regression._compare import MetricResult, compare_runs, regressions, scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import Baseline, RunData, read_baseline, read_run
from harness.regression._ratios import METRICS, repetition_ratios, require_repetitions
from harness.regression._stats import MIN_REPETITIONS
from harness.regression._table import results_table, verdict_line

COMMAND = "regress"


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``regress`` arguments to ``parser``; sets ``func=run``."""
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="run folder with summary.parquet and manifest.json"
    )
    parser.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        metavar="DIR",
        help="baseline folder written by 'mqbench baseline' (default: %(default)s)",
    )
    reference_option(parser)
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.10,
        metavar="FRACTION",
        help="how much worse a median ratio may get before it can count as a regression (default: %(default)s)",
    )
    parser.add_argument(
        "--metric-threshold",
        action="append",
        default=[],
        metavar="METRIC=FRACTION",
        help=f"threshold for one metric, repeatable; metrics: {', '.join(METRICS)}",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        metavar="P",
        help="significance level of the one-sided Mann-Whitney U test (default: %(default)s)",
    )
    parser.add_argument(
        "--baseline-system",
        action="append",
        default=[],
        metavar="SYSTEM=BASELINE_SYSTEM",
        help="compare SYSTEM of this run with BASELINE_SYSTEM of the baseline (e.g. a test build)",
    )
    parser.set_defaults(func=run)
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``regress`` on an ``argparse`` subparsers object (``parser.add_subparsers()``)."""
    parser = subparsers.add_parser(
        COMMAND,
        help="fail when a system got slower relative to the reference than in the baseline",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    return configure(parser)


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise RegressionInputError(f"{option} {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def _fraction(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise RegressionInputError(f"{what} must be a fraction between 0 and 1 (0.1 = 10 %), got {text!r}")
    return value


def _metric_thresholds(items: Sequence[str]) -> dict[str, float]:
    out = {}
    for name, value in _pairs(items, "--metric-threshold").items():
        if name not in METRICS:
            raise RegressionInputError(
                f"--metric-threshold: unknown metric {name!r}; known metrics: {', '.join(METRICS)}"
            )
        out[name] = _fraction(value, f"--metric-threshold {name}")
    return out


def _ratios(summary: pd.DataFrame, where: str, reference: str, variant: str | None) -> pd.DataFrame:
    try:
        ratios = repetition_ratios(summary, reference, variant)
    except RegressionInputError as exc:
        raise RegressionInputError(f"{where}: {exc}") from None
    require_repetitions(ratios, where, MIN_REPETITIONS)
    return ratios


def _origin(env: Mapping[str, Any]) -> str:
    host = env.get("host") or {}
    revision = str(env.get("git_revision") or "?")[:10]
    runs = env.get("runs") or [env.get("run_id", "?")]
    which = f"run {runs[0]}" if len(runs) == 1 else f"{len(runs)} pooled runs ({', '.join(map(str, runs))})"
    return f"{which}, git {revision}, host {host.get('hostname', '?')}"


def check(
    run_data: RunData,
    baseline: Baseline,
    *,
    reference: str = "zmq",
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
    system, variant = split_reference(reference)
    base = _ratios(baseline.summary, f"baseline {baseline.path}", system, variant)
    known = set(base["scenario"])
    current = repetition_ratios(run_data.summary, system, variant)
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


def run(args: argparse.Namespace, screen: Console | None = None) -> int:
    """Execute ``mqbench regress`` for parsed ``args``; returns the exit status (0, 1 or 2).

    Prints to ``screen`` (the CLI's console) or a new stdout console; errors go to stderr.
    """
    try:
        threshold = _fraction(str(args.threshold), "--threshold")
        alpha = _fraction(str(args.alpha), "--alpha")
        metric_thresholds = _metric_thresholds(args.metric_threshold)
        baseline_systems = _pairs(args.baseline_system, "--baseline-system")
        run_data = read_run(Path(args.run_dir))
        baseline = read_baseline(Path(args.baseline))
        results, notes = check(
            run_data,
            baseline,
            reference=args.reference,
            threshold=threshold,
            alpha=alpha,
            metric_thresholds=metric_thresholds,
            baseline_systems=baseline_systems,
        )
    except RegressionInputError as exc:
        return fail(COMMAND, str(exc))
    screen = screen or console()
    screen.print(f"Baseline: {_origin(baseline.environment)}", soft_wrap=True, highlight=False)
    screen.print(
        f"This run: {_origin({**run_data.manifest, 'run_id': run_data.run_id})}",
        soft_wrap=True,
        highlight=False,
    )
    screen.print(
        results_table(
            results,
            title=f"Ratios to {args.reference} (median over repetitions); "
            f"threshold {threshold:.0%}, alpha {alpha:g}, one-sided Mann-Whitney U",
        )
    )
    for note in notes:
        screen.print(note, soft_wrap=True, highlight=False)
    screen.print(verdict_line(results, alpha), soft_wrap=True, highlight=False, markup=False)
    return EXIT_REGRESSION if regressions(results) else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    description = __doc__.splitlines()[0] if __doc__ else None
    return configure(argparse.ArgumentParser(prog=f"mqbench {COMMAND}", description=description))


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry: ``python -m harness.regression.regress RUN_DIR ...``."""
    return int(run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
