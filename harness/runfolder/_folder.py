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

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.runfolder import schema
from harness.runfolder._case import CaseKey
from harness.runfolder._host import git_revision, host_info, new_run_id, version
from harness.runfolder._io import atomic_write, parquet_bytes, redact, write_frame
from harness.runfolder._store import Store, StoreError, is_uri, local_path


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

    def case_complete(self, key: CaseKey) -> bool:
        """Whether one case ran to its end (the manifest's ``cases``); the run's state when not recorded."""
        for c in self.cases:
            if CaseKey.of(c) == key:
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
    """One run folder. :meth:`create` starts a new run (the runner); :meth:`open` reads an existing one.

    A run folder is local (``path``) or on shared storage named by a URI (``store``; then ``path`` is the
    storage's own path, for display and the run id): tables, raw files, the manifest and report files work
    on both; ``logs_dir``, ``work_dir`` and the runner's scratch files are local only."""

    def __init__(self, path: Path, manifest: dict[str, Any], has_manifest: bool = True,
                 store: Store | None = None) -> None:
        self.path = path
        self.manifest = manifest
        self.has_manifest = has_manifest
        self.store = store

    @property
    def location(self) -> str:
        """Where the run is: its local path or its URI."""
        return self.store.uri if self.store else str(self.path)

    # -- the one place that touches files: a local path or the store ----------------------------------

    def _is_file(self, relpath: str) -> bool:
        return self.store.is_file(relpath) if self.store else (self.path / relpath).is_file()

    def _read(self, relpath: str) -> bytes:
        return self.store.read_bytes(relpath) if self.store else (self.path / relpath).read_bytes()

    def _write(self, relpath: str, data: bytes) -> Path:
        if self.store:
            self.store.write_bytes(relpath, data)
            return self.path / relpath
        return atomic_write(self.path / relpath, data)

    def _names(self, folder: str, suffix: str) -> list[str]:
        if self.store:
            return self.store.names(folder, suffix)
        local = self.path / folder
        return sorted(p.name for p in local.glob(f"*{suffix}") if not p.name.startswith(".")) if local.is_dir() else []

    def _file(self, relpath: str) -> Path | str:
        """What a reader (pyarrow, a Spark task on any host) opens for ``relpath``: a path or a URI."""
        return self.store.url(relpath) if self.store else self.path / relpath

    def _frame(self, relpath: str) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(self._read(relpath)) if self.store else self.path / relpath)

    # -- creating and the manifest -------------------------------------------------------------------

    @classmethod
    def create(cls, root: Path | str, label: str, tool: Mapping[str, Any] | None = None) -> RunFolder:
        """A new ``root/<run-id>/`` with ``raw/`` and a first manifest marked incomplete (``root``: a path,
        ``file://`` or another URI, see :mod:`harness.runfolder._store`)."""
        run_id = new_run_id(label)
        store = _store(root)
        if store:
            store = store.child(run_id)
            store.make_dir(schema.RAW_DIR)
            path = Path(store.root)
        else:
            path = local_path(root) / run_id
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
        run = cls(path, manifest, store=store)
        run.write_manifest()
        return run

    @classmethod
    def open(cls, location: Path | str) -> RunFolder:
        """An existing run folder (a path, ``file://`` or another URI). A missing manifest is tolerated (the
        run then reads as incomplete and unlabelled); a location that is not a folder or an unreadable
        manifest raise :class:`RunFolderError`."""
        store = _store(location)
        path = Path(store.root) if store else local_path(location)
        if not (store.is_dir() if store else path.is_dir()):
            raise RunFolderError(f"{location}: no such run folder; pass a folder under results/ that holds raw/*.parquet")
        run = cls(path, {"run_id": path.name, "complete": False}, has_manifest=False, store=store)
        if run._is_file(schema.MANIFEST):
            run.manifest = _parse_json(run._read(schema.MANIFEST), f"{run.location}/{schema.MANIFEST}",
                                       "re-run or repair the manifest")
            run.has_manifest = True
        return run

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
        self._write(schema.MANIFEST, text.encode())

    def finish(self, complete: bool, problems: Iterable[str] = ()) -> None:
        self.manifest["complete"] = complete
        self.manifest["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.manifest["problems"] = [*self.manifest.get("problems", []), *problems]
        self.write_manifest()

    # -- raw records ---------------------------------------------------------------------------------

    def write_raw(self, name: str, rows: pd.DataFrame, send_errors: pd.DataFrame | None = None,
                  drained: pd.DataFrame | None = None, acks_tracked: bool = False) -> Path:
        """``raw/<name>`` in RAW_SCHEMA (and ``KEY_FIELD`` when ``rows`` have it); rows of a message in
        ``send_errors`` (producer, seq) get ``send_failed``; with ``acks_tracked`` (the producers were told
        each send's outcome) a row whose send got neither an acknowledgement nor a refusal is ``unconfirmed``;
        a row that never arrived but whose message the final read found (``drained``: producer, seq,
        consumer) is ``drained``."""
        rows = rows.copy()
        keys = pd.MultiIndex.from_frame(rows[["producer", "seq"]].astype("int64"))
        failed = np.zeros(len(rows), dtype=bool)
        if send_errors is not None and len(send_errors):
            failed = keys.isin(pd.MultiIndex.from_frame(send_errors[["producer", "seq"]].astype("int64")))
        rows["send_failed"] = failed
        rows["unconfirmed"] = (acks_tracked & rows["t_ack"].isna().to_numpy() & ~failed
                               & rows["t_send"].notna().to_numpy())
        held = np.zeros(len(rows), dtype=bool)
        if drained is not None and len(drained):
            pubsub = len(rows) and str(rows["pattern"].iloc[0]) == "pubsub"
            cols = ["producer", "seq", "consumer"] if pubsub else ["producer", "seq"]
            found = pd.MultiIndex.from_frame(drained[cols].astype("int64"))
            held = pd.MultiIndex.from_frame(rows[cols].astype("int64")).isin(found) & rows["t_recv"].isna().to_numpy()
        rows["drained"] = held
        for column in schema.HOST_COLUMNS:  # filled only on a Spark cluster: names, or None
            rows[column] = rows[column].astype(object) if column in rows else None
        table = pa.Table.from_pandas(rows, schema=schema.RAW_SCHEMA, preserve_index=False)
        key = schema.KEY_FIELD
        if key.name in rows:  # a keyed run's
            table = table.append_column(key, pa.array(rows[key.name], key.type))
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer, compression="zstd")
        return self._write(f"{schema.RAW_DIR}/{name}", buffer.getvalue().to_pybytes())

    def raw_files(self) -> list[Path | str]:
        """The run's raw Parquet files, sorted (URIs for a run on shared storage); :class:`RunFolderError`
        if there are none."""
        raw = f"{self.location}/{schema.RAW_DIR}"
        if not (self.store.is_dir(schema.RAW_DIR) if self.store else (self.path / schema.RAW_DIR).is_dir()):
            raise RunFolderError(f"{raw}: no raw folder; this run recorded no messages (was it interrupted at start?)")
        files = [self._file(f"{schema.RAW_DIR}/{name}") for name in self._names(schema.RAW_DIR, ".parquet")]
        if not files:
            raise RunFolderError(f"{raw}: no raw Parquet files; this run recorded no messages")
        return files

    def read_raw(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """One case's raw rows (``name`` as written by :meth:`write_raw`, with or without ``.parquet``)."""
        path = self._file(f"{schema.RAW_DIR}/{name if name.endswith('.parquet') else f'{name}.parquet'}")
        return read_raw_table([path], columns).to_pandas()

    # -- tables --------------------------------------------------------------------------------------

    def write_table(self, name: str, frame: pd.DataFrame, csv: bool = False) -> Path:
        """``<name>.parquet`` (``name`` may hold a folder: ``timeseries/<case>``), + ``.csv`` when ``csv``."""
        if self.store is None:
            return write_frame(frame, self.path / f"{name}.parquet", csv=csv)[0]
        if csv:
            self._write(f"{name}.csv", frame.to_csv(index=False).encode("utf-8"))
        return self._write(f"{name}.parquet", parquet_bytes(frame))

    def read_table(self, name: str) -> pd.DataFrame:
        """``<name>.parquet``, or an empty frame when the run has none."""
        relpath = f"{name}.parquet"
        return self._frame(relpath) if self._is_file(relpath) else pd.DataFrame()

    def read_timeseries(self) -> pd.DataFrame:
        """Every ``timeseries/*.parquet`` of the run, concatenated (empty when none)."""
        names = self._names(schema.TIMESERIES_DIR, ".parquet")
        frames = [self._frame(f"{schema.TIMESERIES_DIR}/{n}") for n in names]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def write_summary(self, tables: Mapping[str, pd.DataFrame], engine: str) -> list[Path]:
        """The pipeline's tables (``SUMMARY_TABLES`` and ``recovery``), each ``.parquet`` + ``.csv``."""
        written: list[Path] = []
        for name, frame in tables.items():
            written += [self.write_table(name, frame, csv=True), self.path / f"{name}.csv"]
        self.manifest["summary"] = {"engine": engine, "tables": list(tables)}
        if self.has_manifest:
            self.write_manifest()
        return written

    def has_summary(self, tables: Sequence[str] = schema.SUMMARY_TABLES) -> bool:
        return all(self._is_file(f"{name}.parquet") for name in tables)

    def read_summary(self, tables: Sequence[str] = schema.SUMMARY_TABLES) -> dict[str, pd.DataFrame]:
        """The pipeline's ``tables`` as written by :meth:`write_summary`, ``recovery`` and ``search`` (empty
        when none).

        ``tables=("summary",)`` reads the per-repetition summary alone (the regression check)."""
        missing = [name for name in tables if not self._is_file(f"{name}.parquet")]
        if missing:
            raise RunFolderError(
                f"{self.location}/{missing[0]}.parquet: missing; run `mqbench report {self.location}` to compute "
                "the summary"
            )
        read = {name: self._frame(f"{name}.parquet") for name in tables}
        optional = (schema.RECOVERY, schema.SEARCH, *schema.WORKLOAD_TABLES)
        return {**read, **{name: self.read_table(name) for name in optional}}

    @property
    def summary_engine(self) -> str:
        return str((self.manifest.get("summary") or {}).get("engine") or "pandas")

    def write_file(self, relpath: str, data: bytes) -> Path:
        """A report file (``report.html``, ``summary.md``, ``figures/<name>.png``...), atomically."""
        return self._write(relpath, data)


def _store(location: Path | str) -> Store | None:
    """The store of a URI location, ``None`` for a local one; :class:`RunFolderError` when unusable."""
    if not is_uri(location):
        return None
    try:
        return Store(str(location))
    except StoreError as exc:
        raise RunFolderError(str(exc)) from None


def _parse_json(data: bytes, name: str, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise RunFolderError(f"{name}: not readable JSON ({exc}); {what}") from None
    if not isinstance(parsed, dict):
        raise RunFolderError(f"{name}: expected a JSON object; {what}")
    return parsed


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object file of a run or baseline folder; :class:`RunFolderError` ending in ``what`` (what to
    do) when it is missing, unreadable or not an object."""
    if not path.is_file():
        raise RunFolderError(f"{path}: missing; {what}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RunFolderError(f"{path}: not readable JSON ({exc}); {what}") from None
    return _parse_json(data, str(path), what)


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
        [p for p in results.iterdir()
         if p.is_dir() and p.name not in ("baseline", schema.LAKE_DIR) and (p / schema.RAW_DIR).is_dir()]
        if results.is_dir()
        else []
    )
    if not candidates:
        raise RunFolderError(f"{results}: no run folders with raw/ data; run `make compare` first")
    return max(candidates, key=lambda p: p.stat().st_mtime)

