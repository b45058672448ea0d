"""Suite-wide hooks. When ``MQBENCH_CURRENT_TEST`` names a file (``make test`` sets it), the id of the test
that is running is kept there, so that a process killed by a signal (an abort in a C library, the OOM
killer) can still be traced to its test: ``make test`` prints it after such a death.

The suite's runs summarise with pandas (``MQBENCH_ENGINE``, which the commands and their subprocesses read):
each of its hundreds of small runs would otherwise start a Spark JVM. The Spark engine is tested against
pandas in ``tests/harness/pipeline``, and the default itself (Spark) in ``tests/harness/commands``."""

from __future__ import annotations

import os

from harness.pipeline import ENGINE_VARIABLE

_TRACE = os.environ.get("MQBENCH_CURRENT_TEST")
os.environ.setdefault(ENGINE_VARIABLE, "pandas")


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    if _TRACE:
        with open(_TRACE, "w") as f:
            f.write(nodeid + "\n")
