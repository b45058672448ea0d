"""``RunFolder``: the one type that creates, writes, opens and reads ``results/<run-id>/``.

Layout (names in :mod:`harness.runfolder.schema`): ``manifest.json``; ``raw/<case>.parquet`` (RAW_SCHEMA);
the runner's events ``faults.parquet``, ``send_errors.parquet``, ``timeseries/<case>.parquet``; the
pipeline's tables ``summary``/``aggregate``/``series``/``distribution`` (+ ``recovery`` when a case had
faults), each ``.parquet`` + ``.csv``; the report's ``report.html``, ``summary.md``, ``figures/*.png``,
``feature_matrix.csv``; ``logs/`` of provisioned brokers. Every file is written under a temporary name and
renamed. The manifest is written first with ``complete: false`` and rewritten at the end, so an interrupted
run stays marked incomplete. Secrets in URLs are redacted in the manifest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.runfolder import schema
from harness.runfolder._host import git_revision, host_info, new_run_id, version
from harness.runfolder._io import atomic_write, redact, write_frame


class RunFolderError(Exception):
    """A run folder that cannot be used (missing, no raw data, unreadable manifest); one clear sentence."""


@dataclass(frozen=True)
class RunInfo:
    """What the summary, the report and the regression check need from one run's ``manifest.json``."""

    path: Path
    run_id: str
    complete: bool
    started: str = ""
    finished: str = ""
    scenarios: tuple[Mapping[str, Any], ...] = ()
    systems: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    host: Mapping[str, Any] = field(default_factory=dict)
    git_revision: str = ""
    has_manifest: bool = True
    cases: tuple[Mapping[str, Any], ...] = ()

    def case_complete(self, scenario: str, system: str, variant: str, size: int, rate: float | None,
                      repetition: int) -> bool:
        """Whether one case ran to its end (the manifest's ``cases``); the run's state when not recorded."""
        want = (scenario, system, variant, int(size), None if rate is None or rate != rate else float(rate),
                int(repetition))
        for c in self.cases:
            got = (c.get("scenario"), c.get("system"), c.get("variant"), c.get("size"),
                   None if c.get("rate") is None else float(c["rate"]), c.get("repetition"))
            if got == want:
                return bool(c.get("complete"))
        return self.complete

    def describe(self, system: str, variant: str) -> dict[str, str]:
        """``VARIANT_LABELS`` of one variant. Runs recorded before labels were per variant fall back to the
        system's entry (whose guarantee was the first variant's)."""
        own = self.variants.get(f"{system}/{variant}") or {}
        sys_info = self.systems.get(system, {})
        out = {}
        for key in schema.VARIANT_LABELS:
            value = own.get(key) or sys_info.get(key) or (system if key == "label" else "")
            out[key] = str(value)
        return out

    def label(self, system: str) -> str:
        """Display name of ``system`` (e.g. ``"kafka (tansu)"``); the system name if none is given."""
        return str(self.systems.get(system, {}).get("label") or system)

    def versions(self, system: str) -> str:
        """``"pyzmq 26.2.0, libzmq 4.3.5"``: the versions the manifest records for ``system``."""
        versions = self.systems.get(system, {}).get("versions") or {}
        return ", ".join(f"{name} {v}" for name, v in versions.items())

    @property
    def clock(self) -> str:
        return str(self.host.get("clock") or "CLOCK_MONOTONIC (time.monotonic_ns)")

    @property
    def clock_resolution_ns(self) -> float:
        value = self.host.get("clock_resolution_ns")
        return float(value) if value is not None else float("nan")


class RunFolder:
    """One run folder. :meth:`create` starts a new run (the runner); :meth:`open` reads an existing one."""

    def __init__(self, path: Path, manifest: dict[str, Any], has_manifest: bool = True) -> None:
        self.path = path
        self.manifest = manifest
        self.has_manifest = has_manifest

    # -- creating and the manifest -------------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, label: str, tool: Mapping[str, Any] | None = None) -> RunFolder:
        """A new ``root/<run-id>/`` with ``raw/`` and a first manifest marked incomplete."""
        run_id = new_run_id(label)
        path = root / run_id
        (path / schema.RAW_DIR).mkdir(parents=True, exist_ok=False)
        manifest: dict[str, Any] = {
            "run_id": run_id,
            "complete": False,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "finished": None,
            "scenarios": [],
            "systems": {},
            "variants": {},
            "host": host_info(),
            "git_revision": git_revision(Path(__file__).resolve().parent),
            "tool": {"mqbench": version("mqbench"), "numpy": version("numpy"), "pyarrow": version("pyarrow"),
                     **(tool or {})},
            "problems": [],
            "cases": [],
        }
        run = cls(path, manifest)
        run.write_manifest()
        return run

    @classmethod
    def open(cls, path: Path | str) -> RunFolder:
        """An existing run folder. A missing manifest is tolerated (the run then reads as incomplete and
        unlabelled); a path that is not a folder or an unreadable manifest raise :class:`RunFolderError`."""
        path = Path(path)
        if not path.is_dir():
            raise RunFolderError(f"{path}: no such run folder; pass a folder under results/ that holds raw/*.parquet")
        manifest_path = path / schema.MANIFEST
        if not manifest_path.is_file():
            return cls(path, {"run_id": path.name, "complete": False}, has_manifest=False)
        return cls(path, read_json(manifest_path, "re-run or repair the manifest"))

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def logs_dir(self) -> Path:
        return self.path / schema.LOGS_DIR

    @property
    def work_dir(self) -> Path:
        """Scratch space of the runner's workers; removed when the run finishes."""
        return self.path / schema.WORK_DIR

    def info(self) -> RunInfo:
        m = self.manifest
        return RunInfo(
            path=self.path,
            run_id=self.run_id,
            complete=bool(m.get("complete", False)),
            started=str(m.get("started") or ""),
            finished=str(m.get("finished") or ""),
            scenarios=tuple(m.get("scenarios") or ()),
            systems=dict(m.get("systems") or {}),
            variants=dict(m.get("variants") or {}),
            host=dict(m.get("host") or {}),
            git_revision=str(m.get("git_revision") or ""),
            has_manifest=self.has_manifest,
            cases=tuple(m.get("cases") or ()),
        )

    def write_manifest(self) -> None:
        text = redact(json.dumps(self.manifest, indent=2, default=str))
        atomic_write(self.path / schema.MANIFEST, text.encode())

    def finish(self, complete: bool, problems: Iterable[str] = ()) -> None:
        self.manifest["complete"] = complete
        self.manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.manifest["problems"] = [*self.manifest.get("problems", []), *problems]
        self.write_manifest()

    # -- raw records ---------------------------------------------------------------------------------

    @staticmethod
    def raw_name(scenario: str, system: str, variant: str, size: int, rate: float | None, rep: int) -> str:
        r = "max" if rate is None else f"{rate:g}"
        return f"{scenario}__{system}__{variant}__{size}B__rate-{r}__rep{rep}.parquet"

    def write_raw(self, name: str, rows: pd.DataFrame, send_errors: pd.DataFrame | None = None) -> Path:
        """``raw/<name>`` in RAW_SCHEMA; rows of a message in ``send_errors`` (producer, seq) get
        ``send_failed``."""
        rows = rows.copy()
        failed = pd.Series(False, index=rows.index)
        if send_errors is not None and len(send_errors):
            told = pd.MultiIndex.from_frame(send_errors[["producer", "seq"]].astype("int64"))
            failed = pd.Series(pd.MultiIndex.from_frame(rows[["producer", "seq"]].astype("int64")).isin(told),
                               index=rows.index)
        rows["send_failed"] = failed
        table = pa.Table.from_pandas(rows, schema=schema.RAW_SCHEMA, preserve_index=False)
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer, compression="zstd")
        return atomic_write(self.path / schema.RAW_DIR / name, buffer.getvalue().to_pybytes())

    def raw_files(self) -> list[Path]:
        """The run's raw Parquet files, sorted; :class:`RunFolderError` if there are none."""
        raw = self.path / schema.RAW_DIR
        if not raw.is_dir():
            raise RunFolderError(f"{raw}: no raw folder; this run recorded no messages (was it interrupted at start?)")
        files = sorted(p for p in raw.glob("*.parquet") if not p.name.startswith("."))
        if not files:
            raise RunFolderError(f"{raw}: no raw Parquet files; this run recorded no messages")
        return files

    def read_raw(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """One case's raw rows (``name`` as written by :meth:`write_raw`, with or without ``.parquet``)."""
        path = self.path / schema.RAW_DIR / (name if name.endswith(".parquet") else f"{name}.parquet")
        return read_raw_table([path], columns).to_pandas()

    # -- tables --------------------------------------------------------------------------------------

    def write_table(self, name: str, frame: pd.DataFrame, csv: bool = False) -> Path:
        """``<name>.parquet`` (``name`` may hold a folder: ``timeseries/<case>``), + ``.csv`` when ``csv``."""
        return write_frame(frame, self.path / f"{name}.parquet", csv=csv)[0]

    def read_table(self, name: str) -> pd.DataFrame:
        """``<name>.parquet``, or an empty frame when the run has none."""
        path = self.path / f"{name}.parquet"
        return pd.read_parquet(path) if path.is_file() else pd.DataFrame()

    def read_timeseries(self) -> pd.DataFrame:
        """Every ``timeseries/*.parquet`` of the run, concatenated (empty when none)."""
        files = sorted((self.path / schema.TIMESERIES_DIR).glob("*.parquet"))
        frames = [pd.read_parquet(p) for p in files if not p.name.startswith(".")]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def write_summary(self, tables: Mapping[str, pd.DataFrame], engine: str) -> list[Path]:
        """The pipeline's tables (``SUMMARY_TABLES`` and ``recovery``), each ``.parquet`` + ``.csv``."""
        written: list[Path] = []
        for name, frame in tables.items():
            written += write_frame(frame, self.path / f"{name}.parquet", csv=True)
        self.manifest["summary"] = {"engine": engine, "tables": list(tables)}
        if self.has_manifest:
            self.write_manifest()
        return written

    def has_summary(self, tables: Sequence[str] = schema.SUMMARY_TABLES) -> bool:
        return all((self.path / f"{name}.parquet").is_file() for name in tables)

    def read_summary(self, tables: Sequence[str] = schema.SUMMARY_TABLES) -> dict[str, pd.DataFrame]:
        """The pipeline's ``tables`` as written by :meth:`write_summary`, ``recovery`` and ``search`` (empty
        when none).

        ``tables=("summary",)`` reads the per-repetition summary alone (the regression check)."""
        missing = [name for name in tables if not (self.path / f"{name}.parquet").is_file()]
        if missing:
            raise RunFolderError(
                f"{self.path / missing[0]}.parquet: missing; run `mqbench report {self.path}` to compute the summary"
            )
        read = {name: pd.read_parquet(self.path / f"{name}.parquet") for name in tables}
        return {**read, **{name: self.read_table(name) for name in (schema.RECOVERY, schema.SEARCH)}}

    @property
    def summary_engine(self) -> str:
        return str((self.manifest.get("summary") or {}).get("engine") or "pandas")

    def write_file(self, relpath: str, data: bytes) -> Path:
        """A report file (``report.html``, ``summary.md``, ``figures/<name>.png``...), atomically."""
        return atomic_write(self.path / relpath, data)


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object file of a run or baseline folder; :class:`RunFolderError` ending in ``what`` (what to
    do) when it is missing, unreadable or not an object."""
    if not path.is_file():
        raise RunFolderError(f"{path}: missing; {what}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFolderError(f"{path}: not readable JSON ({exc}); {what}") from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{path}: expected a JSON object; {what}")
    return data


def read_raw_table(files: Sequence[Path | str], columns: Sequence[str] | None = None) -> pa.Table:
    """Raw rows of ``files`` in RAW_SCHEMA (a column a file predates is null), as one Arrow table."""
    names = list(columns or schema.RAW_SCHEMA.names)
    target = pa.schema([schema.RAW_SCHEMA.field(n) for n in names])
    tables = []
    for f in files:
        table = pq.read_table(f)
        cols = [table[n] if n in table.column_names else pa.nulls(len(table), target.field(n).type) for n in names]
        tables.append(pa.Table.from_arrays(cols, names=names).cast(target))
    return pa.concat_tables(tables) if tables else target.empty_table()


def first_raw_row(file: Path | str, columns: Sequence[str]) -> dict[str, Any]:
    """The first row of a raw file (``columns`` only; read from its first row group), or ``{}`` when the
    file has no rows."""
    parquet = pq.ParquetFile(file)
    for index in range(parquet.num_row_groups):
        group = parquet.read_row_group(index, columns=list(columns))
        if len(group):
            return dict(group.slice(0, 1).to_pylist()[0])
    return {}


def count_raw_rows(files: Iterable[Path | str]) -> int:
    """Total rows in ``files``, read from Parquet footers only (cheap)."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def newest_run(results: Path) -> Path:
    """The most recently modified run folder under ``results`` (one with ``raw/``), for notebooks."""
    candidates = (
        [p for p in results.iterdir() if p.is_dir() and p.name != "baseline" and (p / schema.RAW_DIR).is_dir()]
        if results.is_dir()
        else []
    )
    if not candidates:
        raise RunFolderError(f"{results}: no run folders with raw/ data; run `make compare` first")
    return max(candidates, key=lambda p: p.stat().st_mtime)

