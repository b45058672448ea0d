"""`mqbench compare --spark-master` on a standalone master and two workers, each worker in its own host
namespace, a Redis broker on a third host: the producer runs on one worker host, the consumer on the
other, the pipeline on the same cluster. Everything started here is stopped by pid (namespaces by name)
at the end, also when the test fails. This test also covers the barrier stage itself (roles on their
hosts, one executor each, clock offsets bracketing 0 on one kernel)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.network import leftovers, network
from harness.pipeline import PER_REPETITION_COLUMNS
from harness.runfolder.schema import HOST_COLUMNS
from tests.harness.cluster.standalone import standalone
from tests.harness.network.support import require_root

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = """
name: cluster-queue
description: one producer and one consumer on two hosts of a Spark cluster, through Redis on a third
pattern: queue
systems: [redis]
message_sizes: [100]
messages: 2000
warmup: 200
rate: 2000
repetitions: 1
hosts: {producers: prod, consumers: cons}
"""
REDIS_PORT = "6391"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_compare_places_producer_and_consumer_on_two_worker_hosts(tmp_path: Path) -> None:
    require_root()
    (tmp_path / "q.yaml").write_text(SCENARIO)
    mqbench = Path(sys.executable).parent / "mqbench"
    with network(["prod", "cons", "brk"]) as net:
        assert net is not None
        prefix = net.prefix
        redis = subprocess.Popen(
            [*net.prefix_for("brk"), "redis-server", "--bind", net.address("brk"), "--port", REDIS_PORT, "--save", "",
             "--appendonly", "no", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            with standalone(tmp_path, hosts=("prod", "cons"), net=net) as cluster:
                done = subprocess.run(
                    [str(mqbench), "compare", str(tmp_path / "q.yaml"), "--systems", "redis", "--no-report",
                     "--out", str(tmp_path / "res"), "--broker", f"redis=redis://{net.address('brk')}:{REDIS_PORT}",
                     "--spark-master", cluster.master],
                    cwd=ROOT, env={**os.environ, "SPARK_LOCAL_IP": net.address(None)}, capture_output=True,
                    text=True, timeout=600)
                pids = cluster.pids
        finally:
            redis.terminate()
            redis.wait(10)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert not [pid for pid in [*pids, redis.pid] if _alive(pid)]
    assert leftovers(prefix) == []
    run = next((tmp_path / "res").iterdir())
    raw = pd.read_parquet(next((run / "raw").iterdir()))
    assert set(raw["send_host"]) == {"prod"} and set(raw["recv_host"]) == {"cons"}
    assert raw["send_executor"].iloc[0].startswith(net.address("prod"))
    assert raw["recv_executor"].iloc[0].startswith(net.address("cons"))
    clocks = pd.read_parquet(run / "clocks.parquet")
    assert set(clocks["host"]) == {"prod", "cons"}
    for r in clocks.itertuples():  # one kernel: the true offset is 0, within the measured bound
        assert abs(r.offset_ns) <= r.uncertainty_ns
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["summary"]["engine"] == "spark" and manifest["complete"]
    summary = pd.read_parquet(run / "summary.parquet")
    assert list(summary.columns) == list(PER_REPETITION_COLUMNS)  # the columns of a run on one machine
    assert summary["lost"].iloc[0] == 0 and summary["lat_p50_us"].notna().all()
    assert summary["clock_uncertainty_us"].iloc[0] == pytest.approx(clocks["latency_uncertainty_ns"].iloc[0] / 1e3)
    assert set(HOST_COLUMNS) <= set(raw.columns)
