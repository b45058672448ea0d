"""The PySpark engine: the pandas engine's computation, one case per Spark task, for runs of any size.

Every output row belongs to one case (``CASE_KEYS``: a case's repetitions together), and a raw file holds
one case and repetition. So the job needs no shuffle and no global sort: the driver groups the files by
case (their first rows), Spark runs one task per case, and each task reads its files with pyarrow (one pass,
Arrow columns straight into numpy) and computes :func:`harness.pipeline._pandas.compute_group` on them.
Percentiles are therefore exact (numpy's linear interpolation) and both engines give the same tables by
construction. Only the small tables come back to the driver.

The executors must see the files: a shared file system or a URI pyarrow reads (``hdfs://``, ``s3://``).
A case must fit in one Python worker's memory (about 150 bytes per raw row); cases run in parallel, one
per executor core, largest first, so the job scales with executors while a run has more cases than cores.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.pipeline import _pandas
from harness.pipeline._errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_HINT = "PySpark needs Java 17: install openjdk-17-jre-headless"


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return True
    return shutil.which("java") is not None


def spark_session(master: str | None = None, shuffle_partitions: int = 8) -> SparkSession:
    """The active Spark session, or a new one on ``master`` (default ``local[*]``) with the UI off.

    Spark's console progress bar is drawn only when stderr is a terminal (it floods logs otherwise).
    Raises :class:`PipelineError` with :data:`JAVA_HINT` when no JVM can be started.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if not _java_available():
        raise PipelineError(JAVA_HINT)
    master = master or "local[*]"
    builder = (
        SparkSession.builder.appName("mqbench-pipeline")
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # The JVM only schedules and collects small tables (the rows live in the Python workers).
        .config("spark.driver.memory", os.environ.get("MQBENCH_SPARK_DRIVER_MEMORY", "1g"))
    )
    # The Python workers must import harness: by default they run this interpreter (SparkContext reads
    # PYSPARK_PYTHON when it starts); a cluster whose hosts keep mqbench elsewhere sets it (docs/cluster.md).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # the JVM gateway failing to start surfaces as assorted exception types
        raise PipelineError(f"{JAVA_HINT} (Spark did not start: {str(exc).splitlines()[0][:200]})") from exc


def compute(spark: SparkSession, files: Sequence[Path | str]) -> _pandas.Tables:
    """(case aggregates, per-second receipt counts, pooled latency distribution), as pandas frames."""
    groups = [[str(f) for f in group] for group in _pandas.case_groups(files)]
    if not groups:
        return _pandas.concat_parts([])
    tasks = spark.sparkContext.parallelize(groups, numSlices=len(groups))
    return _pandas.concat_parts(tasks.map(_pandas.compute_group).collect())
