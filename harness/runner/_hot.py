"""Which per-message loops run: the C ones (``_hotloop.c``, built by setup.py where a compiler is available)
or the Python ones in harness.runner._send and harness.runner.worker. MQBENCH_PYTHON_LOOPS=1 makes the
runner use the Python loops anyway, to compare the two (docs/harness-cost.md). The loops look these names
up when they start, so tests can switch to the Python loops by setting them to None."""

from __future__ import annotations

import os
from collections.abc import Callable

recv_headers: Callable[..., int] | None = None
send_stamped: Callable[..., int] | None = None
_PYTHON_LOOPS_FORCED = os.environ.get("MQBENCH_PYTHON_LOOPS", "") not in ("", "0")
if not _PYTHON_LOOPS_FORCED:
    try:
        from harness.runner import _hotloop
    except ImportError:  # pragma: no cover - the tests force the Python loops by patching these names
        pass
    else:
        recv_headers, send_stamped = _hotloop.recv_headers, _hotloop.send_stamped

#: Which per-message loops this process runs: recorded in every run's manifest.
HOT_LOOPS = (
    "C" if send_stamped is not None
    else "Python (MQBENCH_PYTHON_LOOPS is set)" if _PYTHON_LOOPS_FORCED
    else "Python (harness/runner/_hotloop.c is not built)"
)
