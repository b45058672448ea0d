"""``monitored_queue`` (pyzmq's ``zmq.devices.monitoredqueue``): a queue between two sockets that
copies each message to a monitor socket behind the prefix of its direction."""

from __future__ import annotations

from typing import Any

from mqcore.constants import PollEvent, SocketType
from mqcore.poller import Poller

__all__ = ["monitored_queue"]


def monitored_queue(in_socket: Any, out_socket: Any, mon_socket: Any, in_prefix: bytes = b"in",
                    out_prefix: bytes = b"out") -> None:
    """Forward both ways and copy each message to ``mon_socket`` behind the prefix of its direction.

    With ROUTER on both sides the two routing frames are swapped, so replies find their way back.
    Returns only by raising (ContextTerminated when the context is terminated).
    """
    for name, prefix in (("in_prefix", in_prefix), ("out_prefix", out_prefix)):
        if not isinstance(prefix, bytes):
            raise TypeError(f"monitored_queue's {name} must be bytes, not {type(prefix).__name__}")
    swap = in_socket.type == SocketType.ROUTER and out_socket.type == SocketType.ROUTER
    poller = Poller()
    poller.register(in_socket, PollEvent.POLLIN)
    poller.register(out_socket, PollEvent.POLLIN)
    routes = ((in_socket, out_socket, in_prefix), (out_socket, in_socket, out_prefix))
    while True:
        ready = dict(poller.poll())
        for src, dst, prefix in routes:
            if ready.get(src, 0) & PollEvent.POLLIN:
                msg = src.recv_multipart()
                if swap:
                    msg[0], msg[1] = msg[1], msg[0]
                dst.send_multipart(msg)
                mon_socket.send_multipart([prefix, *msg])
