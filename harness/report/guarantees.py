"""The report's section on guarantees: what every broker row promises (its parity), and what each guarantee
costs.

* **Parity**: one row per variant that runs on a broker: the broker's shape (nodes, replicas), what a send
  waits for before it counts as accepted, when messages are forced to disk, and the guarantee that follows.
  Two rows are like for like only where these agree.
* **The cost of a guarantee**: per system and client, receiver throughput and p99 latency at at-most-once,
  at single-node durable (or at-least-once) and at replicated durable, each as a ratio to that system's
  at-most-once row of the same run, scenario, size and rate; the brokerless systems beside them (no broker
  to pay for). Where a class has several variants, the fastest is shown and named.

Reads the stored summary only (``summary.aggregate``); returns nothing when no broker row is there.
"""

from __future__ import annotations

import html
import math

import pandas as pd

from harness import units
from harness.pipeline import Summary
from harness.report.tables import to_html, to_markdown

AT_MOST_ONCE, SINGLE, REPLICATED = "at-most-once", "single-node durable", "replicated durable"
CLASSES = (AT_MOST_ONCE, SINGLE, REPLICATED)
NOTE = (
    "Each ratio divides a row by the same system's at-most-once row of the same run, scenario, size and rate "
    "(×1 = no cost; receiver throughput below 1 and p99 above 1 are what the guarantee costs). 'Single-node "
    "durable' is the strongest guarantee one node gives (durable, else at-least-once); 'replicated durable' "
    "runs on a cluster keeping copies on several nodes. The brokerless systems have no broker to pay for: "
    "their rows are the reference a broker is chosen over. The parity table says what each row waits for."
)


def guarantee_class(guarantee: str, replicas: object) -> str:
    """Which column of the cost table a row belongs to."""
    copies = _int(replicas)
    if guarantee == "at-most-once":
        return AT_MOST_ONCE
    return REPLICATED if copies > 1 else SINGLE


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 1


def parity_table(summary: Summary) -> pd.DataFrame:
    """One row per broker variant of the summarised runs: shape, acks, fsync, guarantee."""
    rows = []
    for run in summary.runs:
        for entry in run.variants.values():
            if not entry.get("parity") or str(entry.get("nodes")) == "0":
                continue
            rows.append({
                "system": str(entry.get("label") or entry.get("system")),
                "variant": str(entry.get("variant")),
                "nodes": str(entry.get("nodes")),
                "replicas": str(entry.get("replicas")),
                "a send waits for": str(entry.get("acks")),
                "fsync": str(entry.get("fsync")),
                "guarantee": str(entry.get("guarantee")),
            })
    return pd.DataFrame(rows).drop_duplicates() if rows else pd.DataFrame()


def cost_table(summary: Summary) -> pd.DataFrame:
    """The cost of each guarantee per system (see the module docstring); empty without broker rows."""
    agg = summary.aggregate
    if agg.empty or "nodes" not in agg or not (~agg["nodes"].astype(str).isin(["", "0", "nan"])).any():
        return pd.DataFrame()
    agg = agg.assign(cls=[guarantee_class(str(g), r) for g, r in zip(agg["guarantee"], agg["replicas"], strict=True)])
    notes = {str(e.get("label")): str(e["cluster_note"]) for run in summary.runs for e in run.variants.values()
             if e.get("cluster_note")}
    out = []
    for key, case in agg.groupby(["run_id", "scenario", "size", "rate"], sort=False, dropna=False):
        _, scenario, size, rate = (str(key[0]), str(key[1]), int(str(key[2])), key[3])  # type: ignore[index]
        brokers = case[case["nodes"].astype(str) != "0"]
        if brokers.empty or brokers["cls"].nunique() < 2:
            continue
        for label, rows in case.groupby("label", sort=True):
            best = {cls: _fastest(rows[rows["cls"] == cls]) for cls in CLASSES}
            base = best[AT_MOST_ONCE]
            brokerless = str(rows["nodes"].iloc[0]) == "0"
            line: dict[str, str] = {"scenario": scenario, "size": units.size(size),
                                    "rate": units.rate_text(rate, units.count),
                                    "system": str(label) + (" (no broker)" if brokerless else "")}
            for cls in CLASSES:
                line[f"{cls}: msgs/s"] = _cell(best[cls], base, "receiver_msgs_per_s_mean")
                line[f"{cls}: p99"] = _cell(best[cls], base, "lat_p99_us_mean", duration=True)
            if best[REPLICATED] is None and str(label) in notes:  # asked for, and not to be had: say why
                line[f"{REPLICATED}: msgs/s"] = f"— ({notes[str(label)]})"
            out.append(line)
    return pd.DataFrame(out)


def _fastest(rows: pd.DataFrame) -> pd.Series | None:
    if rows.empty:
        return None
    return rows.sort_values("receiver_msgs_per_s_mean", ascending=False).iloc[0]


def _cell(row: pd.Series | None, base: pd.Series | None, column: str, duration: bool = False) -> str:
    if row is None:
        return "—"
    value = float(row[column])
    if math.isnan(value):
        return "—"
    text = units.duration_us(value) if duration else units.count(value)
    variant = "" if row["variant"] == "default" else f" [{row['variant']}]"
    if base is None or base is row or math.isnan(float(base[column])) or not float(base[column]):
        return text + variant
    return f"{text} ×{value / float(base[column]):.2f}{variant}"


def render(summary: Summary) -> tuple[str, str] | None:
    """(HTML section, Markdown section), or None when the summary has no broker row."""
    parity = parity_table(summary)
    if parity.empty:
        return None
    cost = cost_table(summary)
    esc = html.escape
    h = ["<h2>Guarantees: what each broker row promises, and what it costs</h2>",
         "<h3>Parity of the broker rows</h3>",
         "<p>Two rows are like for like only where shape, acknowledgement and fsync agree.</p>",
         f"<div class='scroll text'>{to_html(parity)}</div>"]
    m = ["## Guarantees: what each broker row promises, and what it costs", "", "### Parity of the broker rows",
         "", to_markdown(parity), ""]
    if not cost.empty:
        h += ["<h3>The cost of a guarantee</h3>", f"<p>{esc(NOTE)}</p>", f"<div class='scroll'>{to_html(cost)}</div>"]
        m += ["### The cost of a guarantee", "", NOTE, "", to_markdown(cost), ""]
    return "\n".join(h), "\n".join(m)
