"""Suite-wide hooks. When ``MQBENCH_CURRENT_TEST`` names a file (``make test`` sets it), the id of the test
that is running is kept there, so that a process killed by a signal (an abort in a C library, the OOM
killer) can still be traced to its test: ``make test`` prints it after such a death."""

from __future__ import annotations

import os

_TRACE = os.environ.get("MQBENCH_CURRENT_TEST")


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    if _TRACE:
        with open(_TRACE, "w") as f:
            f.write(nodeid + "\n")
