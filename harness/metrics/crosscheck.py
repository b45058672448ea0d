"""Crosscheck arithmetic shared by ``mqbench crosscheck`` and the report: R, the client-bound label, medians.

R = harness receiver msg/s ÷ the broker's own tool's msg/s on the same broker instance in the same minutes.
A row whose R is below ``CLIENT_BOUND`` is labelled client-bound: the harness's client gets less than half
of what the broker serves its own tool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

CLIENT_BOUND = 0.5  # R below this: the row measures its client more than its broker


def ratio(harness_rate: float, reference: float) -> float:
    """harness ÷ tool; NaN when either is missing or the tool's rate is not positive."""
    if not (finite(harness_rate) and finite(reference)) or reference <= 0:
        return math.nan
    return harness_rate / reference


def client_bound(r: float) -> bool:
    return finite(r) and r < CLIENT_BOUND


def median_rows(rows: Sequence[Mapping[Any, Any]]) -> list[dict[str, Any]]:
    """One row per (system, variant, tool, size): medians of the rates and R over repetitions, the
    client-bound label of the median R, and the first non-empty status/note."""
    groups: dict[tuple[Any, ...], list[Mapping[Any, Any]]] = {}
    for r in rows:
        groups.setdefault((r["system"], r["variant"], r["tool"], r["size"]), []).append(r)
    out = []
    for (system, variant, tool, size), members in groups.items():
        first = members[0]
        med = {k: _median([m[k] for m in members]) for k in
               ("harness_rate", "tool_rate", "R", "tool_lat_p50_us", "tool_lat_p99_us",
                "cpu_tool_s", "cpu_broker_tool_s", "cpu_harness_s", "cpu_broker_harness_s")}
        ok = [m for m in members if m["status"] == "ok"]
        out.append({
            "system": system, "variant": variant, "client": first["client"], "label": first["label"],
            "tool": tool, "size": size, "reps": len(ok), "rate_kind": next((m["rate_kind"] for m in ok), ""),
            "tool_lat_kind": next((m["tool_lat_kind"] for m in ok), ""), **med,
            "client_bound": client_bound(med["R"]),
            "status": "ok" if ok else first["status"],
            "note": next((m["note"] for m in members if m["status"] != "ok"), first["note"]),
        })
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
