"""A user's Ctrl-C in the middle of a broker run: the run folder is marked incomplete and no broker process
outlives `mqbench compare`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.brokers._process import _running
from harness.pipeline import run_folders
from tests.harness.drivers.conformance import require_backend
from tests.harness.runner.test_runner_e2e import _descendants

ROOT = Path(__file__).resolve().parents[3]


def interrupt_mid_run(tmp_path: Path, scenario_text: str, broker_comm: str, wait: float,
                      sig: int = signal.SIGINT, started: str | None = None) -> tuple[str, set[int]]:
    """Run `mqbench compare` on ``scenario_text`` (process backend), send it ``sig`` once a process named
    ``broker_comm`` and the workers run (with ``started``, a glob under the output folder, once a file matching
    it is there too: a worker's record of a case that has started), and return its output and every
    descendant pid seen. Asserts it exits with 130 and no traceback (after a SIGINT), or was killed (SIGKILL)."""
    scenario = tmp_path / "long.yaml"
    scenario.write_text(scenario_text)
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "compare", str(scenario), "--out", str(tmp_path / "res"),
         "--backend", "process"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + wait
        running = False
        while time.monotonic() < deadline and not running and proc.poll() is None:
            time.sleep(0.5)
            seen |= _descendants(proc.pid)
            names = [_name(p) for p in seen]
            # forkserver + producer + consumer: the case is running
            running = broker_comm in names and sum(1 for n in names if n.startswith("python")) >= 3
            running = running and (started is None or any((tmp_path / "res").glob(started)))
        if proc.poll() is not None:  # it ended before the case ran: say why, not after the whole wait
            raise AssertionError(f"mqbench compare ended (exit {proc.returncode}) before the case ran:\n"
                                 f"{proc.communicate()[0]}")
        assert running, f"the case never started ({broker_comm} and three workers{', ' + started if started else ''})"
        time.sleep(1.0)
        seen |= _descendants(proc.pid)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return output, seen
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    return output, seen


def test_ctrl_c_during_a_broker_run_leaves_no_broker(tmp_path: Path) -> None:
    require_backend("nats", "process")
    _, seen = interrupt_mid_run(
        tmp_path,
        "name: long\npattern: pubsub\nmessage_sizes: [100]\nduration: 60s\nrate: 1000\nsystems: [nats]\n",
        "nats-server",
        wait=90,
    )
    (run_dir,) = run_folders(tmp_path / "res")
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is False
    left = left_running(seen, wait=15)
    assert not left, f"processes left running after Ctrl-C: {left}"


def test_a_killed_mqbench_leaves_no_broker_and_no_worker(tmp_path: Path) -> None:
    """SIGKILL, where no handler, ``finally`` or atexit hook runs: the broker is stopped by the process's
    watchdog (harness/_watchdog.py), the workers die with the runner's forkserver, nothing is left."""
    require_backend("nats", "process")
    folders = set(Path(tempfile.gettempdir()).glob("mqbench-nats-*"))
    _, seen = interrupt_mid_run(
        tmp_path,
        "name: long\npattern: queue\nmessage_sizes: [100]\nduration: 60s\nrate: 1000\nsystems: [nats]\n",
        "nats-server",
        wait=90,
        sig=signal.SIGKILL,
    )
    left = left_running(seen, wait=30)
    assert not left, f"processes left running after a SIGKILL of mqbench: {left}"
    assert set(Path(tempfile.gettempdir()).glob("mqbench-nats-*")) <= folders, "the broker's folder was left"


def left_running(pids: set[int], wait: float) -> dict[int, str]:
    """Those of ``pids`` still running (zombies are not: a killed parent's children may wait for a reaper
    that never comes) after up to ``wait`` seconds, with their names."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(map(_running, pids)):
        time.sleep(0.2)
    return {p: _name(p) for p in pids if _running(p)}


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
