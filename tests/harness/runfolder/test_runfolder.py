"""The run folder's one owner: redaction, atomic writes, creating, writing and reading a run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.runfolder import RunFolder, RunFolderError, atomic_write, redact
from harness.runfolder.schema import HOST_COLUMNS, RAW_SCHEMA


def test_redact_hides_every_url_password() -> None:
    assert redact("amqp://guest:secret@host:5672/%2F") == "amqp://guest:***@host:5672/%2F"
    assert redact("redis://:pw@127.0.0.1:6379/0") == "redis://:***@127.0.0.1:6379/0"
    assert redact("nats://host:4222") == "nats://host:4222"
    text = json.dumps({"a": "amqp://u:p1@h/", "b": "mqtt://v:p2@h:1883", "c": "user@example.org"})
    out = redact(text)
    assert "p1" not in out and "p2" not in out and "user@example.org" in out


def test_atomic_write_leaves_only_the_file(tmp_path: Path) -> None:
    path = atomic_write(tmp_path / "sub" / "x.bin", b"data")
    assert path.read_bytes() == b"data"
    assert [p.name for p in path.parent.iterdir()] == ["x.bin"]


def _rows(n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": "r", "scenario": "s", "pattern": "queue", "system": "zmq", "variant": "default",
        "repetition": 0, "size": 100, "rate": float("nan"), "producer": 0, "consumer": 0, "seq": range(n),
        "warmup": False, "t_intended": pd.array([None] * n, "Int64"), "t_send": range(n),
        "t_ack": pd.array([None] * n, "Int64"), "t_recv": range(10, 10 + n),
    })


def test_create_write_and_open_a_run(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path, "a label/with spaces", {"hot_loops": "python"})
    run.manifest["systems"]["redis"] = {"broker_url": "redis://:secret@127.0.0.1:1/0"}
    run.manifest["variants"]["redis/aof"] = {"system": "redis", "variant": "aof", "guarantee": "durable"}
    run.write_raw("case.parquet", _rows(4), pd.DataFrame({"producer": [0], "seq": [2], "t_ns": [2]}))
    run.finish(True)
    assert "secret" not in (run.path / "manifest.json").read_text()

    again = RunFolder.open(run.path)
    info = again.info()
    assert info.complete and info.run_id == run.run_id and "with-spaces" in info.run_id
    assert info.describe("redis", "aof")["guarantee"] == "durable"
    assert info.describe("redis", "other")["label"] == "redis"  # unknown variant: the system's own name
    raw = again.read_raw("case")
    assert list(raw["send_failed"]) == [False, False, True, False]
    assert pq.read_table(again.raw_files()[0]).schema.equals(RAW_SCHEMA, check_metadata=False)
    with pytest.raises(RunFolderError, match=r"summary.parquet: missing; run `mqbench report"):
        again.read_summary()


def test_raw_files_from_before_send_failed_read_as_null(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path, "old")
    newer = ("send_failed", "unconfirmed", "drained", *HOST_COLUMNS)
    old = pa.schema([f for f in RAW_SCHEMA if f.name not in newer])
    pq.write_table(pa.Table.from_pandas(_rows(3), schema=old, preserve_index=False), run.path / "raw" / "old.parquet")
    rows = run.read_raw("old")
    assert rows[["send_failed", "unconfirmed", "drained"]].isna().all().all()
    assert rows[list(HOST_COLUMNS)].isna().all().all()  # hosts are named only by runs on a Spark cluster


def test_open_says_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="no such run folder"):
        RunFolder.open(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{not json")
    with pytest.raises(RunFolderError, match="not readable JSON"):
        RunFolder.open(tmp_path / "bad")
    with pytest.raises(RunFolderError, match="no raw folder"):
        RunFolder(tmp_path / "bad", {}).raw_files()


def test_write_raw_marks_unconfirmed_and_drained_rows(tmp_path: Path) -> None:
    """With outcomes told, a send with neither an acknowledgement nor a refusal is unconfirmed; a row that
    never arrived but that the final read found is drained; a refused send is neither."""
    run = RunFolder.create(tmp_path, "flags")
    rows = _rows(5)
    rows["t_ack"] = pd.array([1, None, None, 4, None], "Int64")
    rows["t_recv"] = pd.array([10, 11, None, None, None], "Int64")
    errors = pd.DataFrame({"producer": [0], "seq": [4], "t_ns": [99]})
    drained = pd.DataFrame({"producer": [0, 0], "seq": [1, 3], "consumer": [0, 0], "t_ns": [50, 51]})
    run.write_raw("flags.parquet", rows, errors, drained=drained, acks_tracked=True)
    raw = run.read_raw("flags")
    assert list(raw["send_failed"]) == [False, False, False, False, True]
    assert list(raw["unconfirmed"]) == [False, True, True, False, False]
    assert list(raw["drained"]) == [False, False, False, True, False]  # seq 1 arrived: not drained
    run.write_raw("plain.parquet", rows, errors)
    assert not run.read_raw("plain")[["unconfirmed", "drained"]].any().any()
