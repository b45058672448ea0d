"""The schemas of ``results/<run-id>/``: raw records, summary columns, evaluation tables, file names.

Raw records (``raw/*.parquet``): one row per (message, receiving consumer). A message nobody received has
one row with ``consumer = -1`` and a null ``t_recv`` (queue pattern) or one row per consumer that should have
had it (pubsub). A duplicate delivery is a second row with the same (producer, seq, consumer). For reqrep,
``t_recv`` is when the reply reached the requester, so ``t_recv - t_send`` is a round trip, and ``consumer``
is the requester's index. All stamps are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, shared by the processes
of one host), in ns. ``t_intended`` is the open-loop schedule's send time (null at rate ``max``); ``t_ack``
is when the system acknowledged the send: when a synchronously acknowledging producer's send returned, or when
a producer that reports outcomes (``Producer.watch_outcomes``) heard of it (null without an acknowledgement); ``send_failed`` is true
when the producer's send of that message raised (the producer was told; null in runs before it existed).
``send_host``/``send_executor`` and ``recv_host``/``recv_executor`` name the host and Spark executor of the
worker that stamped ``t_send`` and ``t_recv`` in a run on a Spark cluster (``compare --spark-master``), whose
stamps are on the coordinator's clock (``clocks.parquet``); null in a run on one machine and in older runs.
The raw files of a keyed run (``keys:``) have one more column, ``key`` (``KEY_FIELD``): the message key each
message was sent with (``harness.runner._keys`` defines which message had which).
"""

from __future__ import annotations

import pyarrow as pa

from harness.metrics.compute import PERCENTILES
from harness.metrics.recovery import RECOVERY_COLUMNS

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
        ("send_failed", pa.bool_()),
        ("unconfirmed", pa.bool_()),  # the producer was told outcomes, and of this send none came
        ("drained", pa.bool_()),  # never arrived, but the final read found it held by the broker
        ("send_host", pa.string()),
        ("send_executor", pa.string()),
        ("recv_host", pa.string()),
        ("recv_executor", pa.string()),
    ]
)

#: The raw column a keyed run's files have beside RAW_SCHEMA's: the message key each message was sent with.
KEY_FIELD = pa.field("key", pa.string())

#: Raw columns only a run on a Spark cluster fills (null otherwise).
HOST_COLUMNS = ("send_host", "send_executor", "recv_host", "recv_executor")

#: Columns that identify one measured case; the summary has one row per case and repetition.
CASE_KEYS = ("run_id", "scenario", "pattern", "system", "variant", "size", "rate")

#: What each case is, per variant (from the manifest's ``variants``): display name, guarantee, client, backend.
#: What the manifest records per variant and every summary row carries: its label (system and client), its
#: guarantee, client and backend, and its parity: the broker's shape (nodes, replicas) and the one-line
#: ``parity`` label (shape; what a send waits for; when messages are forced to disk).
VARIANT_LABELS = ("label", "guarantee", "client", "backend", "parity", "nodes", "replicas")

#: The columns that name a case in the evaluation tables (faults, time series, send errors, recovery).
CASE_COLUMNS = ("scenario", "pattern", "system", "variant", "label", "guarantee", "size", "rate", "repetition")


def percentile_column(p: float, prefix: str = "lat") -> str:
    """``lat_p50_us``, ``lat_p99_9_us``, ``lat_p99_99_us``..."""
    text = f"{p:g}".replace(".", "_")
    return f"{prefix}_p{text}_us"


#: The summary's CPU columns (from ``cpu.parquet``; percent of one core over the case's measured interval):
#: the broker (all its processes; NaN when brokerless or not measured), the busiest worker and its role, the
#: harness parent, the CPU seconds of all of them, ``cpu_note`` ("no broker", why a figure is missing),
#: ``client_bound``: the CPU-based label with its reason in words, empty when the rule does not apply
#: (``harness.metrics.bound``), every worker process together (``clients_cpu_pct``) and the machine's cores
#: (``cpu_cores``, from the run's host; NaN when not recorded).
CPU_SUMMARY_COLUMNS = (
    "broker_cpu_pct", "client_cpu_pct", "client_cpu_role", "harness_cpu_pct", "cpu_total_s", "cpu_note",
    "client_bound", "clients_cpu_pct", "cpu_cores",
)

#: Publish latency (OMB's publish latency, PerfTest's confirm latency): send to the system's acknowledgement,
#: ``t_ack - t_send`` over the sent messages whose producer was told of it (synchronous acks, or reported ones:
#: ``Producer.watch_outcomes``); kept apart from the end-to-end ``lat_*`` columns; NaN when the variant has
#: no acknowledgements. ``publish_count`` is the number of acknowledged messages they are taken over.
PUBLISH_COLUMNS = (
    *(percentile_column(p, "publish") for p in PERCENTILES),
    "publish_max_us",
    "publish_mean_us",
    "publish_count",
)

#: Summary columns (``summary.parquet`` / ``summary.csv``), one row per case and repetition.
SUMMARY_COLUMNS = (
    *CASE_KEYS,
    *VARIANT_LABELS,  # label: display name, e.g. "kafka (tansu)"
    "repetition",
    "producers",
    "consumers",
    "sent",
    "expected",  # delivery units: messages (queue, reqrep) or messages x subscribers (pubsub)
    "received",  # units that arrived at least once
    "lost",  # accepted units (send returned normally) that never arrived: silent loss
    "send_failed",  # units whose send raised at the producer (it was told); not counted as lost
    "unconfirmed",  # units never received whose outcome never came back (producer told outcomes): not lost
    "held",  # accepted units the consumers never got that the final read found in the broker: not lost
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
    # how far a latency between two hosts' clocks may be off (a run on a Spark cluster: ``clocks.parquet``'s
    # latency_uncertainty_ns); NaN when sender and receiver share a clock (a run on one machine)
    "clock_uncertainty_us",
    *(percentile_column(p, "lat_intended") for p in PERCENTILES),
    "lat_intended_max_us",
    "send_delay_p50_us",
    "send_delay_p99_us",
    "send_delay_max_us",
    "complete",
    *CPU_SUMMARY_COLUMNS,
    *PUBLISH_COLUMNS,
)

#: ``recovery.parquet`` / ``.csv``: one row per fault of a case (``harness.metrics.recovery``).
RECOVERY_TABLE_COLUMNS = (*CASE_COLUMNS, "case", *RECOVERY_COLUMNS)
#: ``cpu.parquet`` / ``.csv``: the runner's CPU figures, one row per process role of every case and repetition,
#: over the case's measured interval (start event to the end of the wait). ``role`` is ``broker`` (all its
#: processes; ``cpu_s`` NaN and ``note`` saying why when it runs elsewhere; no row for a brokerless system),
#: a worker (``producer-0``, ``consumer-1``, ``requester-0``, ``replier-0``; with its JVM when the client runs
#: there) or ``harness`` (the runner's parent process). ``core_pct`` is percent of one core (100 = one core busy
#: the whole interval).
CPU_TABLE_COLUMNS = (*CASE_KEYS, "repetition", "case", "role", "cpu_s", "wall_s", "core_pct", "note")
#: ``clocks.parquet`` / ``.csv`` (runs on a Spark cluster only): one row per role of every case: where it ran
#: (``host``, ``executor``), its clock offset to the coordinator over the case (``offset_ns``: coordinator minus
#: host, the mean of the measurements before and after the case) with ``uncertainty_ns`` and the best round trip
#: ``rtt_ns``, the offset applied to its host's stamps (``applied_offset_ns``: the host's tightest) and the
#: case's ``latency_uncertainty_ns``: how far a latency between two of its hosts may be off (0: one host).
CLOCK_TABLE_COLUMNS = (*CASE_KEYS, "repetition", "case", "role", "host", "executor", "offset_ns", "uncertainty_ns",
                       "rtt_ns", "applied_offset_ns", "latency_uncertainty_ns")
#: ``faults.parquet``: the runner's fault events: case columns, ``case``, what the injector reported
#: (``fault action carried_out_as at_s target t_fault_ns t_back_ns ok detail``) and ``t_start_ns``.
#: ``send_errors.parquet``: case columns, ``case``, ``producer seq t_ns`` of every send that raised.
#: ``timeseries/<case>.parquet``: the sampler's rows (``seconds backlog queue_depth broker_rss_bytes ...``),
#: case columns, ``case`` and ``depth_note`` (why queue depth was not sampled, when it was not).

# The files of a run folder.
MANIFEST = "manifest.json"
RAW_DIR = "raw"
LOGS_DIR = "logs"
WORK_DIR = ".work"
FIGURES_DIR = "figures"
TIMESERIES_DIR = "timeseries"
FAULTS = "faults"
SEND_ERRORS = "send_errors"
RECOVERY = "recovery"
CPU = "cpu"
CLOCKS = "clocks"
#: The rate-search table (``rate: search`` scenarios only): max sustained rate and knee per system variant.
SEARCH = "search"
#: The workload tables (``harness/pipeline/_workload.py``; only runs with backlog, rate-profile or topic-sweep
#: scenarios have rows): per second of those cases, per backlog case, per case of a topic sweep.
TIMELINE, BACKLOG, TOPICS = "timeline", "backlog", "topics"
WORKLOAD_TABLES = (TIMELINE, BACKLOG, TOPICS)
TIMELINE_COLUMNS = (*CASE_KEYS, "repetition", "second", "offered", "sent", "received", "e2e_p99_us",
                    "publish_p99_us", "backlog")
BACKLOG_COLUMNS = (*CASE_KEYS, "repetition", "target", "built", "backlog_messages", "release_s", "drain_s",
                   "catchup_msgs_per_s", "producer_msgs_per_s", "e2e_p99_us", "publish_p99_us", "note")
TOPICS_COLUMNS = (*CASE_KEYS, "repetition", "topics", "topics_received", "topic_msgs_per_s_min",
                  "topic_msgs_per_s_median", "topic_msgs_per_s_max")
#: The pipeline's tables, each as ``<name>.parquet`` + ``<name>.csv``; ``summary`` is the one summary.
SUMMARY_TABLES = ("summary", "aggregate", "series", "distribution")
#: Results other tools read (``harness/pipeline/_export.py``), per case and repetition: HdrHistogram interval
#: logs and percentile distributions ``hdr/<case>.<e2e|publish>.<hlog|hgrm>``; OMB-shaped ``omb/<case>.json``.
HDR_DIR = "hdr"
OMB_DIR = "omb"
#: The results lake beside the run folders (``results/lake/``, ``harness.runfolder._lake``): ``raw``, ``runs``
#: and each of LAKE_TABLES as ``<table>/date=<YYYY-MM-DD>/<run-id>[__<case>].parquet``.
LAKE_DIR = "lake"
LAKE_RUNS = "runs"
LAKE_TABLES = (*SUMMARY_TABLES, RECOVERY, SEARCH, *WORKLOAD_TABLES)
#: ``runs``: one row per run in the lake.
LAKE_RUN_COLUMNS = ("run_id", "started", "finished", "complete", "git_revision", "hostname", "cpus", "mqbench",
                    "scenarios", "systems", "engine")
REPORT_HTML = "report.html"
REPORT_MD = "summary.md"
FEATURE_MATRIX = "feature_matrix.csv"

#: ``crosscheck.parquet`` / ``.csv`` (``mqbench crosscheck``): one row per system variant, tool, reference and
#: repetition; ``reference`` is "matched" (the tool with the row's settings) or "best" (the tool at its best on
#: the broker: then R is the fraction of the broker's capacity the row reached). ``tool_settings``: what the
#: tool ran with, in words; ``tool_steady_s``: the seconds of steady state its figure covers.
#: ``harness_rate``: the harness's receiver msg/s (the pipeline's summary) of that repetition; ``tool_rate``:
#: the tool's receiver msg/s, or its sender msg/s when it has no consumer (``rate_kind`` says which);
#: ``R = harness_rate / tool_rate``; ``client_bound``: R against the matched tool below the client-bound
#: bound (0.5). CPU columns are
#: seconds over each side's own interval: ``cpu_tool_s`` the tool's processes (rusage at exit),
#: ``cpu_broker_tool_s`` the broker meanwhile, ``cpu_harness_s`` the harness's workers, ``cpu_broker_harness_s``
#: the broker meanwhile (NaN for an external broker). ``status`` is "ok", "missing", "failed" or "not run" (a
#: tool with no run with the row's settings, ``Tool.unmatched``; the row then has its run at its best only);
#: for all but "ok" ``note`` is the one-sentence reason and the tool's figures are NaN.
CROSSCHECK = "crosscheck"
CROSSCHECK_COLUMNS = (
    # reference: "matched" (the tool with the row's settings) or "best" (the tool at its best on the broker)
    "system", "variant", "client", "label", "guarantee", "tool", "reference", "tool_version", "tool_settings",
    "tool_steady_s",
    "size", "producers", "consumers", "window", "messages", "repetition",
    "harness_rate", "tool_rate", "rate_kind", "R", "client_bound",
    "tool_sender_rate", "tool_receiver_rate", "tool_lat_p50_us", "tool_lat_p99_us", "tool_lat_kind",
    "cpu_tool_s", "cpu_broker_tool_s", "tool_wall_s", "cpu_harness_s", "cpu_broker_harness_s", "harness_wall_s",
    "status", "note", "command",
)
