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


def test_a_ctrl_c_while_the_call_runs_waits_for_its_end() -> None:
    """A Ctrl-C that lands while the calling thread waits (the call well under way) asks the call to stop and
    waits until it has ended before KeyboardInterrupt goes on, its result cleaned up. (Waiting with
    ``Thread.join``, Python 3.11 took the interrupted join for the thread's end: the call ran on past the
    command's exit, 5 of 5 here.)"""
    cleaned: list[str] = []
    asked: list[float] = []
    ended: list[float] = []

    def call() -> str:
        time.sleep(0.3)  # the calling thread is in its wait by now
        os.kill(os.getpid(), signal.SIGINT)
        while not asked:
            time.sleep(0.01)
        time.sleep(0.5)  # a cancelled Spark job takes a moment to unwind
        ended.append(time.monotonic())
        return "session"

    with pytest.raises(KeyboardInterrupt):
        interruptible(call, on_interrupt=lambda: asked.append(time.monotonic()), cleanup=cleaned.append)
    assert ended, "interruptible returned while its call still ran"
    assert cleaned == ["session"]
    assert asked
