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


def _copy(run: Path, to: Path) -> tuple[Path, Path]:
    """A copy of ``run`` with only its raw records (no stored summary) and its first raw file's path."""
    import shutil

    copy = to / run.name
    shutil.copytree(run / "raw", copy / "raw")
    shutil.copy(run / "manifest.json", copy / "manifest.json")
    return copy, sorted((copy / "raw").glob("*.parquet"))[0]


@pytest.mark.parametrize("engine", ["pandas", "spark"])
def test_a_raw_file_that_is_not_parquet_is_named(synthetic_run: Path, tmp_path: Path, engine: str) -> None:
    """Before, either engine failed deep inside with pyarrow's or Spark's traceback."""
    run, first = _copy(synthetic_run, tmp_path)
    first.write_bytes(b"PAR1 but then nothing a Parquet reader wants" * 50)
    with pytest.raises(PipelineError, match=rf"{first.name} is not a readable Parquet file \(.*\); move it out"):
        summarize(run, engine=engine)  # type: ignore[arg-type]


def test_a_spark_failure_is_one_line_with_its_cause(synthetic_run: Path, tmp_path: Path, spark: object) -> None:
    """A raw column of the wrong type passes the footer check and fails in Spark's scan: the sentence gives
    Spark's cause from inside its wrapper (``Exception thrown in awaitResult``), not a Java stack trace."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run, first = _copy(synthetic_run, tmp_path)
    table = pq.read_table(first)
    at = table.schema.get_field_index("seq")
    pq.write_table(table.set_column(at, "seq", pa.array([str(v) for v in table["seq"].to_pylist()])), first)
    with pytest.raises(PipelineError) as caught:
        summarize(run, engine="spark", spark=spark)  # type: ignore[arg-type]
    said = str(caught.value)
    assert said.startswith(f"Spark could not summarise {run}: ")
    assert "[seq]" in said and "awaitResult" not in said and "\n" not in said and "\tat " not in said
