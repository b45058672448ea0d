"""The results lake: every run's raw records and summary tables in one partitioned Parquet dataset.

Layout (``results/lake/`` beside the run folders; :data:`harness.runfolder.schema.LAKE_TABLES`)::

    lake/<table>/date=<YYYY-MM-DD>/<run-id>[__<case>].parquet

``<table>`` is ``raw`` (RAW_SCHEMA, one file per case and repetition, as in the run folder), ``runs`` (one
row per run: when, which commit, which host, complete or not, which engine; :data:`LAKE_RUN_COLUMNS`)
or one of the summary tables (``summary``, ``aggregate``, ``series``, ``distribution``, ``recovery``,
``search``), one file per run. ``date`` is the day the run started (UTC): the one partition column, in
the path only (Hive style), so Spark (``spark.read.parquet("results/lake/summary")``), pandas
(``pd.read_parquet``) and DuckDB (``read_parquet('results/lake/summary/*/*.parquet', hive_partitioning =
true)``) all read a table with ``date`` as a column; ``run_id``, ``system`` and ``scenario`` are columns of
the files and each file holds one run, so a filter on them skips whole files by their Parquet statistics.

A run is added whole and again whole (its files are replaced, so adding is idempotent); the ``runs`` file
is written last, so a run is in the lake once its ``runs`` row is. Every file is written atomically.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from harness.runfolder import schema
from harness.runfolder._folder import RunFolder, RunFolderError, read_raw_table
from harness.runfolder._io import atomic_write, parquet_bytes


class Lake:
    """The lake at ``root`` (a local folder). :meth:`add` writes one run's tables, :meth:`read` reads a
    table of every run (or of some), :meth:`table_path` is what Spark or DuckDB open."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def table_path(self, table: str) -> Path:
        return self.root / table

    def run_ids(self) -> set[str]:
        """The runs in the lake (those whose ``runs`` row is written)."""
        folder = self.root / schema.LAKE_RUNS
        return {p.stem for p in folder.glob("date=*/*.parquet")} if folder.is_dir() else set()

    def add(self, run: Mapping[str, Any], raw: Iterable[tuple[str, Path | pa.Table]],
            tables: Mapping[str, pd.DataFrame]) -> None:
        """Add one run: ``run`` is its ``runs`` row (:data:`LAKE_RUN_COLUMNS`), ``raw`` its raw records as
        (case file name, file in RAW_SCHEMA or table) pairs, one at a time, ``tables`` its summary tables by
        name. Files of the run already there are replaced. A raw file is hard-linked into the lake when it
        can be (run folders never change a file in place: they write a new one and rename it), else copied."""
        run_id, day = str(run["run_id"]), _day(str(run.get("started") or ""))
        self.remove(run_id)
        for case, source in raw:
            target = self._file(schema.RAW_DIR, day, f"{run_id}__{case.removesuffix('.parquet')}")
            if isinstance(source, Path):
                _link(source, target)
            else:
                buffer = pa.BufferOutputStream()
                pq.write_table(source, buffer, compression="zstd")
                atomic_write(target, buffer.getvalue().to_pybytes())
        for name, frame in tables.items():
            if name in schema.LAKE_TABLES and not frame.empty:
                atomic_write(self._file(name, day, run_id), parquet_bytes(frame.reset_index(drop=True)))
        row = pd.DataFrame([{c: run.get(c) for c in schema.LAKE_RUN_COLUMNS}])
        atomic_write(self._file(schema.LAKE_RUNS, day, run_id), parquet_bytes(row))

    def add_run(self, run: RunFolder) -> None:
        """Put ``run``'s raw records and stored summary tables into the lake (replacing what the lake held
        of it). A raw file already in RAW_SCHEMA goes in as it is; an older one is rewritten into it.
        :class:`RunFolderError` for a run on shared storage or without a stored summary."""
        if run.store is not None:
            raise RunFolderError(f"{run.location}: the results lake holds runs on this machine only")
        tables = run.read_summary()

        def raw() -> Iterator[tuple[str, Path | pa.Table]]:
            for path in run.raw_files():
                assert isinstance(path, Path)
                same = pq.read_schema(path).remove_metadata().equals(schema.RAW_SCHEMA)
                yield path.name, (path if same else read_raw_table([path]))

        self.add(run_row(run.manifest, run.summary_engine), raw(), tables)

    def remove(self, run_id: str) -> None:
        """Delete every file of ``run_id`` (the ``runs`` row first, so a half-removed run is not listed)."""
        for table in (schema.LAKE_RUNS, *schema.LAKE_TABLES, schema.RAW_DIR):
            folder = self.root / table
            if folder.is_dir():
                for path in folder.glob("date=*/*.parquet"):
                    if _of_run(path, run_id):
                        path.unlink(missing_ok=True)

    def read(self, table: str, run_ids: Sequence[str] | None = None, columns: Sequence[str] | None = None
             ) -> pd.DataFrame:
        """``table`` of every run in the lake (or of ``run_ids``) as one frame with its ``date`` column;
        empty when the lake has none. Files of runs not (yet) in ``runs`` are left out."""
        folder = self.root / table
        known = self.run_ids() if run_ids is None else set(run_ids) & self.run_ids()
        files = [p for p in sorted(folder.glob("date=*/*.parquet")) if any(_of_run(p, r) for r in known)] \
            if folder.is_dir() else []
        if not files:
            return pd.DataFrame()
        dataset = ds.dataset([str(f) for f in files], format="parquet", partitioning="hive",
                             partition_base_dir=str(folder))
        frame = dataset.to_table(columns=list(columns) if columns else None).to_pandas()
        if "date" in frame:
            frame["date"] = frame["date"].astype(str)
        return frame

    def _file(self, table: str, day: str, stem: str) -> Path:
        return self.root / table / f"date={day}" / f"{stem}.parquet"


def _of_run(path: Path, run_id: str) -> bool:
    return path.stem == run_id or path.stem.startswith(f"{run_id}__")


def _link(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source`` (a copy across file systems), replacing it atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _day(started: str) -> str:
    """The run's start day (``2026-11-26``) from its ISO time; ``unknown`` when not recorded."""
    return started[:10] if len(started) >= 10 and started[4] == "-" else "unknown"


def run_row(manifest: Mapping[str, Any], engine: str) -> dict[str, Any]:
    """A run's ``runs`` row (:data:`LAKE_RUN_COLUMNS`) from its manifest."""
    host = manifest.get("host") or {}
    scenarios = [str(s.get("name")) for s in manifest.get("scenarios") or [] if isinstance(s, Mapping)]
    systems = sorted(manifest.get("systems") or {})
    tool = manifest.get("tool") or {}
    cpus = host.get("cpus")
    return {
        "run_id": str(manifest.get("run_id") or ""),
        "started": str(manifest.get("started") or ""),
        "finished": str(manifest.get("finished") or ""),
        "complete": bool(manifest.get("complete", False)),
        "git_revision": str(manifest.get("git_revision") or ""),
        "hostname": str(host.get("hostname") or ""),
        "cpus": float(cpus) if isinstance(cpus, int | float) else math.nan,
        "mqbench": str(tool.get("mqbench") or ""),
        "scenarios": ",".join(scenarios),
        "systems": ",".join(systems),
        "engine": engine,
    }
