"""The `zmq` driver: pyzmq over the real libzmq. Brokerless, so the plan decides who binds.

Topology: producers bind (PUB for pubsub, PUSH for queue), and each consumer connects to every producer of
its topic, so a PUSH load-balances over the consumers of its topic and a SUB fair-queues over its
publishers. For reqrep each replier binds a REP and each requester's REQ connects to every replier.

The module is written against pyzmq's API only, so `mqcore_driver` reuses it with `mqcore` swapped in.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, ClassVar

from harness.drivers.base import (
    Consumer,
    Driver,
    DriverError,
    Pattern,
    Producer,
    Replier,
    Requester,
    Role,
    Topology,
    topology_from_plan,
)

_TRANSPORTS = ("tcp", "ipc")
# How many messages one poll() may deliver before returning to the runner's loop.
_POLL_BURST = 4096


def free_tcp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ZmqDriver(Driver):
    name: ClassVar[str] = "zmq"
    patterns: ClassVar[frozenset[Pattern]] = frozenset(Pattern)
    client_packages: ClassVar[tuple[str, ...]] = ("pyzmq",)

    @classmethod
    def module(cls) -> ModuleType:
        import zmq

        return zmq

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return frozenset({"transport", "sndhwm", "rcvhwm", "io_threads"})

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            cls.module()
        except ImportError as exc:
            return f"{cls.name} cannot be imported: {exc}"
        return None

    def versions(self) -> dict[str, str]:
        out = super().versions()
        zmq = self.module()
        if self.name == "zmq":  # mqcore also answers zmq_version() (pyzmq's API) but is not libzmq
            out["libzmq"] = zmq.zmq_version()
        return out

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        transport = self.options.get("transport", "tcp")
        if transport not in _TRANSPORTS:
            raise DriverError(
                f"{self.name}: option transport must be one of {', '.join(_TRANSPORTS)} "
                f"(workers are separate processes, so inproc cannot be used), got {transport!r}"
            )
        self.transport = transport
        for key in ("sndhwm", "rcvhwm", "io_threads"):
            value = self.options.get(key)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise DriverError(f"{self.name}: option {key} must be a whole number >= 0, got {value!r}")
        self._ctx: Any = None

    # -- parent ------------------------------------------------------------------------------------

    def plan(self, topology: Topology) -> dict[str, Any]:
        plan = super().plan(topology)
        binders = topology.consumers if topology.pattern is Pattern.REQREP else topology.producers
        if self.transport == "tcp":
            plan["endpoints"] = [f"tcp://127.0.0.1:{free_tcp_port()}" for _ in range(binders)]
        else:
            folder = tempfile.mkdtemp(prefix=f"mqbench-{topology.run_tag}-")
            plan["ipc_dir"] = folder
            plan["endpoints"] = [f"ipc://{folder}/e{i}" for i in range(binders)]
        return plan

    def teardown(self, plan: Mapping[str, Any]) -> None:
        folder = plan.get("ipc_dir")
        if folder:
            for entry in os.scandir(folder):
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
            try:
                os.rmdir(folder)
            except OSError:
                pass

    # -- workers -----------------------------------------------------------------------------------

    def _context(self) -> Any:
        if self._ctx is None:
            self._ctx = self.module().Context(io_threads=self.options.get("io_threads", 1))
        return self._ctx

    def _socket(self, kind: int) -> Any:
        s = self._context().socket(kind)
        if "sndhwm" in self.options:
            s.setsockopt(self.module().SNDHWM, self.options["sndhwm"])
        if "rcvhwm" in self.options:
            s.setsockopt(self.module().RCVHWM, self.options["rcvhwm"])
        return s

    def _peers(self, plan: Mapping[str, Any], role: Role, binder_is_producer: bool) -> list[str]:
        """Endpoints of the binders that share this worker's topic."""
        t = topology_from_plan(plan)
        count = t.producers if binder_is_producer else t.consumers
        return [plan["endpoints"][i] for i in range(count) if i % t.topics == role.topic]

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        zmq = self.module()
        pattern = topology_from_plan(plan).pattern
        s = self._socket(zmq.PUB if pattern is Pattern.PUBSUB else zmq.PUSH)
        s.bind(plan["endpoints"][role.index])
        return _ZmqProducer(s, self)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        zmq = self.module()
        pattern = topology_from_plan(plan).pattern
        s = self._socket(zmq.SUB if pattern is Pattern.PUBSUB else zmq.PULL)
        return _ZmqConsumer(s, self._peers(plan, role, binder_is_producer=True), pattern, self)

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        return _ZmqRequester(self, self._peers(plan, role, binder_is_producer=False))

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        s = self._socket(self.module().REP)
        s.bind(plan["endpoints"][role.index])
        return _ZmqReplier(s, self)

    def close_context(self) -> None:
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None


class _ZmqProducer(Producer):
    def __init__(self, sock: Any, driver: ZmqDriver) -> None:
        self._sock = sock
        self._driver = driver
        # The bound method itself: one Python frame less per message on the hot path.
        self.send = sock.send  # type: ignore[method-assign]

    def send(self, payload: bytearray) -> None:  # replaced per instance in __init__
        self._sock.send(payload)

    def close(self) -> None:
        self._sock.close(linger=0)
        self._driver.close_context()


class _ZmqConsumer(Consumer):
    def __init__(self, sock: Any, peers: list[str], pattern: Pattern, driver: ZmqDriver) -> None:
        self._sock = sock
        self._peers = peers
        self._pattern = pattern
        self._driver = driver
        self._on: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        zmq = self._driver.module()
        if self._pattern is Pattern.PUBSUB:
            self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        for endpoint in self._peers:
            self._sock.connect(endpoint)
        self._on = on_message

    def poll(self, timeout: float) -> None:
        zmq = self._driver.module()
        recv = self._sock.recv
        on = self._on
        assert on is not None, "start() first"
        noblock = zmq.NOBLOCK
        n = 0
        try:
            while n < _POLL_BURST:
                on(recv(noblock))
                n += 1
        except zmq.Again:
            if n == 0:
                self._sock.poll(int(timeout * 1000), zmq.POLLIN)

    def close(self) -> None:
        self._sock.close(linger=0)
        self._driver.close_context()


class _ZmqRequester(Requester):
    """REQ over every replier. After a timeout the REQ is replaced (a REQ that missed its reply is stuck)."""

    def __init__(self, driver: ZmqDriver, peers: list[str]) -> None:
        self._driver = driver
        self._peers = peers
        self._sock = self._connect()

    def _connect(self) -> Any:
        s = self._driver._socket(self._driver.module().REQ)
        for endpoint in self._peers:
            s.connect(endpoint)
        return s

    def request(self, payload: bytearray, timeout: float) -> bytes | None:
        zmq = self._driver.module()
        sock = self._sock
        sock.send(payload)
        try:
            reply: bytes = sock.recv(zmq.NOBLOCK)
            return reply
        except zmq.Again:
            pass
        if sock.poll(int(timeout * 1000), zmq.POLLIN):
            reply = sock.recv()
            return reply
        sock.close(linger=0)
        self._sock = self._connect()
        return None

    def close(self) -> None:
        self._sock.close(linger=0)
        self._driver.close_context()


class _ZmqReplier(Replier):
    def __init__(self, sock: Any, driver: ZmqDriver) -> None:
        self._sock = sock
        self._driver = driver

    def start(self) -> None:
        pass

    def poll(self, timeout: float) -> int:
        zmq = self._driver.module()
        sock = self._sock
        if not sock.poll(int(timeout * 1000), zmq.POLLIN):
            return 0
        n = 0
        try:
            while n < _POLL_BURST:
                sock.send(sock.recv(zmq.NOBLOCK))
                n += 1
        except zmq.Again:
            pass
        return n

    def close(self) -> None:
        self._sock.close(linger=0)
        self._driver.close_context()
