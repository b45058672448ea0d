"""Proxy devices (pyzmq's ``zmq.devices.proxydevice``): a device whose messages are also copied to a
monitor socket, as plain, Thread and Process variants."""

from __future__ import annotations

from typing import Any

from mqcore.constants import SocketType
from mqcore.devices.basedevice import Device, ProcessDevice, ThreadDevice, _SocketPlan
from mqcore.proxy import proxy

__all__ = ["ProxyBase", "Proxy", "ThreadProxy", "ProcessProxy"]


class ProxyBase(Device):
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


class Proxy(ProxyBase):
    """A QUEUE that also sends each message to the monitor socket."""


class ThreadProxy(ProxyBase, ThreadDevice):
    """A Proxy in a background thread."""


class ProcessProxy(ProxyBase, ProcessDevice):
    """A Proxy in a child process."""
