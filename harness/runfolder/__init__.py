"""The run folder ``results/<run-id>/``: its layout and schemas, atomic writes, redaction, and ``RunFolder``,
the one type that writes and reads it. Every other package goes through here; this package imports only
:mod:`harness.metrics` (pure functions), never the runner, the pipeline or the report. A run folder may
live on shared storage named by a URI (``file://``, ``hdfs://``, ``s3://``/``s3a://``; ``_store.py``)."""

from harness.runfolder._case import CaseKey
from harness.runfolder._folder import (
    RunFolder,
    RunFolderError,
    RunInfo,
    count_raw_rows,
    first_raw_row,
    newest_run,
    read_json,
    read_raw_table,
)
from harness.runfolder._host import git_revision, host_info, new_run_id
from harness.runfolder._io import atomic_write, redact, write_frame
from harness.runfolder._lake import Lake
from harness.runfolder._store import is_uri, local_path

__all__ = [
    "CaseKey",
    "Lake",
    "RunFolder",
    "RunFolderError",
    "RunInfo",
    "atomic_write",
    "count_raw_rows",
    "first_raw_row",
    "git_revision",
    "host_info",
    "is_uri",
    "local_path",
    "new_run_id",
    "newest_run",
    "read_json",
    "read_raw_table",
    "redact",
    "write_frame",
]
