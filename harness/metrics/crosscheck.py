"""Crosscheck arithmetic shared by ``mqbench crosscheck`` and the report: R, the client-bound label, medians,
and the sentence that says what fraction of the broker's capacity a row reached.

R = harness receiver msg/s ÷ the broker's own tool's msg/s on the same broker instance in the same minutes.
Against the tool with the row's settings, a row whose R is below ``CLIENT_BOUND`` is labelled client-bound:
the harness's client gets less than half of what the broker serves its own tool. Against the tool at its
best, R is the fraction of the broker's capacity here that the row reached.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness import units

CLIENT_BOUND = 0.5  # R below this: the row measures its client more than its broker


def ratio(harness_rate: float, reference: float) -> float:
    """harness ÷ tool; NaN when either is missing or the tool's rate is not positive."""
    if not (finite(harness_rate) and finite(reference)) or reference <= 0:
        return math.nan
    return harness_rate / reference


def client_bound(r: float) -> bool:
    return finite(r) and r < CLIENT_BOUND


def median_rows(rows: Sequence[Mapping[Any, Any]]) -> list[dict[str, Any]]:
    """One row per (system, variant, tool, reference, size): medians of the rates and R over repetitions, the
    client-bound label of the median R (against the tool with the row's settings only), and the first
    non-empty status/note and settings."""
    groups: dict[tuple[Any, ...], list[Mapping[Any, Any]]] = {}
    for r in rows:
        groups.setdefault((r["system"], r["variant"], r["tool"], r.get("reference", "matched"), r["size"]),
                          []).append(r)
    out = []
    for (system, variant, tool, reference, size), members in groups.items():
        first = members[0]
        med = {k: _median([m.get(k, math.nan) for m in members]) for k in
               ("harness_rate", "tool_rate", "R", "tool_lat_p50_us", "tool_lat_p99_us", "tool_steady_s",
                "cpu_tool_s", "cpu_broker_tool_s", "cpu_harness_s", "cpu_broker_harness_s")}
        ok = [m for m in members if m["status"] == "ok"]
        most = [float(m["tool_rate"]) for m in ok if finite(m.get("tool_rate"))]
        out.append({
            "system": system, "variant": variant, "client": first["client"], "label": first["label"],
            "tool": tool, "reference": reference, "size": size, "reps": len(ok),
            "rate_kind": next((m["rate_kind"] for m in ok), ""),
            "tool_lat_kind": next((m["tool_lat_kind"] for m in ok), ""),
            "tool_settings": next((m.get("tool_settings", "") for m in ok), ""), **med,
            "tool_rate_max": max(most) if most else math.nan,
            "client_bound": reference == "matched" and client_bound(med["R"]),
            "status": "ok" if ok else first["status"],
            "note": next((m["note"] for m in members if m["status"] != "ok"), first["note"]),
        })
    for m in out:  # what the broker carries, beside each "best" row (the sentences and the report's label)
        if m["reference"] == "best":
            m["capacity"], m["capacity_from"] = broker_capacity(m, out)
    return out


def broker_capacity(best: Mapping[str, Any], medians: Sequence[Mapping[str, Any]]) -> tuple[float, str]:
    """What the broker carries here for the row of ``best`` (a "best" median row), and which reference moved
    it ("best", or "matched": the tool with the row's settings): the most the tool moved in any of its
    repetitions, at its best or with the row's settings, on that broker in the same minutes. A maximum over
    repetitions, held against the row's median, so a row's fraction of it is never overstated by a tool
    repetition that ran slow."""
    matched = [x["tool_rate_max"] for x in medians
               if x["reference"] == "matched" and x["status"] == "ok" and x["tool"] == best["tool"]
               and (x["system"], x["variant"], x["size"]) == (best["system"], best["variant"], best["size"])
               and finite(x["tool_rate_max"])]
    own = best["tool_rate_max"]  # NaN only where no repetition gave a figure: no capacity, no fraction
    top = max(matched, default=math.nan)
    return (top, "matched") if finite(top) and top > own else (own, "best")


def capacity_sentences(medians: Sequence[Mapping[str, Any]], name: Callable[[Any, Any], str]) -> list[str]:
    """One sentence per row variant and size that has a figure against its tool at its best: the fraction of
    the broker's capacity it reached, and R against the tool with the row's own settings (``median_rows``).
    What the broker carries here is :func:`broker_capacity`. A row that moved more than that says so instead
    of a fraction above 1: the tool's settings did not reach the broker's capacity. ``name(label, variant)`` names a row
    (the report's ``row_name``)."""
    out = []
    for m in medians:
        if m["reference"] != "best" or m["status"] != "ok" or not finite(m["R"]):
            continue
        row = name(m["label"] or m["system"], m["variant"])
        vs = "sender" if m["rate_kind"] == "sender" else "receiver"
        matched = [x for x in medians if x["reference"] == "matched" and x["status"] == "ok" and finite(x["R"])
                   and (x["system"], x["variant"], x["size"]) == (m["system"], m["variant"], m["size"])]
        capacity, source, own = m["capacity"], m["capacity_from"], m["tool_rate_max"]
        most = "the most of its repetitions, " if m["reps"] > 1 else ""
        best = (f"{m['tool']} at its best ({m['tool_settings'] or 'its settings'}) moved "
                f"{units.count(own)} msg/s ({most}{vs})")
        if m["harness_rate"] > capacity:
            same_tool = [x["tool_rate_max"] for x in matched if x["tool"] == m["tool"] and finite(x["tool_rate_max"])]
            text = (f"{row}, {units.size(int(m['size']))}: moved {units.count(m['harness_rate'])} msg/s, more than "
                    f"the broker's own tool did here — {best}"
                    + (f", with the row's settings {units.count(max(same_tool))}" if same_tool else "")
                    + "; those settings are not the broker's capacity here, so the row's fraction of it is not "
                      "known")
        else:
            where = (best if source == "best" else
                     f"{m['tool']} with the row's settings moved {units.count(capacity)} msg/s ({most}{vs}), more "
                     f"than at its best ({m['tool_settings'] or 'its settings'}: {units.count(own)})")
            text = (f"{row}, {units.size(int(m['size']))}: {m['harness_rate'] / capacity:.2f} of what the broker "
                    f"carries here — {where}, the row {units.count(m['harness_rate'])}")
        if matched:
            text += "; against the tool with the row's settings R = " + ", ".join(
                f"{x['R']:.2f} ({x['tool']})" for x in matched)
        out.append(text + ".")
    return out


def _median(values: Sequence[Any]) -> float:
    kept = sorted(float(v) for v in values if finite(v))
    if not kept:
        return math.nan
    mid = len(kept) // 2
    return kept[mid] if len(kept) % 2 else (kept[mid - 1] + kept[mid]) / 2


def finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
