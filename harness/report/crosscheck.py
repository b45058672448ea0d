"""The report's crosscheck section: each broker row beside the broker's own tool (``crosscheck.parquet``).

Present only for runs of ``mqbench crosscheck``. First, per row variant, one sentence: the fraction of the
broker's capacity it reached (against the tool at its best) and R against the tool with the row's settings.
Then one line per system variant, tool and reference: the medians over repetitions of the harness's receiver
rate, the tool's rate, R, the tool's settings and latency; rows with R below the client-bound bound against
the tool with their own settings are named client-bound, with the CPU seconds that show which side was busy.
"""

from __future__ import annotations

import html

import pandas as pd

from harness import units
from harness.metrics.crosscheck import CLIENT_BOUND, capacity_sentences, median_rows
from harness.pipeline import Summary
from harness.report._context import row_name
from harness.report.tables import to_html, to_markdown
from harness.runfolder import RunFolder
from harness.runfolder.schema import CROSSCHECK

INTRO = (f"R = the harness's receiver msg/s ÷ the broker's own benchmark tool's msg/s, both against the same "
         f"broker instance, interleaved (harness, tool with the row's settings, tool at its best, harness …), "
         f"each tool in steady state for a fixed time; median over repetitions. Against the tool at its best "
         f"(reference 'best': the settings its maintainers publish for peak throughput, the row's delivery "
         f"guarantee kept), R is the fraction of what the broker carries here that the row reached (the sentences "
         f"take the most the tool moved in any repetition, at its best or with the row's settings; a row above "
         f"that is labelled 'above the tool's best': those settings did not reach the broker's capacity, and the "
         f"row gets no fraction). A tool "
         f"without a consumer is compared with its sender rate ('vs' = sender). R < {CLIENT_BOUND:g} against the "
         f"tool with the row's settings: the row is client-bound — it measures the client more than the broker. "
         f"CPU: seconds over each side's run.")


def load(summary: Summary) -> pd.DataFrame:
    """The crosscheck rows of every run in ``summary`` (empty when none was a crosscheck)."""
    frames = [RunFolder.open(run.path).read_table(CROSSCHECK) for run in summary.runs]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def view(rows: pd.DataFrame) -> pd.DataFrame:
    """The section's table: one line per system variant x tool."""
    out = []
    for m in median_rows(rows.to_dict("records")):
        variant = m["system"] if m["variant"] in ("default", "") else f"{m['system']}/{m['variant']}"
        ok = m["status"] == "ok"
        latency = (f"{units.duration_us(m['tool_lat_p50_us'])} / {units.duration_us(m['tool_lat_p99_us'])} "
                   f"({m['tool_lat_kind']})") if ok and m["tool_lat_kind"] else ""
        out.append({
            "row": variant, "tool": m["tool"], "reference": "at its best" if m["reference"] == "best" else "row's settings",
            "tool settings": m["tool_settings"], "repetitions": m["reps"],
            "harness msg/s": units.count(m["harness_rate"]) if ok else "",
            "tool msg/s": units.count(m["tool_rate"]) if ok else "",
            "vs": m["rate_kind"], "R": f"{m['R']:.2f}" if ok and m["R"] == m["R"] else "",
            "label": ("client-bound" if m["client_bound"] else
                      "above the tool's best" if ok and m["reference"] == "best" and m["harness_rate"] > m["capacity"]
                      else ""),
            "tool p50 / p99": latency,
            "CPU s harness / broker": _pair(m["cpu_harness_s"], m["cpu_broker_harness_s"]) if ok else "",
            "CPU s tool / broker": _pair(m["cpu_tool_s"], m["cpu_broker_tool_s"]) if ok else "",
            "note": m["note"] if not ok else "",
        })
    return pd.DataFrame(out)


def _pair(a: float, b: float) -> str:
    return " / ".join("–" if v != v else f"{v:.1f}" for v in (a, b))


def render(summary: Summary) -> tuple[str, str] | None:
    """(HTML section, Markdown section), or None when no run of ``summary`` has crosscheck rows."""
    rows = load(summary)
    if rows.empty:
        return None
    table = view(rows)
    flagged = table[table["label"] == "client-bound"]
    bound = [f"{r} (against {t})" for r, t in zip(flagged["row"], flagged["tool"], strict=True)]
    verdict = ("Client-bound rows: " + ", ".join(bound) + ".") if bound else "No row is client-bound."
    said = capacity_sentences(median_rows(rows.to_dict("records")), row_name)
    h = ["<h2>Crosscheck against the brokers' own tools</h2>", f"<p>{html.escape(INTRO)}</p>",
         *([f"<ul>{''.join(f'<li>{html.escape(x)}</li>' for x in said)}</ul>"] if said else []),
         f"<p>{html.escape(verdict)}</p>", to_html(table)]
    m = ["## Crosscheck against the brokers' own tools", "", INTRO, "", *[f"- {x}" for x in said],
         *([""] if said else []), verdict, "", to_markdown(table), ""]
    return "\n".join(h), "\n".join(m)
