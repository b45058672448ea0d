"""Run by test_stage in its own process (one SparkContext per process): a two-role barrier stage on the
master given as argv[1]; prints the results as JSON."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from harness.cluster import Role, run_stage
from harness.pipeline import spark_session


def body(role: Role) -> dict[str, Any]:
    return {"pid": os.getpid(), "t": time.monotonic_ns(), "spec": role.spec}


def main() -> None:
    os.environ["MQBENCH_SPARK_DRIVER_MEMORY"] = "512m"
    spark = spark_session(sys.argv[1])
    try:
        roles = [Role("producer-0", {"n": 1}, host="host-a"), Role("consumer-0", {"n": 2}, host="host-b")]
        results = run_stage(spark, roles, body)
    finally:
        spark.stop()
    print(json.dumps([{"role": r.role, "value": r.value, "host": r.host, "executor": r.executor,
                       **r.offset.as_dict()} for r in results]))


if __name__ == "__main__":
    main()
