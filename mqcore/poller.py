"""Poller: wait for several sockets (and plain fds) to become readable/writable (pyzmq's ``zmq.Poller``).

Readiness of an mqcore socket is computed from its pipes after running its pending commands; to
sleep, the poller arms every socket's mailbox and polls their fds together with the plain fds, so a
command (activate_read, ...) arriving for any socket wakes it. Use from one thread at a time.
"""

from __future__ import annotations

import select
import time
from typing import Any

from mqcore.constants import PollEvent
from mqcore.error import ContextTerminated
from mqcore.socket_base import SocketBase

POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)
POLLERR = int(PollEvent.POLLERR)


def _fileno(obj: Any) -> int:
    return obj if isinstance(obj, int) else int(obj.fileno())


class Poller:
    """Register sockets or fds, then ``poll(timeout_ms)`` -> list of (socket_or_fd, events)."""

    def __init__(self) -> None:
        self.sockets: list[tuple[Any, int]] = []
        self._map: dict[Any, int] = {}

    def register(self, socket: Any, flags: int = POLLIN | POLLOUT) -> None:
        """Watch ``socket`` for ``flags``; flags 0 unregisters."""
        if not flags:
            if socket in self._map:
                self.unregister(socket)
            return
        if socket in self._map:
            self.sockets[self._map[socket]] = (socket, int(flags))
        else:
            self._map[socket] = len(self.sockets)
            self.sockets.append((socket, int(flags)))

    modify = register

    def __contains__(self, socket: Any) -> bool:
        return socket in self._map

    def unregister(self, socket: Any) -> None:
        """Stop watching ``socket``; KeyError if it was not registered."""
        idx = self._map.pop(socket)
        self.sockets.pop(idx)
        for i, (s, _) in enumerate(self.sockets[idx:], idx):
            self._map[s] = i

    def _ready(self) -> list[tuple[Any, int]]:
        ready = []
        for sock, flags in self.sockets:
            if isinstance(sock, SocketBase):
                events = sock._events() & flags
                if sock._ctx_terminated:
                    raise ContextTerminated()  # as zmq_poll's ETERM
                if events:
                    ready.append((sock, events))
        return ready

    def poll(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        """Events ready now or within ``timeout`` ms (None or negative: wait forever).

        Raises ContextTerminated once the context of a registered socket is terminated.
        """
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout / 1000.0
        while True:
            ready = self._ready()
            fds = [(s, f) for s, f in self.sockets if not isinstance(s, SocketBase)]
            if ready and not fds:
                return ready
            remaining_ms: float | None = None
            if deadline is not None:
                remaining_ms = max(0.0, (deadline - time.monotonic()) * 1000.0)
            if ready:
                remaining_ms = 0.0
            p = select.poll()
            armed: list[SocketBase] = []
            sleep = True
            for sock, flags in self.sockets:
                if isinstance(sock, SocketBase):
                    if sock._closed:
                        continue
                    sock._release_engine()  # we sleep on its mailbox only: the IO thread reads
                    if not sock._mailbox.prepare_sleep():
                        sleep = False
                    armed.append(sock)
                    p.register(sock._mailbox.fd, select.POLLIN)
                else:
                    mask = (select.POLLIN if flags & POLLIN else 0) | (select.POLLOUT if flags & POLLOUT else 0)
                    p.register(_fileno(sock), mask)
            result = p.poll(remaining_ms if sleep else 0)
            for sock in armed:
                sock._mailbox.sleeping = False
            fd_ready = []
            got = dict(result)
            for sock in armed:
                if got.pop(sock._mailbox.fd, 0):
                    sock._mailbox.drain_fd()
            for sock, flags in fds:
                ev = got.get(_fileno(sock), 0)
                mask = (POLLIN if ev & select.POLLIN else 0) | (POLLOUT if ev & select.POLLOUT else 0)
                mask |= POLLERR if ev & (select.POLLERR | select.POLLHUP) else 0
                if mask & (flags | POLLERR):
                    fd_ready.append((_fileno(sock), mask & (flags | POLLERR)))  # fds, as pyzmq
            if ready or fd_ready:
                return ready + fd_ready
            if deadline is not None and time.monotonic() >= deadline:
                return self._ready()


def select_sockets(rlist: list[Any], wlist: list[Any], xlist: list[Any],
                   timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """pyzmq's ``zmq.select``: timeout in seconds."""
    p = Poller()
    for s in set(rlist) | set(wlist) | set(xlist):
        p.register(s, (POLLIN if s in rlist else 0) | (POLLOUT if s in wlist else 0)
                   | (POLLERR if s in xlist else 0))
    events = dict(p.poll(None if timeout is None else timeout * 1000))

    def seen(s: Any) -> int:  # plain fds come back from poll() as numbers
        return events.get(s if isinstance(s, SocketBase) else _fileno(s), 0)

    return ([s for s in rlist if seen(s) & POLLIN], [s for s in wlist if seen(s) & POLLOUT],
            [s for s in xlist if seen(s) & POLLERR])
