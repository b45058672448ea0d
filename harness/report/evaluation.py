"""The report's evaluation section: slow consumers, faults, recovery, durability and the feature matrix.

Reads the runner's events of each run folder (``timeseries/*.parquet``, ``faults.parquet``) through
:class:`~harness.runfolder.RunFolder` and the pipeline's recovery table from the summary; returns nothing
when no run has any of it, so plain benchmark reports are unchanged. Figures are pure builders like :mod:`harness.report.figures`.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from harness.pipeline import Summary
from harness.report._context import footnote, row_name
from harness.report.figures import _colors
from harness.report.matrix import feature_matrix, scenario_roles
from harness.report.tables import to_html, to_markdown
from harness.runfolder import RunFolder
from harness.runfolder.schema import FAULTS, RAW_DIR


@dataclass
class Evaluation:
    timeseries: pd.DataFrame
    faults: pd.DataFrame
    recovery: pd.DataFrame
    matrix: pd.DataFrame
    depth_notes: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.timeseries.empty and self.faults.empty and self.recovery.empty


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_evaluation(summary: Summary) -> Evaluation:
    """Gather the evaluation events of every run in ``summary`` and build the feature matrix."""
    folders = [RunFolder.open(run.path) for run in summary.runs]
    ts = _concat([run.read_timeseries() for run in folders])
    faults = _concat([run.read_table(FAULTS).assign(run_dir=str(run.path)) for run in folders])
    recovery = summary.recovery
    roles: dict[str, str] = {}
    brokerless: dict[str, bool] = {}
    for run in summary.runs:
        roles.update(scenario_roles(run.scenarios))
        for system, info in run.systems.items():
            brokerless[system] = info.get("backend") == "embedded"
    notes = {}
    if not ts.empty and "depth_note" in ts:
        for label, note in ts[["label", "depth_note"]].drop_duplicates().itertuples(index=False):
            if note:
                notes[str(label)] = str(note)
    matrix = pd.DataFrame()
    if not (ts.empty and recovery.empty):
        matrix = feature_matrix(summary.per_repetition, recovery, roles, brokerless)
    return Evaluation(ts, faults, recovery, matrix, notes)


def _case_key(row: pd.Series) -> str:
    return f"{row_name(row['label'], row['variant'])} ({row['pattern']})"


def _fault_lines(ax: object, ev: Evaluation, scenario: str) -> None:
    if ev.faults.empty:
        return
    f = ev.faults[(ev.faults["scenario"] == scenario) & ev.faults["t_fault_ns"].notna()]
    for at in sorted(set(((f["t_fault_ns"] - f["t_start_ns"]) / 1e9).round(1))):
        ax.axvline(at, color="#b00020", ls="--", lw=0.8)  # type: ignore[attr-defined]


def backlog_figure(summary: Summary, ev: Evaluation) -> Figure | None:
    """Sent minus received and broker memory over time, per scenario (red dashes: faults)."""
    if ev.timeseries.empty:
        return None
    scenarios = sorted(ev.timeseries["scenario"].unique())
    fig = Figure(figsize=(13, 3.4 * len(scenarios) + 0.9), layout="constrained")
    axes = fig.subplots(len(scenarios), 2, squeeze=False)
    fig.suptitle("Backlog (sent − received, harness counters) and broker memory over time", fontsize=12)
    fig.supxlabel(footnote(summary, width=200), fontsize=7, color="#444")
    for (ax_b, ax_m), scenario in zip(axes, scenarios, strict=True):
        group = ev.timeseries[ev.timeseries["scenario"] == scenario]
        keys = group.apply(_case_key, axis=1)
        colors = _colors(list(keys.unique()))
        for key, case in group.groupby(keys, sort=True):
            first = case[case["repetition"] == case["repetition"].min()]
            ax_b.plot(first["seconds"], first["backlog"], "-", lw=1.2, label=key, color=colors[str(key)])
            if first["broker_rss_bytes"].notna().any():
                ax_m.plot(first["seconds"], first["broker_rss_bytes"] / 1e6, "-", lw=1.2, label=key,
                          color=colors[str(key)])
        for ax in (ax_b, ax_m):
            _fault_lines(ax, ev, scenario)
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("seconds since the common start")
        ax_b.set_ylabel("messages sent − received")
        ax_b.set_title(f"{scenario}: backlog (lost messages stay in it)", fontsize=10)
        ax_m.set_ylabel("broker RSS, MB (/proc)")
        ax_m.set_title(f"{scenario}: broker resident memory (brokers only)", fontsize=10)
        ax_b.legend(fontsize=7)
        if ax_m.lines:
            ax_m.legend(fontsize=7)
    return fig


BUCKET_S = 0.25  # width of the delivery-rate buckets, seconds


def delivery_figure(summary: Summary, ev: Evaluation) -> Figure | None:
    """Sends and receipts per second around the faults, one panel per case (red: fault, green: back)."""
    if ev.faults.empty or "run_dir" not in ev.faults:
        return None
    cases = ev.faults.drop_duplicates("case")
    panels: list[tuple[Any, pd.DataFrame]] = []
    for case in cases.itertuples(index=False):
        folder = RunFolder.open(Path(str(case.run_dir)))
        if (folder.path / RAW_DIR / f"{case.case}.parquet").exists():
            panels.append((case, folder.read_raw(str(case.case), ["t_send", "t_recv"])))
    if not panels:
        return None
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(4.6 * cols, 2.5 * rows + 0.9), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for extra in axes[len(panels):]:
        extra.set_visible(False)
    fig.suptitle(f"Delivery around faults: sends and receipts per second ({BUCKET_S:g} s buckets)", fontsize=12)
    fig.supxlabel(footnote(summary, width=int(60 * cols * 4.6 / 6.4) + 40), fontsize=7, color="#444")
    for ax, (case, raw) in zip(axes, panels, strict=False):
        t0 = int(case.t_start_ns)
        for column, style, name in (("t_send", "--", "sent"), ("t_recv", "-", "received")):
            stamps = raw[column].dropna().astype("int64")
            if stamps.empty:
                continue
            buckets = ((stamps - t0) // int(BUCKET_S * 1e9)).value_counts().sort_index()
            buckets = buckets.reindex(range(int(buckets.index.min()), int(buckets.index.max()) + 1), fill_value=0)
            ax.plot(buckets.index * BUCKET_S, buckets.to_numpy() / BUCKET_S, style, lw=1.0, label=name,
                    color="#888" if name == "sent" else "#1f77b4", drawstyle="steps-post")
        mine = ev.faults[(ev.faults["case"] == case.case) & (ev.faults["run_dir"] == case.run_dir)]
        for stamp, color, style in (("t_fault_ns", "#b00020", "--"), ("t_back_ns", "#2a9d2a", ":")):
            for t in mine[stamp].dropna().astype("int64"):
                ax.axvline((int(t) - t0) / 1e9, color=color, ls=style, lw=0.9)
        ax.set_title(f"{case.scenario}: {row_name(case.label, case.variant)}", fontsize=9)
        ax.set_xlabel("seconds since the common start", fontsize=8)
        ax.set_ylabel("msgs/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    return fig


def recovery_view(ev: Evaluation) -> pd.DataFrame:
    """The recovery table as shown: one row per fault and case."""
    if ev.recovery.empty:
        return pd.DataFrame()
    r = ev.recovery.copy()

    def secs(x: float) -> str:
        return "—" if pd.isna(x) else f"{x:.3f}"

    def verdict(row: pd.Series) -> str:
        if pd.isna(row["lost"]):
            return "not carried out"
        return "kept all accepted" if row["lost"] == 0 else f"lost {int(row['lost'])}"

    out = pd.DataFrame({
        "scenario": r["scenario"],
        "system": r["label"],
        "variant": r["variant"],
        "guarantee": r["guarantee"],
        "rep": r["repetition"],
        "fault": r["action"] + " @ " + r["at_s"].map(lambda s: f"{s:g}s"),
        "done as": r["carried_out_as"],
        "messages": r["window_messages"],
        "refused (send errors)": r["refused"],
        "lost": r["lost"],
        "duplicated": r["duplicated"],
        "reordered": r["reordered"],
        "back after s": r["recovery_s"].map(secs),
        "first new msg s": r["first_new_s"].map(secs),
        "longest gap s": r["max_gap_s"].map(secs),
        # after the fault's end (restart back, network healed): first delivery, pre-fault rate again
        "end → first s": _column(r, "back_first_s").map(secs),
        "end → rate s": _column(r, "back_rate_s").map(secs),
        "p50 ms before/during/after": r.apply(_latencies, axis=1, args=("latency",)),
        "p99 ms before/during/after": r.apply(_latencies, axis=1, args=("latency_p99",)),
        "verdict": r.apply(verdict, axis=1),
    })
    return out.fillna("—")


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A recovery column, NaN for runs recorded before it existed."""
    return frame[name] if name in frame else pd.Series(float("nan"), index=frame.index)


def _latencies(row: pd.Series, prefix: str) -> str:
    values = [row.get(f"{prefix}_{window}_s") for window in ("before", "during", "after")]
    return " / ".join("—" if v is None or pd.isna(v) else f"{v * 1e3:.3g}" for v in values)


def faults_view(ev: Evaluation) -> pd.DataFrame:
    if ev.faults.empty:
        return pd.DataFrame()
    f = ev.faults
    return pd.DataFrame({
        "scenario": f["scenario"], "system": f["label"], "variant": f["variant"], "rep": f["repetition"],
        "action": f["action"], "planned s": f["at_s"],
        "at s (measured)": ((f["t_fault_ns"] - f["t_start_ns"]) / 1e9).map(lambda x: "—" if pd.isna(x) else f"{x:.3f}"),
        "back after s": ((f["t_back_ns"] - f["t_fault_ns"]) / 1e9).map(lambda x: "—" if pd.isna(x) else f"{x:.3f}"),
        "ok": f["ok"], "detail": f["detail"],
    })


DURABILITY_NOTE = (
    "Durable variants must lose nothing they accepted across a SIGKILL of the broker: RabbitMQ durable queue + "
    "persistent messages + publisher confirms + manual acks; ActiveMQ persistent + receipts + client acks; Redis "
    "with AOF (appendfsync always). Kafka here is Tansu with memory storage: nothing survives its restart, so its "
    "loss says nothing about Apache Kafka. Core NATS and MQTT QoS 0 keep nothing; Mosquitto runs without "
    "persistence. ZeroMQ-style systems have no broker: the peer holding the queue (the consumer) is restarted "
    "instead and what it held is lost. A restarted transient queue (RabbitMQ) or stream group (Redis) is gone "
    "with its messages; the clients declare it again when they reconnect, as applications do. 'refused' are sends "
    "that raised at the producer (it was told); 'lost' are accepted messages that never arrived (silent loss)."
)


def render(summary: Summary) -> tuple[dict[str, Figure], str, str] | None:
    """(figures, HTML section, Markdown section), or None when no run has evaluation data."""
    ev = load_evaluation(summary)
    if ev.empty:
        return None
    figures = {}
    for name, build in (("evaluation_backlog", backlog_figure), ("evaluation_delivery_around_faults", delivery_figure)):
        fig = build(summary, ev)
        if fig is not None:
            figures[name] = fig
    esc = html.escape
    h = ["<h2>Evaluation beyond speed</h2>"]
    m = ["## Evaluation beyond speed", ""]
    if not ev.matrix.empty:
        h += ["<h3>Measured feature matrix</h3>",
              "<p>Each cell: the verdict, then the measurement of this run that decides it.</p>",
              to_html(ev.matrix)]
        m += ["### Measured feature matrix", "", to_markdown(ev.matrix), ""]
    rec = recovery_view(ev)
    if not rec.empty:
        h += ["<h3>Recovery and durability after each fault</h3>", f"<p>{esc(DURABILITY_NOTE)}</p>",
              to_html(rec, highlight="lost")]
        m += ["### Recovery and durability after each fault", "", DURABILITY_NOTE, "", to_markdown(rec), ""]
    fv = faults_view(ev)
    if not fv.empty:
        h += ["<h3>Faults carried out</h3>", to_html(fv)]
        m += ["### Faults carried out", "", to_markdown(fv), ""]
    if ev.depth_notes:
        h.append("<h3>Queue depth</h3><ul>")
        h += [f"<li>{esc(k)}: not sampled — {esc(v)}</li>" for k, v in ev.depth_notes.items()]
        h.append("</ul>")
        m += ["### Queue depth", ""] + [f"- {k}: not sampled — {v}" for k, v in ev.depth_notes.items()] + [""]
    return figures, "\n".join(h), "\n".join(m)
