"""The pandas engine against known answers and an independent numpy reference."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.pipeline import PER_REPETITION_COLUMNS, Summary, load_summary, summarize
from harness.pipeline._tables import PUBLISH_LATENCY_FROM
from harness.runfolder.schema import SUMMARY_COLUMNS
from tests.harness.pipeline.reference import expected_summary, raw_rows, summary_by_case

FAULT = ("queue-2to1", "mqcore", 64, "max", 0)
PUBSUB_FAULT = ("pubsub-rates", "zmq", 128, 1000.0, 1)


def test_columns_extend_the_summary_schema(pandas_summary: Summary) -> None:
    columns = list(pandas_summary.per_repetition.columns)
    assert columns == list(PER_REPETITION_COLUMNS)
    assert columns[: len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)
    assert len(pandas_summary.per_repetition) == 20  # 8 queue + 8 pubsub + 4 reqrep cases x repetitions


def test_injected_faults_are_counted(pandas_summary: Summary) -> None:
    rows = summary_by_case(pandas_summary.per_repetition)
    fault = rows[FAULT]
    # one lost, one refused at the producer and never delivered, one refused but delivered, one delivered
    # twice, one never told (unconfirmed), one found by the final read (held), one drained that arrived
    # anyway: 236 distinct messages received, plus one duplicate arrival; only the first is "lost"
    assert (fault["sent"], fault["expected"], fault["received"]) == (240, 240, 236)
    assert (fault["lost"], fault["send_failed"], fault["duplicated"], fault["out_of_order"]) == (1, 2, 1, 1)
    assert (fault["unconfirmed"], fault["held"]) == (1, 1)
    pubsub = rows[PUBSUB_FAULT]
    assert (pubsub["sent"], pubsub["expected"], pubsub["received"], pubsub["lost"]) == (120, 240, 239, 1)
    clean = [r for key, r in rows.items() if key not in (FAULT, PUBSUB_FAULT)]
    assert all(r["lost"] == r["send_failed"] == r["duplicated"] == r["out_of_order"] == 0 for r in clean)


def test_warmup_rows_are_excluded(pandas_summary: Summary) -> None:
    queue = pandas_summary.per_repetition.query("scenario == 'queue-2to1'")
    assert set(queue["sent"]) == {240}  # 2 producers x 120 measured (+ 10 warmup each, not counted)


@pytest.mark.parametrize(
    "column",
    [
        "sender_msgs_per_s",
        "receiver_msgs_per_s",
        "sender_mb_per_s",
        "receiver_mb_per_s",
        "lat_p50_us",
        "lat_p90_us",
        "lat_p99_us",
        "lat_p99_9_us",
        "lat_p99_99_us",
        "lat_max_us",
        "lat_mean_us",
        "lat_intended_p50_us",
        "lat_intended_p99_99_us",
        "send_delay_p50_us",
        "send_delay_p99_us",
        "send_delay_max_us",
        "publish_p50_us",
        "publish_p99_99_us",
        "publish_max_us",
        "sent",
        "expected",
        "received",
        "lost",
        "send_failed",
        "duplicated",
        "out_of_order",
        "latency_kind",
    ],
)
def test_equals_numpy_on_raw_rows_exactly(synthetic_run: Path, pandas_summary: Summary, column: str) -> None:
    expected = expected_summary(raw_rows(synthetic_run))
    actual = summary_by_case(pandas_summary.per_repetition)
    assert set(actual) == set(expected)
    for key, want in expected.items():
        got = actual[key][column]
        if column not in want:
            assert math.isnan(got), key
        elif isinstance(want[column], float) and math.isnan(want[column]):
            assert math.isnan(got), key
        else:
            assert got == want[column], (key, got, want[column])


def test_reqrep_is_round_trip_and_labelled(pandas_summary: Summary) -> None:
    per = pandas_summary.per_repetition
    assert set(per.loc[per["pattern"] == "reqrep", "latency_kind"]) == {"round-trip"}
    assert set(per.loc[per["pattern"] != "reqrep", "latency_kind"]) == {"one-way"}
    assert set(per["label"]) == {"mqcore", "pyzmq"}
    assert set(per["percentile_method"]) == {"exact"} and set(per["stamped_by"]) == {"client"}
    assert per.loc[per["rate"].isna(), "lat_intended_p50_us"].isna().all()  # rate max: no schedule


def test_series_counts_every_receipt(pandas_summary: Summary) -> None:
    per = pandas_summary.per_repetition.fillna({"rate": -1.0})
    series = pandas_summary.series.fillna({"rate": -1.0})
    keys = ["scenario", "system", "size", "rate", "repetition"]
    totals = series.groupby(keys)["msgs"].sum()
    # every arrival, duplicates included: received (distinct) + duplicated
    per = per.assign(arrivals=per["received"] + per["duplicated"])
    arrivals = per.set_index(keys)["arrivals"]
    assert totals.sort_index().to_dict() == arrivals.sort_index().to_dict()


def test_distribution_pools_raw_rows_over_repetitions(synthetic_run: Path, pandas_summary: Summary) -> None:
    rows = [
        r
        for r in raw_rows(synthetic_run)
        if not r["warmup"] and r["t_recv"] is not None and r["scenario"] == "reqrep" and r["system"] == "zmq"
    ]
    lat = np.array([r["t_recv"] - r["t_send"] for r in rows])
    dist = pandas_summary.distribution.query(
        "scenario == 'reqrep' and system == 'zmq' and latency_from == 'actual send'"
    ).set_index("percentile")
    assert dist["latency_us"][99.0] == np.percentile(lat, 99.0) / 1e3
    assert dist["latency_us"][100.0] == lat.max() / 1e3
    assert set(dist["samples"]) == {len(lat)}


def test_distribution_pools_publish_latency_apart(synthetic_run: Path, pandas_summary: Summary) -> None:
    rows = [r for r in raw_rows(synthetic_run) if not r["warmup"] and r["t_ack"] is not None
            and r["scenario"] == "queue-2to1" and r["system"] == "zmq"]
    pub = np.array(sorted({(r["producer"], r["seq"], r["repetition"]): r["t_ack"] - r["t_send"]
                           for r in rows}.values()))
    dist = pandas_summary.distribution.query("scenario == 'queue-2to1' and system == 'zmq'")
    assert set(dist["latency_from"]) == {"actual send", PUBLISH_LATENCY_FROM}
    publish = dist[dist["latency_from"] == PUBLISH_LATENCY_FROM].groupby("percentile")["latency_us"].first()
    assert publish[99.0] == np.percentile(pub, 99.0) / 1e3
    assert publish[100.0] == pub.max() / 1e3
    # cases without acknowledgements have no publish rows
    assert PUBLISH_LATENCY_FROM not in set(
        pandas_summary.distribution.query("scenario != 'queue-2to1'")["latency_from"])


def test_many_runs_are_summarized_together(tmp_path: Path) -> None:
    from tests.harness.pipeline.synthetic import build_run

    a = build_run(tmp_path, "run-a", scenarios=("reqrep",))
    b = build_run(tmp_path, "run-b", scenarios=("reqrep",), systems=("kafka",), seed=3)
    summary = summarize([a, b], engine="pandas")
    assert set(summary.per_repetition["run_id"]) == {"run-a", "run-b"}
    assert "kafka (tansu)" in set(summary.aggregate["label"])


def test_load_summary_reads_the_stored_summary_and_renews_an_old_one(tmp_path: Path) -> None:
    from tests.harness.pipeline.synthetic import build_run

    run = build_run(tmp_path, scenarios=("reqrep",))
    first = load_summary([run], engine="pandas")  # none stored yet: computed and stored
    stored = (run / "summary.parquet").read_bytes()
    again = load_summary([run], engine="pandas")
    assert (run / "summary.parquet").read_bytes() == stored  # read, not recomputed
    pd.testing.assert_frame_equal(first.per_repetition, again.per_repetition)
    # a summary written by an older mqbench, without today's columns, is computed again
    first.per_repetition.drop(columns=["send_failed"]).to_parquet(run / "summary.parquet")
    assert "send_failed" in load_summary([run], engine="pandas").per_repetition


def test_case_by_case_equals_everything_at_once(synthetic_run: Path) -> None:
    """The engine summarises one case at a time to bound memory; the tables are those of one pass."""
    from harness.pipeline import _pandas
    from harness.pipeline._summary import finish_per_repetition
    from harness.pipeline._tables import finish_distribution, finish_series
    from harness.runfolder import RunFolder

    run = RunFolder.open(synthetic_run)
    files = run.raw_files()
    assert len(files) > 2
    (cases, series, dist), (cases_1, series_1, dist_1) = (
        _pandas.compute_files(files), _pandas.compute(_pandas.load_raw(files))
    )
    info = [run.info()]
    pd.testing.assert_frame_equal(finish_per_repetition(cases, info), finish_per_repetition(cases_1, info))
    pd.testing.assert_frame_equal(finish_series(series), finish_series(series_1))
    pd.testing.assert_frame_equal(finish_distribution(dist), finish_distribution(dist_1))
