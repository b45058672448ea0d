"""The process that holds a librocketmq push consumer (``harness.drivers.rocketmq_consumer``) ends quietly when
the driver that started it is gone before it could say it started: a Ctrl-C (or a stop) of the run closes the
driver's end of the pipe while the client is still starting. It once printed a ``BrokenPipeError`` traceback
into the interrupted run's console (CI, ``test_ctrl_c_during_a_run_leaves_no_java[rocketmq]``). No broker is
needed: the name server it is given does not answer, and the client starts anyway (or, without the rocketmq
wheel, fails to): either way its one message to the driver finds the pipe closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_consumer_process_ends_quietly_when_its_driver_is_gone() -> None:
    data_read, data_write = os.pipe()
    acks_read, acks_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.drivers.rocketmq_consumer", str(data_write), str(acks_read),
         "127.0.0.1:1", "mqbench-gone", "gone", "mqbench-gone"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(data_write, acks_read),
    )
    for fd in (data_write, acks_read, data_read):  # the driver is gone: nobody reads what the process says
        os.close(fd)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        os.close(acks_write)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err.decode(errors="replace")
    assert b"Traceback" not in err and b"Error" not in err, err.decode(errors="replace")
