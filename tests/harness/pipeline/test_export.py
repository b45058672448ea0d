"""The files other tools read (harness/pipeline/_export.py): HdrHistogram's own reader (the Python
``hdrhistogram`` package) loads the ``.hlog`` intervals with the summary's percentiles, to the histogram's
precision; the ``.hgrm`` and the OMB-shaped JSON carry the same figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from harness.pipeline import summarise_run
from harness.pipeline._export import HIGHEST_US, LOWEST_US, SIGNIFICANT_FIGURES, bucketed, record
from harness.runfolder.schema import RAW_SCHEMA, percentile_column

N = 30_000  # messages: enough that neighbouring order statistics at p99.9 sit close together
WARMUP = 100


def _run(root: Path) -> Path:
    rng = np.random.default_rng(11)
    run = root / "run-export"
    (run / "raw").mkdir(parents=True)
    total = N + WARMUP
    seq = np.arange(total)
    t_send = 5_000_000_000_000 + np.cumsum(rng.integers(50_000, 150_000, total))  # ~10 kmsg/s, ~3 s long
    e2e = rng.lognormal(np.log(400_000), 0.9, total).astype(np.int64)  # ns, tail to tens of ms
    pub = rng.lognormal(np.log(90_000), 0.6, total).astype(np.int64)
    acked = seq % 9 != 0  # not every send acknowledged
    lost = seq % 97 == 0
    frame = pd.DataFrame({
        "run_id": "run-export", "scenario": "work", "pattern": "queue", "system": "zmq", "variant": "default",
        "repetition": 0, "size": 100, "rate": 10000.0, "producer": 0, "consumer": np.where(lost, -1, 0),
        "seq": seq, "warmup": seq < WARMUP, "t_intended": t_send - rng.integers(0, 20_000, total),
        "t_send": t_send, "t_ack": pd.array(np.where(acked, t_send + pub, 0), dtype="Int64"),
        "t_recv": pd.array(t_send + e2e, dtype="Int64"), "send_failed": False, "unconfirmed": False,
        "drained": False,
    })
    frame.loc[~acked, "t_ack"] = pd.NA
    frame.loc[lost, "t_recv"] = pd.NA
    for column in ("send_host", "send_executor", "recv_host", "recv_executor"):
        frame[column] = None
    pq.write_table(pa.Table.from_pandas(frame, schema=RAW_SCHEMA, preserve_index=False),
                   run / "raw" / "work__zmq__default__100B__rate-10000__rep0.parquet")
    manifest = {"run_id": "run-export", "complete": True, "started": "2026-11-26T10:00:00+00:00",
                "scenarios": [{"name": "work", "pattern": "queue", "topics": 1, "producers": 1, "consumers": 1}],
                "systems": {"zmq": {"label": "pyzmq"}}, "variants": {"zmq/default": {"label": "pyzmq"}},
                "cases": []}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.Series]:
    run = _run(tmp_path_factory.mktemp("export"))
    summary = summarise_run(run, engine="pandas")
    return run, summary.per_repetition.iloc[0]


def _read_log(path: Path) -> tuple[HdrHistogram, int]:
    """Every interval of an ``.hlog`` added up by HdrHistogram's own reader; and how many intervals."""
    total = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
    reader = HistogramLogReader(str(path), HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES))
    intervals = 0
    while reader.add_next_interval_histogram(total):
        intervals += 1
    reader.close()
    return total, intervals


def _precision_us(values_ns: np.ndarray, p: float) -> float:
    """How far a histogram's percentile may lie from the exact (linear) one: its bucket width (one part in
    a thousand, at least the 1 µs unit) plus the spread of the order statistics next to the rank, since
    HdrHistogram takes one of them where numpy interpolates between two."""
    ordered = np.sort(values_ns)
    rank = p / 100 * (len(ordered) - 1)
    near = ordered[max(0, math.floor(rank) - 1):min(len(ordered), math.ceil(rank) + 2)]
    return float(near.max() - near.min()) / 1e3 + max(1.0, 2e-3 * float(np.quantile(values_ns, p / 100)) / 1e3)


@pytest.mark.parametrize(("kind", "prefix"), [("e2e", "lat"), ("publish", "publish")])
def test_hlog_loads_in_hdrhistogram_with_the_summary_percentiles(
    exported: tuple[Path, pd.Series], kind: str, prefix: str
) -> None:
    run, row = exported
    frame = pq.read_table(next((run / "raw").glob("*.parquet"))).to_pandas()
    frame = frame[~frame["warmup"]]
    later = "t_recv" if kind == "e2e" else "t_ack"
    rows = frame[frame[later].notna()]
    values_ns = (rows[later] - rows["t_send"]).to_numpy(np.int64)
    hist, intervals = _read_log(run / "hdr" / f"{next((run / 'raw').glob('*.parquet')).stem}.{kind}.hlog")
    assert hist.get_total_count() == len(values_ns) == (row["lat_count"] if kind == "e2e" else row["publish_count"])
    assert intervals >= 3  # one per second of a ~3 s case
    for p in (50.0, 90.0, 99.0, 99.9):
        summary_us = float(row[percentile_column(p, prefix)])
        assert abs(hist.get_value_at_percentile(p) - summary_us) <= _precision_us(values_ns, p), p
    assert abs(hist.get_max_value() - row[f"{'lat' if kind == 'e2e' else 'publish'}_max_us"]) <= max(
        1.0, 1e-3 * hist.get_max_value())


def test_hgrm_is_the_percentile_distribution(exported: tuple[Path, pd.Series]) -> None:
    run, row = exported
    text = next((run / "hdr").glob("*.e2e.hgrm")).read_text()
    lines = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    table = [(float(v), float(q), int(c)) for v, q, c, *_ in lines[1:]]
    assert table[-1][2] == row["lat_count"]  # cumulative count ends at every sample
    frame = pq.read_table(next((run / "raw").glob("*.parquet"))).to_pandas()
    frame = frame[~frame["warmup"] & frame["t_recv"].notna()]
    values_ns = (frame["t_recv"] - frame["t_send"]).to_numpy(np.int64)
    for value_ms, q, _ in table[:-1:7]:  # each line: the value at its percentile (ms, 3 decimals)
        exact_us = float(np.quantile(values_ns, q)) / 1e3
        assert abs(value_ms * 1e3 - exact_us) <= _precision_us(values_ns, q * 100) + 1.0, q
    assert [v for v, _, _ in table] == sorted(v for v, _, _ in table)


@pytest.mark.parametrize("values", [
    np.random.default_rng(5).lognormal(np.log(400), 0.9, 30_000).astype(np.int64),  # µs, tail to tens of ms
    np.random.default_rng(6).integers(0, 50_000_000, 20_000),
    (np.random.default_rng(7).pareto(1.5, 50_000) * 100).astype(np.int64),
    np.array([0]), np.array([5]), np.array([0, 0, 3]), np.array([3000] * 10 + [7]), np.array([4_000_000_000]),
], ids=["lognormal", "uniform", "pareto", "zero", "one", "zeros", "two-buckets", "past-the-highest"])
def test_hgrm_is_what_hdrhistogram_writes(values: np.ndarray) -> None:
    """Line for line the ``hdrhistogram`` package's own ``output_percentile_distribution`` of a histogram of
    the same values, but the standard deviation, in ms as HdrHistogram's Java writes it (the package
    leaves it in µs)."""
    from io import BytesIO

    from harness.pipeline._export import percentile_distribution

    theirs = BytesIO()
    record(HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES), values).output_percentile_distribution(
        theirs, 1000.0)
    mine, package = percentile_distribution(values).decode().splitlines(), theirs.getvalue().decode().splitlines()
    assert len(mine) == len(package) > 5
    assert mine[:-3] + mine[-2:] == package[:-3] + package[-2:]
    (mean, deviation), (package_mean, package_deviation) = (
        [float(x.split("=")[1]) for x in line.strip("#[]").split(",")] for line in (mine[-3], package[-3]))
    assert mean == package_mean
    assert deviation == pytest.approx(package_deviation / 1000, abs=1e-3)


def test_bucketing_records_like_every_value() -> None:
    values = np.random.default_rng(3).integers(0, 50_000_000, 20_000)
    one_by_one = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)
    for v in values:
        one_by_one.record_value(int(v))
    assert record(HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES), values).equals(one_by_one)
    assert len(bucketed(values)[0]) < len(np.unique(values))


def test_omb_result_has_the_shape_and_the_summary_figures(exported: tuple[Path, pd.Series]) -> None:
    run, row = exported
    result = json.loads(next((run / "omb").glob("*.json")).read_text())
    for key in ("workload", "driver", "messageSize", "topics", "partitions", "producersPerTopic",
                "consumersPerTopic", "publishRate", "consumeRate", "backlog", "publishLatency99pct",
                "aggregatedPublishLatency99pct", "aggregatedPublishLatencyQuantiles", "endToEndLatency99pct",
                "aggregatedEndToEndLatency99pct", "aggregatedEndToEndLatencyQuantiles",
                "aggregatedPublishDelayLatency99pct"):
        assert key in result, key
    assert result["workload"] == "work" and result["messageSize"] == 100
    # OMB's units: publish and end-to-end latency in ms, from the same raw rows as the summary
    assert result["aggregatedEndToEndLatency99pct"] * 1e3 == pytest.approx(row["lat_p99_us"])
    assert result["aggregatedPublishLatency50pct"] * 1e3 == pytest.approx(row["publish_p50_us"])
    assert len(result["publishRate"]) == len(result["endToEndLatency99pct"]) == 1  # one 10 s window
    assert result["publishRate"][0] == pytest.approx(row["sender_msgs_per_s"], rel=0.01)
