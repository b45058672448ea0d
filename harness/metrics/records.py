"""Raw per-message records: the schema of ``results/<run>/raw/*.parquet`` and the summary columns.

One raw row per (message, receiving consumer). A message nobody received has one row with ``consumer = -1``
and a null ``t_recv`` (queue pattern) or one row per consumer that should have had it (pubsub). A duplicate
delivery is a second row with the same (producer, seq, consumer). For reqrep, ``t_recv`` is when the reply
reached the requester, so ``t_recv - t_send`` is a round trip, and ``consumer`` is the requester's index.

All stamps are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, shared by the processes of one host), in ns.
``t_intended`` is the open-loop schedule's send time (null at rate ``max``); ``t_ack`` is when a
synchronously acknowledging producer's send returned (null otherwise).
"""

from __future__ import annotations

import pyarrow as pa

RAW_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("scenario", pa.string()),
        ("pattern", pa.string()),
        ("system", pa.string()),
        ("variant", pa.string()),
        ("repetition", pa.int32()),
        ("size", pa.int32()),
        ("rate", pa.float64()),  # offered rate in msgs/s over all producers; NaN for "max"
        ("producer", pa.int32()),
        ("consumer", pa.int32()),
        ("seq", pa.int64()),
        ("warmup", pa.bool_()),
        ("t_intended", pa.int64()),
        ("t_send", pa.int64()),
        ("t_ack", pa.int64()),
        ("t_recv", pa.int64()),
    ]
)

#: Columns that identify one measured case; the summary has one row per case and repetition.
CASE_KEYS = ("run_id", "scenario", "pattern", "system", "variant", "size", "rate")

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def percentile_column(p: float, prefix: str = "lat") -> str:
    """``lat_p50_us``, ``lat_p99_9_us``, ``lat_p99_99_us``..."""
    text = f"{p:g}".replace(".", "_")
    return f"{prefix}_p{text}_us"


#: Summary columns (``summary.parquet`` / ``summary.csv``), one row per case and repetition.
SUMMARY_COLUMNS = (
    *CASE_KEYS,
    "label",  # display name, e.g. "kafka (tansu)"
    "guarantee",
    "repetition",
    "producers",
    "consumers",
    "sent",
    "expected",
    "received",
    "lost",
    "duplicated",
    "out_of_order",
    "sender_msgs_per_s",
    "sender_mb_per_s",
    "receiver_msgs_per_s",
    "receiver_mb_per_s",
    "latency_kind",  # "one-way" or "round-trip"
    "latency_from",  # "actual send" ; intended-time latency is in the lat_intended_* columns
    *(percentile_column(p) for p in PERCENTILES),
    "lat_max_us",
    "lat_mean_us",
    *(percentile_column(p, "lat_intended") for p in PERCENTILES),
    "lat_intended_max_us",
    "send_delay_p50_us",
    "send_delay_p99_us",
    "send_delay_max_us",
    "complete",
)
