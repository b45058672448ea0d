"""Runs beyond one machine: a case's roles as one Spark barrier stage on a cluster's executors, and the
clock offsets between their hosts and the coordinator.

    from harness.cluster import Role, run_stage
    results = run_stage(spark, [Role("producer-0", spec), Role("consumer-0", spec)], body)
    results[0].host, results[0].executor, results[0].offset   # where it ran, coordinator - host clock

``ClusterCases`` runs the runner's cases this way (``mqbench compare --spark-master``): the runner's worker
code runs inside the tasks. Nothing here imports the pipeline or the report.
"""

from harness.cluster._case import ClusterCases
from harness.cluster._clock import ClockServer, Offset, estimate, measure, over_case
from harness.cluster._stage import (
    HOST_VARIABLE,
    Role,
    RoleResult,
    StageError,
    assign,
    run_stage,
)

__all__ = [
    "HOST_VARIABLE",
    "ClockServer",
    "ClusterCases",
    "Offset",
    "Role",
    "RoleResult",
    "StageError",
    "assign",
    "estimate",
    "measure",
    "over_case",
    "run_stage",
]
