"""`mqbench calibrate`: the paired statistics on known numbers, and a short real run through the CLI."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from harness.calibrate import Calibration, steal_ms

ROOT = Path(__file__).resolve().parents[3]


def test_paired_ratios_and_their_summary() -> None:
    c = Calibration(bare=[100.0, 200.0, 400.0, 100.0, 50.0], harness=[90.0, 100.0, 400.0, 70.0, 60.0],
                    steal=[0.0, 10.0, None, 0.0, 0.0])
    assert c.ratios() == pytest.approx([0.9, 0.5, 1.0, 0.7, 1.2])
    assert c.median_ratio() == pytest.approx(0.9)
    assert c.quartiles() == pytest.approx((0.7, 1.0))
    assert c.ratio_of_medians() == pytest.approx(90.0 / 100.0)
    one = Calibration(bare=[10.0], harness=[8.0], steal=[None])
    assert one.quartiles() == pytest.approx((0.8, 0.8))


def test_csv_keeps_every_pair(tmp_path: Path) -> None:
    c = Calibration(bare=[1000.0, 2000.0], harness=[900.0, 1000.0], steal=[3.0, None])
    c.write_csv(tmp_path / "calibrate.csv")
    rows = list(csv.DictReader(open(tmp_path / "calibrate.csv")))
    assert [(r["bare_msgs_per_s"], r["harness_msgs_per_s"], r["harness_over_bare"], r["steal_ms"]) for r in rows] == [
        ("1000", "900", "0.9000", "3"), ("2000", "1000", "0.5000", "")]


def test_steal_is_a_counter_on_linux() -> None:
    first = steal_ms()
    if sys.platform.startswith("linux"):
        assert first is not None and first >= 0
        second = steal_ms()
        assert second is not None and second >= first


def test_calibrate_cli_runs_pairs_and_writes_them(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "calibrate", "--messages", "20000", "--repetitions", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "median of the 2 paired ratios" in proc.stdout
    rows = list(csv.DictReader(open(tmp_path / "calibrate.csv")))
    assert len(rows) == 2
    for r in rows:
        assert float(r["bare_msgs_per_s"]) > 0 and float(r["harness_msgs_per_s"]) > 0
        assert float(r["harness_over_bare"]) == pytest.approx(
            float(r["harness_msgs_per_s"]) / float(r["bare_msgs_per_s"]), rel=1e-3)
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2  # one harness run folder per pair


def test_calibrate_rejects_impossible_arguments_in_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "calibrate", "--messages", "1"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.startswith("mqbench: ")
    assert proc.stderr.strip().count("\n") == 0 and "--messages >= 2" in proc.stderr


def test_an_incomplete_harness_run_stops_calibration_with_its_reason(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import pandas as pd
    from rich.console import Console

    import harness.calibrate as cal
    import harness.compare as cmp

    monkeypatch.setattr(cal, "bare_receiver_throughput", lambda n, size: 1000.0)
    monkeypatch.setattr(cmp, "compare", lambda *a, **k: cmp.CompareOutcome(
        run_dir=tmp_path, complete=False, summary=pd.DataFrame(), problems=["stalled: no message moved for 30 s"]))
    with pytest.raises(cal.CalibrationError, match="repetition 1 did not complete: stalled: no message moved"):
        cal.calibrate(100, 1000, 2, tmp_path, Console(file=open(os.devnull, "w")))  # noqa: SIM115


def test_ctrl_c_during_the_bare_loop_stops_at_once_and_leaves_nothing_running(tmp_path: Path) -> None:
    """The bare loop's sender blocks at its HWM once the receiver stops: Ctrl-C must not wait for it."""
    import os
    import signal
    import time

    from tests.harness.runner.test_runner_e2e import _descendants

    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "calibrate", "--messages", "50000000", "--repetitions", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: a failed test kills all of it, forkserver included
    )
    try:
        # Starting the forkserver and the bare sender took over 60 s on a 2-core machine under a load of 14.
        deadline = time.monotonic() + 180
        children: set[int] = set()
        while time.monotonic() < deadline and len(children) < 2:  # forkserver + bare sender
            time.sleep(0.3)
            children = _descendants(proc.pid)
        assert len(children) >= 2, "the bare loop never started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=25)  # stopped at once, not joined for 30 s (25: a loaded CI machine)
    finally:
        if proc.poll() is None:  # the test failed: leave nothing behind either
            for pid in _descendants(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # and whatever started after the list was taken
            except ProcessLookupError:
                pass
            proc.wait(10)
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in children):
        time.sleep(0.2)
    assert not [p for p in children if Path(f"/proc/{p}").exists()], "processes left running"
