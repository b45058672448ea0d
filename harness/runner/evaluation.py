"""What a case with faults or a slow consumer adds to the run folder, beside its raw rows.

- ``timeseries/<case>.parquet``: the Sampler's rows (backlog, broker and worker memory, queue depth);
- ``faults.parquet`` (+ the manifest's ``faults`` list): one row per fault with its monotonic_ns stamps;
- ``recovery.parquet`` + ``recovery.csv``: :func:`harness.metrics.recovery.recovery_table` per fault;
- ``send_errors.parquet``: producer, seq and stamp of every send that raised.
Every row carries the case columns (scenario, system, variant, label, guarantee, size, rate, repetition).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.metrics.recovery import recovery_table
from harness.runner.case import CaseResult
from harness.runner.faults import DEPTH_NOT_SAMPLED
from harness.runner.results import RunFolder


class EvaluationFiles:
    """Accumulates one run's fault, recovery and send-error rows and rewrites their files after each case."""

    def __init__(self, run: RunFolder) -> None:
        self.run = run
        self.faults: list[dict[str, Any]] = []
        self.recovery: list[pd.DataFrame] = []
        self.send_errors: list[pd.DataFrame] = []

    def add(self, raw_name: str, case: dict[str, Any], result: CaseResult) -> None:
        stem = raw_name.removesuffix(".parquet")
        cols = {**case, "case": stem}
        if result.timeseries is not None and not result.timeseries.empty:
            ts = result.timeseries.assign(**cols)
            ts["depth_note"] = "" if ts["queue_depth"].notna().any() else DEPTH_NOT_SAMPLED.get(case["system"], "")
            self.run.write_table(f"timeseries/{stem}.parquet", ts)
        if result.faults:
            rows = [{**cols, **f, "t_start_ns": result.start_ns} for f in result.faults]
            self.faults.extend(rows)
            self.run.manifest.setdefault("faults", []).extend(rows)
            self.run.write_table("faults.parquet", pd.DataFrame(self.faults))
            table = recovery_table(result.rows, result.faults, result.send_errors) if len(result.rows) else None
            if table is not None:
                self.recovery.append(table.assign(**cols))
                self.run.write_table("recovery.parquet", pd.concat(self.recovery, ignore_index=True), csv=True)
        if result.send_errors is not None and len(result.send_errors):
            self.send_errors.append(result.send_errors.assign(**cols))
            self.run.write_table("send_errors.parquet", pd.concat(self.send_errors, ignore_index=True))
