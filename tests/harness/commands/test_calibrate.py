"""`mqbench calibrate`: the paired statistics on known numbers, and a short real run through the CLI."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.calibrate import (
    Calibration,
    CalibrationError,
    bare_receiver_throughput,
    relative_to_reference,
    steal_ms,
    write_csv,
)
from harness.commands.calibrate import verdicts
from harness.pipeline import run_folders

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
    c = Calibration("mqcore", 1000, bare=[1000.0, 2000.0], harness=[900.0, 1000.0], steal=[3.0, None])
    write_csv([c], tmp_path / "calibrate.csv")
    rows = list(csv.DictReader(open(tmp_path / "calibrate.csv")))
    assert [(r["library"], r["size"], r["bare_msgs_per_s"], r["harness_msgs_per_s"], r["harness_over_bare"],
             r["steal_ms"]) for r in rows] == [("mqcore", "1000", "1000", "900", "0.9000", "3"),
                                               ("mqcore", "1000", "2000", "1000", "0.5000", "")]


def test_each_library_is_set_against_what_the_harness_costs_pyzmq() -> None:
    results = [
        Calibration("zmq", 100, bare=[100.0, 100.0, 100.0], harness=[90.0, 100.0, 80.0], steal=[None] * 3),
        Calibration("mqcore", 100, bare=[100.0, 100.0, 100.0], harness=[45.0, 50.0, 40.0], steal=[None] * 3),
        Calibration("jeromq", 1000, bare=[10.0], harness=[9.0], steal=[None]),
    ]
    relative = relative_to_reference(results)
    assert relative[("zmq", 100)] == pytest.approx(1.0)
    assert relative[("mqcore", 100)] == pytest.approx(0.45 / 0.9)
    assert math.isnan(relative[("jeromq", 1000)])  # pyzmq was not measured at 1000 B
    lines = verdicts(results)
    assert lines[0] == ("100 B: harness ÷ bare: pyzmq 0.90, mqcore 0.45; against pyzmq's: mqcore 0.50 (1.00: the "
                        "harness costs it what it costs pyzmq).")
    assert lines[1] == "1 KB: harness ÷ bare: JeroMQ 0.90."


@pytest.mark.parametrize("library", ["zmq", "mqcore"])
def test_the_bare_loop_of_a_python_library_measures_its_receiver(library: str) -> None:
    rate, cpu = bare_receiver_throughput(library, 5000, 100)
    assert rate > 0 and cpu > 0


def test_the_bare_sender_cycles_through_as_many_messages_as_the_harness_hands_the_library() -> None:
    from harness.brokers import free_port
    from harness.calibrate import _bare_command, _distinct
    from harness.runner._send import SEND_POOL_BYTES

    # pyzmq copies out of the harness's block (256 slots of 1 KB); mqcore keeps its pool's objects
    assert _distinct("zmq", 1024) == 256 and _distinct("zmq", 100) == 1024
    assert _distinct("mqcore", 1024) == SEND_POOL_BYTES // 1024 == _distinct("jeromq", 1024)
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    try:
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        push = [*_bare_command("mqcore", "push", endpoint, 7, 100)[:-1], "3"]  # the sender binds
        with subprocess.Popen(push, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "bound"
            pull.connect(endpoint)
            pull.setsockopt(zmq.RCVTIMEO, 30_000)
            got = [pull.recv() for _ in range(7)]
            assert proc.wait(60) == 0
        assert [int.from_bytes(m[:8], "little") for m in got] == [0, 1, 2, 0, 1, 2, 0]
        assert {len(m) for m in got} == {100}
    finally:
        pull.close(linger=0)
        ctx.term()


def test_a_library_without_a_bare_loop_is_named() -> None:
    with pytest.raises(CalibrationError, match="no bare loop for 'rabbitmq'"):
        bare_receiver_throughput("rabbitmq", 100, 100)


def test_steal_is_a_counter_on_linux() -> None:
    first = steal_ms()
    if sys.platform.startswith("linux"):
        assert first is not None and first >= 0
        second = steal_ms()
        assert second is not None and second >= first


def test_calibrate_cli_runs_pairs_of_every_library_and_writes_them(tmp_path: Path) -> None:
    from harness.drivers.java import unavailable_reason

    libraries = ["zmq", "mqcore", "jeromq"]
    if unavailable_reason() is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"JeroMQ's bare loop needs the JVM worker in CI: {unavailable_reason()}")
        libraries.remove("jeromq")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "calibrate", "--messages", "20000", "--repetitions", "1",
         "--sizes", "100", "--libraries", ",".join(libraries), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())  # the console wraps long lines
    assert "100 B: harness ÷ bare: pyzmq " in said and "against pyzmq's: mqcore " in said
    rows = list(csv.DictReader(open(tmp_path / "calibrate.csv")))
    assert [r["library"] for r in rows] == libraries
    for r in rows:
        assert float(r["bare_msgs_per_s"]) > 0 and float(r["harness_msgs_per_s"]) > 0
        assert float(r["bare_cpu_us_per_msg"]) > 0 and float(r["harness_cpu_us_per_msg"]) > 0
        assert float(r["harness_over_bare"]) == pytest.approx(
            float(r["harness_msgs_per_s"]) / float(r["bare_msgs_per_s"]), rel=1e-3)
    assert len(run_folders(tmp_path)) == len(libraries)  # one harness run folder per pair (the lake aside)


@pytest.mark.parametrize(("args", "says"), [
    (["--messages", "1"], "--messages >= 2"),
    (["--libraries", "zmq,rabbitmq"], "--libraries takes zmq, mqcore, jeromq; got rabbitmq"),
    (["--sizes", "100,1XB"], "unknown unit in '1XB'"),
])
def test_calibrate_rejects_impossible_arguments_in_one_line(args: list[str], says: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "calibrate", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.startswith("mqbench: ")
    assert proc.stderr.strip().count("\n") == 0 and says in proc.stderr


def test_an_incomplete_harness_run_stops_calibration_with_its_reason(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd
    from rich.console import Console

    import harness.calibrate as cal
    import harness.compare as cmp

    monkeypatch.setattr(cal, "bare_receiver_throughput", lambda library, n, size: (1000.0, 0.5))
    monkeypatch.setattr(cmp, "compare", lambda *a, **k: cmp.CompareOutcome(
        run_dir=tmp_path, complete=False, summary=pd.DataFrame(), problems=["stalled: no message moved for 30 s"]))
    with pytest.raises(cal.CalibrationError,
                       match="mqcore, 100 B, repetition 1 did not complete: stalled: no message moved"):
        cal.calibrate(["mqcore"], [100], 1000, 2, tmp_path, Console(file=open(os.devnull, "w")))  # noqa: SIM115


def test_ctrl_c_during_the_bare_loop_stops_at_once_and_leaves_nothing_running(tmp_path: Path) -> None:
    """The bare loop's sender blocks at its HWM once the receiver stops: Ctrl-C must not wait for it."""
    import signal
    import time

    from tests.harness.runner.test_runner_e2e import _descendants

    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "calibrate", "--messages", "50000000", "--repetitions", "1",
         "--libraries", "zmq"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group: a failed test kills all of it, forkserver included
    )
    try:
        # Starting the forkserver and the bare sender took over 60 s on a 2-core machine under a load of 14.
        deadline = time.monotonic() + 180
        children: set[int] = set()
        while time.monotonic() < deadline and len(children) < 2:  # the bare sender and receiver
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
