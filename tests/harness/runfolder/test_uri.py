"""Run folders named by URI: ``file://`` is a local path; other schemes go through pyarrow's file systems
(exercised here by routing ``file://`` through the store, as ``hdfs://`` or ``s3://`` would go)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness import pipeline
from harness.pipeline import _summary, summarize, write_summary
from harness.runfolder import RunFolder, RunFolderError, _folder
from harness.runfolder._store import Store, local_path
from tests.harness.pipeline.synthetic import build_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("results"))


def _through_store(monkeypatch: pytest.MonkeyPatch) -> None:
    def as_uri(location: object) -> bool:
        return isinstance(location, str) and "://" in location

    monkeypatch.setattr(_folder, "is_uri", as_uri)
    monkeypatch.setattr(_summary, "is_uri", as_uri)


def test_file_uri_is_the_local_folder(run: Path) -> None:
    assert local_path(run.as_uri()) == run
    folder = RunFolder.open(run.as_uri())
    assert folder.store is None and folder.path == run and folder.raw_files() == RunFolder.open(run).raw_files()


def test_summary_through_the_store_equals_the_local_one(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = summarize(run, engine="pandas")
    _through_store(monkeypatch)
    folder = RunFolder.open(run.as_uri())
    assert folder.store is not None and all(str(f).startswith("file://") for f in folder.raw_files())
    remote = summarize(run.as_uri(), engine="pandas")
    for name, frame in local.tables().items():
        pd.testing.assert_frame_equal(remote.tables()[name], frame, obj=name)
    write_summary(remote, run.as_uri())
    stored = RunFolder.open(run.as_uri())
    assert stored.has_summary() and stored.summary_engine == "pandas"
    pd.testing.assert_frame_equal(stored.read_summary()["summary"], local.per_repetition)
    assert not [p for p in run.rglob(".*.tmp")]  # temporary names renamed into place


def test_new_run_on_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _through_store(monkeypatch)
    created = RunFolder.create(tmp_path.as_uri(), "uri")
    created.write_table("faults", pd.DataFrame({"a": [1]}), csv=True)
    created.finish(complete=True)
    opened = RunFolder.open(f"{tmp_path.as_uri()}/{created.run_id}")
    assert opened.info().complete and opened.read_table("faults")["a"].tolist() == [1]
    assert (tmp_path / created.run_id / "faults.csv").is_file()


def test_unusable_locations_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="cannot open this location"):
        RunFolder.open("nosuchscheme://bucket/run")
    with pytest.raises(pipeline.PipelineError, match="no such run folder"):
        summarize((tmp_path / "missing").as_uri(), engine="pandas")
    assert Store("mock:///a").child("b").full("c") == "a/b/c"


def test_hadoop_s3_names_are_opened_as_s3() -> None:
    from harness.runfolder._store import _readable

    assert _readable("s3a://bucket/results/run") == "s3://bucket/results/run"
    assert _readable("hdfs://nn:8020/results") == "hdfs://nn:8020/results"
