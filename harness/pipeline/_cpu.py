"""The summary's CPU columns, from the runs' CPU tables (``cpu.parquet``, one row per process role of a case),
and its clock column (``clock_uncertainty_us``, from the clock tables of runs on a Spark cluster).

Per case and repetition: the broker's % of a core (all its processes), the busiest worker's (and which one
it was), the harness parent's, the CPU seconds of all of them together, a note when a figure is missing,
and the CPU-based label (:func:`harness.metrics.bound.client_bound`). Both engines' summaries get these
columns here, after the engines: CPU is not computed from raw rows.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

from harness.metrics.bound import NO_BROKER, client_bound
from harness.runfolder.schema import CPU_SUMMARY_COLUMNS

#: ``cpu_note`` of a case with no CPU rows (a run recorded before CPU was measured, or a case that failed).
NOT_RECORDED = "not recorded"
_KEYS = ("run_id", "scenario", "system", "variant", "size", "rate", "repetition")
_NOT_WORKERS = ("broker", "harness")
#: Per-node roles of a clustered broker (``broker node0`` ...): shown in cpu.csv, already inside ``broker``.
NODE_ROLE = "broker node"


def _key(values: Sequence[object]) -> tuple[Hashable, ...]:
    # NaN (rate "max") never equals itself: key it as None; sizes and repetitions as int.
    out: list[Hashable] = []
    for v in values:
        if isinstance(v, float) and math.isnan(v):
            out.append(None)
        elif isinstance(v, int | np.integer):
            out.append(int(v))
        else:
            out.append(v)  # type: ignore[arg-type]
    return tuple(out)


def _one_case(roles: list[dict[str, object]], cores: float) -> dict[str, object]:
    if not roles:
        return {"broker_cpu_pct": math.nan, "client_cpu_pct": math.nan, "client_cpu_role": "",
                "harness_cpu_pct": math.nan, "cpu_total_s": math.nan, "cpu_note": NOT_RECORDED, "client_bound": "",
                "clients_cpu_pct": math.nan, "cpu_cores": cores}
    pct = {str(r["role"]): float(r["core_pct"]) for r in roles}  # type: ignore[arg-type]
    workers = {role: v for role, v in pct.items()
               if role not in _NOT_WORKERS and not role.startswith(NODE_ROLE) and not math.isnan(v)}
    busiest = max(workers, key=workers.__getitem__) if workers else ""
    client = workers[busiest] if busiest else math.nan
    clients = sum(workers.values()) if workers else math.nan
    has_broker = "broker" in pct
    broker = pct.get("broker", math.nan)
    notes = [*([] if has_broker else [NO_BROKER]), *(n for r in roles if isinstance(n := r.get("note"), str) and n)]
    seconds = [s for r in roles if not str(r["role"]).startswith(NODE_ROLE)
               and not math.isnan(s := float(r["cpu_s"]))]  # type: ignore[arg-type]
    return {
        "broker_cpu_pct": broker,
        "client_cpu_pct": client,
        "client_cpu_role": busiest,
        "harness_cpu_pct": pct.get("harness", math.nan),
        "cpu_total_s": sum(seconds) if seconds else math.nan,
        "cpu_note": "; ".join(dict.fromkeys(notes)),
        "client_bound": client_bound(client, broker, busiest, brokerless=not has_broker, clients_pct=clients,
                                     total_pct=sum(v for r, v in pct.items() if not r.startswith(NODE_ROLE)
                                                   and not math.isnan(v)), cores=cores) or "",
        "clients_cpu_pct": clients,
        "cpu_cores": cores,
    }


def clock_uncertainty_us(cases: pd.DataFrame, clocks: pd.DataFrame) -> pd.Series:
    """For each row of ``cases``, the uncertainty (µs) of a latency between its hosts' clocks, from the
    concatenated clock tables ``clocks`` (``CLOCK_TABLE_COLUMNS``; empty for runs on one machine: NaN)."""
    per_case: dict[tuple[Hashable, ...], float] = {}
    if not clocks.empty:
        for record in clocks.to_dict("records"):
            key = _key([record[k] for k in _KEYS])  # type: ignore[index]
            per_case[key] = max(per_case.get(key, 0.0), float(record["latency_uncertainty_ns"]) / 1e3)  # type: ignore[index, arg-type]
    keys = cases[list(_KEYS)].itertuples(index=False)
    return pd.Series([per_case.get(_key(list(k)), math.nan) for k in keys], index=cases.index, dtype="float64")


def cpu_columns(cases: pd.DataFrame, cpu: pd.DataFrame, cores: Sequence[object] | None = None) -> pd.DataFrame:
    """``CPU_SUMMARY_COLUMNS`` for each row of ``cases`` (which holds ``run_id scenario system variant size
    rate repetition``), from the concatenated CPU tables ``cpu`` (``CPU_TABLE_COLUMNS``; may be empty) and,
    per row, the cores of the machine that ran it (``cores``; None where not recorded)."""
    per_row = [float(c) if isinstance(c, int | float) else math.nan for c in (cores or [None] * len(cases))]
    groups: dict[tuple[Hashable, ...], list[dict[str, object]]] = {}
    if not cpu.empty:
        for record in cpu.to_dict("records"):
            groups.setdefault(_key([record[k] for k in _KEYS]), []).append(record)  # type: ignore[arg-type]
    rows = [_one_case(groups.get(_key(list(k)), []), n)
            for k, n in zip(cases[list(_KEYS)].itertuples(index=False), per_row, strict=True)]
    return pd.DataFrame(rows, columns=list(CPU_SUMMARY_COLUMNS), index=cases.index)
