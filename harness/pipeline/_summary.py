"""``summarize``: raw records of one or many runs -> per-repetition summary, aggregate, series.

Engine choice: ``"pandas"`` computes in this process (numpy, exact); ``"spark"`` runs a PySpark job on
``spark_master`` (``local[*]`` by default); ``"auto"`` takes pandas when the runs hold at most
``PANDAS_MAX_ROWS`` raw rows (read from Parquet footers), Spark above.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pandas as pd

from harness.pipeline import _pandas, _spark
from harness.pipeline._aggregate import aggregate
from harness.pipeline._files import atomic_write_frame
from harness.pipeline._finish import finish_distribution, finish_per_repetition, finish_series
from harness.pipeline._runs import PipelineError, RunInfo, count_rows, raw_files, read_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Engine = Literal["auto", "spark", "pandas"]

#: ``engine="auto"`` uses pandas up to this many raw rows over all runs (about 200 MB in memory).
PANDAS_MAX_ROWS = 2_000_000
#: Spark computes exact percentiles for cases with at most this many latency samples; approx above.
EXACT_LIMIT = 1_000_000
#: ``percentile_approx`` accuracy above ``EXACT_LIMIT``: rank error at most n / 100_000.
APPROX_ACCURACY = 100_000


@dataclass(frozen=True)
class Summary:
    """The pipeline's output.

    * ``per_repetition``: one row per case and repetition, ``SUMMARY_COLUMNS`` + ``EXTRA_COLUMNS``;
    * ``aggregate``: one row per case: mean and 95 % Student-t interval across repetitions;
    * ``series``: receipts per second since each repetition's first receipt (zero-filled, long table);
    * ``distribution``: latency percentiles of each case pooled over repetitions, from raw rows
      (``latency_from`` = "actual send" or "intended"; percentile 100 is the maximum);
    * ``runs``: the manifests read; ``engine``: which engine computed it.
    """

    per_repetition: pd.DataFrame
    aggregate: pd.DataFrame
    series: pd.DataFrame
    distribution: pd.DataFrame
    runs: tuple[RunInfo, ...]
    engine: str


def _as_paths(run_dirs: Path | str | Iterable[Path | str]) -> list[Path]:
    if isinstance(run_dirs, str | Path):
        return [Path(run_dirs)]
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise PipelineError("no run folders given; pass at least one results/<run-id> folder")
    return paths


def summarize(
    run_dirs: Path | str | Iterable[Path | str],
    engine: Engine = "auto",
    spark_master: str | None = None,
    *,
    spark: SparkSession | None = None,
    exact_limit: int = EXACT_LIMIT,
    approx_accuracy: int = APPROX_ACCURACY,
) -> Summary:
    """Summarize the raw records of ``run_dirs`` (one folder or several).

    ``spark`` reuses an existing session (tests, notebooks); otherwise the active one or a new one on
    ``spark_master``. ``exact_limit`` / ``approx_accuracy`` only affect the Spark engine; the pandas engine
    is always exact. Raises :class:`PipelineError` (one sentence) for a missing folder, a run without raw
    Parquet files, an unknown engine, or a Spark that cannot start (Java missing).
    """
    runs = [read_run(path) for path in _as_paths(run_dirs)]
    files = [f for run in runs for f in raw_files(run)]
    if engine == "auto":
        engine = "pandas" if count_rows(files) <= PANDAS_MAX_ROWS else "spark"
    if engine == "pandas":
        cases, series, distribution = _pandas.compute(_pandas.load_raw(files))
    elif engine == "spark":
        session = spark or _spark.spark_session(spark_master)
        cases, series, distribution = _spark.compute(session, files, exact_limit, approx_accuracy)
    else:
        raise PipelineError(f"unknown engine {engine!r}; use 'auto', 'spark' or 'pandas'")
    per_repetition = finish_per_repetition(cases, runs)
    return Summary(
        per_repetition=per_repetition,
        aggregate=aggregate(per_repetition),
        series=finish_series(series),
        distribution=finish_distribution(distribution),
        runs=tuple(runs),
        engine=engine,
    )


def write_summary(summary: Summary, out_dir: Path | str) -> list[Path]:
    """Write ``summary``/``aggregate``/``series``/``distribution`` as ``.parquet`` and ``.csv`` in ``out_dir``.

    Each file is written to a temporary name and renamed. Returns the paths written. In a run folder this
    replaces the runner's ``summary.parquet``/``.csv`` with the same columns (plus ``EXTRA_COLUMNS``)
    recomputed from the raw rows.
    """
    out = Path(out_dir)
    tables: Sequence[tuple[str, pd.DataFrame]] = (
        ("summary", summary.per_repetition),
        ("aggregate", summary.aggregate),
        ("series", summary.series),
        ("distribution", summary.distribution),
    )
    written: list[Path] = []
    for name, frame in tables:
        written += atomic_write_frame(frame, out / f"{name}.parquet", out / f"{name}.csv")
    return written
