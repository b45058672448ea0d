"""IoThread: one reactor thread (selectors poller + timers + command mailbox).

Every object plugged into an IO thread (listeners, connecters, sessions, engines) is touched only by
that thread; other threads reach it by ``post``-ing a command to the mailbox. Handlers registered with
``add_fd`` are called as ``handler(mask)`` with selectors.EVENT_READ/EVENT_WRITE bits (errors and
hang-ups are reported as both, so the handler's read/write fails and it sees the error). The poller is
``select.poll`` used directly: the ``selectors`` wrapper cost measurable latency per wake-up. Timers are a
heap of (deadline, seq, callback); cancelling marks the entry dead. A handler that raises is logged
and the loop continues, so one broken connection never stops the thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import select
import selectors
import threading
import time
from collections.abc import Callable
from typing import Any

from mqcore.mailbox import Mailbox

log = logging.getLogger("mqcore")

Handler = Callable[[int], None]


class Timer:
    """Handle returned by ``IoThread.add_timer``; ``cancel()`` is owner-thread only."""

    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class IoThread:
    """A reactor thread. Start with ``start()``; ``stop()`` posts a stop command and joins."""

    def __init__(self, name: str = "mqcore-io") -> None:
        self.mailbox = Mailbox()
        self._poller = select.poll()
        self._poller.register(self.mailbox.fd, select.POLLIN)
        self._handlers: dict[int, Handler] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._running = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    # -- any thread ------------------------------------------------------------------------------
    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in this IO thread."""
        self.mailbox.post(fn, *args)

    def start(self) -> None:
        self._running = True
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and wait for the thread (not from the IO thread itself)."""
        if self._thread.is_alive():
            self.post(self._stop)
            if threading.current_thread() is not self._thread:
                self._thread.join()
        self.mailbox.close()

    def in_thread(self) -> bool:
        return threading.current_thread() is self._thread

    # -- IO thread only --------------------------------------------------------------------------
    def _stop(self) -> None:
        self._running = False

    def add_fd(self, fd: int, events: int, handler: Handler) -> None:
        """Watch ``fd`` for ``events`` (EVENT_READ|EVENT_WRITE); replaces an earlier registration."""
        mask = (select.POLLIN if events & selectors.EVENT_READ else 0) | (
            select.POLLOUT if events & selectors.EVENT_WRITE else 0)
        self._handlers[fd] = handler
        self._poller.register(fd, mask)  # register also modifies

    def set_events(self, fd: int, events: int, handler: Handler) -> None:
        """Change the watched events; 0 stops watching without forgetting the handler's slot."""
        if events:
            self.add_fd(fd, events, handler)
        else:
            self.remove_fd(fd)

    def remove_fd(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None:
            try:
                self._poller.unregister(fd)
            except (KeyError, ValueError, OSError):
                pass

    def add_timer(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(time.monotonic() + delay_s, callback)
        heapq.heappush(self._timers, (timer.deadline, next(self._seq), timer))
        return timer

    def _run_timers(self) -> float | None:
        timers = self._timers
        now = time.monotonic()
        while timers:
            deadline, _, timer = timers[0]
            if timer.cancelled:
                heapq.heappop(timers)
                continue
            if deadline > now:
                return deadline - now
            heapq.heappop(timers)
            self._call(timer.callback)
            now = time.monotonic()
        return None

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # a failing handler must not kill the IO thread
            log.exception("mqcore io thread: handler failed")

    def _loop(self) -> None:
        mailbox = self.mailbox
        poll = self._poller.poll
        handlers = self._handlers
        mfd = mailbox.fd
        rd = select.POLLIN | select.POLLERR | select.POLLHUP
        wr = select.POLLOUT | select.POLLERR | select.POLLHUP
        while self._running:
            timeout = self._run_timers()
            if mailbox.prepare_sleep():
                events = poll(None if timeout is None else timeout * 1000.0 + 0.5)
            else:
                events = poll(0)
            mailbox.sleeping = False
            for fd, ev in events:
                if fd == mfd:
                    mailbox.drain_fd()
                    continue
                handler = handlers.get(fd)
                if handler is not None:
                    mask = (1 if ev & rd else 0) | (2 if ev & wr else 0)
                    self._call(handler, mask)
            q = mailbox.queue
            while q:
                fn, args = q.popleft()
                self._call(fn, *args)
