"""The recovery table of a run: :func:`harness.metrics.recovery.recovery_table` for every case with faults.

Inputs are the runner's events in the run folder (``faults``, ``send_errors``) and the case's raw rows; the
output has ``RECOVERY_TABLE_COLUMNS``. The table is small (one row per fault), so both engines share this
pandas computation.
"""

from __future__ import annotations

import pandas as pd

from harness.metrics.recovery import recovery_table
from harness.runfolder import RunFolder
from harness.runfolder.schema import CASE_COLUMNS, FAULTS, RECOVERY_TABLE_COLUMNS, SEND_ERRORS


def run_recovery(run: RunFolder) -> pd.DataFrame:
    """One row per fault of every case of ``run`` that had faults; empty (with the columns) when none."""
    faults = run.read_table(FAULTS)
    errors = run.read_table(SEND_ERRORS)
    frames = []
    if not faults.empty:
        for case, events in faults.groupby("case", sort=True):
            rows = run.read_raw(str(case))
            if rows.empty:
                continue
            mine = errors[errors["case"] == case] if not errors.empty else None
            records = [{str(k): (None if pd.isna(v) else v) for k, v in e.items()} for e in events.to_dict("records")]
            table = recovery_table(rows, records, mine)
            first = events.iloc[0]
            frames.append(table.assign(**{k: first[k] for k in CASE_COLUMNS}, case=case))
    if not frames:
        return pd.DataFrame(columns=list(RECOVERY_TABLE_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(RECOVERY_TABLE_COLUMNS)]
