"""The self-contained HTML report and the Markdown summary as strings, and the headline in words (the
writing is ``headline.write_report``'s job)."""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from harness import units
from harness.metrics.bound import MARK, RULE, cpu_text
from harness.metrics.search import KEEP_UP
from harness.pipeline import Summary
from harness.report.manifest import run_table, scenarios_table, systems_table, variants_table
from harness.report.tables import (
    cpu_table,
    delivery_table,
    results_table,
    search_results_table,
    to_html,
    to_markdown,
)

if TYPE_CHECKING:
    from harness.report.headline import Headline, Row

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

SEARCH_NOTE = (
    "A rate search runs short open-loop trials per system, bisecting the offered rate: a trial is sustained "
    f"when the receiver gets at least {KEEP_UP:.0%} of the offered rate, nothing is lost, and p99 from the intended "
    "send time stays under the scenario's bound. The knee is where the p99-vs-load curve bends upward."
)

CPU_NOTE = (
    "CPU time of each process over the case's measured interval (the start to the last message moved), from "
    "/proc, as % of one core (100 = one core busy throughout; a multi-threaded process can exceed it): the "
    "broker with all its processes, the busiest client process (producer, consumer, requester or replier, "
    f"with its JVM), the harness's parent process; means over repetitions. {RULE}. Per process figures: cpu.csv."
)

_CSS = """
body{font-family:system-ui,sans-serif;margin:16px 24px;color:#222;max-width:1400px}
h1{margin-top:0} .verdicts{margin:6px 0 4px;padding-left:20px;font-size:15px;line-height:1.35}
.verdicts li{margin:2px 0} .scroll{max-width:100%;overflow-x:auto} .text td{text-align:left}
table{max-width:100%} td{overflow-wrap:anywhere}
h1{font-size:1.5em;margin-bottom:4px} h2{font-size:1.2em;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
tr.problem td{background:#fde8e8}
.banner{background:#b00020;color:#fff;padding:10px 14px;font-weight:bold;margin:10px 0}
figure{margin:10px 0} figcaption{font-size:13px;color:#444} img{max-width:100%;border:1px solid #eee}
dl dt{font-weight:bold;margin-top:6px} dl dd{margin-left:18px}
code{background:#f5f5f5;padding:1px 4px}
"""


def manifest_tables(summary: Summary) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) of the runs, systems, variants and scenarios the summary covers."""
    runs = summary.runs
    out = [(f"Run {run.run_id}", run_table(run, summary.engine)) for run in runs]
    out += [("Systems", systems_table(runs)), ("Variants: client, guarantee, backend", variants_table(runs)),
            ("Scenarios", scenarios_table(runs))]
    return [(title, table) for title, table in out if not table.empty]


def _overlap(a: Row, b: Row) -> bool:
    """Whether the two rows' 95 % intervals of receiver msgs/s overlap (no interval: never)."""
    if math.isnan(a.low) or math.isnan(b.low):
        return False
    return a.low <= b.high and b.low <= a.high


def _ratio(row: Row, reference: str) -> str:
    return "" if math.isnan(row.ratio) or row.name == reference else f", {units.factor(row.ratio)} {reference}"


def _who(row: Row) -> str:
    return f"{row.name} ({row.guarantee})" if row.guarantee else row.name


def sentence(head: Headline) -> str:
    """The result of one scenario in words, from the numbers of its headline rows."""
    best, rest = head.rows[0], head.rows[1:]
    start = f"{head.scenario} ({head.case_text}, {head.repetitions}): "
    if not rest:
        return (start + f"only {_who(best)} ran: {units.count(best.msgs)} msgs/s received, "
                f"p99 {units.duration_us(best.p99_us)}.")
    worst = rest[-1]
    if head.by_search:
        none = [row.name for row in head.rows if row.msgs <= 0]
        text = (f"{_who(best)} sustains the most, {units.count(best.msgs)} msgs/s"
                f"{_ratio(best, head.reference)} (p99 there {units.duration_us(best.p99_us)})")
        least = [row for row in rest if row.msgs > 0]
        if least:
            text += (f"; the least is {_who(least[-1])}, {units.count(least[-1].msgs)} msgs/s"
                     f"{_ratio(least[-1], head.reference)}")
        if none:
            text += f"; {', '.join(none)} sustained none of the rates tried"
        return start + text + "."
    if head.by_latency:
        text = (f"{_who(best)} has the lowest p99, {units.duration_us(best.p99_us)} (p50 "
                f"{units.duration_us(best.p50_us)}), receiving {units.count(best.msgs)} msgs/s; the highest is "
                f"{_who(worst)} at {units.duration_us(worst.p99_us)}")
        factor = worst.p99_us / best.p99_us if best.p99_us > 0 else math.nan
        text += "" if math.isnan(factor) else f" ({units.factor(factor)} the lowest)"
    elif _overlap(best, rest[0]):
        second = rest[0]
        text = (f"{_who(best)} and {_who(second)} are within each other's 95% interval, "
                f"{units.count(best.msgs)} and {units.count(second.msgs)} msgs/s received, p99 "
                f"{units.duration_us(best.p99_us)} and {units.duration_us(second.p99_us)}")
    else:
        text = (f"{_who(best)} is fastest at {units.count(best.msgs)} msgs/s received"
                f"{_ratio(best, head.reference)}, p99 {units.duration_us(best.p99_us)}")
    if not head.by_latency and (len(rest) > 1 or not _overlap(best, rest[0])):
        text += (f"; slowest is {_who(worst)} at {units.count(worst.msgs)} msgs/s"
                 f"{_ratio(worst, head.reference)}, p99 {units.duration_us(worst.p99_us)}")
    lost = [row.name for row in head.rows if row.lost]
    bound = [f"{row.name} ({cpu_text(row.client_cpu, row.broker_cpu)})" for row in head.rows if row.bound]
    return (start + text + (f"; {', '.join(lost)} lost messages" if lost else "")
            + (f"; {MARK} bound by its own client's CPU: {', '.join(bound)}" if bound else "") + ".")


def caption(head: Headline) -> str:
    bound = (f" Hatched bars: {RULE}; the bar gives the two figures (mean % of a core)."
             if any(row.bound for row in head.rows) else "")
    return (f"{head.scenario}: {len(head.rows)} system variants compared at {head.case_text}, "
            f"{head.ranking}; means of {head.repetitions} with 95% intervals; ratios to {head.reference}.{bound}")


def figure_name(head: Headline) -> str:
    """``headline_<scenario>``: the PNG's file stem (only letters, digits, ``-`` and ``_``)."""
    return "headline_" + re.sub(r"[^A-Za-z0-9_-]", "_", head.scenario)


def _figure_html(name: str, png: bytes, text: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    cap = html.escape(text)
    return (f"<figure><img id='fig-{html.escape(name)}' alt='{cap}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{cap}</figcaption></figure>")


def render_html(
    summary: Summary,
    pngs: Mapping[str, bytes],
    captions: Mapping[str, str],
    extra: str = "",
    extra_pngs: Mapping[str, bytes] | None = None,
    extra_captions: Mapping[str, str] | None = None,
    heads: Sequence[Headline] = (),
) -> str:
    """The whole report as one HTML document; figures are embedded as base64 PNG ``data:`` URLs.

    The headline comes first (one sentence per scenario in ``heads``, then their charts, found in ``pngs``
    under :func:`figure_name`); then the manifest tables, results, other figures and delivery. ``extra``
    (HTML) and ``extra_pngs`` form the evaluation section, placed after the delivery table."""
    esc = html.escape
    title = "mqbench report — " + ", ".join(run.run_id for run in summary.runs)
    out = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width'><title>{esc(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
    ]
    for run in summary.runs:
        if not run.complete:
            out.append(
                f"<div class='banner'>Run {esc(run.run_id)} is INCOMPLETE: it was interrupted or is "
                "still running; numbers cover only what was recorded.</div>"
            )
    lead = [figure_name(head) for head in heads]
    if heads:
        out.append("<section id='headline'><ul class='verdicts'>")
        out += [f"<li>{esc(sentence(head))}</li>" for head in heads]
        out.append("</ul>")
        out += [_figure_html(name, pngs[name], captions.get(name, name)) for name in lead if name in pngs]
        out.append("</section>")
    for heading, table in manifest_tables(summary):
        out.append(f"<h2>{esc(heading)}</h2><div class='scroll text'>{to_html(table)}</div>")
    search = search_results_table(summary)
    if not search.empty:
        out.append(f"<h2>Maximum sustainable rate</h2><p>{esc(SEARCH_NOTE)}</p>")
        out.append(f"<div class='scroll'>{to_html(search)}</div>")
    out.append("<h2>Results</h2>")
    out.append(f"<div class='scroll'>{to_html(results_table(summary), highlight='lost')}</div>")
    out += [_figure_html(name, png, captions.get(name, name)) for name, png in pngs.items() if name not in lead]
    cpu = cpu_table(summary)
    if not cpu.empty:
        out.append(f"<h2>CPU per case</h2><p>{esc(CPU_NOTE)}</p><div class='scroll'>{to_html(cpu)}</div>")
    out.append("<h2>Delivery</h2>")
    out.append(f"<div class='scroll'>{to_html(delivery_table(summary), highlight='lost')}</div>")
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


def render_markdown(
    summary: Summary, figure_names: list[str], extra: str = "", heads: Sequence[Headline] = ()
) -> str:
    """``summary.md``: headline sentences and charts, manifest tables, results, CPU, delivery, figure links."""
    lines = ["# mqbench summary", ""]
    for run in summary.runs:
        if not run.complete:
            lines += [f"> **Run {run.run_id} is INCOMPLETE**: numbers cover only what was recorded.", ""]
    if heads:
        lines += ["## Headline", ""]
        lines += [f"- {sentence(head)}" for head in heads]
        lines += [""] + [f"![{caption(head)}](figures/{figure_name(head)}.png)" for head in heads] + [""]
    search = search_results_table(summary)
    if not search.empty:
        lines += ["## Maximum sustainable rate", "", SEARCH_NOTE, "", to_markdown(search), ""]
    for heading, table in manifest_tables(summary):
        lines += [f"## {heading}", "", to_markdown(table), ""]
    cpu = cpu_table(summary)
    lines += [
        "## Results",
        "",
        to_markdown(results_table(summary)),
        "",
        *(["## CPU per case", "", CPU_NOTE, "", to_markdown(cpu), ""] if not cpu.empty else []),
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
