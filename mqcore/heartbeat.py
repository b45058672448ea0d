"""ZMTP heartbeats for one connection (HEARTBEAT_IVL / _TTL / _TIMEOUT), as libzmq does them.

After the handshake, with HEARTBEAT_IVL > 0 the engine sends a PING every interval carrying our
HEARTBEAT_TTL (in deciseconds); if nothing at all arrives within HEARTBEAT_TIMEOUT (default: the
interval) after a PING, the connection is closed (DISCONNECTED event; the connect side reconnects).
A peer's PING with a TTL arms the same check on our side: nothing received within the TTL closes
the connection. PINGs are answered with PONG by the engine.

Owned by the engine's IO thread. Invariants: at most one timeout check and one TTL check are armed;
``last_recv`` is the monotonic time of the last read that brought bytes; ``cancel`` disarms all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mqcore.io_thread import IoThread, Timer
    from mqcore.options import Options

_now = time.monotonic


class Heartbeat:
    """Timers of one connection; ``send_ping(ttl_ds)`` queues a PING, ``expire(reason)`` closes."""

    def __init__(self, io: IoThread, options: Options, send_ping: Callable[[int], None],
                 expire: Callable[[str], None]) -> None:
        self.io = io
        self.ivl = max(options.heartbeat_ivl, 0) / 1000.0
        timeout = options.heartbeat_timeout
        self.timeout = (options.heartbeat_ivl if timeout < 0 else timeout) / 1000.0
        self.ttl_ds = min(max(options.heartbeat_ttl, 0) // 100, 0xFFFF)
        self.send_ping = send_ping
        self.expire = expire
        self.last_recv = _now()
        self._ping_timer: Timer | None = None
        self._timeout_timer: Timer | None = None
        self._ttl_timer: Timer | None = None
        self.cancelled = False

    def start(self) -> None:
        """Begin pinging (no-op without HEARTBEAT_IVL)."""
        if self.ivl > 0:
            self._ping_timer = self.io.add_timer(self.ivl, self._ping)

    def _ping(self) -> None:
        if self.cancelled:
            return
        self.send_ping(self.ttl_ds)
        if self.cancelled:
            return
        self._ping_timer = self.io.add_timer(self.ivl, self._ping)
        if self.timeout > 0 and self._timeout_timer is None:
            sent = _now()
            self._timeout_timer = self.io.add_timer(self.timeout, lambda: self._check_timeout(sent))

    def _check_timeout(self, sent: float) -> None:
        self._timeout_timer = None
        if not self.cancelled and self.last_recv < sent:
            self.expire("heartbeat timed out: nothing received after a PING")

    def peer_ping(self, ttl_ds: int) -> None:
        """The peer pinged with ``ttl_ds``: expect more from it within that time."""
        if ttl_ds <= 0 or self._ttl_timer is not None or self.cancelled:
            return
        since = _now()
        self._ttl_timer = self.io.add_timer(ttl_ds / 10.0, lambda: self._check_ttl(since))

    def _check_ttl(self, since: float) -> None:
        self._ttl_timer = None
        if not self.cancelled and self.last_recv < since:
            self.expire("heartbeat TTL expired: the peer went silent")

    def cancel(self) -> None:
        self.cancelled = True
        for timer in (self._ping_timer, self._timeout_timer, self._ttl_timer):
            if timer is not None:
                timer.cancel()
