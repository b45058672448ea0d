"""The fault-tolerant strategies of the send and receive loops (runs with faults): reconnect, and count what
failed instead of failing.

A ``send`` or ``poll`` that raises (the broker went away) is counted and the producer/consumer is created
again from the driver until that works (the generic reconnect: a fresh client, same plan and role). The
sequence number of a failed send is not retried: it is recorded as a send error (``<out>.errors``), so
recovery metrics can tell messages the system refused from messages it accepted and then lost. Records of
these runs are mapped (harness.runner._records), so a worker the runner kills leaves them behind.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.runner._context import Ended, Interrupted, WorkerContext, WorkerSpec
from harness.runner._outcomes import Outcomes
from harness.runner._records import ERROR_RECORD
from harness.runner._send import Step

RECONNECT_PAUSE = 0.1  # seconds between attempts to create a producer/consumer again


def quiet_clients() -> None:
    """Client libraries log every failed reconnect; errors are counted instead."""
    logging.disable(logging.CRITICAL)


def again(make: Callable[[], Any], stop: Any, deadline_ns: int | None) -> Any:
    """Create a producer/consumer again until that works; None when the run stops first."""
    while not stop.is_set() and (deadline_ns is None or time.monotonic_ns() < deadline_ns):
        try:
            return make()
        except Exception:  # noqa: BLE001 - the broker is still away; try again
            time.sleep(RECONNECT_PAUSE)
    return None


def drop(obj: Any) -> None:
    """Close a broken producer/consumer if that is quick; its client may be wedged, so never wait on it."""

    def close() -> None:
        with contextlib.suppress(Exception):
            obj.close()

    t = threading.Thread(target=close, daemon=True)
    t.start()
    t.join(0.5)


class ReconnectingSend(Step):
    """A producer's send that survives the broker going away: a failed send is logged as a send error and the
    producer made again (``Ended`` when the run ends first)."""

    every = 63
    stopped = ""

    def __init__(self, make: Callable[[], Any], flushes: bool, spec: WorkerSpec, ctx: WorkerContext,
                 outcomes: Outcomes | None = None) -> None:
        self.make, self.flushes, self.spec, self.ctx, self.outcomes = make, flushes, spec, ctx, outcomes
        self.producer: Any = make()
        self.send = self.producer.send
        self.keeps_second = bool(self.producer.acks_synchronously)  # a synchronous ack is stamped on return
        self.unwatched = True  # the producer is asked to report outcomes at its first send (its first seq)
        self.errors = open(f"{spec.out}.errors", "ab", buffering=0)  # noqa: SIM115 - closed in close()

    def __call__(self, buf: bytearray, seq: int, t: int) -> int:
        if self.unwatched and self.outcomes is not None:
            self.outcomes.watch(self.producer, seq)
            self.unwatched = False
        try:
            self.send(buf)
        except Exception:  # noqa: BLE001 - counted; the producer is made again
            self.errors.write(ERROR_RECORD.pack(seq, t))
            self.ctx.progress[self.spec.slot] = seq + 1
            drop(self.producer)
            duration = self.spec.duration_ns
            self.producer = again(self.make, self.ctx.stop,
                                  None if duration is None else int(self.ctx.start_ns.value) + duration)
            if self.producer is None:
                raise Ended from None
            self.send = self.producer.send
            self.unwatched = True
            return 0
        return time.monotonic_ns() if self.keeps_second else 0

    def finish(self, timeout: float) -> None:
        if self.producer is not None and self.flushes:
            with contextlib.suppress(Exception):
                self.producer.flush(timeout)

    def close(self) -> None:
        self.errors.close()
        if self.producer is not None:
            drop(self.producer)


class ReconnectingConsumer:
    """A consumer whose ``poll`` makes it again when it raises; ``consumer`` is None once the run stopped
    before that worked."""

    def __init__(self, make: Callable[[], Any], stop: Any) -> None:
        self.make, self.stop = make, stop
        self.consumer: Any = make()

    def poll(self, timeout: float) -> None:
        try:
            self.consumer.poll(timeout)
        except Interrupted:
            raise
        except Exception:  # noqa: BLE001 - the broker went away: make the consumer again
            drop(self.consumer)
            time.sleep(RECONNECT_PAUSE)
            self.consumer = again(self.make, self.stop, None)
            if self.consumer is None:
                raise Ended from None

    def close(self) -> None:
        if self.consumer is not None:
            drop(self.consumer)
