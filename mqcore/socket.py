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
from typing import TYPE_CHECKING, Any

from mqcore.constants import Errno, Event, PollEvent, SocketOption, SocketType
from mqcore.error import Again, ContextTerminated, ZMQBindError, ZMQError
from mqcore.frame import FINISHED_TRACKER, Frame
from mqcore.shadow import Shadowable, register
from mqcore.socket_base import SocketBase, _as_bytes

Opt = SocketOption


class Socket(SocketBase, Shadowable):
    """A messaging socket; create with ``Context.socket(type)`` or ``Socket(ctx, type)``."""

    _shadow_kind = SocketBase

    def __new__(cls, context: Any = None, socket_type: int = -1, shadow: Any = None,
                **kwargs: Any) -> Socket:
        if shadow is not None or isinstance(context, SocketBase):
            return cls.shadow(context if shadow is None else shadow)
        return super().__new__(cls)

    def __init__(self, context: Any = None, socket_type: int = -1, shadow: Any = None,
                 **kwargs: Any) -> None:
        if self._shadow:
            return  # made by __new__: acts on its original
        if context is None:
            from mqcore.context import Context

            context = Context.instance()
        super().__init__(context, socket_type)
        register(self)

    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle {type(self).__name__}: a socket belongs to its process")

    def __repr__(self) -> str:
        closed = " closed" if self._closed else ""
        module = "zmq" if type(self).__module__ in ("mqcore.socket", "mqcore") else "zmq.asyncio"
        return f"<{module}.{type(self).__name__}(zmq.{self.socket_type.name}) at {id(self):#x}{closed}>"

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *SocketOption.__members__})

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

    # -- endpoints ----------------------------------------------------------------------------------------
    def bind(self, addr: str | bytes) -> _EndpointUse:  # type: ignore[override]
        """Bind to ``addr``; the result, used with ``with``, unbinds at the end of the block.
        ZMQError naming ``addr`` if it cannot be bound."""
        addr = addr.decode() if isinstance(addr, bytes) else addr
        _with_addr(super().bind, addr)
        return _EndpointUse(self, "bind", self._resolved(addr))

    def connect(self, addr: str | bytes) -> _EndpointUse:  # type: ignore[override]
        """Connect to ``addr``; the result, used with ``with``, disconnects at the end of the block."""
        addr = addr.decode() if isinstance(addr, bytes) else addr
        _with_addr(super().connect, addr)
        return _EndpointUse(self, "connect", addr)

    def _resolved(self, addr: str) -> str:
        # a wildcard port binds one real endpoint: unbind that one
        if addr.endswith((":0", ":*")):
            return self.getsockopt(Opt.LAST_ENDPOINT).decode()  # type: ignore[no-any-return]
        return addr

    # -- options ---------------------------------------------------------------------------------------
    def set(self, option: int, value: Any) -> None:
        self.setsockopt(option, value)

    def get(self, option: int) -> Any:
        return self.getsockopt(option)

    def setsockopt_string(self, option: int, value: str, encoding: str = "utf-8") -> None:
        self.setsockopt(option, value.encode(encoding))

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        """Receive one frame into ``buffer`` (at most ``nbytes``, default its size; the rest of the
        frame is dropped); returns the frame's full length. BufferError for a read-only or
        non-contiguous buffer, ValueError for a bad ``nbytes``, Again as ``recv``."""
        view = memoryview(buffer)
        if view.readonly or not view.c_contiguous:
            raise BufferError("recv_into needs a writable, contiguous buffer")
        if nbytes < 0 or nbytes > view.nbytes:
            raise ValueError(f"nbytes={nbytes} is outside 0..{view.nbytes}, the buffer's size")
        data = SocketBase.recv(self, flags)  # the blocking one, also for asyncio subclasses
        n = min(len(data), nbytes or view.nbytes)
        view.cast("B")[:n] = data[:n]
        return len(data)

    def getsockopt_string(self, option: int, encoding: str = "utf-8") -> str:
        """A bytes option as str; TypeError for a numeric option."""
        if SocketOption(option)._opt_type.name != "bytes":  # type: ignore[attr-defined]
            raise TypeError(f"option {SocketOption(option).name} is not a bytes option")
        value = self.getsockopt(option)
        return value.decode(encoding) if isinstance(value, bytes) else str(value)

    set_string = setsockopt_unicode = setsockopt_string
    get_string = getsockopt_unicode = getsockopt_string

    @property
    def type(self) -> int:
        return self.socket_type

    @property
    def rcvmore(self) -> bool:
        return bool(self._in_parts)

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
            self._out_parts.clear()
        elif len(msg) > 1 or flags & 2:
            self._impl.check_send_start()
        if flags & 2:
            self._out_parts.extend(msg)
            return None
        self._send_msg(msg, flags)
        return FINISHED_TRACKER if track else None

    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> list[Any]:
        """Receive all frames of the next message (list of bytes, or Frames with copy=False)."""
        if self._in_parts:
            msg = list(self._in_parts)
            self._in_parts.clear()
        else:
            msg = self._recv_msg(flags)
        if copy:
            return msg
        frames = [Frame(f) for f in msg]
        properties = self._in_properties()
        for f in frames:
            f.more = True
            f.properties = properties
        frames[-1].more = False
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
            return int(self.getsockopt(SocketOption.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
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

    if TYPE_CHECKING:
        # For type checkers only: options are read as attributes (properties added below the class).
        def __getattr__(self, name: str) -> Any: ...

    def __setattr__(self, name: str, value: Any) -> None:
        """pyzmq's rule: an attribute the socket (or its class) has is set; any other name is a socket
        option (``sub.subscribe = b""``), or AttributeError. send/recv write no attribute, so this
        never runs on their path."""
        if name[0] == "_" or name in self.__dict__ or _declared(type(self), name):
            object.__setattr__(self, name, value)
            return
        option = getattr(SocketOption, name.upper(), None)
        if option is None:
            raise AttributeError(f"{type(self).__name__} has no such option: {name.upper()}")
        _option_property(option).__set__(self, value)


def _declared(cls: type, name: str) -> bool:
    """Is ``name`` a class attribute or an annotated instance attribute of ``cls`` or its bases?
    (``subscribe``/``unsubscribe`` are methods, but assigning them sets the option, as in pyzmq.)"""
    if name in ("subscribe", "unsubscribe"):
        return False
    return any(name in c.__dict__ or name in c.__dict__.get("__annotations__", ()) for c in cls.__mro__)


def _option_property(option: SocketOption) -> property:
    def fget(self: Socket) -> Any:
        try:
            return self.getsockopt(option)
        except ZMQError as exc:
            # As pyzmq: an option that cannot be read (EINVAL: write-only, or not this type's) is an
            # AttributeError, so that getattr with a default, hasattr and unittest.mock's spec work.
            if exc.errno != Errno.EINVAL:
                raise
            raise AttributeError(f"{option.name.lower()} attribute is write-only") from None

    def fset(self: Socket, value: Any) -> None:
        if isinstance(value, str) and option in (Opt.ROUTING_ID, Opt.CONNECT_ROUTING_ID, Opt.SUBSCRIBE,
                                                  Opt.UNSUBSCRIBE):
            value = value.encode()
        self.setsockopt(option, value)

    return property(fget, fset, doc=f"The {option.name} socket option.")


def _upper_option_property(name: str, option: SocketOption) -> property:
    """``sock.LINGER``: the option by its constant's name; reading one that cannot be read here raises
    AttributeError (so ``hasattr`` is False), as pyzmq's does."""
    def fget(self: Socket) -> Any:
        try:
            return self.getsockopt(option)
        except ZMQError as exc:  # a write-only option, or one this socket type lacks
            raise AttributeError(f"socket option {name} cannot be read here: {exc}") from None

    return property(fget, _option_property(option).fset, doc=f"The {option.name} socket option.")


# Options are properties of the class, lower case (``sock.linger``) and upper case (``sock.LINGER``),
# not a ``__getattr__``: a class with one has every attribute read on it take the slow generic path,
# in send and recv too (CPython does not specialise attribute reads for such classes).
for _name, _member in SocketOption.__members__.items():
    _attr = _name.lower()
    if _attr not in ("type",) and not hasattr(Socket, _attr):
        setattr(Socket, _attr, _option_property(_member))
    if not hasattr(Socket, _name):
        setattr(Socket, _name, _upper_option_property(_name, _member))


def _with_addr(op: Any, addr: str) -> None:
    try:
        op(addr)
    except ZMQError as exc:
        exc.strerror = f"{exc.strerror} (addr={addr!r})"
        exc.args = (exc.strerror,)
        raise


class _EndpointUse:
    """What ``bind``/``connect`` return: leaving a ``with`` block undoes the bind or connect."""

    def __init__(self, socket: Socket, kind: str, addr: str) -> None:
        self.socket, self.kind, self.addr = socket, kind, addr

    def __repr__(self) -> str:
        return f"<SocketContext({self.kind}={self.addr!r})>"

    def __enter__(self) -> Socket:
        return self.socket

    def __exit__(self, *exc: object) -> None:
        if self.socket.closed:
            return
        if self.kind == "bind":
            self.socket.unbind(self.addr)
        else:
            self.socket.disconnect(self.addr)
