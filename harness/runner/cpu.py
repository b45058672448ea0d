"""The run folder's CPU table (``cpu.parquet`` + ``.csv``, ``CPU_TABLE_COLUMNS``): what each process role of
every case used over its measured interval, as :meth:`harness.runner._workers.Workers.cpu_used` reported it.
The pipeline turns these rows into the summary's CPU columns; nothing here judges them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from harness.runfolder import RunFolder
from harness.runfolder.schema import CPU, CPU_TABLE_COLUMNS
from harness.runner._context import Case
from harness.runner.proc import CpuUse

FAULT_NOTE = "a case with faults: a process restarted by a fault is not counted after its restart"


class CpuTable:
    """Accumulates one run's CPU rows and rewrites the table after each case (an interrupted run keeps what
    its finished cases measured)."""

    def __init__(self, run: RunFolder) -> None:
        self.run = run
        self.rows: list[dict[str, Any]] = []

    def add(self, case: Case, used: Sequence[CpuUse]) -> None:
        if not used:
            return
        key = case.key
        keys = {"run_id": case.run_id, **key.columns(), "pattern": case.scenario.pattern.value, "case": key.stem}
        # The meter's pids are fixed at the start: a broker or worker a fault restarts is not counted after.
        partial = FAULT_NOTE if case.scenario.faults else ""
        self.rows += [
            {**keys, "role": u.role, "cpu_s": u.cpu_s, "wall_s": u.wall_s, "core_pct": u.core_pct,
             "note": "; ".join(n for n in (u.note, partial) if n)}
            for u in used
        ]
        self.run.write_table(CPU, pd.DataFrame(self.rows, columns=list(CPU_TABLE_COLUMNS)), csv=True)
