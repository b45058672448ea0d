"""A Ctrl-C while Spark summarises (`mqbench report`): one sentence and exit status 130, never a traceback,
a Spark error log or an aborted interpreter, and no JVM left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.harness.pipeline.conftest import need_java
from tests.harness.pipeline.synthetic import build_bulk_run

MQBENCH = Path(sys.executable).with_name("mqbench")


def _javas(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "java"]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("after_jvm_s", [1.0, 7.0])
def test_ctrl_c_during_a_spark_summary_says_so_in_one_sentence_and_leaves_no_jvm(
    tmp_path: Path, after_jvm_s: float
) -> None:
    """1.0 s after the JVM appears the session is starting; 7.0 s after, the first queries of a summary of
    two million rows run (a cold one takes 15-30 s here). Before the fix the second printed PySpark's warning
    with the JVM's stack trace and a Python traceback (a cancelled job inside an Arrow collection), and,
    once the summary ran off the main thread, the interpreter aborted at exit ("PyGILState_Release") while
    the cancelled collection's threads finished."""
    need_java()
    run = build_bulk_run(tmp_path, 2_000_000, cases=4, seed=3)
    proc = subprocess.Popen([str(MQBENCH), "report", str(run), "--engine", "spark"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + 120
        while not seen and proc.poll() is None and time.monotonic() < deadline:
            seen.update((p.pid, p) for p in _javas(proc.pid))
            time.sleep(0.05)
        assert seen, "the report's Spark session never started a JVM"
        time.sleep(after_jvm_s)
        seen.update((p.pid, p) for p in _javas(proc.pid))
        assert proc.poll() is None, "the report ended before the Ctrl-C: the summary was too quick to interrupt"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for java in seen.values():
            if java.is_running():
                java.kill()
    assert proc.returncode == 130, out
    assert "interrupted: mqbench report stopped before it finished" in out, out
    for noise in ("Traceback", "Fatal Python error", "ERROR", "Exception", "WARN "):
        assert noise not in out, out
    time.sleep(1)  # the JVM exits when the gateway closes; give it a moment after the command's exit
    left = [p.pid for p in seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"JVMs still running after the command ended: {left}"
    assert not (run / "summary.csv").exists()
