"""``summarize``: raw records of one or many runs -> per-repetition summary, aggregate, series.

The engines reduce raw rows to case aggregates (counts, first/last stamps, order statistics in ns; see
``_tables.py``); the summary row of each case and repetition is made from them here, once, with the
definitions of ``harness.metrics.compute`` (rate, percentiles, delivery accounting).

Engine choice: ``"spark"`` computes with Spark SQL on ``spark_master`` (``local[*]`` by default; one
session per process, started on first use); ``"pandas"`` computes in this process, one case after another
(the reference the Spark engine is tested against); ``"auto"`` (the default) is Spark, or pandas when no
Java runtime exists here or Spark cannot start, with :attr:`Summary.note` saying so in one line.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness._spark_calls import failure_reason, interruptible
from harness.metrics.compute import PERCENTILES, Delivery, rate
from harness.pipeline import _pandas, _session, _spark
from harness.pipeline._aggregate import aggregate
from harness.pipeline._cpu import clock_uncertainty_us, cpu_columns
from harness.pipeline._errors import PipelineError
from harness.pipeline._export import write_exports
from harness.pipeline._recovery import run_recovery
from harness.pipeline._search import search_table
from harness.pipeline._tables import (
    GROUP_KEYS,
    PER_REPETITION_COLUMNS,
    empty_case_aggregate,
    finish_distribution,
    finish_series,
    sort_cases,
)
from harness.pipeline._workload import workload_tables
from harness.runfolder import CaseKey, RunFolder, RunFolderError, RunInfo, is_uri, local_path
from harness.runfolder import newest_run as _newest_run
from harness.runfolder.schema import (
    CASE_KEYS,
    CLOCKS,
    CPU,
    RECOVERY,
    SEARCH,
    SUMMARY_TABLES,
    VARIANT_LABELS,
    WORKLOAD_TABLES,
    percentile_column,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Engine = Literal["auto", "spark", "pandas"]
ENGINES: tuple[Engine, ...] = ("auto", "spark", "pandas")
ENGINE_VARIABLE = "MQBENCH_ENGINE"


def default_engine() -> Engine:
    """The engine of a command not given ``--engine`` (``compare``, ``report``, ``history``): ``auto`` (Spark,
    pandas where no Java runtime exists), or what :data:`ENGINE_VARIABLE` says. The test suite sets it to
    ``pandas`` so that its many small runs do not each start a JVM; the Spark engine has tests of its own.
    Raises :class:`PipelineError` for a value that names no engine."""
    value = os.environ.get(ENGINE_VARIABLE, "auto")
    if value not in ENGINES:
        raise PipelineError(f"{ENGINE_VARIABLE}={value!r} names no engine; set it to auto, spark or pandas, "
                            "or unset it")
    return cast(Engine, value)


@dataclass(frozen=True)
class Summary:
    """The pipeline's output.

    * ``per_repetition``: one row per case and repetition, ``SUMMARY_COLUMNS`` + ``EXTRA_COLUMNS``;
    * ``aggregate``: one row per case: mean and 95 % Student-t interval across repetitions;
    * ``series``: receipts per second since each repetition's first receipt (zero-filled, long table);
    * ``distribution``: latency percentiles of each case pooled over repetitions, from raw rows
      (``latency_from`` = "actual send" or "intended"; percentile 100 is the maximum);
    * ``recovery``: one row per fault of the cases with faults (``RECOVERY_TABLE_COLUMNS``);
    * ``search``: per ``rate: search`` system variant, the max sustained rate and the knee (``SEARCH_COLUMNS``);
    * ``runs``: the manifests read; ``engine``: which engine computed it ("spark" or "pandas");
    * ``master``: the Spark master it ran on; ``session_start_s``: what starting the Spark session cost this
      summary (0 when it was running already, NaN for pandas); ``compute_s``: the summary's own time;
      ``note``: one line when ``"auto"`` fell back to pandas, saying why.
    """

    per_repetition: pd.DataFrame
    aggregate: pd.DataFrame
    series: pd.DataFrame
    distribution: pd.DataFrame
    runs: tuple[RunInfo, ...]
    engine: str
    recovery: pd.DataFrame = field(default_factory=pd.DataFrame)
    search: pd.DataFrame = field(default_factory=pd.DataFrame)
    master: str = ""
    session_start_s: float = math.nan
    compute_s: float = math.nan
    note: str = ""
    #: ``timeline``, ``backlog``, ``topics`` (``_workload``): empty unless the runs had workload scenarios
    workload: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def computed_by(self) -> str:
        """``Spark (local[*]; session start 4.1 s, summary 2.3 s)`` or ``pandas (...)``, with the note."""
        timing = [f"session start {self.session_start_s:.1f} s"] if self.session_start_s == self.session_start_s \
            and self.session_start_s > 0 else []
        if self.compute_s == self.compute_s:
            timing.append(f"summary {self.compute_s:.1f} s")
        where = "; ".join([self.master, *timing] if self.master else timing)
        name = {"spark": "Spark", "pandas": "pandas"}.get(self.engine, self.engine)
        text = f"{name} ({where})" if where else name
        return f"{text}: {self.note}" if self.note else text

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables as a run folder stores them (``SUMMARY_TABLES`` + ``recovery`` and ``search`` when
        they have rows)."""
        tables = {
            "summary": self.per_repetition,
            "aggregate": self.aggregate,
            "series": self.series,
            "distribution": self.distribution,
        }
        optional = {RECOVERY: self.recovery, SEARCH: self.search, **self.workload}
        return {**tables, **{name: frame for name, frame in optional.items() if not frame.empty}}


def _rate(count: pd.Series, first: pd.Series, last: pd.Series) -> pd.Series:
    """msgs/s at one endpoint, :func:`harness.metrics.compute.rate` per case."""
    span = (last - first).astype("float64")  # subtract first: ns stamps need more than float64's 53 bits
    return pd.Series(rate(count.to_numpy(), span.to_numpy()), index=count.index)


def _quantile_columns(frame: pd.DataFrame, source: str, names: Sequence[str], count: str) -> pd.DataFrame:
    values = np.full((len(frame), len(names)), np.nan)
    for i, (q, n) in enumerate(zip(frame[source], frame[count], strict=True)):
        if n and q is not None and len(q) == len(names):
            values[i] = np.asarray(q, dtype="float64") / 1e3
    return pd.DataFrame(values, columns=list(names), index=frame.index)


def finish_per_repetition(cases: pd.DataFrame, runs: Sequence[RunInfo], cpu: pd.DataFrame | None = None,
                          clocks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Build the per-repetition summary (``PER_REPETITION_COLUMNS``) from the engines' case aggregates and
    the runs' CPU tables (``cpu``, ``CPU_TABLE_COLUMNS``) and clock tables (``clocks``,
    ``CLOCK_TABLE_COLUMNS``); each None or empty when none was recorded."""
    if cases.empty:
        return pd.DataFrame(columns=list(PER_REPETITION_COLUMNS))
    by_id = {run.run_id: run for run in runs}
    c = cases.reset_index(drop=True)
    out = c[list(GROUP_KEYS)].copy()
    info = [by_id.get(r) for r in c["run_id"]]
    labels = [
        i.describe(s, v) if i else {k: (s if k == "label" else "") for k in VARIANT_LABELS}
        for i, s, v in zip(info, c["system"], c["variant"], strict=True)
    ]
    for key in VARIANT_LABELS:
        out[key] = [lab[key] for lab in labels]
    for name in ("producers", "consumers", "sent"):
        out[name] = c[name].astype("int64")
    for name in ("unconfirmed", "held"):  # tables of an engine or a run from before these existed
        if name not in c:
            c[name] = 0
    accounts = [
        Delivery.from_counts(*(int(x) for x in r))
        for r in c[["expected", "received_unique", "received", "failed", "failed_received", "out_of_order",
                    "unconfirmed", "held"]].fillna(0).itertuples(index=False)
    ]
    for name in ("expected", "received", "lost", "send_failed", "unconfirmed", "held", "duplicated", "out_of_order"):
        out[name] = pd.Series([getattr(d, name) for d in accounts], index=c.index, dtype="int64")
    out["sender_msgs_per_s"] = _rate(c["sent"], c["t_send_first"], c["t_send_last"])
    out["receiver_msgs_per_s"] = _rate(c["lat_count"], c["t_recv_first"], c["t_recv_last"])
    out["sender_mb_per_s"] = out["sender_msgs_per_s"] * c["size"] / 1e6
    out["receiver_mb_per_s"] = out["receiver_msgs_per_s"] * c["size"] / 1e6
    out["latency_kind"] = np.where(c["pattern"] == "reqrep", "round-trip", "one-way")
    out["latency_from"] = "actual send"
    lat = _quantile_columns(c, "lat_q_ns", [percentile_column(p) for p in PERCENTILES], "lat_count")
    lat_int = _quantile_columns(
        c, "int_q_ns", [percentile_column(p, "lat_intended") for p in PERCENTILES], "int_count"
    )
    delay = _quantile_columns(c, "delay_q_ns", ["send_delay_p50_us", "send_delay_p99_us"], "delay_count")
    out = pd.concat([out, lat], axis=1)
    has_lat = c["lat_count"] > 0
    out["lat_max_us"] = (c["lat_max_ns"].astype("float64") / 1e3).where(has_lat)
    out["lat_mean_us"] = c["lat_sum_ns"].astype("float64") / c["lat_count"].where(has_lat) / 1e3
    out["clock_uncertainty_us"] = clock_uncertainty_us(out, pd.DataFrame() if clocks is None else clocks)
    out = pd.concat([out, lat_int], axis=1)
    out["lat_intended_max_us"] = (c["int_max_ns"].astype("float64") / 1e3).where(c["int_count"] > 0)
    out = pd.concat([out, delay], axis=1)
    out["send_delay_max_us"] = (c["delay_max_ns"].astype("float64") / 1e3).where(c["delay_count"] > 0)
    keys = c[["scenario", "system", "variant", "size", "rate", "repetition"]].to_dict("records")
    out["complete"] = [bool(i.case_complete(CaseKey.of(k))) if i else False for i, k in zip(info, keys, strict=True)]
    cores = [i.host.get("cpus") if i else None for i in info]
    out = pd.concat([out, cpu_columns(out, pd.DataFrame() if cpu is None else cpu, cores)], axis=1)
    out["lat_count"] = c["lat_count"].astype("int64")
    out["sender_span_s"] = (c["t_send_last"] - c["t_send_first"]).astype("float64") / 1e9
    out["receiver_span_s"] = (c["t_recv_last"] - c["t_recv_first"]).astype("float64") / 1e9
    out["percentile_method"] = c["percentile_method"].astype(str)
    out["percentile_rank_error"] = c["percentile_rank_error"].astype("float64")
    out["clock"] = [i.clock if i else "CLOCK_MONOTONIC (time.monotonic_ns)" for i in info]
    out["clock_resolution_ns"] = [i.clock_resolution_ns if i else float("nan") for i in info]
    out["stamped_by"] = "client"
    if "pub_count" not in c:  # tables of an engine from before publish latency existed
        c = c.assign(pub_count=0, pub_q_ns=None, pub_max_ns=np.nan, pub_sum_ns=np.nan)
    has_pub = c["pub_count"] > 0
    pub = _quantile_columns(c, "pub_q_ns", [percentile_column(p, "publish") for p in PERCENTILES], "pub_count")
    out = pd.concat([out, pub], axis=1)
    out["publish_max_us"] = (c["pub_max_ns"].astype("float64") / 1e3).where(has_pub)
    out["publish_mean_us"] = c["pub_sum_ns"].astype("float64") / c["pub_count"].where(has_pub) / 1e3
    out["publish_count"] = c["pub_count"].fillna(0).astype("int64")
    out = out[list(PER_REPETITION_COLUMNS)]
    return sort_cases(out, GROUP_KEYS)


def _check_readable(files: Sequence[Path | str]) -> None:
    """:class:`PipelineError` naming the first local raw file that is not Parquet (its footer unreadable): a
    truncated or foreign file would otherwise fail deep inside an engine."""
    for f in files:
        if isinstance(f, str) and is_uri(f):
            continue
        try:
            pq.ParquetFile(f).close()
        except (pa.ArrowException, OSError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise PipelineError(f"{f} is not a readable Parquet file ({reason}); move it out of the run's raw/ "
                                "folder or run its case again") from None


def _names(folders: Sequence[RunFolder]) -> str:
    more = f" and {len(folders) - 3} more" if len(folders) > 3 else ""
    return ", ".join(str(f.location) for f in folders[:3]) + more


@contextmanager
def _as_pipeline_error() -> Iterator[None]:
    try:
        yield
    except PipelineError:
        raise
    except RunFolderError as exc:
        raise PipelineError(str(exc)) from None


def _with_unmeasured_cases(cases: pd.DataFrame, runs: Sequence[RunInfo]) -> pd.DataFrame:
    """``cases`` (the engines' case aggregates) with a row for each case and repetition that its run
    completed but whose raw rows were all warm-up (a run that ended within its warm-up), which no engine
    sees: zero counts and no stamps, so that the summary shows the repetition as having measured nothing
    (no rate, no percentile) instead of leaving it out."""
    seen = {(row["run_id"], CaseKey.of(row)) for row in cases.to_dict("records")}
    added = []
    for run in runs:
        scenarios = {s.get("name"): s for s in run.scenarios}
        for entry in run.cases:
            key = CaseKey.of(entry)
            scenario = scenarios.get(key.scenario)
            if entry.get("complete") and scenario is not None and (run.run_id, key) not in seen:
                added.append({**key.columns(), "run_id": run.run_id, "pattern": scenario.get("pattern", ""),
                              "producers": int(scenario.get("producers") or 1),
                              "consumers": int(scenario.get("consumers") or 1), **empty_case_aggregate()})
    if not added:
        return cases
    return pd.concat([cases, pd.DataFrame(added)], ignore_index=True) if len(cases) else pd.DataFrame(added)


def _as_paths(run_dirs: Path | str | Iterable[Path | str]) -> list[Path | str]:
    """Run locations: local paths (``file://`` URIs become paths) and URIs of shared storage."""
    if isinstance(run_dirs, str | Path):
        run_dirs = [run_dirs]
    paths = [p if is_uri(p) else local_path(p) for p in run_dirs]
    if not paths:
        raise PipelineError("no run folders given; pass at least one results/<run-id> folder")
    return paths


def summarize(
    run_dirs: Path | str | Iterable[Path | str],
    engine: Engine = "auto",
    spark_master: str | None = None,
    *,
    spark: SparkSession | None = None,
) -> Summary:
    """Summarize the raw records of ``run_dirs`` (one folder or several).

    ``spark`` reuses an existing session (tests, notebooks); otherwise the active one or a new one on
    ``spark_master``. Both engines compute exact percentiles and give the same tables. Raises
    :class:`PipelineError` (one sentence) for a missing folder, a run without raw Parquet files, an unknown
    engine, or a Spark that cannot start (Java missing).
    """
    with _as_pipeline_error():
        folders = [RunFolder.open(path) for path in _as_paths(run_dirs)]
        files = [f for run in folders for f in run.raw_files()]
        _check_readable(files)
        if engine not in ENGINES:
            raise PipelineError(f"unknown engine {engine!r}; use 'auto', 'spark' or 'pandas'")
        note, master, start_s = "", "", math.nan
        if engine != "pandas" and spark is None:
            began = time.perf_counter()
            try:
                spark = _session.spark_session(spark_master)
            except PipelineError as exc:
                if engine == "spark":
                    raise
                note = _session.NO_JAVA_FALLBACK if not _session.java_available() else \
                    f"Spark could not start ({exc}), so the pandas engine (the reference) computed the summary"
            start_s = time.perf_counter() - began
        began = time.perf_counter()
        if spark is not None and engine != "pandas":
            engine, master = "spark", str(spark.sparkContext.master)
            start_s = 0.0 if start_s != start_s else start_s
            from py4j.protocol import Py4JError
            from pyspark.errors import PySparkException

            session = spark
            try:
                cases, series, distribution = interruptible(lambda: _spark.compute(session, files),
                                                            on_interrupt=session.sparkContext.cancelAllJobs)
            except (Py4JError, PySparkException) as exc:  # Spark's own failure, as one line
                raise PipelineError(f"Spark could not summarise {_names(folders)}: "
                                    f"{failure_reason(str(exc))}") from None
            except KeyboardInterrupt:
                # a session mqbench started ends with the summary it served: left running, its py4j and Arrow
                # threads can still be finishing the cancelled collection when the command exits, which
                # aborts the interpreter ("PyGILState_Release" on Ctrl-C in `mqbench report`, 2 runs of 2)
                if _session.started_here(session):
                    _session.stop_after_cancel(session)
                raise
        else:
            engine, start_s = "pandas", math.nan
            cases, series, distribution = _pandas.compute_files(files)
        runs = [run.info() for run in folders]
        cases = _with_unmeasured_cases(cases, runs)
        cpu = [run.read_table(CPU).assign(run_id=run.run_id) for run in folders]
        clocks = [run.read_table(CLOCKS).assign(run_id=run.run_id) for run in folders]
        per_repetition = finish_per_repetition(cases, runs, pd.concat(cpu, ignore_index=True),
                                               pd.concat(clocks, ignore_index=True))
        recovery = [run_recovery(run) for run in folders]
        workload = workload_tables(folders)
        summary = Summary(
            per_repetition=per_repetition,
            aggregate=aggregate(per_repetition),
            series=finish_series(series),
            distribution=finish_distribution(distribution),
            runs=tuple(runs),
            engine=engine,
            recovery=pd.concat(recovery, ignore_index=True),
            search=search_table(per_repetition, runs),
            master=master,
            session_start_s=start_s,
            note=note,
            workload=workload,
        )
    return replace(summary, compute_s=time.perf_counter() - began)


def newest_run(results: Path) -> Path:
    """The newest run folder under ``results`` (notebooks, ``mqbench report`` without a folder)."""
    with _as_pipeline_error():
        return _newest_run(results)


def summarise_run(run_dir: Path | str, engine: Engine = "auto", spark_master: str | None = None) -> Summary:
    """Compute the one summary of a run and store it in the run folder (``compare`` calls this), with the
    files other tools read beside it: HdrHistogram logs and OMB results per case (``_export``)."""
    summary = summarize(run_dir, engine=engine, spark_master=spark_master)
    write_summary(summary, run_dir)
    with _as_pipeline_error():
        write_exports(RunFolder.open(run_dir))
    return summary


def load_summary(
    run_dirs: Path | str | Iterable[Path | str], engine: Engine = "auto", spark_master: str | None = None
) -> Summary:
    """The stored summary of each run (computed with ``engine`` and stored first for a run that has none, or
    one from an older mqbench without today's columns), joined: tables are per run, so joining them equals
    summarising the runs together."""
    parts: list[tuple[RunInfo, dict[str, pd.DataFrame], str]] = []
    with _as_pipeline_error():
        for path in _as_paths(run_dirs):
            run = RunFolder.open(path)
            tables = run.read_summary() if run.has_summary() else None
            # a run recorded by an older mqbench may hold a summary without today's columns
            if tables is None or not set(PER_REPETITION_COLUMNS) <= set(tables["summary"].columns):
                write_summary(summarize(path, engine=engine, spark_master=spark_master), path)
                run = RunFolder.open(path)
                tables = run.read_summary()
            parts.append((run.info(), tables, run.summary_engine))
    joined = {
        name: pd.concat([t[name] for _, t, _ in parts if not t[name].empty] or [parts[0][1][name]],
                        ignore_index=True)
        for name in (*SUMMARY_TABLES, RECOVERY, SEARCH, *WORKLOAD_TABLES)
    }
    order = {"summary": GROUP_KEYS, "aggregate": CASE_KEYS, "series": (*GROUP_KEYS, "second"),
             "distribution": (*CASE_KEYS, "latency_from", "percentile")}
    for name, keys in order.items():
        if not joined[name].empty:
            joined[name] = sort_cases(joined[name], keys)
    return Summary(
        per_repetition=joined["summary"],
        aggregate=joined["aggregate"],
        series=joined["series"],
        distribution=joined["distribution"],
        runs=tuple(info for info, _, _ in parts),
        engine=", ".join(dict.fromkeys(used for _, _, used in parts)),
        recovery=joined[RECOVERY],
        search=joined[SEARCH],
        workload={name: joined[name] for name in WORKLOAD_TABLES},
    )


def write_summary(summary: Summary, out_dir: Path | str) -> list[Path]:
    """Write the summary's tables as ``.parquet`` + ``.csv`` into ``out_dir`` (a run folder or a report
    folder of several runs), each to a temporary name first; return the paths written."""
    if not is_uri(out_dir):
        local_path(out_dir).mkdir(parents=True, exist_ok=True)
    with _as_pipeline_error():
        return RunFolder.open(out_dir).write_summary(summary.tables(), summary.engine)
