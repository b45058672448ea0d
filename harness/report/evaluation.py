"""The report's evaluation section: slow consumers, faults, recovery, durability and the feature matrix.

Reads the runner's events of each run folder (``timeseries/*.parquet``, ``faults.parquet``) through
:class:`~harness.runfolder.RunFolder` and the pipeline's recovery table from the summary; returns nothing
when no run has any of it, so plain benchmark reports are unchanged. Figures are pure builders like :mod:`harness.report.figures`.
"""

from __future__ import annotations

import html
import math
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


#: Shading of a fault's window (from the fault to its end) by kind, as Jepsen's charts shade a nemesis.
FAULT_COLORS = {"node": "#7b2cbf", "broker": "#b00020", "network": "#e07b00", "worker": "#555555"}


def _fault_kind(action: str) -> str:
    if action.endswith("-node"):
        return "node"
    if action.endswith("-broker") or action == "restart-peer":
        return "broker"
    if action in ("delay", "bandwidth", "partition", "reset"):
        return "network"
    return "worker"


def shade_faults(ax: Any, faults: pd.DataFrame, t0: int | None = None) -> None:
    """Shade each carried-out fault of ``faults`` on ``ax`` (x in seconds since ``t0``, else since each
    fault's own case start ``t_start_ns``): its window from the fault to its end (restart back, pause over,
    network healed), or a line where it has no end (a kill that stays dead); one legend entry per kind."""
    if faults.empty:
        return
    done = faults[faults["t_fault_ns"].notna()]
    starts: Any = t0 if t0 is not None else done["t_start_ns"].astype("float64")
    begin = (done["t_fault_ns"].astype("float64") - starts) / 1e9
    end = (done["t_back_ns"].astype("float64") - starts) / 1e9 if "t_back_ns" in done else begin * math.nan
    shown: set[str] = set()
    for a, b, action in sorted(set(zip(begin.round(2), end.round(2), done["action"], strict=True)),
                               key=lambda x: x[0]):
        kind = _fault_kind(str(action))
        label = None if kind in shown else f"{kind} fault"
        shown.add(kind)
        if b == b and b > a:  # NaN: no end
            ax.axvspan(a, b, color=FAULT_COLORS[kind], alpha=0.15, lw=0, label=label)
        else:
            ax.axvline(a, color=FAULT_COLORS[kind], ls="--", lw=0.9, label=label)


def _fault_lines(ax: object, ev: Evaluation, scenario: str) -> None:
    if ev.faults.empty:
        return
    shade_faults(ax, ev.faults[ev.faults["scenario"] == scenario])


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


def _p99_line(ax: Any, raw: pd.DataFrame, t0: int) -> None:
    """The p99 latency of the messages received in each bucket, on a second (log) axis."""
    got = raw.dropna(subset=["t_send", "t_recv"])
    if got.empty:
        return
    bucket = (got["t_recv"].astype("int64") - t0) // int(BUCKET_S * 1e9)
    p99 = ((got["t_recv"] - got["t_send"]).astype("float64") / 1e6).groupby(bucket).quantile(0.99)
    twin = ax.twinx()
    twin.plot(p99.index * BUCKET_S, p99.to_numpy(), "-", lw=0.8, color="#d62728", alpha=0.8,
              drawstyle="steps-post", label="p99 ms")
    twin.set_yscale("log")
    twin.set_ylabel("p99 latency, ms", fontsize=8, color="#d62728")
    twin.tick_params(labelsize=7, colors="#d62728")


def delivery_figure(summary: Summary, ev: Evaluation) -> Figure | None:
    """Sends and receipts per second and the p99 latency of each bucket's receipts around the faults, one panel
    per case; each fault's window shaded (node faults purple, broker red, network orange, workers grey)."""
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
    fig.suptitle(f"Delivery around faults: sends and receipts per second and the receipts' p99 latency "
                 f"({BUCKET_S:g} s buckets; shaded: each fault's window)", fontsize=12)
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
        shade_faults(ax, mine, t0)
        _p99_line(ax, raw, t0)
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
        return "—" if pd.isna(x) else "never" if x == math.inf else f"{x:.3f}"

    def verdict(row: pd.Series) -> str:
        if pd.isna(row["lost"]):
            return "not carried out"
        said = "kept all accepted" if row["lost"] == 0 else f"lost {int(row['lost'])}"
        if row["guarantee"] != "at-most-once" and row["lost"] > 0:
            said = f"LOST {int(row['lost'])} acknowledged"
        if unavailable_past_end(row):
            said += "; unavailable past the fault's end"
        return said

    def node(row: pd.Series) -> str:
        n, role = row.get("node"), row.get("node_role")
        if n is None or pd.isna(n):
            return "—"
        return f"{int(n)}" + (f" ({role})" if isinstance(role, str) and role in ("leader", "follower") else "")

    out = pd.DataFrame({
        "scenario": r["scenario"],
        "system": r["label"],
        "variant": r["variant"],
        "guarantee": r["guarantee"],
        "rep": r["repetition"],
        "fault": r["action"] + " @ " + r["at_s"].map(lambda s: f"{s:g}s"),
        "done as": r["carried_out_as"],
        "node": r.apply(node, axis=1) if "node" in r else "—",
        "messages": r["window_messages"],
        "refused (send errors)": r["refused"],
        "unconfirmed": _column(r, "unconfirmed"),
        "held (final read)": _column(r, "held"),
        "lost": r["lost"],
        "duplicated": r["duplicated"],
        "reordered": r["reordered"],
        "writes back s": _column(r, "send_unavailable_s").map(secs),
        "whole again s": _column(r, "whole_s").map(secs),
        "lowest rate ×": _column(r, "rate_dip").map(lambda x: "—" if pd.isna(x) else f"{x:.2f}"),
        "stall s": _column(r, "stall_s").map(secs),
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


#: Seconds past a fault's end (its duration or down time; the fault itself for a kill) within which writes
#: must be acknowledged again before a row is named as unavailable past the end.
GRACE_S = 1.0


def unavailable_past_end(row: pd.Series) -> bool:
    """Whether the producers of a row whose acknowledgements are told were not acknowledged again by the end of
    the fault plus ``GRACE_S`` (never again included)."""
    if "send_unavailable_s" not in row or row.get("guarantee") == "at-most-once" or pd.isna(row.get("lost")):
        return False
    tracked = row.get("send_unavailable_s")
    if tracked is None or pd.isna(tracked):
        return bool(row.get("window_messages", 0)) and row.get("accepted", 0) == 0
    length = row.get("down_s")
    length = 0.0 if length is None or pd.isna(length) else float(length)
    return float(tracked) > length + GRACE_S


def named_failures(ev: Evaluation) -> list[str]:
    """Sentences naming every row that lost acknowledged messages or stayed unavailable past a fault's end."""
    if ev.recovery.empty:
        return []
    r = ev.recovery
    out = []
    lost = r[(r["guarantee"] != "at-most-once") & (r["lost"].fillna(0) > 0)]
    for (label, variant), rows in lost.groupby(["label", "variant"], sort=True):
        faults = ", ".join(sorted(set(rows["action"].astype(str))))
        out.append(f"{row_name(label, variant)} ({rows['guarantee'].iloc[0]}) lost {int(rows['lost'].sum()):,} acknowledged "
                   f"messages ({faults}).")
    late = r[r.apply(unavailable_past_end, axis=1)] if "send_unavailable_s" in r else r.iloc[0:0]
    for (label, variant), rows in late.groupby(["label", "variant"], sort=True):
        faults = ", ".join(sorted(set(rows["action"].astype(str))))
        out.append(f"{row_name(label, variant)} stayed unavailable to writes past the end of the fault ({faults}).")
    return out


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
    "Durable variants must lose nothing they accepted across a SIGKILL of the broker or of a node: each row's "
    "parity (shape, what a send waits for, fsync) is in the parity table above. Tansu keeps messages in memory "
    "only, so its loss says nothing about Apache Kafka. Core NATS and MQTT QoS 0 keep nothing; Mosquitto runs "
    "without persistence. ZeroMQ-style systems have no broker: the peer holding the queue (the consumer) is "
    "restarted instead and what it held is lost. 'refused' are sends the producer was told failed; 'unconfirmed' "
    "are sends whose acknowledgement never came (in flight when a connection or node died: not accepted, not "
    "lost); 'held' are accepted messages the consumers never got that a final read found still in the broker (a "
    "stall, not loss; 'stall s' is how long a consumer went without a receipt at the end); 'lost' are accepted "
    "messages that never arrived and that the broker no longer held (silent loss). 'writes back s': from the "
    "fault to the first acknowledgement of a message sent after it; 'whole again s': until the cluster passed "
    "its readiness check again; 'lowest rate ×': the lowest 200 ms receipt rate after the fault over the rate "
    "before it. Shaded in the figures: each fault's window."
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
        failures = named_failures(ev) or ["No row lost an acknowledged message or stayed unavailable to writes "
                                          "past the end of a fault."]
        h += ["<h3>Recovery and durability after each fault</h3>",
              "<ul class='verdicts'>" + "".join(f"<li>{esc(x)}</li>" for x in failures) + "</ul>",
              f"<p>{esc(DURABILITY_NOTE)}</p>", to_html(rec, highlight="lost")]
        m += ["### Recovery and durability after each fault", "", *[f"- {x}" for x in failures], "",
              DURABILITY_NOTE, "", to_markdown(rec), ""]
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
