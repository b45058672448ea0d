"""Results pipeline: raw per-message records of one or many runs -> summary tables.

Public API::

    from harness.pipeline import summarize, write_summary
    summary = summarize([Path("results/2024-...")], engine="auto")   # or "spark" / "pandas"
    write_summary(summary, Path("results/2024-..."))

Definitions follow DESIGN.md ("Endpoint-based definitions"): latency per message between two endpoints
(round trip at the requester for reqrep), sender and receiver throughput each at its own endpoint,
percentiles from raw rows (never averaged), delivery accounting per case.
"""

from harness.pipeline._aggregate import CI_METRICS, confidence_interval
from harness.pipeline._finish import (
    DISTRIBUTION_COLUMNS,
    EXTRA_COLUMNS,
    PER_REPETITION_COLUMNS,
    SERIES_COLUMNS,
)
from harness.pipeline._runs import PipelineError, RunInfo, newest_run, read_run
from harness.pipeline._spark import JAVA_HINT, spark_session
from harness.pipeline._summary import (
    APPROX_ACCURACY,
    EXACT_LIMIT,
    PANDAS_MAX_ROWS,
    Summary,
    summarize,
    write_summary,
)

__all__ = [
    "APPROX_ACCURACY",
    "CI_METRICS",
    "DISTRIBUTION_COLUMNS",
    "EXACT_LIMIT",
    "EXTRA_COLUMNS",
    "JAVA_HINT",
    "PANDAS_MAX_ROWS",
    "PER_REPETITION_COLUMNS",
    "SERIES_COLUMNS",
    "PipelineError",
    "RunInfo",
    "Summary",
    "confidence_interval",
    "newest_run",
    "read_run",
    "spark_session",
    "summarize",
    "write_summary",
]
