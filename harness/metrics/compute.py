"""Endpoint-based metrics as pure functions over numpy arrays of nanosecond stamps.

Definitions (DESIGN.md, from the seed on ZeroMQ's architecture):
* latency exists per message between two endpoints: ``t_recv - t_send``; a stream has a distribution;
* throughput exists at one endpoint: (n - 1) / (last stamp - first stamp) at the sender or the receiver;
* delivery accounting per consumer: expected, received, lost, duplicated, out of order; sends the producer
  was told failed are kept apart from accepted messages that were lost.
Percentiles use numpy's default (linear interpolation between two order statistics: :func:`order_ranks`).
These are the only definitions: the pipeline's engines reduce raw rows to counts, stamps and quantiles and
call these functions on them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Int64Array = npt.NDArray[np.int64]

#: The latency percentiles every summary reports.
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def throughput(stamps_ns: npt.ArrayLike) -> float:
    """Messages per second at one endpoint from its stamps: see :func:`rate`."""
    s = np.asarray(stamps_ns, dtype=np.int64)
    if s.size == 0:
        return float("nan")
    return float(rate(np.array([s.size]), np.array([int(s.max()) - int(s.min())]))[0])


def rate(count: npt.ArrayLike, span_ns: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Messages per second at one endpoint: (n - 1) intervals over the span (last - first stamp) in ns,
    element-wise.

    n stamps bound n - 1 intervals; counting n over the span would overstate short runs (two messages
    1 ms apart are one interval, 1,000/s, not 2,000/s). NaN when fewer than two stamps or a zero span make
    the rate undefined.
    """
    n = np.asarray(count, dtype=np.float64)
    span = np.asarray(span_ns, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (n - 1) * 1e9 / span
    return np.where((n >= 2) & (span > 0), out, np.nan)


def megabytes_per_second(msgs_per_s: float, size: int) -> float:
    return msgs_per_s * size / 1e6


def latency_percentiles(
    latencies_ns: npt.ArrayLike, percentiles: Sequence[float] = PERCENTILES
) -> dict[str, float]:
    """Percentiles, max and mean in microseconds: keys ``p50`` ... ``p99.99``, ``max``, ``mean``.

    NaN everywhere for an empty input (nothing was received), never an invented number.
    """
    lat = np.asarray(latencies_ns, dtype=np.int64)
    out: dict[str, float] = {}
    if lat.size == 0:
        for p in percentiles:
            out[f"p{p:g}"] = float("nan")
        out["max"] = out["mean"] = float("nan")
        return out
    values = quantiles(lat, [p / 100 for p in percentiles])
    for p, v in zip(percentiles, values, strict=True):
        out[f"p{p:g}"] = float(v) / 1e3
    out["max"] = float(lat.max()) / 1e3
    out["mean"] = float(lat.mean()) / 1e3
    return out


def quantiles(values_ns: npt.ArrayLike, fractions: Sequence[float]) -> list[float]:
    """Quantiles (fractions in [0, 1]) of int64 ns values with linear interpolation (numpy's default).
    ``p / 100`` is the fraction of percentile p in both engines. NaN for no values."""
    values = np.sort(np.asarray(values_ns, dtype=np.int64))
    return quantiles_of_sorted(values, fractions)


def quantiles_of_sorted(values_ns: npt.NDArray[np.int64], fractions: Sequence[float]) -> list[float]:
    """:func:`quantiles` of values already sorted ascending."""
    n = len(values_ns)
    return [interpolate(int(values_ns[lo]), int(values_ns[hi]), w) for lo, hi, w in order_ranks(n, fractions)] \
        if n else [float("nan")] * len(fractions)


def order_ranks(n: int, fractions: Sequence[float]) -> list[tuple[int, int, float]]:
    """For each fraction q of ``n`` values: the 0-based ranks (lo, hi) of the two order statistics its
    quantile lies between and the weight of the upper one (Hyndman & Fan's definition 7, numpy's "linear").

    This and :func:`interpolate` are the one definition of a percentile: the pandas engine reads the order
    statistics from sorted values, the Spark engine finds them without sorting (``pipeline/_exact.py``).
    The index is computed with numpy's own expression, so the result equals ``numpy.quantile`` to the bit.
    """
    out = []
    for q in fractions:
        h = (n - 1) * q  # numpy's virtual index for "linear", the same float operation
        if h >= n - 1:
            out.append((n - 1, n - 1, 0.0))
        else:
            lo = math.floor(h)
            out.append((lo, lo + 1, h - lo))
    return out


def interpolate(low: int, high: int, weight: float) -> float:
    """The quantile between order statistics ``low`` and ``high`` (ns) at ``weight`` from ``low``, written as
    numpy writes it (from the nearer end, so that the result is monotone in the weight)."""
    diff = high - low
    return float(high) - diff * (1 - weight) if weight >= 0.5 else float(low) + diff * weight


def message_keys(producer: npt.ArrayLike, seq: npt.ArrayLike) -> Int64Array:
    """One int64 per (producer, seq): producer in the high bits, seq (< 2**32) in the low ones."""
    p = np.asarray(producer, dtype=np.int64)
    s = np.asarray(seq, dtype=np.int64)
    return (p << 32) | s


@dataclass(frozen=True)
class Delivery:
    """Delivery accounting of one stream.
    ``expected = received + lost + send_failed_unreceived + unconfirmed + held``:

    * ``send_failed``: messages whose send raised at the producer, or that the system refused in an
      acknowledgement it sent later (the producer was told; the runner did not retry);
    * ``unconfirmed``: messages that never arrived and whose send's outcome never came back to a producer
      that is told outcomes (in flight when its connection or node died): not accepted, so not lost;
    * ``held``: accepted messages the consumers never got but the final read found still in the broker (a
      consumer that stalled, not a broker that lost them);
    * ``lost``: accepted messages that never arrived and that the broker no longer held: silent loss;
    * a failed send that arrived all the same counts as received (and in ``send_failed``).
    """

    expected: int
    received: int  # distinct messages that arrived
    lost: int  # accepted messages that never arrived
    duplicated: int  # arrivals beyond the first of the same message
    out_of_order: int  # arrivals with a lower seq than an earlier arrival from the same producer
    send_failed: int = 0  # sends the producer was told failed
    unconfirmed: int = 0  # never arrived, outcome never told
    held: int = 0  # never arrived, found by the final read

    @property
    def accepted(self) -> int:
        return self.expected - self.send_failed - self.unconfirmed

    @classmethod
    def from_counts(
        cls, expected: int, received: int, receipts: int, failed: int, failed_received: int, out_of_order: int,
        unconfirmed: int = 0, held: int = 0,
    ) -> Delivery:
        """Accounting from counts: ``received`` distinct arrivals, ``receipts`` all arrivals, ``failed``
        sends that raised of which ``failed_received`` arrived anyway, ``unconfirmed`` and ``held`` units that
        never arrived (see the class)."""
        return cls(
            expected=expected,
            received=received,
            lost=expected - received - (failed - failed_received) - unconfirmed - held,
            duplicated=receipts - received,
            out_of_order=out_of_order,
            send_failed=failed,
            unconfirmed=unconfirmed,
            held=held,
        )


def delivery(
    expected_keys: npt.ArrayLike, arrived_keys_in_order: npt.ArrayLike, failed_keys: npt.ArrayLike = ()
) -> Delivery:
    """Delivery accounting at one consumer (or one queue's consumers taken together).

    ``arrived_keys_in_order`` are message keys in arrival order; ``failed_keys`` those whose send raised.
    Arrivals of keys that were not expected (warmup messages) are ignored.
    """
    exp = np.unique(np.asarray(expected_keys, dtype=np.int64))
    arr = np.asarray(arrived_keys_in_order, dtype=np.int64)
    arr = arr[np.isin(arr, exp)]
    distinct = np.unique(arr)
    failed = np.intersect1d(np.asarray(failed_keys, dtype=np.int64), exp)
    return Delivery.from_counts(
        expected=int(exp.size),
        received=int(distinct.size),
        receipts=int(arr.size),
        failed=int(failed.size),
        failed_received=int(np.isin(failed, distinct).sum()),
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
