"""The results lake and the history over it: runs land in one partitioned dataset that pandas and Spark
read, and the history table and figure are made from the lake's summary and runs tables."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds
import pytest

from harness.commands import history as history_command
from harness.pipeline import index_results, summarise_run
from harness.report.history import HISTORY_COLUMNS, history_figure, history_table, moves
from harness.runfolder import Lake
from tests.harness.pipeline.synthetic import build_run


def _runs(root: Path, count: int) -> list[Path]:
    runs = []
    for i in range(count):
        run = build_run(root, f"run-{i:02d}", seed=i, scenarios=("queue-2to1", "reqrep"))
        manifest = json.loads((run / "manifest.json").read_text())
        manifest.update(started=f"2026-11-{10 + i:02d}T10:00:00+00:00", git_revision=f"{i:02d}" + "ab" * 19)
        (run / "manifest.json").write_text(json.dumps(manifest))
        runs.append(run)
    return runs


def _pandas(path: Path) -> object:
    return summarise_run(path, engine="pandas")


def test_index_results_puts_every_run_in_the_lake_once(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 3)
    lake, added, skipped = index_results(tmp_path, _pandas)
    assert sorted(added) == [r.name for r in runs] and skipped == []
    assert index_results(tmp_path, _pandas)[1] == []  # nothing new the second time
    assert lake.run_ids() == {r.name for r in runs}
    raw = lake.read("raw")
    assert len(raw) == sum(len(pd.read_parquet(r / "raw")) for r in runs)
    summary = lake.read("summary")
    assert set(summary["run_id"]) == {r.name for r in runs} and set(summary["date"]) == {"2026-11-10", "2026-11-11",
                                                                                          "2026-11-12"}
    # one Hive-partitioned dataset: pyarrow (and so pandas) reads it whole, with date from the path
    table = ds.dataset(str(lake.table_path("summary")), format="parquet", partitioning="hive").to_table()
    assert table.num_rows == len(summary) and "date" in table.column_names


def test_adding_a_run_again_replaces_it(tmp_path: Path) -> None:
    (run,) = _runs(tmp_path, 1)
    lake, _, _ = index_results(tmp_path, _pandas)
    before = len(lake.read("raw"))
    from harness.runfolder import RunFolder

    lake.add_run(RunFolder.open(run))
    assert len(lake.read("raw")) == before and lake.run_ids() == {run.name}


def test_history_of_many_runs(tmp_path: Path) -> None:
    _runs(tmp_path, 4)
    lake, _, _ = index_results(tmp_path, _pandas)
    table = history_table(lake.read("summary"), lake.read("runs"), reference="zmq")
    assert list(table.columns) == list(HISTORY_COLUMNS)
    assert list(dict.fromkeys(table["run_id"])) == [f"run-{i:02d}" for i in range(4)]  # in start order
    metrics = set(table["metric"])
    assert {"receiver_msgs_per_s", "lat_p99_us", "ratio:receiver_msgs_per_s", "ratio:lat_p50_us"} <= metrics
    ratio = table[(table["metric"] == "ratio:receiver_msgs_per_s") & (table["system"] == "mqcore")].iloc[0]
    summary = lake.read("summary")
    rows = summary[(summary["run_id"] == ratio["run_id"]) & (summary["scenario"] == ratio["scenario"])
                   & (summary["size"] == ratio["size"])]
    per_rep = rows.pivot_table(index="repetition", columns="system", values="receiver_msgs_per_s")
    assert ratio["value"] == pytest.approx((per_rep["mqcore"] / per_rep["zmq"]).median())  # the regress ratios
    assert history_figure(table) is not None
    moved = moves(table)
    assert (moved["runs"] == 4).all()


def test_history_command_writes_the_page_and_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _runs(tmp_path, 2)
    from harness.cli import main

    assert main(["history", "--results", str(tmp_path), "--engine", "pandas"]) == 0
    out = tmp_path / history_command.NAME
    assert (out / "figures" / "history.png").stat().st_size > 10_000
    assert "2 runs" in (out / "history.html").read_text()
    assert len(pd.read_csv(out / "history.csv")) > 0
    assert Lake(tmp_path / "lake").run_ids() == {"run-00", "run-01"}


def test_history_without_runs_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["history", "--results", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith("mqbench: ")


def test_each_variant_keeps_its_own_label_in_the_ratios(tmp_path: Path) -> None:
    # One system driven by two clients (as Kafka's kafka-python and Java rows): the ratio lines name each
    # variant by its own label, not by the system's first one.
    _runs(tmp_path, 2)
    lake, _, _ = index_results(tmp_path, _pandas)
    summary = lake.read("summary")
    java = summary[summary["system"] == "mqcore"].assign(variant="java", label="mqcore (java)")
    java["receiver_msgs_per_s"] = java["receiver_msgs_per_s"] / 2
    summary = pd.concat([summary, java], ignore_index=True)
    table = history_table(summary, lake.read("runs"), reference="zmq")
    ratios = table[(table["metric"] == "ratio:receiver_msgs_per_s") & (table["system"] == "mqcore")]
    labels = dict(zip(ratios["variant"], ratios["label"], strict=False))
    assert labels["java"] == "mqcore (java)"
    assert labels[ratios.loc[ratios["variant"] != "java", "variant"].iloc[0]] != "mqcore (java)"
    assert ratios["label"].notna().all()
