"""The events a case with faults or a slow consumer adds to the run folder, beside its raw rows.

- ``timeseries/<case>.parquet``: the Sampler's rows (backlog, broker and worker memory, queue depth);
- ``faults.parquet`` (+ the manifest's ``faults`` list): one row per fault with its monotonic_ns stamps;
- ``send_errors.parquet``: producer, seq and stamp of every send that raised.
Every row carries the case columns (``CASE_COLUMNS``) and ``case`` (the raw file's stem). What these events
mean for delivery (the recovery table) is computed by the pipeline from them and the raw rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.runfolder import CaseKey, RunFolder
from harness.runfolder.schema import FAULTS, SEND_ERRORS, TIMESERIES_DIR
from harness.runner.faults import DEPTH_NOT_SAMPLED

if TYPE_CHECKING:  # case.py imports this module
    from harness.runner.case import CaseResult


class EvaluationFiles:
    """Accumulates one run's fault and send-error rows and rewrites their files after each case."""

    def __init__(self, run: RunFolder) -> None:
        self.run = run
        self.faults: list[dict[str, Any]] = []
        self.send_errors: list[pd.DataFrame] = []

    def add(self, key: CaseKey, case: dict[str, Any], result: CaseResult) -> None:
        """``case``: the key's columns and the case's labels."""
        stem = key.stem
        cols = {**key.columns(), **case, "case": stem}
        if result.timeseries is not None and not result.timeseries.empty:
            ts = result.timeseries.assign(**cols)
            ts["depth_note"] = "" if ts["queue_depth"].notna().any() else DEPTH_NOT_SAMPLED.get(key.system, "")
            self.run.write_table(f"{TIMESERIES_DIR}/{stem}", ts)
        if result.faults:
            rows = [{**cols, **f, "t_start_ns": result.start_ns} for f in result.faults]
            self.faults.extend(rows)
            self.run.manifest.setdefault("faults", []).extend(rows)
            frame = pd.DataFrame(self.faults)
            # ns stamps need all 63 bits: nullable Int64, never float64 (a missing stamp would make it one)
            for col in [c for c in frame.columns if (c.startswith("t_") and c.endswith("_ns")) or c == "node"]:
                frame[col] = pd.array([r.get(col) for r in self.faults], dtype="Int64")
            self.run.write_table(FAULTS, frame)
        if result.send_errors is not None and len(result.send_errors):
            self.send_errors.append(result.send_errors.assign(**cols))
            self.run.write_table(SEND_ERRORS, pd.concat(self.send_errors, ignore_index=True))
