"""Calls into Spark's JVM made interruptible: a Ctrl-C reaches the calling thread, which lets the call end and
cleans up what it started."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from harness._spark_calls import interruptible


@pytest.fixture(autouse=True)
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, as in `mqbench` (harness/cli.py): Python leaves it ignored when
    the suite was started with it ignored (a job started with `&` by a non-interactive shell)."""
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved)


def test_a_ctrl_c_as_the_call_begins_waits_for_it_and_cleans_up() -> None:
    """A Ctrl-C that comes while the call's thread is starting (here: sent by the call itself, first thing, so
    it lands before ``start()`` returns) lets the call finish and hands its result to ``cleanup``: nothing it
    started is left running on. (Before the fix it escaped from ``start()`` and the call ran on: 5 of 5.)"""
    cleaned: list[str] = []

    def call() -> str:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)  # still starting when the Ctrl-C is handled
        return "session"

    with pytest.raises(KeyboardInterrupt):
        interruptible(call, cleanup=cleaned.append)
    assert cleaned == ["session"]
