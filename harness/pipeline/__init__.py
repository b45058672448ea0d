"""Results pipeline: raw per-message records of one or many runs -> summary tables.

Public API::

    from harness.pipeline import load_summary, summarise_run, summarize
    summarise_run(Path("results/2024-..."))                 # compute the run's one summary and store it
    summary = load_summary([Path("results/2024-...")])      # read it (computing it first if missing)
    summary = summarize([...], engine="spark")              # compute without storing (tests, notebooks)

Definitions follow DESIGN.md ("Endpoint-based definitions"): latency per message between two endpoints
(round trip at the requester for reqrep), sender and receiver throughput each at its own endpoint,
percentiles from raw rows (never averaged), delivery accounting per case.
"""

from harness.pipeline._aggregate import CI_METRICS, confidence_interval
from harness.pipeline._errors import PipelineError
from harness.pipeline._index import add_run, index_results, lake_for, run_folders
from harness.pipeline._search import SEARCH_KEYS
from harness.pipeline._session import JAVA_HINT, NO_JAVA_FALLBACK, java_available, spark_session
from harness.pipeline._summary import (
    ENGINE_VARIABLE,
    ENGINES,
    Summary,
    default_engine,
    load_summary,
    newest_run,
    summarise_run,
    summarize,
    write_summary,
)
from harness.pipeline._tables import (
    DISTRIBUTION_COLUMNS,
    EXTRA_COLUMNS,
    PER_REPETITION_COLUMNS,
    SERIES_COLUMNS,
)
from harness.runfolder import RunInfo

__all__ = [
    "SEARCH_KEYS",
    "CI_METRICS",
    "DISTRIBUTION_COLUMNS",
    "ENGINES",
    "ENGINE_VARIABLE",
    "EXTRA_COLUMNS",
    "JAVA_HINT",
    "NO_JAVA_FALLBACK",
    "PER_REPETITION_COLUMNS",
    "SERIES_COLUMNS",
    "PipelineError",
    "RunInfo",
    "Summary",
    "add_run",
    "confidence_interval",
    "default_engine",
    "index_results",
    "java_available",
    "lake_for",
    "load_summary",
    "newest_run",
    "run_folders",
    "spark_session",
    "summarise_run",
    "summarize",
    "write_summary",
]
