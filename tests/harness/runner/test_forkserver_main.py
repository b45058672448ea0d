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


def test_workers_do_not_run_the_main_module_again(tmp_path: Path) -> None:
    program, log = tmp_path / "program.py", tmp_path / "ran.log"
    program.write_text(PROGRAM)
    env = {**os.environ, "RAN_LOG": str(log)}
    env.pop("MQBENCH_FORKSERVER_MAIN", None)
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ran = log.read_text().split()
    names = ran[0::2]
    # the program itself, and the forkserver once (as __mp_main__); none of the three workers
    assert names.count("__main__") == 1
    assert names.count("__mp_main__") == 1, ran
    assert "MQBENCH_FORKSERVER_MAIN" not in os.environ
