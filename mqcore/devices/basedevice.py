"""Devices: a proxy whose sockets are made, set up and run in a background thread or process
(pyzmq's ``zmq.devices.Device``, ``ThreadDevice``, ``ProcessDevice``).

A device is given socket *types*; ``bind_in``/``connect_out``/``setsockopt_in``... are recorded and
applied to the sockets it creates in its own thread (sockets are used from one thread only). An
``out_type`` below 0 makes one socket serve both sides. ``start()`` runs the device (in the caller's
thread for ``Device``); it ends quietly when its context is terminated.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqcore.constants import Errno, SocketType
from mqcore.context import Context
from mqcore.error import ZMQBindError, ZMQError
from mqcore.proxy import proxy

if TYPE_CHECKING:
    from mqcore.socket import Socket

__all__ = ["Device", "ThreadDevice", "ProcessDevice", "device", "QUEUE", "FORWARDER", "STREAMER"]

# libzmq's zmq_device types; since libzmq 3.2 all three are zmq_proxy.
STREAMER, FORWARDER, QUEUE = 1, 2, 3


def device(device_type: int, frontend: Socket, backend: Socket) -> None:
    """Forward between two sockets until the context is terminated (pyzmq's ``zmq.device``)."""
    proxy(frontend, backend)


@dataclass
class _SocketPlan:
    """What to do to one of a device's sockets once it exists, in the device's thread."""

    socket_type: int
    binds: list[str] = field(default_factory=list)
    connects: list[str] = field(default_factory=list)
    options: list[tuple[int, Any]] = field(default_factory=list)

    def make(self, ctx: Context) -> Socket:
        return self.apply(ctx.socket(self.socket_type))

    def apply(self, sock: Socket) -> Socket:
        for option, value in self.options:  # options first: ROUTING_ID must precede connect
            sock.setsockopt(option, value)
        for addr in self.binds:
            sock.bind(addr)
        for addr in self.connects:
            sock.connect(addr)
        return sock


class Device:
    """A QUEUE/FORWARDER/STREAMER between an ``in`` and an ``out`` socket, run by ``start()``."""

    context_factory: Callable[[], Context] = Context.instance

    def __init__(self, device_type: int = QUEUE, in_type: int | None = None,
                 out_type: int | None = None) -> None:
        if in_type is None or out_type is None:
            raise TypeError("a device needs both in_type and out_type (socket types)")
        self.device_type = device_type
        self.daemon = True
        self.done = False
        self._plans: dict[str, _SocketPlan] = {"in": _SocketPlan(in_type), "out": _SocketPlan(out_type)}
        self._random_addrs: set[str] = set()
        self._sockets: list[Socket] = []
        self._context: Context | None = None

    @property
    def in_type(self) -> int:
        return self._plans["in"].socket_type

    @property
    def out_type(self) -> int:
        return self._plans["out"].socket_type

    # -- configuration, applied in the device's thread ----------------------------------------------
    def bind_in(self, addr: str) -> None:
        self._plans["in"].binds.append(addr)

    def connect_in(self, addr: str) -> None:
        self._plans["in"].connects.append(addr)

    def setsockopt_in(self, option: int, value: Any) -> None:
        self._plans["in"].options.append((option, value))

    def bind_in_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        return self._bind_random("in", addr, *args, **kwargs)

    def bind_out(self, addr: str) -> None:
        self._plans["out"].binds.append(addr)

    def connect_out(self, addr: str) -> None:
        self._plans["out"].connects.append(addr)

    def setsockopt_out(self, option: int, value: Any) -> None:
        self._plans["out"].options.append((option, value))

    def bind_out_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        return self._bind_random("out", addr, *args, **kwargs)

    def _bind_random(self, role: str, addr: str, *args: Any, **kwargs: Any) -> int:
        """Find a free port now (bind and release it) and record the bind for ``role``."""
        with Context() as ctx, ctx.socket(SocketType.PUSH) as probe:
            for _ in range(5):
                port = probe.bind_to_random_port(addr, *args, **kwargs)
                endpoint = f"{addr}:{port}"
                if endpoint not in self._random_addrs:
                    break
            else:
                raise ZMQBindError("Could not reserve random port.")
        self._random_addrs.add(endpoint)
        self._plans[role].binds.append(endpoint)
        return port

    # -- running ------------------------------------------------------------------------------------
    def _setup_sockets(self) -> dict[str, Socket]:
        ctx = self._context = type(self).context_factory()
        made: dict[str, Socket] = {}
        for role, plan in self._plans.items():
            if role == "out" and plan.socket_type < 0:
                made[role] = plan.apply(made["in"])  # one socket serves both sides
                continue
            made[role] = plan.make(ctx)
            self._sockets.append(made[role])
        return made

    def run_device(self) -> None:
        """Create the sockets and forward; override to run another loop on them."""
        socks = self._setup_sockets()
        proxy(socks["in"], socks["out"])

    def run(self) -> None:
        try:
            self.run_device()
        except ZMQError as exc:
            if exc.errno not in (Errno.ETERM, Errno.ENOTSOCK):
                raise  # termination is the normal end of a device
        finally:
            self.done = True
            for sock in self._sockets:
                if not sock.closed:
                    sock.close()

    def start(self) -> None:
        """Run the device in this thread (the background classes override this)."""
        self.run()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the device has ended, at most ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.001)


class _BackgroundDevice(Device):
    _launch_class: Callable[..., Any]
    launcher: Any = None

    def start(self) -> None:
        self.launcher = type(self)._launch_class(target=self.run)
        self.launcher.daemon = self.daemon
        self.launcher.start()

    def join(self, timeout: float | None = None) -> None:
        self.launcher.join(timeout=timeout)


class ThreadDevice(_BackgroundDevice):
    """A Device run in a background thread; it shares ``Context.instance()``."""

    _launch_class = threading.Thread


class ProcessDevice(_BackgroundDevice):
    """A Device run in a child process, with a context of its own."""

    _launch_class = multiprocessing.Process
    context_factory: Callable[[], Context] = Context
