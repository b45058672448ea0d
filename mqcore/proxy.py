"""proxy and proxy_steerable: move messages between two sockets in the caller's thread (libzmq's
``zmq_proxy`` / ``zmq_proxy_steerable``, pyzmq's ``zmq.proxy``).

Each whole message read from one side is sent to the other (blocking send, as libzmq does), and a
copy goes to the optional ``capture`` socket. ``frontend`` and ``backend`` may be the same socket
(a ROUTER echo, say). The steerable form also reads ``control``: PAUSE stops forwarding (messages
wait in the sockets' queues), RESUME restarts it, TERMINATE returns, STATISTICS replies with eight
u64 frames (messages/bytes in/out of the frontend, then of the backend) when ``control`` can send
(REP, PAIR ...); a REP control socket gets an empty reply to the other commands.

Both run until the context is terminated (ContextTerminated propagates, as in pyzmq) or, for the
steerable form, until TERMINATE. Sockets stay open; the caller closes them.
"""

from __future__ import annotations

import struct
from typing import Any

from mqcore.constants import PollEvent, SocketType
from mqcore.error import ZMQError
from mqcore.poller import Poller

POLLIN = int(PollEvent.POLLIN)

__all__ = ["proxy", "proxy_steerable"]


class _Counters:
    __slots__ = ("values",)

    def __init__(self) -> None:
        # frontend: msgs in, bytes in, msgs out, bytes out; backend: the same
        self.values = [0] * 8

    def count(self, base: int, msg: list[bytes], sent: bool) -> None:
        i = base + (2 if sent else 0)
        self.values[i] += 1
        self.values[i + 1] += sum(len(f) for f in msg)


def _forward(src: Any, dst: Any, capture: Any, stats: _Counters, src_base: int, dst_base: int) -> None:
    msg = src.recv_multipart()
    stats.count(src_base, msg, sent=False)
    if capture is not None:
        capture.send_multipart(msg)
    dst.send_multipart(msg)
    stats.count(dst_base, msg, sent=True)


def _control(control: Any, stats: _Counters) -> str:
    """Handle one control message; returns the command name (upper case)."""
    msg = control.recv_multipart()
    command = msg[0].decode("ascii", "replace").upper() if msg else ""
    if command == "STATISTICS":
        reply = [struct.pack("=Q", v) for v in stats.values]
    elif control.type == SocketType.REP:
        reply = [b""]  # a REP control socket must answer every request (libzmq 4.3.5)
    else:
        return command
    try:
        control.send_multipart(reply)
    except ZMQError:
        pass  # a control socket that cannot send (SUB, PULL) gets no statistics
    return command


def proxy_steerable(frontend: Any, backend: Any, capture: Any = None, control: Any = None) -> None:
    """Forward between ``frontend`` and ``backend`` until TERMINATE arrives on ``control``.

    Raises ContextTerminated when the context is terminated, and whatever a send raises.
    """
    poller = Poller()
    poller.register(frontend, POLLIN)
    if backend is not frontend:
        poller.register(backend, POLLIN)
    if control is not None:
        poller.register(control, POLLIN)
    stats = _Counters()
    paused = False
    while True:
        events = dict(poller.poll())
        if control is not None and events.get(control, 0) & POLLIN:
            command = _control(control, stats)
            if command == "TERMINATE":
                return
            if command == "PAUSE":
                paused = True
            elif command == "RESUME":
                paused = False
            if paused:
                poller.register(control, POLLIN)
                _pause(poller, frontend, backend)
            else:
                poller.register(frontend, POLLIN)
                poller.register(backend, POLLIN)
            continue
        if paused:
            continue
        if events.get(frontend, 0) & POLLIN:
            _forward(frontend, backend, capture, stats, 0, 4)
        if backend is not frontend and events.get(backend, 0) & POLLIN:
            _forward(backend, frontend, capture, stats, 4, 0)


def _pause(poller: Poller, frontend: Any, backend: Any) -> None:
    for sock in (frontend, backend):
        try:
            poller.unregister(sock)
        except KeyError:
            pass


def proxy(frontend: Any, backend: Any, capture: Any = None) -> None:
    """Forward messages between ``frontend`` and ``backend`` forever (copies to ``capture``).

    Returns only by raising: ContextTerminated when the context is terminated.
    """
    proxy_steerable(frontend, backend, capture, None)
