"""The pipeline's Spark session: one per command, started on first use and reused by every summary after it.

``local[*]`` by default (every core of this machine), a cluster with ``master`` (``spark://HOST:PORT``,
``--spark-master``). Memory is sized for a shared two-core machine: the driver JVM (which in local mode
also runs the tasks) gets ``MQBENCH_SPARK_DRIVER_MEMORY`` (2g); executors on a cluster Spark's 1g unless
``MQBENCH_SPARK_EXECUTOR_MEMORY`` says more (a worker offering less never starts one); what does not fit
spills to ``spark.local.dir`` on disk.
Spark's own console progress bar is drawn only when stderr is a terminal (it floods logs otherwise).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness._spark_calls import interruptible
from harness.pipeline._errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_HINT = "PySpark needs Java 17: install openjdk-17-jre-headless"
#: The one line a command prints when it summarises with pandas because Spark cannot run here.
NO_JAVA_FALLBACK = "no Java runtime here, so the pandas engine (the reference) computed the summary; " \
                   "install openjdk-17-jre-headless to compute it with Spark"


def java_available() -> bool:
    """Whether a Java runtime can be found (``JAVA_HOME`` or ``java`` on the PATH), so Spark can start."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return True
    return shutil.which("java") is not None


@dataclass(frozen=True)
class SessionInfo:
    """Where the session runs and what starting it cost (0 when it was already running)."""

    master: str
    start_s: float


_started: dict[int, SessionInfo] = {}
_LOG4J2 = Path(__file__).with_name("log4j2.properties")  # the Spark JVM's logging while it starts


def spark_session(master: str | None = None) -> SparkSession:
    """The active Spark session, or a new one on ``master`` (default ``local[*]``) with the UI off.

    Raises :class:`PipelineError` with :data:`JAVA_HINT` when no JVM can be started.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if not java_available():
        raise PipelineError(JAVA_HINT)
    master = master or "local[*]"
    memory = os.environ.get("MQBENCH_SPARK_DRIVER_MEMORY", "2g")
    builder = (
        SparkSession.builder.appName("mqbench-pipeline")
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", memory)
        # errors only on the console: Spark's start-up notices are not the user's business
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG4J2.as_uri()}")
        # tables come back to the driver as Arrow batches, not pickled rows
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        # small lookup tables (case ids, wanted ranks, block carries) are broadcast, never shuffled
        .config("spark.sql.autoBroadcastJoinThreshold", str(32 << 20))
        # the kept delivery units (_spark.py) are read twice, right away: compressing them as they are cached
        # (Spark's default: encoders' statistics per column and batch, a sixth of a 10M-row summary's samples
        # in a profile) took the delivery query from 16 to 20 s, warm, in three interleaved pairs (docs/pipeline.md)
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
    )
    # Python tasks (the cluster's barrier stage) must import harness: by default they run this interpreter
    # (SparkContext reads PYSPARK_PYTHON when it starts); a cluster whose hosts keep mqbench elsewhere sets it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if os.environ.get("MQBENCH_SPARK_EXECUTOR_MEMORY"):  # else Spark's 1g, which a worker must be able to give
        builder = builder.config("spark.executor.memory", os.environ["MQBENCH_SPARK_EXECUTOR_MEMORY"])
    began = time.perf_counter()
    try:  # off the main thread: a Ctrl-C while the JVM starts stops it, and PySpark installs no SIGINT handler
        session = interruptible(builder.getOrCreate, cleanup=lambda started: started.stop())
    except Exception as exc:  # the JVM gateway failing to start surfaces as assorted exception types
        raise PipelineError(f"{JAVA_HINT} (Spark did not start: {str(exc).splitlines()[0][:200]})") from exc
    # Spark's log stays off the console: a failure reaches the user as the pipeline's one sentence, its cause
    # taken from the JVM's exception (harness._spark_calls.failure_reason), not as a logged stack trace
    session.sparkContext.setLogLevel("FATAL")
    # Spark's default of 200 shuffle partitions makes every small aggregation 200 tasks; the summary's
    # shuffles are of small tables but one (which sets its own count, by rows), so a few per core.
    session.conf.set("spark.sql.shuffle.partitions", str(2 * session.sparkContext.defaultParallelism))
    _started[id(session)] = SessionInfo(master, time.perf_counter() - began)
    return session


def session_info(session: SparkSession) -> SessionInfo:
    """Where ``session`` runs, and its start time if this process started it (else 0)."""
    known = _started.get(id(session))
    return known or SessionInfo(str(session.sparkContext.master), 0.0)


def started_here(session: SparkSession) -> bool:
    """Whether :func:`spark_session` started ``session`` (not a notebook's or a caller's own)."""
    return id(session) in _started


def stop_after_cancel(session: SparkSession, wait: float = 10.0) -> None:
    """Stop ``session`` once the tasks of its cancelled jobs have ended (up to ``wait`` seconds), and without
    Spark's log: a cancelled task still reporting to a stopping scheduler, or releasing a block it already
    dropped, makes Spark log an error with its stack trace, which after a Ctrl-C says nothing to the user."""
    tracker = session.sparkContext._jsc.sc().statusTracker()  # the executors' running tasks: JVM side only
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(e.numRunningTasks() for e in tracker.getExecutorInfos()):
        time.sleep(0.05)
    session.sparkContext.setLogLevel("OFF")
    session.stop()
