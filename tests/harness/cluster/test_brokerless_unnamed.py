"""Brokerless cases on any cluster: `mqbench compare --spark-master` of zmq queue and request/reply scenarios
with no ``hosts:`` on a standalone master with two one-core workers (both on 127.0.0.1, each naming itself a
host through MQBENCH_HOST). The listening side publishes its executor's address through the barrier stage;
the producer and the consumer run on different executors. The master and workers are stopped by pid."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.pipeline import run_folders
from tests.harness.cluster.standalone import Cluster, standalone

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
MQBENCH = Path(sys.executable).parent / "mqbench"
SCENARIOS = """
name: unnamed-zmq-queue
pattern: queue
systems: [zmq]
message_sizes: [100]
messages: 3000
warmup: 100
repetitions: 1
timeout: 20
variants: {zmq: {transport: tcp}}
---
name: unnamed-zmq-reqrep
pattern: reqrep
systems: [zmq]
message_sizes: [100]
messages: 500
warmup: 50
repetitions: 1
timeout: 20
variants: {zmq: {transport: tcp}}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not os.environ.get("JAVA_HOME") and subprocess.run(["which", "java"], capture_output=True).returncode:
        if os.environ.get("CI") == "true":
            pytest.fail("Java 17 is required for the cluster tests in CI")
        pytest.skip("PySpark needs Java 17")
    with standalone(tmp_path_factory.mktemp("unnamed"), hosts=("host-a", "host-b")) as started:
        yield started
    assert started.killed == [], f"had to SIGKILL {started.killed}"


def test_brokerless_cases_without_hosts_run_across_two_executors(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIOS)
    done = subprocess.run(
        [str(MQBENCH), "compare", str(tmp_path / "s.yaml"), "--no-report", "--out", str(tmp_path / "res"),
         "--spark-master", cluster.master],
        cwd=ROOT, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "computed by: Spark (spark://" in done.stdout
    (run,) = run_folders(tmp_path / "res")
    raws = {p.name.split("__")[0]: pd.read_parquet(p) for p in (run / "raw").iterdir()}
    queue, reqrep = raws["unnamed-zmq-queue"], raws["unnamed-zmq-reqrep"]
    received = queue[queue["t_recv"].notna()]
    assert received["send_executor"].nunique() == 1 and received["recv_executor"].nunique() == 1
    assert set(received["send_executor"]) != set(received["recv_executor"])  # two executors
    assert {*queue["send_host"].dropna(), *queue["recv_host"].dropna()} == {"host-a", "host-b"}
    assert reqrep["t_recv"].notna().all()
    summary = pd.read_parquet(run / "summary.parquet").set_index("scenario")
    assert summary["lost"].to_dict() == {"unnamed-zmq-queue": 0, "unnamed-zmq-reqrep": 0}
    assert summary["lat_p50_us"].notna().all()
