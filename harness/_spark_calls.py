"""Calls into Spark's JVM, for the pipeline's session and summary and the cluster's stages: one line from a
failed job's error (:func:`failure_reason`), and calls a Ctrl-C can interrupt cleanly (:func:`interruptible`):
the call runs in a thread of its own, so the Ctrl-C reaches the calling thread (never a
py4j call in flight, which would break the call's connection and print a traceback), and what the call
started is cancelled or cleaned up before the KeyboardInterrupt goes on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def interruptible(
    call: Callable[[], T],
    on_interrupt: Callable[[], object] | None = None,
    cleanup: Callable[[T], object] | None = None,
    grace: float = 60.0,
) -> T:
    """``call()`` (a call into Spark's JVM) in a thread, so that a Ctrl-C reaches the calling thread and not
    a py4j call in flight, which would break the call's connection and log a traceback (and PySpark, not
    started from the main thread, installs no SIGINT handler of its own). On Ctrl-C: up to ``grace``
    seconds' wait for the call to end, ``on_interrupt()`` every half second of it (a call of several jobs may
    be between two when first asked), ``cleanup(result)`` if it still returned one (a
    session that finished starting is stopped), then KeyboardInterrupt again. Errors of ``call`` are
    raised in the calling thread.

    A Ctrl-C may come while ``start()`` has not returned yet, the call already running (on a loaded machine
    its first subprocess can precede the return): it is handled like any other, and whether the call has begun
    is decided under ``gate``: either it had (it is waited for and cleaned up) or it never will (nothing of
    it outlives the command).

    The wait is on an event the thread sets as it ends, never ``Thread.join``: Python 3.11's ``join``, when a
    Ctrl-C interrupts it, marks a thread that still runs as ended (``is_alive()`` False, later joins return at
    once), so the call ran on while the interpreter exited and its Arrow collection aborted it ("Fatal Python
    error: PyGILState_Release", `mqbench report` on Ctrl-C, 1 run in 6)."""
    got: dict[str, Any] = {}
    ended = threading.Event()
    gate = threading.Lock()
    state = {"began": False, "cancelled": False}

    def run() -> None:
        with gate:
            if state["cancelled"]:
                return
            state["began"] = True
        try:
            got["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            got["error"] = exc
        finally:
            ended.set()

    thread = threading.Thread(target=run, name="spark-call", daemon=True)
    try:
        thread.start()
        while not ended.wait(0.2):
            pass
    except KeyboardInterrupt:
        with gate:
            state["cancelled"] = True
            began = state["began"]
        if began:  # the thread runs (it had started when it took the gate): its end may be waited for
            deadline = time.monotonic() + grace
            while True:
                if on_interrupt is not None:
                    on_interrupt()
                if ended.wait(min(0.5, max(0.0, deadline - time.monotonic()))) or time.monotonic() >= deadline:
                    break
        if cleanup is not None and "value" in got:
            cleanup(got["value"])
        raise
    if "error" in got:
        raise got["error"]
    return got["value"]  # type: ignore[no-any-return]


def failure_reason(text: str, limit: int = 300) -> str:
    """One line from the text of a failed Spark job: a task's Python error (the last line of its traceback,
    ``ValueError: ...``), else the first cause Spark gives (``Job aborted due to ...``; a wrapper such as
    ``Exception thrown in awaitResult`` skipped), with the innermost ``Caused by:`` after it when there is
    one (``... Data type mismatches when reading; column: [seq], physicalType: BINARY, ...``)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("Traceback (most recent call last):"):
            last = next((x for x in lines[i + 1:] if x.strip() and not x.startswith((" ", "\t"))), "")
            if last:
                return last.split(" SQLSTATE")[0].strip()[:limit]
    causes = [x.split("Exception: ", 1)[-1].split(" SQLSTATE")[0].strip() for x in lines if "Exception: " in x]
    causes = [c for c in causes if c and c.rstrip(":") not in _WRAPPERS]
    if not causes:
        return (lines[0].strip() if lines else "") or "no reason given"
    first, inner = causes[0], causes[-1]
    return (first if inner == first else f"{first}; {inner}")[:limit]


#: Spark's exceptions that only carry another (the cause after them says what failed).
_WRAPPERS = frozenset({"Exception thrown in awaitResult"})
