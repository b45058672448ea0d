"""Mailbox: a queue of commands plus a wake-up fd, owned by one reader (a socket's user or an IO thread).

Any thread may ``post`` a command (a callable and its arguments); only the owner runs them, so an
object living in an IO thread is touched only by that thread. There is no lock: ``deque.append`` and
``popleft`` are atomic under the GIL, and the wake-up fd is written only while the owner is asleep:

    owner:  sleeping = True; if queue: (don't sleep) else poll(fd)      -- ``prepare_sleep``
    poster: queue.append(cmd); if sleeping: sleeping = False; write(fd)  -- ``post``

Because the owner re-checks the queue after raising the flag, a command is never missed; at worst a
stray byte causes one spurious wake-up, which every wait loop tolerates.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from typing import Any

Command = tuple[Callable[..., Any], tuple[Any, ...]]


class Mailbox:
    """Commands for one owner; ``fd`` becomes readable when a command arrives while it sleeps."""

    __slots__ = ("queue", "sleeping", "fd", "_wfd", "closed")

    def __init__(self) -> None:
        self.queue: deque[Command] = deque()
        self.sleeping = False
        self.closed = False
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        self.fd = rfd
        self._wfd = wfd

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)`` for the owner and wake it if it sleeps. Safe from any thread."""
        self.queue.append((fn, args))
        if self.sleeping:
            self.sleeping = False
            try:
                os.write(self._wfd, b"\x01")
            except (BlockingIOError, OSError):
                pass  # full pipe: a wake-up is already pending; closed: owner is gone

    def prepare_sleep(self) -> bool:
        """Announce that the owner is about to wait on ``fd``; False if commands are already queued."""
        self.sleeping = True
        if self.queue:
            self.sleeping = False
            return False
        return True

    def drain_fd(self) -> None:
        """Consume wake-up bytes after ``fd`` became readable."""
        self.sleeping = False
        try:
            while os.read(self.fd, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def process(self) -> None:
        """Run every queued command in the calling (owner) thread."""
        q = self.queue
        while q:
            fn, args = q.popleft()
            fn(*args)

    def close(self) -> None:
        """Release the fds (owner only, once nobody posts any more)."""
        if not self.closed:
            self.closed = True
            self.sleeping = False  # post() never writes to a (possibly reused) closed fd
            for fd in (self.fd, self._wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
