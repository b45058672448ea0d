"""Reading run folders and baseline folders, writing baseline folders. The only IO of the check.

A run folder is read through :class:`harness.runfolder.RunFolder`: its summary (one row per case and
repetition, computed by the pipeline) and its manifest. A baseline folder (committed to git, so small and diff-friendly) holds:

* ``summary.csv``  - the run's summary rows, only the columns the ratios need (the source of truth: the
  check recomputes ratios from it, so ``--reference`` can change later);
* ``ratios.csv``   - the per-repetition ratios to the reference the baseline was made with (for readers);
* ``baseline.json`` - where it came from: run id, scenarios, host, system versions, git revision.

Every file is written to a temporary sibling name and renamed, so a baseline is never half-written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.regression._errors import RegressionInputError
from harness.regression._ratios import SUMMARY_INPUT_COLUMNS
from harness.runfolder import RunFolder, RunFolderError, atomic_write, read_json

BASELINE_SUMMARY = "summary.csv"
BASELINE_RATIOS = "ratios.csv"
BASELINE_ENVIRONMENT = "baseline.json"
#: Bumped when the baseline folder's layout changes incompatibly.
BASELINE_FORMAT = 1

_TEXT_COLUMNS = {"scenario": str, "pattern": str, "system": str, "variant": str, "label": str}


@dataclass(frozen=True)
class RunData:
    path: Path
    summary: pd.DataFrame
    manifest: Mapping[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)


@dataclass(frozen=True)
class Baseline:
    path: Path
    summary: pd.DataFrame
    environment: Mapping[str, Any]


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return read_json(path, what)
    except RunFolderError as exc:
        raise RegressionInputError(str(exc)) from None


def read_run_data(path: Path) -> RunData:
    """Read a run folder's summary and manifest; :class:`RegressionInputError` if unusable."""
    try:
        run = RunFolder.open(path)
    except RunFolderError as exc:
        raise RegressionInputError(str(exc)) from None
    try:
        summary = run.read_summary(("summary",))["summary"]
    except RunFolderError as exc:
        raise RegressionInputError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise RegressionInputError(f"{path / 'summary.parquet'}: not a readable Parquet file ({exc})") from None
    if not run.has_manifest:
        raise RegressionInputError(f"{path / 'manifest.json'}: missing; every run folder has one; run the scenario again")
    return RunData(path=path, summary=summary, manifest=run.manifest)


def read_source(path: Path) -> RunData:
    """A run folder, or a baseline folder as one more source to pool (``mqbench baseline results/baseline/
    RUN ...`` extends a baseline with new runs): its rows keep their repetitions, its manifest lists the runs
    it was pooled from."""
    if path.is_dir() and (path / BASELINE_ENVIRONMENT).is_file() and not RunFolder.open(path).has_summary(("summary",)):
        found = read_baseline(path)
        env = found.environment
        manifest = {key: env[key] for key in ("run_id", "git_revision", "host", "systems", "scenarios") if key in env}
        manifest.update(complete=True, pooled_runs=list(env.get("runs") or [env.get("run_id", path.name)]),
                        baseline_reference=env.get("reference"))
        return RunData(path=path, summary=found.summary, manifest=manifest)
    return read_run_data(path)


def read_baseline(path: Path) -> Baseline:
    """Read a baseline folder written by :func:`write_baseline`."""
    hint = "create one with 'mqbench baseline RUN_DIR --out " + str(path) + "'"
    if not path.is_dir():
        raise RegressionInputError(f"{path}: no such baseline folder; {hint}")
    environment = _read_json(path / BASELINE_ENVIRONMENT, hint)
    fmt = environment.get("format")
    if fmt != BASELINE_FORMAT:
        raise RegressionInputError(
            f"{path / BASELINE_ENVIRONMENT}: baseline format {fmt!r}, this mqbench reads {BASELINE_FORMAT}; "
            "re-create it with 'mqbench baseline'"
        )
    summary_path = path / BASELINE_SUMMARY
    if not summary_path.is_file():
        raise RegressionInputError(f"{summary_path}: missing; {hint}")
    try:
        # round_trip: pandas' default float parser reads about one value in four a bit off its written
        # repr, so a run compared with its own baseline would show -0.0 % or +0.0 % by chance.
        summary = pd.read_csv(summary_path, dtype=_TEXT_COLUMNS, keep_default_na=False, na_values=[""],
                              float_precision="round_trip")
    except (OSError, ValueError) as exc:
        raise RegressionInputError(f"{summary_path}: not a readable CSV file ({exc}); {hint}") from None
    return Baseline(path=path, summary=summary, environment=environment)


def baseline_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``summary`` a baseline keeps (those present), rows in a stable order."""
    keep = [c for c in (*SUMMARY_INPUT_COLUMNS, "label") if c in summary.columns]
    order = [c for c in ("scenario", "system", "variant", "size", "rate", "repetition") if c in keep]
    return summary[keep].sort_values(order, kind="mergesort", na_position="first").reset_index(drop=True)


def environment(run: RunData, reference: str, created: str) -> dict[str, Any]:
    """What ``baseline.json`` records about the run a baseline comes from."""
    m = run.manifest
    return {
        "format": BASELINE_FORMAT,
        "created": created,
        "run_id": run.run_id,
        "runs": list(m.get("pooled_runs") or [run.run_id]),
        "reference": reference,
        "git_revision": m.get("git_revision", ""),
        "host": m.get("host", {}),
        "systems": m.get("systems", {}),
        "scenarios": m.get("scenarios", []),
    }


def write_baseline(
    out: Path, summary: pd.DataFrame, ratios: pd.DataFrame, env: Mapping[str, Any]
) -> list[Path]:
    """Write a baseline folder (each file through a temporary name and a rename); return the paths.

    The environment file is written last: a first baseline interrupted midway has none and is rejected
    by :func:`read_baseline`.
    """
    out.mkdir(parents=True, exist_ok=True)
    files = (
        (out / BASELINE_SUMMARY, baseline_rows(summary).to_csv(index=False)),
        (out / BASELINE_RATIOS, ratios.to_csv(index=False)),
        (out / BASELINE_ENVIRONMENT, json.dumps(dict(env), indent=2, sort_keys=True, default=str) + "\n"),
    )
    for path, text in files:
        atomic_write(path, text.encode("utf-8"))
    return [path for path, _ in files]
