"""A barrier stage on a standalone cluster of two workers (two "hosts") started here and stopped by pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.cluster.standalone import standalone

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_roles_run_on_their_hosts_with_measured_offsets(tmp_path: Path) -> None:
    with standalone(tmp_path) as cluster:
        done = subprocess.run([sys.executable, "-m", "tests.harness.cluster.stage_probe", cluster.master],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        pids = cluster.pids
    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["role"]: r for r in json.loads(done.stdout.strip().splitlines()[-1])}
    assert results["producer-0"]["host"] == "host-a" and results["consumer-0"]["host"] == "host-b"
    assert results["producer-0"]["executor"] != results["consumer-0"]["executor"]
    assert results["producer-0"]["value"]["spec"] == {"n": 1}
    for r in results.values():  # one kernel: the true offset is 0, within the measured bound
        assert abs(r["offset_ns"]) <= r["uncertainty_ns"]
    assert not [pid for pid in pids if _alive(pid)]
