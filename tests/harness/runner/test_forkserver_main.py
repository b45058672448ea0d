"""The runner's forkserver loads the program's main module once, so no worker runs it again.

A program (its own main module, as the `mqbench` script is) notes every process that runs its module
code, then starts workers the way the runner does. Without `_forkserver_main`, CPython 3.11's forkserver
never preloads the main module and each worker ran it again (the whole CLI's imports, ~1.5 s a worker)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = textwrap.dedent(
    """
    import os
    import time

    with open(os.environ["RAN_LOG"], "a") as log:
        log.write(f"{__name__} {os.getpid()}\\n")

    if __name__ == "__main__":
        from harness.runner._workers import _CTX
        from harness.runner._forkserver_main import start_forkserver

        for _ in range(3):
            start_forkserver()
            p = _CTX.Process(target=time.sleep, args=(0,))
            p.start()
            p.join(30)
            assert p.exitcode == 0, p.exitcode
    """
)


@pytest.mark.parametrize("how", ["script", "module"])
def test_workers_do_not_run_the_main_module_again(tmp_path: Path, how: str) -> None:
    """As a script (the `mqbench` command) and by name (`python -m harness.cli`, as the tests run it)."""
    program, log = tmp_path / "mqbench_program.py", tmp_path / "ran.log"
    program.write_text(PROGRAM)
    env = {**os.environ, "RAN_LOG": str(log), "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env.pop("MQBENCH_FORKSERVER_MAIN", None)
    command = [sys.executable, str(program)] if how == "script" else [sys.executable, "-m", "mqbench_program"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ran = log.read_text().split()
    names = ran[0::2]
    # the program itself, and the forkserver once (as __mp_main__); none of the three workers
    assert names.count("__main__") == 1
    assert names.count("__mp_main__") == 1, ran
    assert "MQBENCH_FORKSERVER_MAIN" not in os.environ


LATE_WORKER = textwrap.dedent(
    """
    import time
    from multiprocessing import synchronize

    class Slow:  # unpickled in the worker before the lock: the lock is gone by the time it is rebuilt
        def __reduce__(self):
            return (time.sleep, (1.0,))

    if __name__ == "__main__":
        from harness.runner._workers import _CTX
        from harness.runner._forkserver_main import start_forkserver

        lock = _CTX.Lock()
        start_forkserver()
        p = _CTX.Process(target=print, args=(Slow(), lock))
        p.start()
        synchronize.sem_unlink(lock._semlock.name)  # as the runner's end does, while the worker starts
        p.join(30)
        print("exitcode", p.exitcode)
    """
)


def test_a_worker_that_starts_after_its_runner_ended_says_nothing(tmp_path: Path) -> None:
    """A Ctrl-C while a case's workers start: the runner's semaphores are gone before a worker can read what
    it was to do. The worker ends (status 1) without a traceback in the run's output."""
    program = tmp_path / "late_worker.py"
    program.write_text(LATE_WORKER)
    env = {k: v for k, v in os.environ.items() if k != "MQBENCH_FORKSERVER_MAIN"}
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert "exitcode 1" in done.stdout, (done.stdout, done.stderr)
    # (the program's own cleanup then complains that the semaphore it unlinked by hand is gone: not the worker)
    assert "SemLock._rebuild" not in done.stderr and "__setstate__" not in done.stderr, done.stderr
