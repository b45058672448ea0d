"""``mqbench regress RUN_DIR``: compare a run's ratios with the committed baseline.

Exit status: 0 nothing regressed, 1 at least one regression (named in the last line), 2 unusable input
(one sentence on stderr). The statistics are :mod:`harness.regression`; this parses, reads and prints.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import units
from harness.commands._options import DEFAULT_BASELINE, add_reference_option
from harness.commands._terminal import EXIT_FAILED, EXIT_OK, Column, fail, numeric, table
from harness.regression import (
    METRICS,
    MetricResult,
    RegressionInputError,
    Verdict,
    check,
    is_reported_only,
    read_baseline,
    read_run_data,
    regressions,
    split_reference,
)

NAME = "regress"

_STYLE = {
    Verdict.OK: "green",
    Verdict.IMPROVED: "bold green",
    Verdict.REGRESSION: "bold red",
    Verdict.NOT_SIGNIFICANT: "yellow",
    Verdict.NO_BASELINE: "dim",
}
_COLUMNS = (
    Column("system"), Column("scenario"), Column("metric"),
    *numeric("case", "baseline ratio", "current ratio", "change", "p-value"),
    Column("verdict"), *numeric("now: system / reference"),
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="fail when a system got slower relative to the reference than in the baseline",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run folder with summary.parquet and manifest.json")
    parser.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        metavar="DIR",
        help="baseline folder written by 'mqbench baseline' (default: %(default)s)",
    )
    add_reference_option(parser)
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
        "--report-only",
        action="append",
        default=[],
        metavar="SYSTEM[:VARIANT]",
        help="judge and show this system's (variant's) metrics but never fail on them, repeatable: rows whose "
             "ratio rests on a free core (mqcore's busy polling) beside the rows that gate (docs/regression.md)",
    )
    parser.add_argument(
        "--baseline-system",
        action="append",
        default=[],
        metavar="SYSTEM=BASELINE_SYSTEM",
        help="compare SYSTEM of this run with BASELINE_SYSTEM of the baseline (e.g. a test build)",
    )
    return parser


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


def _origin(env: Mapping[str, Any]) -> str:
    host = env.get("host") or {}
    revision = str(env.get("git_revision") or "?")[:10]
    runs = env.get("runs") or [env.get("run_id", "?")]
    which = f"run {runs[0]}" if len(runs) == 1 else f"{len(runs)} pooled runs ({', '.join(map(str, runs))})"
    return f"{which}, git {revision}, host {host.get('hostname', '?')}"


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        threshold = _fraction(str(args.threshold), "--threshold")
        alpha = _fraction(str(args.alpha), "--alpha")
        metric_thresholds = _metric_thresholds(args.metric_threshold)
        baseline_systems = _pairs(args.baseline_system, "--baseline-system")
        reported = [split_reference(item) for item in args.report_only]
        run_data = read_run_data(Path(args.run_dir))
        baseline = read_baseline(Path(args.baseline))
        results, notes = check(
            run_data,
            baseline,
            reference=args.reference,
            threshold=threshold,
            alpha=alpha,
            metric_thresholds=metric_thresholds,
            baseline_systems=baseline_systems,
            report_only=reported,
        )
    except RegressionInputError as exc:
        return fail(exc)
    for line in (
        f"Baseline: {_origin(baseline.environment)}",
        f"This run: {_origin({**run_data.manifest, 'run_id': run_data.run_id})}",
    ):
        console.print(line, soft_wrap=True, highlight=False)
    console.print(results_table(
        results,
        title=f"Ratios to {args.reference} (median over repetitions); "
        f"threshold {threshold:.0%}, alpha {alpha:g}, one-sided Mann-Whitney U",
    ))
    for note in notes:
        console.print(note, soft_wrap=True, highlight=False, markup=False)
    gated = [r for r in results if not reported_only(r, reported)]
    shown = [r for r in regressions(results) if reported_only(r, reported)]
    if shown:
        console.print("Reported, not gated: " + "; ".join(r.describe() for r in shown), soft_wrap=True,
                      highlight=False, markup=False)
    console.print(verdict_line(gated, alpha), soft_wrap=True, highlight=False, markup=False)
    return EXIT_FAILED if regressions(gated) else EXIT_OK


def reported_only(result: MetricResult, reported: Sequence[tuple[str, str | None]]) -> bool:
    """Whether ``result`` belongs to a system (and variant, when one is named) given to --report-only."""
    return is_reported_only(result.system, result.key.get("variant"), reported)


def _case(result: MetricResult) -> str:
    text = units.size(int(result.key["size"]))
    rate = float(result.key["rate"])
    if not math.isnan(rate):
        text += f" @ {rate:g}/s"
    return text


def _ratio(value: float) -> str:
    return units.MISSING if math.isnan(value) else f"{value:.3f}"


def results_table(results: Sequence[MetricResult], title: str = "") -> Table:
    """One row per metric: ratios (baseline, now), change, p-value, verdict, absolute medians."""
    rows: list[list[str | Text]] = []
    for r in results:
        spec = METRICS.get(r.metric)
        label = spec.label if spec else r.metric
        unit = spec.unit if spec else ""
        c = r.comparison
        current = c.current_median if c else (statistics.median(r.current_ratios) if r.current_ratios else math.nan)
        rows.append([
            r.system if r.key.get("variant") in (None, "default") else f"{r.system}[{r.key['variant']}]",
            str(r.key["scenario"]),
            f"{label} {'↑' if r.better.value == 'higher' else '↓'}",
            _case(r),
            _ratio(c.baseline_median) if c else units.MISSING,
            _ratio(current),
            f"{c.change:+.1%}" if c else units.MISSING,
            f"{c.p_value:.3f}" if c else units.MISSING,
            Text(r.verdict.value, style=_STYLE[r.verdict]),
            f"{units.count(r.value)} / {units.count(r.reference_value)} {unit}",
        ])
    return table(
        _COLUMNS,
        rows,
        title=title or None,
        caption="↑ higher is better, ↓ lower is better; ratio = system / reference in the same repetition",
    )


def verdict_line(results: Sequence[MetricResult], alpha: float) -> str:
    """The closing line: every regression (system and metric) in one line, or how many metrics passed."""
    found = regressions(results)
    if found:
        parts = []
        for r in found:
            c = r.comparison
            assert c is not None  # a regression always has a baseline
            direction = "fell" if r.better.value == "higher" else "rose"
            parts.append(
                f"{r.describe()} {direction} {abs(c.change):.0%} relative to {r.reference} "
                f"(threshold {r.threshold:.0%}, p={c.p_value:.3f})"
            )
        return "REGRESSION: " + "; ".join(parts)
    judged = [r for r in results if r.comparison is not None]
    counts = {v: sum(r.verdict is v for r in judged) for v in Verdict}
    extra = []
    if counts[Verdict.IMPROVED]:
        extra.append(f"{counts[Verdict.IMPROVED]} improved")
    if counts[Verdict.NOT_SIGNIFICANT]:
        extra.append(f"{counts[Verdict.NOT_SIGNIFICANT]} changed but not significant at alpha={alpha:g}")
    unjudged = len(results) - len(judged)
    if unjudged:
        extra.append(f"{unjudged} without a baseline")
    systems = ", ".join(sorted({r.system for r in results}))
    return f"No regression: {len(judged)} metric(s) of {systems} checked" + (
        f" ({'; '.join(extra)})." if extra else "."
    )
