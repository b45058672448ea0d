"""Endpoint-based metrics as pure functions over numpy arrays of nanosecond stamps.

Definitions (DESIGN.md, from the seed on ZeroMQ's architecture):
* latency exists per message between two endpoints: ``t_recv - t_send``; a stream has a distribution;
* throughput exists at one endpoint: messages / (last stamp - first stamp) at the sender or the receiver;
* delivery accounting per consumer: expected, received, lost, duplicated, out of order.
Percentiles use numpy's default (linear interpolation), which Spark's exact ``percentile`` also uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.metrics.records import PERCENTILES

Int64Array = npt.NDArray[np.int64]


def throughput(stamps_ns: npt.ArrayLike) -> float:
    """Messages per second at one endpoint: (n - 1) intervals over (last - first).

    n stamps span n - 1 intervals; counting n over the span would overstate short runs. Returns NaN when
    fewer than two stamps or a zero span make the rate undefined.
    """
    s = np.asarray(stamps_ns, dtype=np.int64)
    if s.size < 2:
        return float("nan")
    span = int(s.max()) - int(s.min())
    if span <= 0:
        return float("nan")
    return (s.size - 1) / (span / 1e9)


def megabytes_per_second(msgs_per_s: float, size: int) -> float:
    return msgs_per_s * size / 1e6


def latency_percentiles(
    latencies_ns: npt.ArrayLike, percentiles: Sequence[float] = PERCENTILES
) -> dict[str, float]:
    """Percentiles, max and mean in microseconds: keys ``p50`` ... ``p99.99``, ``max``, ``mean``.

    NaN everywhere for an empty input (nothing was received), never an invented number.
    """
    lat = np.asarray(latencies_ns, dtype=np.float64)
    out: dict[str, float] = {}
    if lat.size == 0:
        for p in percentiles:
            out[f"p{p:g}"] = float("nan")
        out["max"] = out["mean"] = float("nan")
        return out
    values = np.percentile(lat, list(percentiles))
    for p, v in zip(percentiles, values, strict=True):
        out[f"p{p:g}"] = float(v) / 1e3
    out["max"] = float(lat.max()) / 1e3
    out["mean"] = float(lat.mean()) / 1e3
    return out


def message_keys(producer: npt.ArrayLike, seq: npt.ArrayLike) -> Int64Array:
    """One int64 per (producer, seq): producer in the high bits, seq (< 2**32) in the low ones."""
    p = np.asarray(producer, dtype=np.int64)
    s = np.asarray(seq, dtype=np.int64)
    return (p << 32) | s


@dataclass(frozen=True)
class Delivery:
    expected: int
    received: int  # distinct messages that arrived
    lost: int
    duplicated: int  # arrivals beyond the first of the same message
    out_of_order: int  # arrivals with a lower seq than an earlier arrival from the same producer


def delivery(
    expected_keys: npt.ArrayLike, arrived_keys_in_order: npt.ArrayLike
) -> Delivery:
    """Delivery accounting at one consumer (or one queue's consumers taken together).

    ``arrived_keys_in_order`` are message keys in arrival order. Arrivals of keys that were not expected
    (warmup messages) are ignored.
    """
    exp = np.unique(np.asarray(expected_keys, dtype=np.int64))
    arr = np.asarray(arrived_keys_in_order, dtype=np.int64)
    arr = arr[np.isin(arr, exp)]
    distinct = np.unique(arr)
    received = int(distinct.size)
    duplicated = int(arr.size - distinct.size)
    return Delivery(
        expected=int(exp.size),
        received=received,
        lost=int(exp.size - received),
        duplicated=duplicated,
        out_of_order=out_of_order(arr),
    )


def out_of_order(arrived_keys_in_order: npt.ArrayLike) -> int:
    """First arrivals whose seq is lower than the highest seq already seen from the same producer.

    A duplicate is counted as a duplicate, not again as out of order: only first arrivals are looked at.
    """
    keys = np.asarray(arrived_keys_in_order, dtype=np.int64)
    if keys.size < 2:
        return 0
    _, first = np.unique(keys, return_index=True)
    keys = keys[np.sort(first)]
    producers = keys >> 32
    seqs = keys & 0xFFFFFFFF
    total = 0
    for p in np.unique(producers):
        s = seqs[producers == p]
        if s.size < 2:
            continue
        running_max = np.maximum.accumulate(s)
        total += int(np.count_nonzero(s[1:] < running_max[:-1]))
    return total
