"""Results other tools read, written from each case's raw rows after the summary: HdrHistogram files and
OpenMessaging Benchmark (OMB) result files.

Per case and repetition (one raw file), for end-to-end latency (``t_recv - t_send`` per receipt) and, where
the producers were told of acknowledgements, publish latency (``t_ack - t_send`` per sent message):

* ``hdr/<case>.<kind>.hlog``: an HdrHistogram interval log (format 1.2, what HdrHistogram's
  ``HistogramLogReader`` in Java and the Python ``hdrhistogram`` package read): one histogram per second
  of the case, by the time each value was complete (receipt or acknowledgement), intervals in seconds since
  the case's first measured send;
* ``hdr/<case>.<kind>.hgrm``: the case's whole percentile distribution as HdrHistogram's
  ``outputPercentileDistribution`` writes it (what its plotter draws), values in milliseconds.

Values are recorded in whole microseconds (OMB's unit; ns truncated) with 3 significant digits, between
1 µs and one hour (longer values are recorded as one hour). So a percentile read from these files equals the
summary's (exact, from ns) to within the histogram's precision: one part in a thousand, or 1 µs.

* ``omb/<case>.json``: the case in the shape of OMB's ``TestResult`` (``bin/create_charts.py`` and other
  OMB tooling read it): rates and latency percentiles per 10-second window (OMB's reporting interval) and
  aggregated over the case, publish latency and end-to-end latency in ms, publish delay (from the
  open-loop schedule's intended send time) in µs. Aggregated figures are exact (from the raw rows, like
  the summary); a latency the case does not have is left out rather than written as 0.

Warmup rows are left out, as everywhere in the summary.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.runfolder import RunFolder
from harness.runfolder.schema import HDR_DIR, OMB_DIR

#: HdrHistogram settings of every file written here.
LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES = 1, 3_600_000_000, 3
#: Values below this are exact in the histogram (3 significant digits: 2048 sub-buckets); above, a bucket
#: of values ``[2^m, 2^(m+1))`` has a width of ``2^(m - 10)``.
_EXACT_BELOW = 2048
INTERVAL_S = 1.0  # seconds per interval histogram of an ``.hlog``
OMB_WINDOW_S = 10.0  # OMB's reporting interval
OMB_PERCENTILES = (50.0, 75.0, 95.0, 99.0, 99.9, 99.99, 99.999)
_OMB_SUFFIX = {50.0: "50pct", 75.0: "75pct", 95.0: "95pct", 99.0: "99pct", 99.9: "999pct", 99.99: "9999pct",
               99.999: "99999pct"}
_COLUMNS = ["producer", "consumer", "seq", "warmup", "t_intended", "t_send", "t_ack", "t_recv"]


def histogram() -> Any:
    """An empty histogram with the settings of every file written here."""
    from hdrh.histogram import HdrHistogram

    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


def _widths(values: np.ndarray) -> np.ndarray:
    """The width of the histogram bucket each of int64 ``values`` falls in (1 below ``_EXACT_BELOW``)."""
    shift = np.zeros(values.shape, np.int64)
    big = values >= _EXACT_BELOW
    shift[big] = np.floor(np.log2(values[big])).astype(np.int64) - 10
    return np.left_shift(np.ones(values.shape, np.int64), shift)


def bucketed(values_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, counts) of int64 µs ``values_us`` after moving each to the lowest value of its
    histogram bucket: recording those with their counts fills the histogram exactly as recording every value
    would, in as many calls as there are buckets in use."""
    v = np.clip(values_us, 0, HIGHEST_US)
    return np.unique(v & ~(_widths(v) - 1), return_counts=True)


def record(hist: Any, values_us: np.ndarray) -> Any:
    for value, count in zip(*bucketed(values_us), strict=True):
        hist.record_value(int(value), int(count))
    return hist


def interval_log(values_us: np.ndarray, done_s: np.ndarray, comment: str, start_epoch_s: float) -> str:
    """The ``.hlog`` text: one interval histogram per ``INTERVAL_S`` of ``done_s`` (seconds since the case's
    start at which each value was complete)."""
    from hdrh.log import HistogramLogWriter

    out = io.StringIO()
    writer = HistogramLogWriter(out)
    writer.output_comment(f"[{comment}]")
    writer.output_log_format_version()
    started = datetime.fromtimestamp(start_epoch_s, UTC).isoformat(sep=" ", timespec="seconds")
    out.write(f"#[StartTime: {start_epoch_s:.3f} (seconds since epoch), {started}]\n")
    writer.output_legend()
    slots = np.floor(np.maximum(done_s, 0.0) / INTERVAL_S).astype(np.int64)
    order = np.argsort(slots, kind="stable")
    slots, values_us = slots[order], values_us[order]
    bounds = np.flatnonzero(np.r_[True, slots[1:] != slots[:-1]]) if len(slots) else np.array([], np.int64)
    for begin, end in zip(bounds, np.r_[bounds[1:], len(slots)], strict=True):
        hist = record(histogram(), values_us[begin:end])
        start = float(slots[begin]) * INTERVAL_S
        hist.set_start_time_stamp(int(start * 1000))
        hist.set_end_time_stamp(int((start + INTERVAL_S) * 1000))
        # max in ms (the unit ratio of µs values); the payload keeps the µs values
        writer.output_interval_histogram(hist, start, start + INTERVAL_S, 1000.0)
    return out.getvalue()


def percentile_distribution(values_us: np.ndarray, scale: float = 1000.0, ticks_per_half_distance: int = 5) -> bytes:
    """The ``.hgrm`` text of ``values_us`` in ms, as the ``hdrhistogram`` package's
    ``output_percentile_distribution`` writes it for a histogram of them (HdrHistogram's
    ``outputPercentileDistribution``): line for line the same, but computed over the buckets in use, where the
    package walks every bucket below the largest value three times in Python (about 100 ms a file against
    0.3-4 ms: 10.5 s of a smoke run's exports), and with the standard deviation in ms, as HdrHistogram's Java writes it (the package
    leaves it in µs beside a mean in ms)."""
    lowest, counts = bucketed(np.asarray(values_us, np.int64))
    widths = _widths(lowest)
    highest, middle = (lowest + widths - 1).tolist(), (lowest + (widths >> 1)).tolist()
    tally = counts.tolist()
    total = sum(tally)
    out = io.BytesIO()
    out.write(b"%12s %14s %10s %14s\n\n" % (b"Value", b"Percentile", b"TotalCount", b"1/(1-Percentile)"))
    digits = SIGNIFICANT_FIGURES
    line, last_line = f"%12.{digits}f %2.12f %10d %14.2f\n".encode(), f"%12.{digits}f %2.12f %10d\n".encode()
    # The package's percentile iterator, over the buckets in use (one in use at a time, ``fresh`` until its
    # count is added): a line each time the cumulative percentile reaches the next level, then one at 100 %.
    level, at, cumulative, fresh, last = 0.0, 0, 0, True, False
    while total:
        if cumulative >= total:
            if last:
                break
            level, last = 100.0, True
        if fresh:
            cumulative += tally[at]
            fresh = False
        if (100.0 * cumulative) / total >= level:
            if level != 100:
                out.write(line % (highest[at] / scale, level / 100, cumulative, 1 / (1 - level / 100)))
            else:
                out.write(last_line % (highest[at] / scale, level / 100, cumulative))
            gap = 100.0 - level
            if gap:
                level += 100.0 / (ticks_per_half_distance * math.pow(2, (math.log(100 / gap) / math.log(2)) + 1))
            continue
        at, fresh = at + 1, True
    mean = float(sum(c * m for c, m in zip(tally, middle, strict=True))) / total if total else 0.0
    spread = 0.0
    for c, m in zip(tally, middle, strict=True):
        spread += ((m * 1.0) - mean) ** 2 * c
    deviation = math.sqrt(spread / total) if total else 0.0
    empty = histogram()
    out.write(f"#[Mean    = %12.{digits}f, StdDeviation   = %12.{digits}f]\n".encode() % (mean / scale,
                                                                                        deviation / scale))
    out.write(f"#[Max     = %12.{digits}f, TotalCount     = %12.{digits}f]\n".encode() % (
        (highest[-1] if total and lowest[-1] else 0) / scale, total))
    out.write(b"#[Buckets = %12d, SubBuckets     = %12d]\n" % (empty.bucket_count, empty.sub_bucket_count))
    return out.getvalue()


def _us(ns: np.ndarray) -> np.ndarray:
    return np.asarray(ns, dtype=np.int64) // 1000


def case_values(raw: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per latency kind (``e2e``, ``publish``), (latencies in ns, when each was complete in ns, intended-send
    delays in ns or empty) of one case and repetition's non-warmup raw rows."""
    rows = raw[~raw["warmup"].fillna(False).astype(bool)]
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    got = rows[rows["t_recv"].notna() & rows["t_send"].notna()]
    if len(got):
        t_send, t_recv = got["t_send"].to_numpy(np.int64), got["t_recv"].to_numpy(np.int64)
        out["e2e"] = (t_recv - t_send, t_recv, np.zeros(0, np.int64))
    sent = rows[rows["t_send"].notna()].drop_duplicates(["producer", "seq"])
    acked = sent[sent["t_ack"].notna()]
    if len(acked):
        t_send, t_ack = acked["t_send"].to_numpy(np.int64), acked["t_ack"].to_numpy(np.int64)
        out["publish"] = (t_ack - t_send, t_ack, np.zeros(0, np.int64))
    return out


def write_exports(run: RunFolder) -> list[str]:
    """Write the HdrHistogram and OMB files of every raw file of ``run``; returns the paths written,
    relative to the run folder."""
    written: list[str] = []
    scenarios = {str(s.get("name")): s for s in run.manifest.get("scenarios") or []}
    variants = run.manifest.get("variants") or {}
    start_epoch = _epoch(str(run.manifest.get("started") or ""))
    for path in run.raw_files():
        name = Path(str(path)).name.removesuffix(".parquet")
        raw = run.read_raw(name, _COLUMNS + ["scenario", "system", "variant", "size", "rate", "repetition"])
        if raw.empty:
            continue
        first = raw.iloc[0]
        measured = raw[~raw["warmup"].fillna(False).astype(bool)]
        t0 = int(measured["t_send"].min()) if measured["t_send"].notna().any() else 0
        values = case_values(raw)
        for kind, (lat_ns, done_ns, _) in values.items():
            lat_us = _us(np.maximum(lat_ns, 0))
            comment = f"mqbench {run.run_id} {name} {kind} latency, microseconds"
            hlog = interval_log(lat_us, (done_ns - t0) / 1e9, comment, start_epoch)
            written.append(str(run.write_file(f"{HDR_DIR}/{name}.{kind}.hlog", hlog.encode())))
            written.append(str(run.write_file(f"{HDR_DIR}/{name}.{kind}.hgrm", percentile_distribution(lat_us))))
        label = (variants.get(f"{first['system']}/{first['variant']}") or {}).get("label") or str(first["system"])
        scenario = {"name": str(first["scenario"]), **scenarios.get(str(first["scenario"]), {})}
        result = omb_result(measured, scenario, str(label), str(first["variant"]), int(first["size"]), t0)
        written.append(str(run.write_file(f"{OMB_DIR}/{name}.json", json.dumps(result, indent=2).encode())))
    return written


def _epoch(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


def _stats(values: np.ndarray, scale: float) -> dict[str, float]:
    """avg, the OMB percentiles and max of ``values`` (ns) divided by ``scale``; {} when there are none."""
    if not len(values):
        return {}
    q = np.quantile(values, [p / 100 for p in OMB_PERCENTILES])
    out = {"Avg": float(values.mean()) / scale, "Max": float(values.max()) / scale}
    out.update({_OMB_SUFFIX[p]: float(v) / scale for p, v in zip(OMB_PERCENTILES, q, strict=True)})
    return out


def omb_result(rows: pd.DataFrame, scenario: Mapping[str, Any], label: str, variant: str, size: int,
               t0: int) -> dict[str, Any]:
    """One case and repetition's non-warmup ``rows`` as an OMB ``TestResult`` (see the module docstring)."""
    topics = int(scenario.get("topics") or 1)
    producers, consumers = int(scenario.get("producers") or 1), int(scenario.get("consumers") or 1)
    partitions = int(scenario.get("partitions") or 1)
    sent = rows[rows["t_send"].notna()].drop_duplicates(["producer", "seq"])
    got = rows[rows["t_recv"].notna() & rows["t_send"].notna()]
    acked = sent[sent["t_ack"].notna()]
    scheduled = sent[sent["t_intended"].notna()]
    series: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {
        "publish": [(acked["t_ack"].to_numpy(np.int64), (acked["t_ack"] - acked["t_send"]).to_numpy(np.int64))],
        "publishDelay": [(scheduled["t_send"].to_numpy(np.int64),
                          (scheduled["t_send"] - scheduled["t_intended"]).to_numpy(np.int64))],
        "endToEnd": [(got["t_recv"].to_numpy(np.int64), (got["t_recv"] - got["t_send"]).to_numpy(np.int64))],
    }
    scale = {"publish": 1e6, "publishDelay": 1e3, "endToEnd": 1e6}  # ms, µs, ms as OMB writes them
    t_send, t_recv = sent["t_send"].to_numpy(np.int64), got["t_recv"].to_numpy(np.int64)
    end = max(int(t_send.max()) if len(t_send) else t0, int(t_recv.max()) if len(t_recv) else t0)
    windows = max(1, math.ceil((end - t0) / 1e9 / OMB_WINDOW_S))
    edges = t0 + (np.arange(windows + 1) * OMB_WINDOW_S * 1e9).astype(np.int64)
    edges[-1] = end + 1
    spans = np.diff(edges) / 1e9
    out: dict[str, Any] = {
        "workload": str(scenario.get("name") or ""),
        "driver": f"mqbench {label}" + ("" if variant == "default" else f" {variant}"),
        "messageSize": size, "topics": topics, "partitions": partitions,
        "producersPerTopic": max(1, producers // topics), "consumersPerTopic": max(1, consumers // topics),
        "publishRate": (np.histogram(t_send, edges)[0] / spans).tolist(),
        "publishErrorRate": [0.0] * windows,
        "consumeRate": (np.histogram(t_recv, edges)[0] / spans).tolist(),
        "backlog": _backlog(t_send, t_recv, edges, max(1, len(got)) / max(1, len(sent))),
    }
    for kind, [(stamps, values)] in series.items():
        per_window = [_stats(values[(stamps >= lo) & (stamps < hi)], scale[kind])
                      for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
        whole = _stats(values, scale[kind])
        if not whole:
            continue
        for stat in ("Avg", *_OMB_SUFFIX.values(), "Max"):
            out[f"{kind}Latency{stat}"] = [w.get(stat, math.nan) for w in per_window]
            out[f"aggregated{kind[0].upper()}{kind[1:]}Latency{stat}"] = whole[stat]
        quantiles = np.quantile(values, [p / 100 for p in _QUANTILE_KEYS])
        out[f"aggregated{kind[0].upper()}{kind[1:]}LatencyQuantiles"] = {
            f"{p:g}": float(v) / scale[kind] for p, v in zip(_QUANTILE_KEYS, quantiles, strict=True)}
    return _finite(out)


_QUANTILE_KEYS: Sequence[float] = (1, 5, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999)


def _backlog(t_send: np.ndarray, t_recv: np.ndarray, edges: np.ndarray, fanout: float) -> list[int]:
    """Messages sent and not yet received at the end of each window (receipts per subscriber counted as
    ``fanout`` per message, as OMB counts ``subscriptions × sent - received``)."""
    sent = np.searchsorted(np.sort(t_send), edges[1:])
    received = np.searchsorted(np.sort(t_recv), edges[1:])
    return [int(round(s * fanout - r)) for s, r in zip(sent, received, strict=True)]


def _finite(value: Any) -> Any:
    """JSON has no NaN: a window without values of a kind is null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value
