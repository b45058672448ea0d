"""A backlog case's release (parent process): consumers hold back while the producers build the backlog;
this thread watches the shared progress counters and releases the consumers once it is built (OMB's
``consumerBacklogSizeGB``: ``subscriptions x sent - received``, here in messages of the case's size).

A brokerless sender cannot build a backlog beyond its high-water marks: a PUSH socket blocks (the producers'
counts stop moving), a PUB socket drops (the counts go on, the messages are lost). When the producers' counts
have not moved for ``BLOCKED_S`` (or every producer finished) before the backlog was built, the consumers
are released anyway and the note says so; the drops show as loss in the delivery accounting. The release
stamp (``monotonic_ns``) goes into ``WorkerContext.release_ns``: producers switch to their drain rate at
their next message, consumers start receiving.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

BLOCKED_S = 2.0  # producers whose counts stand still this long are blocked (a high-water mark)
CHECK_S = 0.005


class BacklogRelease(threading.Thread):
    def __init__(self, progress: Any, producers: int, fanout: int, target: int, release_ns: Any,
                 producers_done: Callable[[], bool]) -> None:
        super().__init__(name="mqbench-backlog", daemon=True)
        self.progress, self.producers, self.fanout, self.target = progress, producers, fanout, target
        self.release_ns, self.producers_done = release_ns, producers_done
        self.halt = threading.Event()
        self.built = 0
        self.note = ""

    def run(self) -> None:
        last_sent, last_move = -1, time.monotonic()
        while not self.halt.wait(CHECK_S):
            counts = list(self.progress)
            sent = sum(counts[: self.producers])
            backlog = sent * self.fanout - sum(counts[self.producers:])
            now = time.monotonic()
            if sent != last_sent:
                last_sent, last_move = sent, now
            if backlog >= self.target:
                self.release(backlog, "")
                return
            if sent and now - last_move > BLOCKED_S:
                self.release(backlog, f"the producers were blocked at a backlog of {backlog:,} messages "
                                      f"(of {self.target:,} asked for): a high-water mark")
                return
            if self.producers_done():
                self.release(backlog, f"the producers finished at a backlog of {backlog:,} messages "
                                      f"(of {self.target:,} asked for)")
                return

    def release(self, backlog: int, note: str) -> None:
        self.built, self.note = backlog, note
        self.release_ns.value = time.monotonic_ns()

    def stop(self) -> dict[str, Any]:
        """End the watch (releasing the consumers if it had not yet); what the manifest records."""
        self.halt.set()
        if self.is_alive():
            self.join()
        if not self.release_ns.value:
            self.release(self.built, "the case ended before the backlog was built")
        return {"target": self.target, "built": self.built, "release_ns": int(self.release_ns.value),
                "note": self.note}
