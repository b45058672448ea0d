"""The CPU meter (harness.runner.proc) on processes whose load we know: a busy loop and a sleeper."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from harness.runner.proc import CpuMeter, CpuWhileActive


@pytest.fixture
def busy_and_idle() -> Iterator[tuple[int, int]]:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield busy.pid, idle.pid
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()


def test_a_busy_process_uses_more_of_a_core_than_an_idle_one(busy_and_idle: tuple[int, int]) -> None:
    busy, idle = busy_and_idle
    meter = CpuMeter({"busy": [busy], "idle": [idle]}).start()
    time.sleep(1.0)
    used = {u.role: u for u in meter.stop()}
    assert used["busy"].core_pct > used["idle"].core_pct
    assert used["busy"].cpu_s > 0 and used["idle"].wall_s == used["busy"].wall_s > 0


def test_a_role_whose_processes_are_gone_counts_nothing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (use,) = CpuMeter({"gone": [gone.pid]}).start().stop()
    assert use.cpu_s == 0.0


def test_a_process_killed_mid_interval_keeps_what_it_used_and_its_role_still_counts(
        busy_and_idle: tuple[int, int]) -> None:
    """A cluster's node killed by a fault: the broker role (all nodes) must not drop to nothing."""
    busy, _ = busy_and_idle
    doomed = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        meter = CpuMeter({"broker": [busy, doomed.pid], "doomed": [doomed.pid]}).start()
        time.sleep(0.5)
        meter.sample()
        before = meter.sample().seconds
    finally:
        doomed.kill()
        doomed.wait()
    time.sleep(0.5)
    used = {u.role: u.cpu_s for u in meter.stop()}
    assert used["doomed"] > 0  # what it had used when last seen
    assert used["broker"] >= before["broker"] - meter._first.seconds["broker"] > used["doomed"]


def test_the_interval_ends_when_the_count_last_moved(busy_and_idle: tuple[int, int]) -> None:
    busy, _ = busy_and_idle
    count = [0]
    began = time.monotonic()
    meter = CpuWhileActive(CpuMeter({"busy": [busy]}), lambda: count[0], every=0.01).start()
    for _ in range(5):
        time.sleep(0.05)
        count[0] += 1
    time.sleep(0.2)  # the follower samples the last move
    quiet_from = time.monotonic()
    time.sleep(0.5)  # the caller notices the end late: this wait is not the case's
    (use,) = meter.stop()
    assert 0 < use.wall_s < quiet_from - began
