"""The self-contained HTML report and the Markdown summary (strings; writing is ``_write.py``'s job)."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping

from harness.pipeline import RunInfo, Summary
from harness.report._context import clock_text, host_text
from harness.report.tables import delivery_table, results_table, to_html, to_markdown

DEFINITIONS = (
    (
        "Latency",
        "per message, between two endpoints: t_recv at the receiver minus t_send at the sender, both "
        "stamped by the harness's workers with CLOCK_MONOTONIC (shared by the processes of one host). A stream "
        "has a latency distribution, never one latency. Request/reply latency is the round trip measured at "
        "the requester (never halved unless labelled one-way estimate).",
    ),
    (
        "From intended time",
        "open-loop runs schedule each send; latency from the intended time corrects for "
        "coordinated omission, send delay = t_send - t_intended.",
    ),
    (
        "Throughput",
        "exists only at one endpoint: sender = (messages sent - 1) / (last send - first send) over all "
        "producers; receiver = (receipts - 1) / (last receipt - first receipt) over all consumers (n stamps "
        "bound n - 1 intervals). Both are shown; there is no single 'system throughput'. "
        "MB/s = msgs/s x size / 10^6.",
    ),
    (
        "Delivery",
        "expected = messages each consumer should get (pubsub: every subscriber; queue/reqrep: one), "
        "send failed = sends that raised at the producer (it was told), lost = accepted messages (the send "
        "returned normally) never delivered: silent loss, duplicated = extra receipts, out of order = first "
        "receipts below the highest seq already received from the same producer. A brokerless drop at the HWM "
        "is loss.",
    ),
    (
        "Statistics",
        "percentiles are computed from raw rows (never averaged); the table's p50..max pool all "
        "repetitions of a case; ± is the half-width of the 95% Student-t interval of the per-repetition values.",
    ),
)

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em;margin-bottom:4px} h2{font-size:1.2em;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
tr.problem td{background:#fde8e8}
.banner{background:#b00020;color:#fff;padding:10px 14px;font-weight:bold;margin:10px 0}
.meta td{text-align:left;border:none;padding:2px 10px 2px 0} .meta td:first-child{color:#666}
figure{margin:16px 0} img{max-width:100%;border:1px solid #eee}
dl dt{font-weight:bold;margin-top:6px} dl dd{margin-left:18px}
code{background:#f5f5f5;padding:1px 4px}
"""


def _scenario_text(run: RunInfo) -> str:
    parts = []
    for scenario in run.scenarios:
        rest = {k: v for k, v in scenario.items() if k not in ("name", "pattern")}
        parts.append(f"{scenario.get('name', '?')} ({scenario.get('pattern', '?')}) {json.dumps(rest)}")
    return "; ".join(parts) or "(not recorded)"


def _systems_rows(run: RunInfo) -> list[tuple[str, str]]:
    rows = []
    for system, info in run.systems.items():
        versions = run.versions(system)
        # guarantees are per variant; runs recorded before that have one per system
        guarantees = [f"{v['variant']} {v['guarantee']}" for v in run.variants.values() if v.get("system") == system]
        guarantee = ", ".join(guarantees) or str(info.get("guarantee") or "")
        details = ", ".join(f"{k}: {v}" for k, v in (("backend", info.get("backend")), ("guarantee", guarantee)) if v)
        rows.append((run.label(system), "; ".join(x for x in (versions, details) if x)))
    return rows


def header_rows(run: RunInfo, engine: str) -> list[tuple[str, str]]:
    """(field, value) pairs describing one run, for the HTML header and the Markdown summary."""
    rows = [
        ("run", run.run_id),
        (
            "status",
            "complete" if run.complete else "INCOMPLETE (interrupted; results cover what was recorded)",
        ),
        ("started / finished", f"{run.started or '?'} / {run.finished or '?'}"),
        ("scenarios", _scenario_text(run)),
        ("host", host_text(run)),
        ("clock", clock_text([run])),
        ("git revision", run.git_revision or "(unknown)"),
        ("folder", str(run.path)),
        ("computed by", f"harness.pipeline ({engine} engine)"),
    ]
    rows += [(f"system {label}", text) for label, text in _systems_rows(run)]
    return rows


def _figure_html(name: str, png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    cap = html.escape(caption)
    return (f"<figure><img id='fig-{html.escape(name)}' alt='{cap}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{cap}</figcaption></figure>")


def render_html(
    summary: Summary,
    pngs: Mapping[str, bytes],
    captions: Mapping[str, str],
    extra: str = "",
    extra_pngs: Mapping[str, bytes] | None = None,
    extra_captions: Mapping[str, str] | None = None,
) -> str:
    """The whole report as one HTML document; figures are embedded as base64 PNG ``data:`` URLs.

    ``extra`` (HTML) and ``extra_pngs`` form the evaluation section, placed after the delivery table."""
    esc = html.escape
    title = "mqbench report — " + ", ".join(run.run_id for run in summary.runs)
    out = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
    for run in summary.runs:
        if not run.complete:
            out.append(
                f"<div class='banner'>Run {esc(run.run_id)} is INCOMPLETE: it was interrupted or is "
                "still running; numbers cover only what was recorded.</div>"
            )
    for run in summary.runs:
        cells = "".join(
            f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in header_rows(run, summary.engine)
        )
        out.append(f"<table class='meta'>{cells}</table>")
    out.append("<h2>Results</h2>")
    out.append(to_html(results_table(summary), highlight="lost"))
    for name, png in pngs.items():
        data = base64.b64encode(png).decode("ascii")
        caption = esc(captions.get(name, name))
        out.append(
            f"<figure><img id='fig-{esc(name)}' alt='{caption}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{caption}</figcaption></figure>"
        )
    out.append("<h2>Delivery</h2>")
    out.append(to_html(delivery_table(summary), highlight="lost"))
    if extra:
        out.append(extra)
    for name, png in (extra_pngs or {}).items():
        out.append(_figure_html(name, png, (extra_captions or {}).get(name, name)))
    out.append("<h2>Definitions</h2><dl>")
    out += [f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in DEFINITIONS]
    out.append(
        "</dl><p>Tables as data: <code>summary.csv</code>, <code>aggregate.csv</code>, "
        "<code>series.csv</code>, <code>distribution.csv</code>; figures in <code>figures/</code>.</p>"
    )
    out.append("</body></html>")
    return "\n".join(out)


def render_markdown(summary: Summary, figure_names: list[str], extra: str = "") -> str:
    """``summary.md``: run header, results table, delivery table, links to the figures."""
    lines = ["# mqbench summary", ""]
    for run in summary.runs:
        if not run.complete:
            lines += [f"> **Run {run.run_id} is INCOMPLETE**: numbers cover only what was recorded.", ""]
        lines += [f"- **{k}**: {v}" for k, v in header_rows(run, summary.engine)]
        lines.append("")
    lines += [
        "## Results",
        "",
        to_markdown(results_table(summary)),
        "",
        "## Delivery",
        "",
        to_markdown(delivery_table(summary)),
        "",
        *([extra, ""] if extra else []),
        "## Figures",
        "",
    ]
    lines += [f"- [{name}](figures/{name}.png)" for name in figure_names]
    lines += ["", "## Definitions", ""] + [f"- **{term}**: {text}" for term, text in DEFINITIONS]
    return "\n".join(lines) + "\n"
