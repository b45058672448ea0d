"""History: how chosen metrics moved across runs and commits, from the runs' stored summaries.

The input is the per-repetition summary of many runs (the results lake's ``summary`` table, or a report's
joined summary) and, per run, when it started and at which commit (the lake's ``runs`` table). Per run,
the metrics are those the rest of mqbench already reports, never recomputed another way:

* each system variant's headline figures per case: ``receiver_msgs_per_s`` and ``lat_p99_us``, the
  median over the run's repetitions (the end-of-run table's figure);
* the regression check's in-run ratios (``harness.regression.repetition_ratios``: system ÷ reference in
  the same repetition), their median per run: ``ratio:receiver_msgs_per_s``, ``ratio:lat_p99_us``...

One row per (run, case, metric): :data:`HISTORY_COLUMNS`. Pure functions; figures are matplotlib
``Figure`` objects like the rest of the report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness import units
from harness.regression import DEFAULT_REFERENCE, RegressionInputError, repetition_ratios

HEADLINE_METRICS = ("receiver_msgs_per_s", "lat_p99_us")
LINE = ("scenario", "pattern", "label", "system", "variant", "size", "rate")
HISTORY_COLUMNS = ("run_id", "started", "git_revision", *LINE, "metric", "value")
#: At most this many lines per panel (the cases seen in the most runs), so hundreds of runs stay readable.
MAX_LINES = 8


def history_table(summary: pd.DataFrame, runs: pd.DataFrame, reference: str = DEFAULT_REFERENCE) -> pd.DataFrame:
    """:data:`HISTORY_COLUMNS` of every run in ``summary`` (``runs``: ``run_id started git_revision``),
    ordered by the runs' start."""
    if summary.empty:
        return pd.DataFrame(columns=list(HISTORY_COLUMNS))
    frame = summary.copy()
    frame["variant"] = frame["variant"].fillna("default").astype(str)
    frame["rate"] = frame["rate"].astype("float64").fillna(-1.0)  # "max" would drop out of a groupby
    parts = []
    for metric in HEADLINE_METRICS:
        if metric in frame:
            med = frame.groupby(["run_id", *LINE], sort=False, dropna=False)[metric].median().reset_index()
            parts.append(med.rename(columns={metric: "value"}).assign(metric=metric))
    for run_id, rows in summary.groupby("run_id", sort=False):
        try:
            ratios = repetition_ratios(rows, reference)
        except RegressionInputError:  # the reference (or anything but it) was not measured in this run
            continue
        if ratios.empty:
            continue
        ratios = ratios.assign(rate=ratios["rate"].astype("float64").fillna(-1.0))
        med = ratios.groupby(["scenario", "pattern", "system", "variant", "size", "rate", "metric"], sort=False,
                             dropna=False)["ratio"].median().reset_index()
        # each variant by its own label: one system's clients are labelled apart (``kafka (java)``)
        labels = frame.loc[frame["run_id"] == run_id, ["system", "variant", "label"]].drop_duplicates(["system", "variant"])
        med = med.merge(labels, on=["system", "variant"], how="left")
        med["metric"] = "ratio:" + med["metric"]
        parts.append(med.rename(columns={"ratio": "value"}).assign(run_id=run_id))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(HISTORY_COLUMNS))
    info = runs[["run_id", "started", "git_revision"]].drop_duplicates("run_id") if not runs.empty else \
        pd.DataFrame({"run_id": out["run_id"].unique(), "started": "", "git_revision": ""})
    out = out.merge(info, on="run_id", how="left")
    out["rate"] = out["rate"].where(out["rate"] >= 0)
    out = out[list(HISTORY_COLUMNS)]
    return out.sort_values(["started", "run_id", *LINE[:1], "metric"], kind="mergesort").reset_index(drop=True)


def _line_name(row: pd.Series) -> str:
    name = str(row["label"]) if row["variant"] in ("default", "", None) else f"{row['label']}/{row['variant']}"
    rate = "" if row["rate"] != row["rate"] else f" @ {units.count(float(row['rate']))}/s"
    return f"{row['scenario']}: {name} {units.size(int(row['size']))}{rate}"


def history_figure(table: pd.DataFrame, title: str = "History across runs") -> Figure | None:
    """Three panels over the runs in start order: receiver msgs/s, p99 latency and the in-run ratios to
    the reference; one line per case (the :data:`MAX_LINES` seen in most runs). None with fewer than two
    runs."""
    runs = list(dict.fromkeys(table["run_id"]))
    if len(runs) < 2:
        return None
    order = {r: i for i, r in enumerate(runs)}
    panels = [("receiver_msgs_per_s", "receiver msgs/s", True), ("lat_p99_us", "p99 latency (µs)", True),
              ("ratio:", "ratio to the reference (in-run)", False)]
    fig = Figure(figsize=(11, 10), layout="constrained")
    axes = fig.subplots(3, 1, sharex=True)
    for ax, (metric, label, log) in zip(axes, panels, strict=True):
        rows = table[table["metric"].str.startswith(metric)] if metric.endswith(":") else table[table["metric"] == metric]
        rows = rows.dropna(subset=["value"])
        if rows.empty:
            ax.set_visible(False)
            continue
        rows = rows.assign(line=[_line_name(r) + (f" [{m.removeprefix('ratio:')}]" if metric.endswith(":") else "")
                                 for (_, r), m in zip(rows.iterrows(), rows["metric"], strict=True)])
        common = rows.groupby("line")["run_id"].nunique().sort_values(ascending=False).index[:MAX_LINES]
        for name in common:
            line = rows[rows["line"] == name].assign(x=lambda f: f["run_id"].map(order)).sort_values("x")
            ax.plot(line["x"], line["value"], marker="o", markersize=3, linewidth=1.2, label=name)
        if log:
            ax.set_yscale("log")
        if metric.endswith(":"):
            ax.axhline(1.0, color="#888", linewidth=0.8, linestyle="--")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    commits = table.drop_duplicates("run_id").set_index("run_id")["git_revision"].reindex(runs).fillna("")
    step = max(1, math.ceil(len(runs) / 12))  # a label each (run and commit) fits at up to 12 across
    ticks = np.arange(0, len(runs), step)
    axes[-1].set_xticks(ticks, [f"{i + 1}\n{str(commits.iloc[i])[:7]}" for i in ticks], fontsize=7)
    axes[-1].set_xlabel(f"run (in start order; {len(runs)} runs) and its git commit")
    fig.suptitle(title, fontsize=12)
    return fig


def moves(table: pd.DataFrame, metrics: Sequence[str] = ("ratio:receiver_msgs_per_s", "ratio:lat_p99_us",
                                                          *HEADLINE_METRICS)) -> pd.DataFrame:
    """Per case and metric: runs, first and last value and their ratio (what the command prints)."""
    rows = table[table["metric"].isin(metrics)].dropna(subset=["value"])
    out = []
    for key, group in rows.groupby([*LINE, "metric"], sort=False, dropna=False):
        first, last = float(group["value"].iloc[0]), float(group["value"].iloc[-1])
        out.append({**dict(zip([*LINE, "metric"], key, strict=True)), "runs": group["run_id"].nunique(),
                    "first": first, "last": last, "last/first": last / first if first else math.nan})
    return pd.DataFrame(out, columns=[*LINE, "metric", "runs", "first", "last", "last/first"])
