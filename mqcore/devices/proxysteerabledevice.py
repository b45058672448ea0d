"""Steerable proxy devices (pyzmq's ``zmq.devices.proxysteerabledevice``): a proxy device with a
control socket, as plain, Thread and Process variants."""

from __future__ import annotations

from typing import Any

from mqcore.constants import SocketType
from mqcore.devices.basedevice import ProcessDevice, ThreadDevice, _SocketPlan
from mqcore.devices.proxydevice import ProxyBase
from mqcore.proxy import proxy_steerable

__all__ = ["ProxySteerableBase", "ProxySteerable", "ThreadProxySteerable", "ProcessProxySteerable"]


class ProxySteerableBase(ProxyBase):
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


class ProxySteerable(ProxySteerableBase):
    """A Proxy steered through its control socket."""


class ThreadProxySteerable(ProxySteerableBase, ThreadDevice):
    """A ProxySteerable in a background thread."""


class ProcessProxySteerable(ProxySteerableBase, ProcessDevice):
    """A ProxySteerable in a child process."""
