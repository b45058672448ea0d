"""The report's workload section: what OMB and PerfTest users look for, from the stored summary only.

* publish vs end-to-end latency (every case with acknowledgements): a table, and a figure of both p50/p99
  side by side per row;
* the backlog drain (backlog scenarios): the ``backlog`` table, and the backlog over time per row with the
  release marked;
* the topic-count figure (topic sweeps): receiver msgs/s and p99 against the topic count, a line per row;
* the rate-profile time series (``rate_profile`` scenarios): offered, sent and received msgs/s per second,
  and p99 per second, a line per row.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from harness import units
from harness.pipeline import Summary
from harness.report._context import case_text
from harness.report.figures import _colors, _legend, panel_figure
from harness.report.tables import to_html, to_markdown
from harness.runfolder.schema import BACKLOG, TIMELINE, TOPICS


def _labelled(summary: Summary, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each row's label (system and client) from the summary."""
    per = summary.per_repetition[["run_id", "system", "variant", "label"]].drop_duplicates(["run_id", "system",
                                                                                             "variant"])
    return frame.merge(per, on=["run_id", "system", "variant"], how="left")


def publish_table(summary: Summary) -> pd.DataFrame:
    """Per case with acknowledgements: publish p50/p99 beside end-to-end p50/p99 (means over repetitions)."""
    agg = summary.aggregate
    if "publish_p99_us_mean" not in agg or agg["publish_p99_us_mean"].isna().all():
        return pd.DataFrame()
    rows = agg[agg["publish_p99_us_mean"].notna()]
    return pd.DataFrame({
        "scenario": rows["scenario"], "row": [case_text(r, omit=("rate",)) for _, r in rows.iterrows()],
        "rate": [units.rate_text(r, lambda v: f"{units.count(v)}/s") for r in rows["rate"]],
        "acks": rows.get("parity", pd.Series("", index=rows.index)).astype(str).str.extract(r"acks: ([^;]*)")[0],
        "publish p50": [units.duration_us(v) for v in rows["publish_p50_us_mean"]],
        "publish p99": [units.duration_us(v) for v in rows["publish_p99_us_mean"]],
        "end-to-end p50": [units.duration_us(v) for v in rows["lat_p50_us_mean"]],
        "end-to-end p99": [units.duration_us(v) for v in rows["lat_p99_us_mean"]],
    }).reset_index(drop=True)


def publish_figure(summary: Summary) -> Figure | None:
    agg = summary.aggregate
    if "publish_p99_us_mean" not in agg:
        return None
    rows = agg[agg["publish_p99_us_mean"].notna()].reset_index(drop=True)
    if rows.empty:
        return None
    fig, (ax,) = panel_figure(summary, 1, "Publish latency (send → acknowledgement) beside end-to-end latency",
                              panel_size=(9.0, 0.34 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    for col, style, color, name in (("publish_p50_us_mean", "o", "#4f81bd", "publish p50"),
                                    ("publish_p99_us_mean", "s", "#4f81bd", "publish p99"),
                                    ("lat_p50_us_mean", "o", "#c0504d", "end-to-end p50"),
                                    ("lat_p99_us_mean", "s", "#c0504d", "end-to-end p99")):
        ax.plot(rows[col], y + (0.12 if name.startswith("publish") else -0.12), style, color=color,
                mfc="white" if "p50" in name else color, label=name)
    ax.set_yticks(y, [f"{r['scenario']}: {case_text(r, omit=('rate',))}" for _, r in rows.iterrows()], fontsize=7)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.duration_us(v)))
    ax.set_xlabel("latency (mean of the repetitions' percentiles)")
    ax.grid(True, axis="x", alpha=0.3)
    _legend(ax, 4)
    return fig


def backlog_view(summary: Summary) -> pd.DataFrame:
    table = summary.workload.get(BACKLOG, pd.DataFrame())
    if table.empty:
        return pd.DataFrame()
    t = _labelled(summary, table)
    return pd.DataFrame({
        "scenario": t["scenario"], "row": [case_text(r, omit=("rate",)) for _, r in t.iterrows()],
        "rep": t["repetition"] + 1, "backlog asked": t["target"].map(units.count),
        "built": t["backlog_messages"].map(units.count), "released at": t["release_s"].map(lambda s: f"{s:.2f} s"),
        "drained in": t["drain_s"].map(lambda s: f"{s:.3f} s"),
        "catch-up msg/s": t["catchup_msgs_per_s"].map(units.count),
        "producers msg/s meanwhile": t["producer_msgs_per_s"].map(units.count),
        "p99 while draining": t["e2e_p99_us"].map(units.duration_us),
        "publish p99 meanwhile": t["publish_p99_us"].map(units.duration_us),
        "note": t["note"],
    })


def _timeline(summary: Summary, kind: str) -> pd.DataFrame:
    timeline = summary.workload.get(TIMELINE, pd.DataFrame())
    if timeline.empty:
        return timeline
    scenarios = {str(s.get("name")): s for run in summary.runs for s in run.scenarios}
    keep = [bool(scenarios.get(str(sc), {}).get(kind)) for sc in timeline["scenario"]]
    return _labelled(summary, timeline[keep])


def backlog_figure(summary: Summary) -> Figure | None:
    timeline = _timeline(summary, "backlog")
    drains = summary.workload.get(BACKLOG, pd.DataFrame())
    if timeline.empty:
        return None
    timeline = timeline[timeline["repetition"] == 0]
    scenarios = sorted(timeline["scenario"].unique())
    fig, axes = panel_figure(summary, len(scenarios), "Backlog build and drain (first repetition)",
                             cols=min(2, len(scenarios)))
    for ax, scenario in zip(axes, scenarios, strict=True):
        part = timeline[timeline["scenario"] == scenario]
        keys = [case_text(g.iloc[0], omit=("rate",)) for _, g in part.groupby(["label", "variant"], sort=True)]
        colors = _colors(keys)
        for (_, group), key in zip(part.groupby(["label", "variant"], sort=True), keys, strict=True):
            ax.plot(group["second"] + 1, group["backlog"], "-o", ms=3, color=colors[key], label=key)
            mine = drains[(drains["scenario"] == scenario) & (drains["system"] == group["system"].iloc[0])
                          & (drains["variant"] == group["variant"].iloc[0]) & (drains["repetition"] == 0)]
            if not mine.empty:
                r = mine.iloc[0]
                ax.axvline(r["release_s"], color=colors[key], ls=":", lw=1)
                ax.axvspan(r["release_s"], r["release_s"] + r["drain_s"], color=colors[key], alpha=0.12)
        ax.set_title(f"{scenario}: backlog at each second's end (dotted: release; shaded: drain)", fontsize=9)
        ax.set_xlabel("seconds since the first send")
        ax.set_ylabel("messages sent, not yet received")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.count(v)))
        ax.grid(True, alpha=0.3)
        _legend(ax, len(keys))
    return fig


def topics_figure(summary: Summary) -> Figure | None:
    """Receiver msgs/s and p99 against the topic count of each sweep (means over repetitions)."""
    series = {str(s.get("name")): (str(s.get("series")), int(s.get("topics") or 1))
              for run in summary.runs for s in run.scenarios if s.get("series")}
    agg = summary.aggregate[summary.aggregate["scenario"].isin(list(series))]
    if agg.empty:
        return None
    agg = agg.assign(series=[series[s][0] for s in agg["scenario"]], topics=[series[s][1] for s in agg["scenario"]])
    sweeps = sorted(agg["series"].unique())
    fig, axes = panel_figure(summary, 2 * len(sweeps), "Throughput and p99 against the number of topics", cols=2)
    for i, sweep in enumerate(sweeps):
        part = agg[agg["series"] == sweep]
        keys = [case_text(g.iloc[0], omit=("rate",)) for _, g in part.groupby(["label", "variant"], sort=True)]
        colors = _colors(keys)
        tput, lat = axes[2 * i], axes[2 * i + 1]
        intended = part["lat_intended_p99_us_mean"].notna().all()
        for (_, group), key in zip(part.groupby(["label", "variant"], sort=True), keys, strict=True):
            group = group.sort_values("topics")
            tput.plot(group["topics"], group["receiver_msgs_per_s_mean"], "-o", color=colors[key], label=key)
            lat.plot(group["topics"], group["lat_intended_p99_us_mean" if intended else "lat_p99_us_mean"], "-s",
                     color=colors[key], label=key)
        for ax in (tput, lat):
            ax.set_xscale("log")
            ax.set_xlabel("topics (one producer and one consumer each unless the scenario says otherwise)")
            ax.grid(True, which="both", alpha=0.3)
        tput.set_ylabel("receiver msgs/s (all topics)")
        tput.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.count(v)))
        lat.set_yscale("log")
        lat.set_ylabel("p99 " + ("from the intended send time" if intended else "latency"))
        lat.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.duration_us(v)))
        tput.set_title(f"{sweep}: throughput", fontsize=9)
        lat.set_title(f"{sweep}: p99", fontsize=9)
        _legend(lat, len(keys), of=tput)
    return fig


def topics_view(summary: Summary) -> pd.DataFrame:
    table = summary.workload.get(TOPICS, pd.DataFrame())
    if table.empty:
        return pd.DataFrame()
    t = _labelled(summary, table)
    return pd.DataFrame({
        "scenario": t["scenario"], "row": [case_text(r, omit=("rate",)) for _, r in t.iterrows()],
        "rep": t["repetition"] + 1, "topics": t["topics"], "topics that received": t["topics_received"],
        "per topic msg/s: lowest": t["topic_msgs_per_s_min"].map(units.count),
        "median": t["topic_msgs_per_s_median"].map(units.count),
        "highest": t["topic_msgs_per_s_max"].map(units.count),
    })


def profile_figure(summary: Summary) -> Figure | None:
    timeline = _timeline(summary, "rate_profile")
    if timeline.empty:
        return None
    timeline = timeline[timeline["repetition"] == 0]
    scenarios = sorted(timeline["scenario"].unique())
    fig, axes = panel_figure(summary, 2 * len(scenarios), "Rate profiles: how each system follows the offered rate "
                             "(first repetition)", cols=2)
    for i, scenario in enumerate(scenarios):
        part = timeline[timeline["scenario"] == scenario]
        rates, lat = axes[2 * i], axes[2 * i + 1]
        groups = list(part.groupby(["label", "variant"], sort=True))
        keys = [case_text(g.iloc[0], omit=("rate",)) for _, g in groups]
        colors = _colors(keys)
        offered = groups[0][1]
        rates.step(offered["second"] + 1, offered["offered"], where="pre", color="#222", lw=2, alpha=0.5,
                   label="offered")
        for (_, group), key in zip(groups, keys, strict=True):
            rates.plot(group["second"] + 0.5, group["received"], "-", color=colors[key], label=f"{key} received")
            rates.plot(group["second"] + 0.5, group["sent"], ":", color=colors[key], lw=1)
            lat.plot(group["second"] + 0.5, group["e2e_p99_us"], "-o", ms=3, color=colors[key], label=key)
        rates.set_title(f"{scenario}: msgs/s per second (dotted: sent)", fontsize=9)
        rates.set_ylabel("msgs/s")
        rates.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.count(v)))
        lat.set_title(f"{scenario}: end-to-end p99 of each second's receipts", fontsize=9)
        lat.set_yscale("log")
        lat.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.duration_us(v)))
        for ax in (rates, lat):
            ax.set_xlabel("seconds since the first send")
            ax.grid(True, alpha=0.3)
        _legend(lat, len(keys) + 1, of=rates)
    return fig


def render(summary: Summary) -> tuple[dict[str, Figure], str, str] | None:
    """(figures, HTML section, Markdown section), or None when the runs have nothing of this section."""
    figures: dict[str, Figure] = {}
    for name, build in (("workload_publish_latency", publish_figure), ("workload_backlog", backlog_figure),
                        ("workload_topics", topics_figure), ("workload_rate_profile", profile_figure)):
        fig = build(summary)
        if fig is not None:
            figures[name] = fig
    tables = [(title, view) for title, view in (
        ("Publish latency beside end-to-end latency", publish_table(summary)),
        ("Backlog build and drain", backlog_view(summary)),
        ("Receiver rate per topic", topics_view(summary)),
    ) if not view.empty]
    if not figures and not tables:
        return None
    h = ["<h2>Workloads</h2>",
         "<p>Publish latency is the time from a send to the system's acknowledgement of it (OMB's publish "
         "latency, PerfTest's confirm latency), per message, kept apart from end-to-end latency. A backlog is "
         "drained when the last message sent before the consumers' release has reached every subscriber. "
         "HdrHistogram logs (<code>hdr/</code>) and OMB-shaped results (<code>omb/</code>) of every case are "
         "in the run folder.</p>"]
    m = ["## Workloads", "", "Publish latency: send to acknowledgement, per message, apart from end-to-end "
         "latency. A backlog is drained when the last message sent before the release reached every subscriber. "
         "HdrHistogram logs (`hdr/`) and OMB-shaped results (`omb/`) of every case are in the run folder.", ""]
    for title, view in tables:
        h += [f"<h3>{html.escape(title)}</h3>", to_html(view)]
        m += [f"### {title}", "", to_markdown(view), ""]
    return figures, "\n".join(h), "\n".join(m)


__all__ = ["render"]

