"""Socket: pyzmq's ``zmq.Socket`` surface on top of SocketBase.

Adds multipart/string/json/pyobj helpers, options as attributes (``s.sndhwm = 10``, ``s.linger``,
``s.identity``, ``s.last_endpoint`` ...) generated as properties, subscribe/unsubscribe, poll and the
context-manager protocol. Same threading rule as SocketBase: one thread at a time.
"""

from __future__ import annotations

import json
import pickle
import random
import time
from collections.abc import Sequence
from typing import Any

from mqcore.constants import Errno, Event, PollEvent, SocketOption, SocketType
from mqcore.error import Again, ContextTerminated, ZMQBindError, ZMQError
from mqcore.frame import Frame
from mqcore.socket_base import SocketBase, _as_bytes

Opt = SocketOption


class Socket(SocketBase):
    """A messaging socket; create with ``Context.socket(type)`` or ``Socket(ctx, type)``."""

    def __init__(self, context: Any = None, socket_type: int = -1, **kwargs: Any) -> None:
        if context is None:
            from mqcore.context import Context

            context = Context.instance()
        super().__init__(context, socket_type)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<mqcore.Socket({self.socket_type.name}) {state} at {id(self):#x}>"

    def __enter__(self) -> Socket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and not self.context.closed:
                self.close()
        except Exception:
            pass

    # -- options ---------------------------------------------------------------------------------------
    def set(self, option: int, value: Any) -> None:
        self.setsockopt(option, value)

    def get(self, option: int) -> Any:
        return self.getsockopt(option)

    def setsockopt_string(self, option: int, value: str, encoding: str = "utf-8") -> None:
        self.setsockopt(option, value.encode(encoding))

    def getsockopt_string(self, option: int, encoding: str = "utf-8") -> str:
        value = self.getsockopt(option)
        return value.decode(encoding) if isinstance(value, bytes) else str(value)

    set_string = setsockopt_string
    get_string = getsockopt_string

    @property
    def type(self) -> int:
        return self.socket_type

    @property
    def rcvmore(self) -> bool:
        return self._rcvmore

    def subscribe(self, topic: str | bytes) -> None:
        """SUB: receive messages starting with ``topic`` (str is UTF-8 encoded)."""
        self.setsockopt(Opt.SUBSCRIBE, topic.encode() if isinstance(topic, str) else topic)

    def unsubscribe(self, topic: str | bytes) -> None:
        """SUB: drop one subscription to ``topic``."""
        self.setsockopt(Opt.UNSUBSCRIBE, topic.encode() if isinstance(topic, str) else topic)

    # -- multipart / typed helpers -----------------------------------------------------------------------
    def send_multipart(self, msg_parts: Sequence[Any], flags: int = 0, copy: bool = True,
                       track: bool = False, **kwargs: Any) -> Any:
        """Send a whole multipart message atomically."""
        if self._closed:
            raise ZMQError(Errno.ENOTSOCK)
        msg = [p if type(p) is bytes else _as_bytes(p) for p in msg_parts]
        if not msg:
            raise ValueError("a message has at least one frame")
        if self._out_parts:
            msg = self._out_parts + msg
            self._out_parts = []
        elif len(msg) > 1 or flags & 2:
            self._impl.check_send_start()
        if flags & 2:
            self._out_parts = msg
            return None
        self._send_msg(msg, flags)
        return None

    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> list[Any]:
        """Receive all frames of the next message (list of bytes, or Frames with copy=False)."""
        if self._in_parts:
            msg = list(self._in_parts)
            self._in_parts.clear()
        else:
            msg = self._recv_msg(flags)
        self._rcvmore = False
        if copy:
            return msg
        frames = [Frame(f) for f in msg]
        for f in frames[:-1]:
            f.more = True
        return frames

    def send_string(self, u: str, flags: int = 0, copy: bool = True, encoding: str = "utf-8",
                    **kwargs: Any) -> Any:
        if not isinstance(u, str):
            raise TypeError("str objects only")
        return self.send(u.encode(encoding), flags=flags)

    def recv_string(self, flags: int = 0, encoding: str = "utf-8") -> str:
        return self.recv(flags).decode(encoding)  # type: ignore[no-any-return]

    send_unicode = send_string
    recv_unicode = recv_string

    def send_pyobj(self, obj: Any, flags: int = 0, protocol: int = pickle.DEFAULT_PROTOCOL,
                   **kwargs: Any) -> Any:
        return self.send(pickle.dumps(obj, protocol), flags=flags)

    def recv_pyobj(self, flags: int = 0) -> Any:
        return pickle.loads(self.recv(flags))

    def send_json(self, obj: Any, flags: int = 0, **kwargs: Any) -> Any:
        return self.send(json.dumps(obj, **kwargs).encode("utf-8"), flags=flags)

    def recv_json(self, flags: int = 0, **kwargs: Any) -> Any:
        return json.loads(self.recv(flags).decode("utf-8"), **kwargs)

    def send_serialized(self, msg: Any, serialize: Any, flags: int = 0, copy: bool = True,
                        **kwargs: Any) -> Any:
        return self.send_multipart(serialize(msg), flags=flags)

    def recv_serialized(self, deserialize: Any, flags: int = 0, copy: bool = True) -> Any:
        return deserialize(self.recv_multipart(flags))

    # -- misc ------------------------------------------------------------------------------------------
    def poll(self, timeout: int | None = None, flags: int = PollEvent.POLLIN) -> int:
        """Wait up to ``timeout`` ms (None: forever) for ``flags`` events; returns the events seen.

        Raises ZMQError(ENOTSOCK) on a closed socket, ContextTerminated once the context is terminated.
        """
        # One socket needs no Poller: sleep on our own mailbox fd (already in self._poll), as recv does.
        if self._closed:
            raise ZMQError(Errno.ENOTSOCK)
        flags = int(flags)
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout / 1000.0
        while True:
            events = self._events() & flags
            if self._ctx_terminated:
                raise ContextTerminated()
            if events:
                return events
            if deadline is not None and time.monotonic() >= deadline:
                return 0
            try:
                self._wait(deadline, bool(flags & PollEvent.POLLIN))
            except Again:
                return 0

    def bind_to_random_port(self, addr: str, min_port: int = 49152, max_port: int = 65536,
                            max_tries: int = 100) -> int:
        """Bind ``addr`` (e.g. ``tcp://127.0.0.1``) to a free port and return it."""
        if min_port == 49152 and max_port == 65536:
            self.bind(f"{addr}:*")
            return int(self.last_endpoint.decode().rsplit(":", 1)[1])
        for _ in range(max_tries):
            port = random.randrange(min_port, max_port)
            try:
                self.bind(f"{addr}:{port}")
            except ZMQError as exc:
                if exc.errno != Errno.EADDRINUSE:
                    raise
                continue
            return port
        raise ZMQBindError("Could not bind socket to random port.")

    def monitor(self, addr: str | bytes | None, events: int = Event.ALL) -> None:
        """Publish this socket's connection events on a PAIR bound at ``addr`` (inproc:// only);
        ``addr=None`` (or events 0) stops monitoring. Read them with
        ``mqcore.utils.monitor.recv_monitor_message``. ZMQError(EPROTONOSUPPORT) for other transports,
        ZMQError(EADDRINUSE) if ``addr`` is taken."""
        from mqcore.monitor import Monitor

        self._check_open()
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None
        if addr is None or not events:
            return
        if isinstance(addr, bytes):
            addr = addr.decode()
        self._monitor = Monitor(self.context, addr, events)

    def get_monitor_socket(self, events: int = Event.ALL, addr: str | None = None) -> Socket:
        """Start monitoring (see ``monitor``) and return a PAIR socket connected to the events."""
        existing = self.__dict__.get("_monitor_socket")
        if existing is not None and not existing.closed and self._monitor is not None:
            return existing  # type: ignore[no-any-return]
        if addr is None:
            addr = f"inproc://monitor.s-{id(self):x}"
        self.monitor(addr, events)
        sock = self.context.socket(SocketType.PAIR)
        sock.setsockopt(Opt.LINGER, 0)
        sock.connect(addr)
        self.__dict__["_monitor_socket"] = sock
        return sock

    def disable_monitor(self) -> None:
        """Stop monitoring; the monitor socket receives MONITOR_STOPPED (it is not closed)."""
        self.__dict__["_monitor_socket"] = None
        self.monitor(None, 0)

    def __getattr__(self, name: str) -> Any:
        option = getattr(SocketOption, name.upper(), None) if name.isupper() else None
        if option is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.getsockopt(option)


def _option_property(option: SocketOption) -> property:
    def fget(self: Socket) -> Any:
        return self.getsockopt(option)

    def fset(self: Socket, value: Any) -> None:
        if isinstance(value, str) and option in (Opt.ROUTING_ID, Opt.CONNECT_ROUTING_ID, Opt.SUBSCRIBE,
                                                  Opt.UNSUBSCRIBE):
            value = value.encode()
        self.setsockopt(option, value)

    return property(fget, fset, doc=f"The {option.name} socket option.")


for _name, _member in SocketOption.__members__.items():
    _attr = _name.lower()
    if _attr in ("type",) or hasattr(Socket, _attr):
        continue
    setattr(Socket, _attr, _option_property(_member))
