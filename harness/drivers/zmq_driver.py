"""The `zmq` driver: pyzmq over the real libzmq. Brokerless, so the plan decides who binds.

Topology: producers bind (PUB for pubsub, PUSH for queue), and each consumer connects to every producer of
its topic, so a PUSH load-balances over the consumers of its topic and a SUB fair-queues over its
publishers. For reqrep each replier binds a REP and each requester's REQ connects to every replier.

Option ``curve: true`` encrypts every connection with CURVE: the plan holds a key pair per binder (made
with the library's own ``curve_keypair()``) and one client key pair; binders are CURVE servers and a
connecting socket sets the binder's public key as CURVE_SERVERKEY before each connect (the key is taken
at connect time, so one socket can reach several servers). No ZAP handler: encryption, not access control.

The module is written against pyzmq's API only, so `mqcore_driver` reuses it with `mqcore` swapped in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from harness import _watchdog
from harness.drivers.base import (
    Capabilities,
    Consumer,
    Driver,
    Pattern,
    Producer,
    Replier,
    Requester,
    Role,
    Topology,
    topology_from_plan,
)
from harness.drivers.options import option

# How many messages one poll() may deliver before returning to the runner's loop.
_POLL_BURST = 4096


@dataclass(frozen=True)
class ZmqOptions:
    """Socket options as pyzmq takes them; values are used as YAML typed them (``exact``), as always."""

    transport: str = option(
        "tcp", choices=("tcp", "ipc"), exact=True, note="workers are separate processes, so not inproc"
    )
    sndhwm: int | None = option(None, minimum=0, exact=True)  # None: the library's default
    rcvhwm: int | None = option(None, minimum=0, exact=True)
    io_threads: int = option(1, minimum=0, exact=True)
    curve: bool = option(False, exact=True)


class ZmqDriver(Driver):
    name: ClassVar[str] = "zmq"
    patterns: ClassVar[frozenset[Pattern]] = frozenset(Pattern)
    client_packages: ClassVar[tuple[str, ...]] = ("pyzmq",)
    client = "pyzmq"
    # pyzmq's send copies a buffer into a zmq message (copy=True), and so does mqcore's; a PUB drops what it
    # sends before a SUB's subscription has arrived.
    capabilities: ClassVar[Capabilities] = Capabilities(pull_receive=True, batch_send=True, slow_joiner=True)
    options_type = ZmqOptions
    opts: ZmqOptions

    @classmethod
    def module(cls) -> ModuleType:
        import zmq

        return zmq

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
        self._ctx: Any = None

    # -- parent ------------------------------------------------------------------------------------

    def plan(self, topology: Topology) -> dict[str, Any]:
        plan = super().plan(topology)
        binders = topology.consumers if topology.pattern is Pattern.REQREP else topology.producers
        if self.opts.transport == "tcp":
            # One call for all binders: its ports are distinct, each checked free while the others are
            # held. Imported here: workers import this module and never plan, and the brokers package
            # would cost each of them its import (seconds).
            from harness.brokers import free_ports

            plan["endpoints"] = [f"tcp://127.0.0.1:{port}" for port in (free_ports(binders) if binders else [])]
        else:
            folder, plan["ipc_undo"] = _watchdog.temporary_folder(f"mqbench-{topology.run_tag}-")
            plan["ipc_dir"] = folder
            plan["endpoints"] = [f"ipc://{folder}/e{i}" for i in range(binders)]
        if self.opts.curve:
            keypair = self.module().curve_keypair
            plan["curve"] = {
                "servers": [[k.decode("ascii") for k in keypair()] for _ in range(binders)],
                "client": [k.decode("ascii") for k in keypair()],
            }
        return plan

    def teardown(self, plan: Mapping[str, Any]) -> None:
        folder = plan.get("ipc_dir")
        if folder:
            _watchdog.remove_folder(folder, int(plan.get("ipc_undo", 0)))

    # -- workers -----------------------------------------------------------------------------------

    def _context(self) -> Any:
        if self._ctx is None:
            self._ctx = self.module().Context(io_threads=self.opts.io_threads)
        return self._ctx

    def _socket(self, kind: int) -> Any:
        s = self._context().socket(kind)
        if self.opts.sndhwm is not None:
            s.setsockopt(self.module().SNDHWM, self.opts.sndhwm)
        if self.opts.rcvhwm is not None:
            s.setsockopt(self.module().RCVHWM, self.opts.rcvhwm)
        return s

    def _bind(self, s: Any, plan: Mapping[str, Any], index: int) -> None:
        """Bind ``s`` to binder ``index``'s endpoint, as a CURVE server if the plan says so."""
        if "curve" in plan:
            zmq = self.module()
            s.setsockopt(zmq.CURVE_SERVER, 1)
            s.setsockopt(zmq.CURVE_SECRETKEY, plan["curve"]["servers"][index][1].encode("ascii"))
        s.bind(plan["endpoints"][index])

    def _connect(self, s: Any, plan: Mapping[str, Any], endpoints: list[str]) -> None:
        """Connect ``s`` to ``endpoints``; with CURVE, each connect carries that binder's server key."""
        curve = plan.get("curve")
        zmq = self.module()
        if curve is not None:
            public, secret = (k.encode("ascii") for k in curve["client"])
            s.setsockopt(zmq.CURVE_PUBLICKEY, public)
            s.setsockopt(zmq.CURVE_SECRETKEY, secret)
        for endpoint in endpoints:
            if curve is not None:
                server_public = curve["servers"][plan["endpoints"].index(endpoint)][0]
                s.setsockopt(zmq.CURVE_SERVERKEY, server_public.encode("ascii"))
            s.connect(endpoint)

    def _peers(self, plan: Mapping[str, Any], role: Role, binder_is_producer: bool) -> list[str]:
        """Endpoints of the binders that share this worker's topic."""
        t = topology_from_plan(plan)
        count = t.producers if binder_is_producer else t.consumers
        return [plan["endpoints"][i] for i in range(count) if i % t.topics == role.topic]

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        zmq = self.module()
        pattern = topology_from_plan(plan).pattern
        s = self._socket(zmq.PUB if pattern is Pattern.PUBSUB else zmq.PUSH)
        self._bind(s, plan, role.index)
        return _ZmqProducer(s, self)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        zmq = self.module()
        pattern = topology_from_plan(plan).pattern
        s = self._socket(zmq.SUB if pattern is Pattern.PUBSUB else zmq.PULL)
        peers = self._peers(plan, role, binder_is_producer=True)
        return _ZmqConsumer(s, lambda sock: self._connect(sock, plan, peers), pattern, self)

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        peers = self._peers(plan, role, binder_is_producer=False)
        return _ZmqRequester(self, lambda sock: self._connect(sock, plan, peers))

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        s = self._socket(self.module().REP)
        self._bind(s, plan, role.index)
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
    def __init__(self, sock: Any, connect: Callable[[Any], None], pattern: Pattern, driver: ZmqDriver) -> None:
        self._sock = sock
        self._connect = connect
        self._pattern = pattern
        self._driver = driver
        self._on: Callable[[bytes], None] | None = None
        self._timeout_ms = -1

    def start(self, on_message: Callable[[bytes], None]) -> None:
        zmq = self._driver.module()
        if self._pattern is Pattern.PUBSUB:
            self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        self._connect(self._sock)
        self._on = on_message

    def poll(self, timeout: float) -> None:
        # Blocking receives with a receive timeout, as a plain recv loop would do: a consumer that has
        # caught up waits inside the library instead of spinning through Again exceptions and poll calls,
        # which on two cores would take CPU from the producer being measured.
        zmq = self._driver.module()
        timeout_ms = max(1, int(timeout * 1000))
        if timeout_ms != self._timeout_ms:
            self._sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
            self._timeout_ms = timeout_ms
        recv = self._sock.recv
        on = self._on
        assert on is not None, "start() first"
        try:
            for _ in range(_POLL_BURST):
                on(recv())
        except zmq.Again:
            pass

    def receiver(self, timeout: float) -> tuple[Callable[[], bytes], type[BaseException]]:
        zmq = self._driver.module()
        self._timeout_ms = max(1, int(timeout * 1000))
        self._sock.setsockopt(zmq.RCVTIMEO, self._timeout_ms)
        return self._sock.recv, zmq.Again

    def close(self) -> None:
        self._sock.close(linger=0)
        self._driver.close_context()


class _ZmqRequester(Requester):
    """REQ over every replier. After a timeout the REQ is replaced (a REQ that missed its reply is stuck)."""

    def __init__(self, driver: ZmqDriver, connect: Callable[[Any], None]) -> None:
        self._driver = driver
        self._connect_to_peers = connect
        self._sock = self._connect()

    def _connect(self) -> Any:
        s = self._driver._socket(self._driver.module().REQ)
        self._connect_to_peers(s)
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
