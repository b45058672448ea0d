"""The manifest as readable tables (run, systems, variants, scenarios): plain cells, never JSON.

Each function returns a display DataFrame of strings; the page renders it as HTML or Markdown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import pandas as pd

from harness import units
from harness.report._context import clock_text, host_text
from harness.runfolder import RunInfo

#: Scenario fields with a column of their own (the rest go to "other settings" when set).
_SHOWN = {"name", "pattern", "message_sizes", "sizes", "messages", "duration", "rates", "producers",
          "consumers", "repetitions", "description", "source"}
#: Scenario field values that mean "not set" and are left out of "other settings".
_UNSET: tuple[Any, ...] = (None, "", [], {}, ())


def cell(value: Any) -> str:
    """One value as text: lists joined by commas, mappings as ``key: value``, nothing as ``–``."""
    if value is None:
        return units.MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and not math.isfinite(value):
        return units.MISSING
    if isinstance(value, float):  # numbers for people: 1,000,000 and 0.00025, never 1e+06 or 2.5e-04
        return f"{value:,.0f}" if value.is_integer() else format(Decimal(repr(value)), "f")
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {cell(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value)
    return str(value)


def run_table(run: RunInfo, engine: str) -> pd.DataFrame:
    """Two columns, field and value, describing one run."""
    status = "complete" if run.complete else "INCOMPLETE (interrupted; results cover what was recorded)"
    rows = [
        ("run", run.run_id),
        ("status", status),
        ("started / finished", f"{run.started or '?'} / {run.finished or '?'}"),
        ("host", host_text(run)),
        ("clock", clock_text([run])),
        ("git revision", run.git_revision or "(unknown)"),
        ("folder", str(run.path)),
        ("computed by", f"harness.pipeline ({engine} engine)"),
    ]
    return pd.DataFrame(rows, columns=["field", "value"])


def _startup(info: Mapping[str, Any]) -> str:
    seconds = info.get("broker_startup_s")
    return units.duration_us(float(seconds) * 1e6) if isinstance(seconds, int | float) else units.MISSING


def systems_table(runs: Iterable[RunInfo]) -> pd.DataFrame:
    """One row per system: label, versions, backend, broker URL and broker start-up time."""
    rows = []
    for run in runs:
        for system, info in run.systems.items():
            # a system driven by several clients is named by itself (each variant's label is in the variants
            # table); else by its label, which names its one client
            labels = {v.get("label") for v in run.variants.values() if v.get("system") == system} - {None, ""}
            rows.append({
                "system": system if len(labels) > 1 else run.label(system),
                "versions": run.versions(system) or units.MISSING,
                "backend": cell(info.get("backend")),
                "broker": cell(info.get("broker_url")),
                "broker start-up": _startup(info),
            })
    return pd.DataFrame(rows).drop_duplicates() if rows else pd.DataFrame(columns=["system"])


def variants_table(runs: Iterable[RunInfo]) -> pd.DataFrame:
    """One row per system variant: the client it drives, its delivery guarantee and backend."""
    rows = []
    for run in runs:
        variants = dict(run.variants)
        # runs recorded before labels were per variant: one entry per system
        for system in run.systems:
            if not any(v.get("system") == system for v in variants.values()):
                variants[system] = {"system": system, "variant": "default", **run.describe(system, "default")}
        for entry in variants.values():
            rows.append({
                # the variant's own label (a Java variant is rabbitmq (java), not its system's first label)
                "system": str(entry.get("label") or run.label(str(entry.get("system")))),
                "variant": cell(entry.get("variant")),
                "client": cell(entry.get("client")),
                "guarantee": cell(entry.get("guarantee")),
                "backend": cell(entry.get("backend")),
            })
    return pd.DataFrame(rows).drop_duplicates() if rows else pd.DataFrame(columns=["system"])


def _sizes(scenario: Mapping[str, Any]) -> str:
    sizes = scenario.get("message_sizes") or scenario.get("sizes") or []
    return ", ".join(units.size(int(s)) for s in sizes) or units.MISSING


def _rates(scenario: Mapping[str, Any]) -> str:
    rates = scenario.get("rates") or [None]
    return ", ".join(units.rate_text(r, units.count) for r in rates)


def _length(scenario: Mapping[str, Any]) -> str:
    if scenario.get("duration") is not None:
        return f"{cell(scenario['duration'])} s"
    if scenario.get("messages") is not None:
        return f"{units.count(float(scenario['messages']))} msgs"
    return units.MISSING


def scenarios_table(runs: Iterable[RunInfo]) -> pd.DataFrame:
    """One row per scenario with its fields; settings without a column of their own are listed together."""
    rows = []
    for run in runs:
        for scenario in run.scenarios:
            other = {k: v for k, v in scenario.items() if k not in _SHOWN and v not in _UNSET}
            rows.append({
                "scenario": cell(scenario.get("name")),
                "pattern": cell(scenario.get("pattern")),
                "sizes": _sizes(scenario),
                "length": _length(scenario),
                "rates (msgs/s)": _rates(scenario),
                "producers → consumers": f"{scenario.get('producers', 1)} → {scenario.get('consumers', 1)}",
                "reps": cell(scenario.get("repetitions")),
                "other settings": cell(other) if other else units.MISSING,
                "description": cell(scenario.get("description") or units.MISSING),
            })
    return pd.DataFrame(rows).drop_duplicates() if rows else pd.DataFrame(columns=["scenario"])
