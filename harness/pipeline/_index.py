"""Runs into the results lake (``harness.runfolder.Lake``): after each summary, and for a whole ``results/``.

``compare`` (through :func:`harness.pipeline.summarise_run`) adds every run it summarises; a ``results/``
folder from before the lake, or runs copied in from elsewhere, are indexed by :func:`index_results`, which
summarises a run that has no summary yet (with the session's engine) before adding it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.pipeline._errors import PipelineError
from harness.runfolder import Lake, RunFolder, RunFolderError
from harness.runfolder.schema import LAKE_DIR, MANIFEST, RAW_DIR


def lake_for(results: Path) -> Lake:
    """The lake of the runs under ``results`` (``results/lake``)."""
    return Lake(results / LAKE_DIR)


def add_run(run_dir: Path, lake: Lake | None = None) -> Lake:
    """Add the run at ``run_dir`` (summarised already) to ``lake`` (default: its results folder's)."""
    lake = lake or lake_for(run_dir.parent)
    try:
        lake.add_run(RunFolder.open(run_dir))
    except RunFolderError as exc:
        raise PipelineError(str(exc)) from None
    return lake


def run_folders(results: Path) -> list[Path]:
    """The run folders under ``results`` (each with a manifest and raw records), oldest name first."""
    if not results.is_dir():
        raise PipelineError(f"{results}: no such folder; give the folder that holds the run folders (results/)")
    return sorted(p for p in results.iterdir()
                  if p.is_dir() and p.name not in ("baseline", LAKE_DIR) and (p / MANIFEST).is_file()
                  and (p / RAW_DIR).is_dir())


def index_results(results: Path, summarise: Callable[[Path], object], lake: Lake | None = None,
                  progress: Callable[[str], None] | None = None) -> tuple[Lake, list[str], list[str]]:
    """Add every run under ``results`` that the lake lacks; ``summarise(run_dir)`` computes and stores a
    run's summary when it has none. Returns the lake, the run ids added and one line per run left out (a
    run that recorded nothing)."""
    lake = lake or lake_for(results)
    known = lake.run_ids()
    added, skipped = [], []
    for path in run_folders(results):
        run = RunFolder.open(path)
        if run.run_id in known:
            continue
        try:
            if not run.has_summary():
                summarise(path)
                run = RunFolder.open(path)
            lake.add_run(run)
        except (PipelineError, RunFolderError) as exc:
            skipped.append(f"{path.name}: {exc}")
            continue
        added.append(run.run_id)
        if progress is not None:
            progress(run.run_id)
    return lake, added, skipped
