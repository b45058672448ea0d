"""The results folder of one run: ``results/<run-id>/``.

Every file is written to a temporary name in the same folder and renamed, so an interrupted run never
leaves a half-written file. The manifest is written first with ``complete: false`` and rewritten at the end;
a run that was interrupted or had a stalled case stays marked incomplete.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.metrics.records import RAW_SCHEMA, SUMMARY_COLUMNS
from harness.runner.worker import HOT_LOOPS

_SECRET = re.compile(r"(://[^:/@\s]+:)([^@\s]+)(@)")


def redact(text: str) -> str:
    """Hide passwords in URLs: ``amqp://user:secret@host`` -> ``amqp://user:***@host``."""
    return _SECRET.sub(r"\1***\3", text)


def new_run_id(label: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label)[:40]
    return f"{stamp}-{safe}"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def host_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    clock = time.get_clock_info("monotonic")
    clocksource = ""
    try:
        clocksource = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "clock": f"CLOCK_MONOTONIC via time.monotonic_ns ({clock.implementation}); clock_gettime in the C loops",
        "clock_resolution_ns": int(clock.resolution * 1e9) or 1,
        "clocksource": clocksource,
    }


def git_revision(cwd: Path | None = None) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True,
            timeout=5,
        ).stdout.strip()
        return f"{out}{'-dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class RunFolder:
    """Writes one run's manifest, raw Parquet files and summary."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.run_id = run_id
        self.path = root / run_id
        self.raw = self.path / "raw"
        self.raw.mkdir(parents=True, exist_ok=False)
        self.manifest: dict[str, Any] = {
            "run_id": run_id,
            "complete": False,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "finished": None,
            "scenarios": [],
            "systems": {},
            "host": host_info(),
            "git_revision": git_revision(Path(__file__).resolve().parent),
            "tool": {"mqbench": _version("mqbench"), "numpy": _version("numpy"), "pyarrow": _version("pyarrow"),
                     "hot_loops": HOT_LOOPS},
            "problems": [],
            "cases": [],
        }
        self.summary_rows: list[dict[str, Any]] = []
        self.write_manifest()

    def write_manifest(self) -> None:
        text = redact(json.dumps(self.manifest, indent=2, default=str))
        atomic_write_bytes(self.path / "manifest.json", text.encode())

    def raw_name(self, scenario: str, system: str, variant: str, size: int, rate: float | None, rep: int) -> str:
        r = "max" if rate is None else f"{rate:g}"
        return f"{scenario}__{system}__{variant}__{size}B__rate-{r}__rep{rep}.parquet"

    def write_raw(self, name: str, rows: pd.DataFrame) -> Path:
        table = pa.Table.from_pandas(rows, schema=RAW_SCHEMA, preserve_index=False)
        path = self.raw / name
        tmp = path.with_name(f".{name}.tmp")
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
        return path

    def write_table(self, relpath: str, frame: pd.DataFrame, csv: bool = False) -> Path:
        """Write ``frame`` as ``<run>/<relpath>`` (Parquet; also ``.csv`` beside it when ``csv``), atomically."""
        path = self.path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
        if csv:
            atomic_write_bytes(path.with_suffix(".csv"), frame.to_csv(index=False).encode())
        return path

    def add_summary(self, row: dict[str, Any]) -> None:
        self.summary_rows.append(row)
        self.write_summary()

    def write_summary(self) -> None:
        df = summary_frame(self.summary_rows)
        tmp = self.path / ".summary.parquet.tmp"
        df.to_parquet(tmp, index=False)
        os.replace(tmp, self.path / "summary.parquet")
        atomic_write_bytes(self.path / "summary.csv", df.to_csv(index=False).encode())

    def finish(self, complete: bool, problems: Iterable[str] = ()) -> None:
        self.manifest["complete"] = complete
        self.manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.manifest["problems"] = [*self.manifest["problems"], *problems]
        self.write_manifest()


def summary_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for col in SUMMARY_COLUMNS:
        if col not in df.columns:
            df[col] = pd.NA
    return df[list(SUMMARY_COLUMNS)]


def _version(pkg: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "unknown"
