"""A user's Ctrl-C in the middle of a broker run: the run folder is marked incomplete and no broker process
outlives `mqbench compare`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.brokers.conformance import require_backend
from tests.harness.test_runner_e2e import _descendants

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_during_a_broker_run_leaves_no_broker(tmp_path: Path) -> None:
    require_backend("nats", "process")
    scenario = tmp_path / "long.yaml"
    scenario.write_text("name: long\npattern: pubsub\nmessage_sizes: [100]\nduration: 60s\nrate: 1000\n"
                        "systems: [nats]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "compare", str(scenario), "--out", str(tmp_path / "res"),
         "--backend", "process"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        broker_running = False
        while time.monotonic() < deadline:
            time.sleep(0.5)
            seen |= _descendants(proc.pid)
            names = {p: _name(p) for p in seen}
            broker_running = "nats-server" in names.values()
            workers = sum(1 for n in names.values() if n.startswith("python"))
            if broker_running and workers >= 3:  # forkserver + producer + consumer: the case is running
                break
        assert broker_running, "the broker never started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    (run_dir,) = (tmp_path / "res").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in seen):
        time.sleep(0.2)
    left = {p: _name(p) for p in seen if Path(f"/proc/{p}").exists()}
    assert not left, f"processes left running after Ctrl-C: {left}"


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
