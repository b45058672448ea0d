"""Report tables: display-ready DataFrames (strings) from a Summary, and their HTML/Markdown forms."""

from __future__ import annotations

import html
import math

import pandas as pd

from harness import units
from harness.metrics.bound import MARK
from harness.pipeline import Summary
from harness.report._context import rate_text, row_name, size_text


def _num(value: float, digits: int = 3) -> str:
    """Readable number: thousands separators for large values, ``digits`` significant digits otherwise."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def mean_ci(mean: float, low: float, high: float) -> str:
    """``"1,234 ± 56"`` (half-width of the 95 % interval); just the mean when there is no interval."""
    if isinstance(low, float) and math.isnan(low):
        return _num(mean)
    return f"{_num(mean)} ± {_num((high - low) / 2, 2)}"


def results_table(summary: Summary) -> pd.DataFrame:
    """One row per case: throughputs (mean ± CI over repetitions) and pooled latency percentiles."""
    agg = summary.aggregate
    dist = summary.distribution
    rows = []
    for _, r in agg.iterrows():
        mask = (
            (dist["run_id"] == r["run_id"])
            & (dist["scenario"] == r["scenario"])
            & (dist["system"] == r["system"])
            & (dist["variant"] == r["variant"])
            & (dist["size"] == r["size"])
            & ((dist["rate"] == r["rate"]) | (dist["rate"].isna() & pd.isna(r["rate"])))
            & (dist["latency_from"] == "actual send")
        )
        pooled = dist[mask].set_index("percentile")["latency_us"]
        clock = _clock_uncertainty_us(summary, r)
        rows.append(
            {
                "system": (f"{row_name(r['label'], r['variant'])} {MARK}" if r.get("client_bound")
                           else row_name(r["label"], r["variant"])),
                "scenario": r["scenario"],
                "size": size_text(int(r["size"])),
                "rate": rate_text(r["rate"]),
                "reps": int(r["repetitions"]),
                "sender msgs/s": mean_ci(
                    r["sender_msgs_per_s_mean"],
                    r["sender_msgs_per_s_ci95_low"],
                    r["sender_msgs_per_s_ci95_high"],
                ),
                "receiver msgs/s": mean_ci(
                    r["receiver_msgs_per_s_mean"],
                    r["receiver_msgs_per_s_ci95_low"],
                    r["receiver_msgs_per_s_ci95_high"],
                ),
                "receiver MB/s": _num(r["receiver_mb_per_s_mean"]),
                "latency": r["latency_kind"],
                **{f"p{p:g} µs": units.uncertain_us(pooled.get(p, math.nan), clock, _num)
                   for p in (50.0, 99.0, 99.9)},
                "max µs": units.uncertain_us(pooled.get(100.0, math.nan), clock, _num),
                "lost": int(r["lost"]),
                "broker CPU": units.percent(r.get("broker_cpu_pct_mean", math.nan)),
                "client CPU": units.percent(r.get("client_cpu_pct_mean", math.nan)),
            }
        )
    return pd.DataFrame(rows)


def _clock_uncertainty_us(summary: Summary, case: pd.Series) -> float:
    """The widest clock uncertainty of the case's repetitions (runs on a Spark cluster), NaN when its
    latencies are on one clock (or the summary is from before the column existed)."""
    rows = summary.per_repetition
    if "clock_uncertainty_us" not in rows:
        return math.nan
    same = (rows["run_id"] == case["run_id"]) & (rows["scenario"] == case["scenario"]) & (
        rows["system"] == case["system"]) & (rows["variant"] == case["variant"]) & (rows["size"] == case["size"]) & (
        (rows["rate"] == case["rate"]) | (rows["rate"].isna() & pd.isna(case["rate"])))
    values = rows.loc[same, "clock_uncertainty_us"].dropna()
    return float(values.max()) if len(values) else math.nan


def cpu_table(summary: Summary) -> pd.DataFrame:
    """Per case (means over repetitions): % of a core used by the broker, the busiest client process, all
    client processes together and the harness, CPU seconds of them all, and the CPU-based label with its reason (or why there is none)."""
    agg = summary.aggregate
    if agg.empty or "client_bound" not in agg:
        return pd.DataFrame()
    return pd.DataFrame({
        "system": [row_name(label, variant) for label, variant in zip(agg["label"], agg["variant"], strict=True)],
        "scenario": agg["scenario"],
        "size": [size_text(int(s)) for s in agg["size"]],
        "rate": [rate_text(r) for r in agg["rate"]],
        "broker CPU": [units.percent(v) for v in agg["broker_cpu_pct_mean"]],
        "busiest client": agg["client_cpu_role"],
        "client CPU": [units.percent(v) for v in agg["client_cpu_pct_mean"]],
        "all clients' CPU": [units.percent(v) for v in agg.get("clients_cpu_pct_mean", pd.Series(math.nan, agg.index))],
        "harness CPU": [units.percent(v) for v in agg["harness_cpu_pct_mean"]],
        "CPU s, all": [_num(v) for v in agg["cpu_total_s_mean"]],
        "bound by CPU": [b or n for b, n in zip(agg["client_bound"], agg["cpu_note"], strict=True)],
    })


def delivery_table(summary: Summary) -> pd.DataFrame:
    """Delivery accounting per case and repetition (expected, received, lost, send failed, duplicated, out of
    order)."""
    per = summary.per_repetition
    out = pd.DataFrame(
        {
            "system": [row_name(label, variant) for label, variant in zip(per["label"], per["variant"], strict=True)],
            "scenario": per["scenario"],
            "pattern": per["pattern"],
            "size": [size_text(int(s)) for s in per["size"]],
            "rate": [rate_text(r) for r in per["rate"]],
            "rep": per["repetition"],
            "sent": per["sent"],
            "expected": per["expected"],
            "received": per["received"],
            "lost": per["lost"],
            "send failed": per["send_failed"],
            "duplicated": per["duplicated"],
            "out of order": per["out_of_order"],
        }
    )
    return out


def search_results_table(summary: Summary) -> pd.DataFrame:
    """Per ``rate: search`` system variant: the highest offered rate sustained under the p99 bound, and the
    knee of its latency-vs-load curve (empty when no scenario searched)."""
    search = summary.search
    if search.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "system": [f"{label} ({g})" if g else str(label) for label, g in zip(search["label"], search["guarantee"],
                                                                          strict=True)],
        "scenario": search["scenario"],
        "variant": search["variant"],
        "size": [size_text(int(s)) for s in search["size"]],
        "p99 bound": [units.duration_us(b) for b in search["p99_bound_us"]],
        "trials (sustained)": [f"{t} ({s})" for t, s in zip(search["trials"], search["sustained_trials"],
                                                            strict=True)],
        "max sustained msgs/s": [units.count(r) for r in search["max_sustained_rate"]],
        "knee msgs/s": [units.count(r) for r in search["knee_rate"]],
    })


def to_html(frame: pd.DataFrame, highlight: str | None = None) -> str:
    """An escaped HTML table; rows where column ``highlight`` is non-zero get class ``problem``."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for _, row in frame.iterrows():
        bad = highlight is not None and row[highlight] not in (0, "0")
        cells = "".join(f"<td>{html.escape(str(v))}</td>" for v in row)
        body.append(f'<tr class="problem">{cells}</tr>' if bad else f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(c) for c in frame.columns) + " |",
        "|" + "|".join("---" for _ in frame.columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
