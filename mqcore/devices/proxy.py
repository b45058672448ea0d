"""Proxy devices: a device with a monitor socket (``Proxy``), a steerable one with a control socket
(``ProxySteerable``), and ``MonitoredQueue``, whose monitor copies carry a per-direction prefix
(pyzmq's ``zmq.devices.Proxy`` ... families). Each comes as plain, Thread and Process variant.
"""

from __future__ import annotations

from typing import Any

from mqcore.constants import PollEvent, SocketType
from mqcore.devices.base import Device, ProcessDevice, ThreadDevice, _SocketPlan
from mqcore.poller import Poller
from mqcore.proxy import proxy, proxy_steerable

__all__ = [
    "Proxy", "ThreadProxy", "ProcessProxy",
    "ProxySteerable", "ThreadProxySteerable", "ProcessProxySteerable",
    "MonitoredQueue", "ThreadMonitoredQueue", "ProcessMonitoredQueue", "monitored_queue",
]


class _WithMonitor(Device):
    """Adds the ``mon`` socket, which gets a copy of every forwarded message."""

    def __init__(self, in_type: int, out_type: int, mon_type: int = SocketType.PUB) -> None:
        super().__init__(3, in_type, out_type)
        self._plans["mon"] = _SocketPlan(mon_type)

    @property
    def mon_type(self) -> int:
        return self._plans["mon"].socket_type

    def bind_mon(self, addr: str) -> None:
        self._plans["mon"].binds.append(addr)

    def connect_mon(self, addr: str) -> None:
        self._plans["mon"].connects.append(addr)

    def setsockopt_mon(self, option: int, value: Any) -> None:
        self._plans["mon"].options.append((option, value))

    def bind_mon_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        return self._bind_random("mon", addr, *args, **kwargs)

    def run_device(self) -> None:
        socks = self._setup_sockets()
        proxy(socks["in"], socks["out"], socks["mon"])


class Proxy(_WithMonitor):
    """A QUEUE that also sends each message to the monitor socket."""


class ThreadProxy(_WithMonitor, ThreadDevice):
    """A Proxy in a background thread."""


class ProcessProxy(_WithMonitor, ProcessDevice):
    """A Proxy in a child process."""


class _WithControl(_WithMonitor):
    """Adds the ``ctrl`` socket: PAUSE, RESUME, TERMINATE, STATISTICS (see ``proxy_steerable``)."""

    def __init__(self, in_type: int, out_type: int, mon_type: int = SocketType.PUB,
                 ctrl_type: int = SocketType.PAIR) -> None:
        super().__init__(in_type, out_type, mon_type)
        self._plans["ctrl"] = _SocketPlan(ctrl_type)

    @property
    def ctrl_type(self) -> int:
        return self._plans["ctrl"].socket_type

    def bind_ctrl(self, addr: str) -> None:
        self._plans["ctrl"].binds.append(addr)

    def connect_ctrl(self, addr: str) -> None:
        self._plans["ctrl"].connects.append(addr)

    def setsockopt_ctrl(self, option: int, value: Any) -> None:
        self._plans["ctrl"].options.append((option, value))

    def bind_ctrl_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        return self._bind_random("ctrl", addr, *args, **kwargs)

    def run_device(self) -> None:
        socks = self._setup_sockets()
        proxy_steerable(socks["in"], socks["out"], socks["mon"], socks["ctrl"])


class ProxySteerable(_WithControl):
    """A Proxy steered through its control socket."""


class ThreadProxySteerable(_WithControl, ThreadDevice):
    """A ProxySteerable in a background thread."""


class ProcessProxySteerable(_WithControl, ProcessDevice):
    """A ProxySteerable in a child process."""


def monitored_queue(in_socket: Any, out_socket: Any, mon_socket: Any, in_prefix: bytes = b"in",
                    out_prefix: bytes = b"out") -> None:
    """Forward both ways and copy each message to ``mon_socket`` behind the prefix of its direction.

    With ROUTER on both sides the two routing frames are swapped, so replies find their way back.
    Returns only by raising (ContextTerminated when the context is terminated).
    """
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


class _MonitoredQueue(_WithMonitor):
    def __init__(self, in_type: int, out_type: int, mon_type: int = SocketType.PUB,
                 in_prefix: bytes = b"in", out_prefix: bytes = b"out") -> None:
        super().__init__(in_type, out_type, mon_type)
        self._prefixes = (in_prefix, out_prefix)

    def run_device(self) -> None:
        socks = self._setup_sockets()
        monitored_queue(socks["in"], socks["out"], socks["mon"], *self._prefixes)


class MonitoredQueue(_MonitoredQueue):
    """``monitored_queue`` run by ``start()``; unlike ``proxy`` it allows ROUTER on both sides."""


class ThreadMonitoredQueue(_MonitoredQueue, ThreadDevice):
    """A MonitoredQueue in a background thread."""


class ProcessMonitoredQueue(_MonitoredQueue, ProcessDevice):
    """A MonitoredQueue in a child process."""
