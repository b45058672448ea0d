"""The watchdog (harness/_watchdog.py): what a harness process started is stopped when that process is killed
outright (no ``finally``, no ``atexit``), and left alone once the process stopped it itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness import _watchdog
from harness.brokers._process import _group_alive, _running
from tests.harness.runner.test_jvm_worker import _within as _until

#: A harness process in miniature: a "broker" (a process group of its own, as harness/brokers/_process.py
#: starts one) and an undo command, registered; then it prints their ids and waits to be killed, or, with
#: ``clean``, stops the broker and takes the command back before it exits normally.
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from harness import _watchdog
    from harness.brokers._process import BrokerProcess
    from harness.brokers._spec import Command
    folder, clean = Path(sys.argv[1]), sys.argv[2] == "clean"
    broker = BrokerProcess(Command("sleeper", ("sh", "-c", "sleep 600 & sleep 600")), cwd=folder, log_dir=folder)
    token = _watchdog.watch_command(["touch", str(folder / "undone")])
    print(broker.pid, _watchdog.watchdog_pid(), flush=True)
    if clean:
        broker.stop(1.0)
        _watchdog.forget(token)
        sys.exit(0)
    time.sleep(600)
""")


def _start(tmp_path: Path, how: str) -> tuple[subprocess.Popen[str], int, int]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), how], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parents[2])
    assert child.stdout is not None
    broker, watchdog = (int(x) for x in child.stdout.readline().split())
    return child, broker, watchdog


def _gone(pid: int) -> bool:
    return not _running(pid)  # a zombie is gone: a killed parent's children may wait for a reaper


def test_a_killed_process_leaves_nothing_it_started_running(tmp_path: Path) -> None:
    child, broker, watchdog = _start(tmp_path, "kill")
    try:
        assert _group_alive(broker) and not _gone(watchdog)
        child.send_signal(signal.SIGKILL)  # no finally, no atexit
        child.wait(10)
        bound = _watchdog.GRACE + _watchdog.POLL + 20
        assert _until(bound, lambda: not _group_alive(broker)), "the broker's process group outlived its harness"
        assert _until(bound, lambda: (tmp_path / "undone").exists()), "the undo command did not run"
        assert _until(bound, lambda: _gone(watchdog)), "the watchdog outlived its work"
    finally:
        child.kill()
        child.wait(10)
        if _group_alive(broker):
            os.killpg(broker, signal.SIGKILL)


def test_what_the_process_stopped_itself_is_left_alone(tmp_path: Path) -> None:
    child, broker, watchdog = _start(tmp_path, "clean")
    assert child.wait(30) == 0
    assert not _group_alive(broker)
    assert _until(_watchdog.POLL + 20, lambda: _gone(watchdog)), "the watchdog outlived its parent"
    assert not (tmp_path / "undone").exists()  # taken back: not run


def test_a_forked_worker_dies_with_the_thread_that_forked_it(tmp_path: Path) -> None:
    """A runner's worker (``die_with_parent``), forked by a forkserver's main thread: killed when that ends."""
    script = textwrap.dedent("""
        import os, sys, time
        from harness import _watchdog
        if os.fork() == 0:
            _watchdog.die_with_parent()
            print(os.getpid(), flush=True)
            time.sleep(600)
            os._exit(0)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).parents[2])
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        assert not _gone(worker)
        parent.kill()
        parent.wait(10)
        assert _until(20, lambda: _gone(worker)), "the worker outlived the process that forked it"
    finally:
        parent.kill()
        if not _gone(worker):
            os.kill(worker, signal.SIGKILL)


#: A process that plans a zmq run over ipc (its endpoints' folder made in the temporary directory), prints the
#: folder and its watchdog's pid, and is killed, or tears the plan down itself.
IPC_CHILD = textwrap.dedent("""
    import sys, time
    from harness import _watchdog
    from harness.drivers.base import Pattern, Topology
    from harness.drivers.zmq_driver import ZmqDriver
    driver = ZmqDriver({"transport": "ipc"})
    plan = driver.plan(Topology(Pattern.QUEUE, 1, 2, 1, 100, "watched"))
    print(plan["ipc_dir"], _watchdog.watchdog_pid(), flush=True)
    if sys.argv[1] == "clean":
        driver.teardown(plan)
        sys.exit(0)
    time.sleep(600)
""")


@pytest.mark.parametrize("how", ["kill", "clean"])
def test_a_killed_process_leaves_no_ipc_folder(tmp_path: Path, how: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", IPC_CHILD, how], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).parents[2], env={**os.environ, "TMPDIR": str(tmp_path)})
    assert child.stdout is not None
    folder, watchdog = child.stdout.readline().split()
    assert Path(folder).parent == tmp_path
    assert how == "clean" or Path(folder).is_dir()  # a clean child may have torn it down already
    try:
        if how == "kill":
            child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert _until(_watchdog.GRACE + _watchdog.POLL + 20, lambda: not Path(folder).exists())
        assert _until(_watchdog.POLL + 20, lambda: _gone(int(watchdog))), "the watchdog outlived its parent"
    finally:
        child.kill()
        child.wait(10)


def _started_by_a_forkserver(ready: Any) -> None:
    """The body of a runner's worker, in miniature: tied to its forkserver, then waiting for nothing that ends."""
    _watchdog.die_with_parent()
    ready.set()
    time.sleep(600)


def test_a_forkserver_and_its_worker_end_with_a_killed_harness() -> None:
    """A worker of a multiprocessing forkserver is handed the write end of the pipe whose closing ends the
    server; one that kept it held the server up while the server held it (both outlived a SIGKILLed harness
    until the worker ended by itself). ``die_with_parent`` closes it: both are gone within seconds."""
    script = textwrap.dedent("""
        import multiprocessing, time
        from multiprocessing import forkserver
        from tests.harness.test_watchdog import _started_by_a_forkserver
        ctx = multiprocessing.get_context("forkserver")
        ready = ctx.Event()
        worker = ctx.Process(target=_started_by_a_forkserver, args=(ready,), daemon=True)
        worker.start()
        assert ready.wait(60)
        print(forkserver._forkserver._forkserver_pid, worker.pid, flush=True)
        time.sleep(600)
    """)
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).parents[2])
    assert harness.stdout is not None
    server, worker = (int(x) for x in harness.stdout.readline().split())
    try:
        assert not _gone(server) and not _gone(worker)
        harness.kill()
        harness.wait(10)
        assert _until(10, lambda: _gone(server)), "the forkserver outlived the harness"
        assert _until(10, lambda: _gone(worker)), "the worker outlived its forkserver"
    finally:
        harness.kill()
        harness.wait(10)
        for pid in (server, worker):
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
