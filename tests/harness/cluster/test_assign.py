"""Roles given to barrier tasks after placement: hosts honoured, the rest spread over executors."""

from __future__ import annotations

import pytest

from harness._spark_calls import failure_reason
from harness.cluster import Role, StageError, assign


def test_roles_spread_over_executors() -> None:
    places = [("h", "e1"), ("h", "e1"), ("h", "e2"), ("h", "e2")]
    roles = [Role("producer-0"), Role("consumer-0"), Role("producer-1"), Role("consumer-1")]
    chosen = assign(roles, places)
    executor_of = {roles[r].name: places[t][1] for t, r in enumerate(chosen)}
    assert executor_of["producer-0"] != executor_of["consumer-0"]
    assert sorted(chosen) == [0, 1, 2, 3]


def test_a_role_with_a_host_runs_there() -> None:
    places = [("a", "e1"), ("b", "e2")]
    roles = [Role("producer-0", host="b"), Role("consumer-0", host="a")]
    assert assign(roles, places) == [1, 0]


def test_a_missing_host_is_one_sentence() -> None:
    with pytest.raises(StageError, match="wants host 'c'.*free tasks run on a, b"):
        assign([Role("producer-0", host="c"), Role("consumer-0")], [("a", "e1"), ("b", "e2")])


# What py4j gives for a barrier task that raised (abridged from a local[2] run) and for a lost executor.
_TASK_RAISED = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover from a failed barrier \
ResultStage. Most recent failure reason: Stage failed because barrier task ResultTask(0, 1) finished unsuccessfully.
org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the Python worker: \
Traceback (most recent call last):
  File "/x/pyspark.zip/pyspark/worker.py", line 4327, in invoke_udf
    run_process()
         ^^^^^^^^^^^^^
  File "/x/probe.py", line 7, in body
    raise ValueError("boom in the task")
ValueError: boom in the task
 SQLSTATE: 38000
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:1097)
"""
_EXECUTOR_LOST = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)
"""


def test_a_failed_stage_is_told_in_one_line() -> None:
    assert failure_reason(_TASK_RAISED) == "ValueError: boom in the task"
    assert failure_reason(_EXECUTOR_LOST) == "Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)"
    assert failure_reason("") == "no reason given"


def test_failure_reason_looks_through_the_wrapper_to_the_causes() -> None:
    text = ("An error occurred while calling o541.getResult.\n"
            ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
            "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)\n"
            "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading "
            "file file:///r/raw/a.parquet.  SQLSTATE: KD001\n"
            "Caused by: java.lang.RuntimeException: footer is too large: 2378207019to be read\n")
    assert failure_reason(text) == ("[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
                                    "file:///r/raw/a.parquet.; footer is too large: 2378207019to be read")
