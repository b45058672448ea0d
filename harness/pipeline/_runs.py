"""Run folders: locating raw Parquet files and reading what the manifest says about a run.

A run folder is ``results/<run-id>/`` with ``manifest.json`` and ``raw/*.parquet`` (see DESIGN.md,
"Results"). A missing manifest is tolerated (the run is then treated as incomplete and unlabelled); a
missing or empty ``raw/`` folder is an error the user can act on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


class PipelineError(Exception):
    """A problem a user can fix (bad path, no raw data, no Java); the message is one clear sentence."""


@dataclass(frozen=True)
class RunInfo:
    """What the report and the summary need from one run's ``manifest.json``."""

    path: Path
    run_id: str
    complete: bool
    started: str = ""
    finished: str = ""
    scenarios: tuple[Mapping[str, Any], ...] = ()
    systems: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    host: Mapping[str, Any] = field(default_factory=dict)
    git_revision: str = ""
    has_manifest: bool = True

    def _entry(self, system: str, variant: str) -> Mapping[str, Any]:
        """What the manifest records for ``variant`` of ``system`` (per variant when it says), else per system."""
        entry = self.systems.get(system, {})
        return entry.get("variants", {}).get(variant) or entry

    def label(self, system: str, variant: str = "") -> str:
        """Display name of ``system`` (e.g. ``"kafka (tansu)"``, ``"rabbitmq (java)"``); the system name if
        none is given."""
        return str(self._entry(system, variant).get("label") or system)

    def guarantee(self, system: str, variant: str = "") -> str:
        return str(self._entry(system, variant).get("guarantee") or "")

    def versions(self, system: str) -> str:
        """``"pyzmq 26.2.0, libzmq 4.3.5"``: the versions the manifest records for ``system``."""
        versions = self.systems.get(system, {}).get("versions") or {}
        return ", ".join(f"{name} {version}" for name, version in versions.items())

    @property
    def clock(self) -> str:
        return str(self.host.get("clock") or "CLOCK_MONOTONIC (time.monotonic_ns)")

    @property
    def clock_resolution_ns(self) -> float:
        value = self.host.get("clock_resolution_ns")
        return float(value) if value is not None else float("nan")


def read_run(path: Path) -> RunInfo:
    """Read ``path/manifest.json``; raise :class:`PipelineError` if ``path`` is not a folder."""
    if not path.is_dir():
        raise PipelineError(
            f"{path}: no such run folder; pass a folder under results/ that holds raw/*.parquet"
        )
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file():
        return RunInfo(path=path, run_id=path.name, complete=False, has_manifest=False)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PipelineError(
            f"{manifest_path}: not readable JSON ({exc}); re-run or repair the manifest"
        ) from exc
    return RunInfo(
        path=path,
        run_id=str(manifest.get("run_id") or path.name),
        complete=bool(manifest.get("complete", False)),
        started=str(manifest.get("started") or ""),
        finished=str(manifest.get("finished") or ""),
        scenarios=tuple(manifest.get("scenarios") or ()),
        systems=dict(manifest.get("systems") or {}),
        host=dict(manifest.get("host") or {}),
        git_revision=str(manifest.get("git_revision") or ""),
    )


def raw_files(run: RunInfo) -> list[Path]:
    """The run's raw Parquet files, sorted; :class:`PipelineError` if there are none."""
    raw = run.path / "raw"
    if not raw.is_dir():
        raise PipelineError(
            f"{raw}: no raw folder; this run recorded no messages (was it interrupted at start?)"
        )
    files = sorted(p for p in raw.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise PipelineError(f"{raw}: no raw Parquet files; this run recorded no messages")
    return files


def count_rows(files: Iterable[Path]) -> int:
    """Total rows in ``files``, read from Parquet footers only (cheap)."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def newest_run(results: Path) -> Path:
    """The most recently modified run folder under ``results`` (one with ``raw/``), for notebooks."""
    candidates = (
        [p for p in results.iterdir() if p.is_dir() and p.name != "baseline" and (p / "raw").is_dir()]
        if results.is_dir()
        else []
    )
    if not candidates:
        raise PipelineError(f"{results}: no run folders with raw/ data; run `make compare` first")
    return max(candidates, key=lambda p: p.stat().st_mtime)
