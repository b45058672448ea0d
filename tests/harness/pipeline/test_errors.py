"""Errors a user can cause come back as one clear sentence (PipelineError), never a traceback dump."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline import JAVA_HINT, NO_JAVA_FALLBACK, PipelineError, _session, summarize, write_summary


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="no such run folder"):
        summarize([tmp_path / "nope"])


def test_missing_and_empty_raw_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(PipelineError, match="no raw folder"):
        summarize(run)
    (run / "raw").mkdir()
    with pytest.raises(PipelineError, match="no raw Parquet files"):
        summarize(run)


def test_unknown_engine(synthetic_run: Path) -> None:
    with pytest.raises(PipelineError, match="unknown engine"):
        summarize(synthetic_run, engine="dask")  # type: ignore[arg-type]


def test_missing_java(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setattr(_session, "java_available", lambda: False)
    with pytest.raises(PipelineError) as info:
        _session.spark_session("local[1]")
    assert str(info.value) == JAVA_HINT == "PySpark needs Java 17: install openjdk-17-jre-headless"


def test_without_java_auto_falls_back_to_pandas_and_says_so(synthetic_run: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setattr(_session, "java_available", lambda: False)
    summary = summarize(synthetic_run)
    assert summary.engine == "pandas" and summary.note == NO_JAVA_FALLBACK
    assert summary.computed_by.startswith("pandas (summary ") and "no Java runtime here" in summary.computed_by
    with pytest.raises(PipelineError, match="Java"):
        summarize(synthetic_run, engine="spark")


def test_write_summary_is_atomic_and_complete(synthetic_run: Path, tmp_path: Path) -> None:
    from harness.pipeline import summarize as run_summary

    written = write_summary(run_summary(synthetic_run, engine="pandas"), tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == sorted(
        f"{t}.{e}" for t in ("summary", "aggregate", "series", "distribution") for e in ("parquet", "csv")
    )
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]
