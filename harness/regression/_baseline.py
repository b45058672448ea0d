"""Recording a baseline: one run, or several runs of one scenario pooled, checked for what the regression
check will need later (complete, the reference system, enough repetitions) and written as a baseline folder.

Several runs pool their repetitions (renumbered run after run; each ratio still pairs the two systems of one
repetition of one run), so the baseline carries the run-to-run variation of the machine and its medians do
not hang on one lucky or unlucky run. A baseline folder can be one of the sources: its repetitions are kept,
and new runs (made hours or days later) widen what it has seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from harness.regression._compare import scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import RunData, environment, read_source, write_baseline
from harness.regression._ratios import usable_ratios


@dataclass(frozen=True)
class RecordedBaseline:
    """What :func:`record_baseline` wrote: the (pooled) run it came from and its per-repetition ratios."""

    run: RunData
    ratios: pd.DataFrame

    @property
    def runs(self) -> list[str]:
        """Ids of every run the baseline pools, oldest first."""
        return list(self.run.manifest.get("pooled_runs") or [self.run.run_id])


def prepare(run_data: RunData, reference: str) -> pd.DataFrame:
    """The baseline's ratios for a loaded run; RegressionInputError if the check could not use them."""
    made_with = run_data.manifest.get("baseline_reference")
    if made_with is not None and made_with != reference:
        raise RegressionInputError(
            f"{run_data.path}: a baseline made against {made_with!r}, not {reference!r}; "
            f"pool it with --reference {made_with}"
        )
    if not run_data.manifest.get("complete", False):
        raise RegressionInputError(
            f"{run_data.path}: the run is marked incomplete in its manifest (interrupted?); "
            "a baseline needs a complete run"
        )
    return usable_ratios(run_data.summary, f"run {run_data.path}", reference)


def pool(runs: Sequence[RunData]) -> RunData:
    """One run's worth of data from several runs of the same scenario: summaries concatenated with the
    repetitions of each later run numbered after those of the runs before it; the first run's manifest
    with every run's id. RegressionInputError if the runs measured different scenarios."""
    first = runs[0]
    if len(runs) == 1:
        return first
    frames = []
    offset = 0
    for run_data in runs:
        if run_data is not first:
            names = sorted(str(s.get("name")) for s in run_data.manifest.get("scenarios") or [])
            wanted = sorted(str(s.get("name")) for s in first.manifest.get("scenarios") or [])
            differences = scenario_differences(
                first.manifest.get("scenarios") or [], run_data.manifest.get("scenarios") or []
            )
            if names != wanted or differences:
                detail = differences[0] if differences else f"scenarios {names} vs {wanted}"
                raise RegressionInputError(
                    f"{run_data.path}: not the same scenario as {first.path} ({detail}); "
                    "only runs of one scenario can be pooled"
                )
        summary = run_data.summary.copy()
        summary["repetition"] = summary["repetition"].astype("int64") + offset
        offset = int(summary["repetition"].max()) + 1
        frames.append(summary)
    manifest = dict(first.manifest)
    manifest["pooled_runs"] = [name for r in runs for name in (r.manifest.get("pooled_runs") or [r.run_id])]
    return RunData(path=first.path, summary=pd.concat(frames, ignore_index=True), manifest=manifest)


def record_baseline(sources: Sequence[Path], out: Path, reference: str) -> RecordedBaseline:
    """Read ``sources`` (run folders, or a baseline folder to extend), pool them and write the baseline
    folder ``out``. RegressionInputError (nothing written) if a source is unusable or the sources measured
    different scenarios; OSError if ``out`` cannot be written."""
    runs = [read_source(path) for path in sources]
    if len(runs) > 1:
        for one in runs:  # each pooled run must be usable on its own (complete, enough repetitions)
            prepare(one, reference)
    pooled = pool(runs)
    ratios = prepare(pooled, reference)
    created = datetime.now(UTC).isoformat(timespec="seconds")
    write_baseline(out, pooled.summary, ratios, environment(pooled, reference, created))
    return RecordedBaseline(pooled, ratios)
