"""How results look: the rich table and the closing one-line verdict. No IO (callers print)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from harness.regression._compare import MetricResult, regressions
from harness.regression._ratios import METRICS, format_size
from harness.regression._stats import Verdict

_STYLE = {
    Verdict.OK: "green",
    Verdict.IMPROVED: "bold green",
    Verdict.REGRESSION: "bold red",
    Verdict.NOT_SIGNIFICANT: "yellow",
    Verdict.NO_BASELINE: "dim",
}


def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    for suffix, factor in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _ratio(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _case(result: MetricResult) -> str:
    text = format_size(int(result.key["size"]))
    rate = float(result.key["rate"])
    if not math.isnan(rate):
        text += f" @ {rate:g}/s"
    return text


def results_table(results: Sequence[MetricResult], title: str = "") -> Table:
    """One row per metric: ratios (baseline, now), change, p-value, verdict, absolute medians."""
    table = Table(
        title=title or None,
        title_justify="left",
        caption="↑ higher is better, ↓ lower is better; ratio = system / reference in the same repetition",
        caption_justify="left",
    )
    for name, justify in (
        ("system", "left"),
        ("scenario", "left"),
        ("metric", "left"),
        ("case", "right"),
        ("baseline ratio", "right"),
        ("current ratio", "right"),
        ("change", "right"),
        ("p-value", "right"),
        ("verdict", "left"),
        ("now: system / reference", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in results:
        spec = METRICS.get(r.metric)
        label = spec.label if spec else r.metric
        unit = spec.unit if spec else ""
        system = r.system if r.key.get("variant") in (None, "default") else f"{r.system}[{r.key['variant']}]"
        c = r.comparison
        table.add_row(
            system,
            str(r.key["scenario"]),
            f"{label} {'↑' if r.better.value == 'higher' else '↓'}",
            _case(r),
            _ratio(c.baseline_median) if c else "-",
            _ratio(c.current_median if c else _median(r.current_ratios)),
            f"{c.change:+.1%}" if c else "-",
            f"{c.p_value:.3f}" if c else "-",
            f"[{_STYLE[r.verdict]}]{r.verdict.value}[/]",
            f"{_number(r.value)} / {_number(r.reference_value)} {unit}",
        )
    return table


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


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
