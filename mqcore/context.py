"""Context: owns the IO threads, the inproc registry and the set of live sockets.

Thread-safe: any thread may create sockets or terminate. ``_lock`` guards the inproc registry;
``_cond`` guards the counts ``term`` waits on (open sockets, live IO objects — listeners and
sessions, which call ``_io_object_done`` from their IO thread when they end). IO threads start lazily,
on the first tcp/ipc endpoint.

term(): every open socket gets a ``stop`` command (blocked calls raise ContextTerminated), then term
waits until all sockets are closed and every lingering session has finished, then stops IO threads.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import TYPE_CHECKING, Any

from mqcore.constants import ContextOption, Errno, SocketOption
from mqcore.error import ZMQError
from mqcore.io_thread import IoThread
from mqcore.shadow import Shadowable, register

if TYPE_CHECKING:
    from mqcore.pipe import Pipe
    from mqcore.socket import Socket
    from mqcore.socket_base import SocketBase


class Context(Shadowable):
    """A set of sockets and the IO threads that serve them (pyzmq's ``zmq.Context``)."""

    _instance: Context | None = None
    _instance_lock = threading.Lock()
    _socket_class: Any = None  # mqcore.Socket unless a subclass names another
    def __new__(cls, io_threads: Any = 1, shadow: Any = None, **kwargs: Any) -> Context:
        if shadow is not None or isinstance(io_threads, Context):
            return cls.shadow(io_threads if shadow is None else shadow)
        return super().__new__(cls)

    def __init__(self, io_threads: int = 1, shadow: Any = None, **kwargs: Any) -> None:
        if self._shadow:
            return  # made by __new__: acts on its original
        if io_threads < 0:
            raise ZMQError(Errno.EINVAL)
        self._n_io = max(io_threads, 1)
        self._io: list[IoThread] = []
        self._next_io = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._sockets: set[SocketBase] = set()
        self._io_objects = 0
        self._inproc_bound: dict[str, SocketBase] = {}
        self._inproc_pending: dict[str, list[tuple[SocketBase, Pipe]]] = {}
        self._sockopts: dict[int, Any] = {}
        self._max_sockets = 1023
        self._pid = os.getpid()
        self._terminating = False
        self.closed = False
        register(self)

    def __repr__(self) -> str:
        n = len(self._sockets)
        sockets = f"{n} socket{'s' if n != 1 else ''}" if n else ""
        return f"<zmq.{type(self).__name__}({sockets}) at {id(self):#x}{' closed' if self.closed else ''}>"

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *ContextOption.__members__})

    # -- public API -----------------------------------------------------------------------------------
    @classmethod
    def instance(cls, io_threads: int = 1) -> Context:
        """The process-wide shared context (re-created if it was terminated)."""
        with cls._instance_lock:
            # a forked child gets a context of its own: the parent's IO threads did not fork
            if cls._instance is None or cls._instance.closed or cls._instance._pid != os.getpid():
                cls._instance = cls(io_threads)
            return cls._instance

    def socket(self, socket_type: int, socket_class: Any = None, **kwargs: Any) -> Socket:
        """A new ``socket_class`` (default: this context's) socket of ``socket_type``; keyword
        arguments go to the class. ZMQError(EFAULT) once terminated, ContextTerminated while terminating."""
        if self.closed:
            raise ZMQError(Errno.EFAULT)
        if self._terminating:
            raise ZMQError(Errno.ETERM)
        if socket_class is None:
            socket_class = self._socket_class
        if socket_class is None:
            from mqcore.socket import Socket as socket_class
        return socket_class(self, socket_type, **kwargs)  # type: ignore[no-any-return]

    def term(self) -> None:
        """Wait for every socket to be closed and every LINGER to run out, then stop IO threads.

        Blocked send/recv calls in other threads raise ContextTerminated.
        """
        if self.closed:
            return
        with self._cond:
            self._terminating = True
            sockets = list(self._sockets)
        for sock in sockets:
            sock._mailbox.post(sock._stop)
        with self._cond:
            while self._sockets or self._io_objects:
                self._cond.wait()
        for io in self._io:
            io.stop()
        self._io.clear()
        self.closed = True

    def destroy(self, linger: int | None = None) -> None:
        """Close every socket (with ``linger`` if given) and terminate. Not for use while other
        threads are still using their sockets."""
        if self.closed:
            return
        with self._cond:
            sockets = list(self._sockets)
        for sock in sockets:
            if not sock.closed:
                sock.close(linger=linger)
        self.term()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            still_open = [s for s in self._sockets if not s.closed]
        if still_open:
            warnings.warn(f"{len(still_open)} socket(s) left open when {self!r} exited; closing them",
                          ResourceWarning, stacklevel=2)
        self.destroy()

    def setsockopt(self, option: int, value: Any) -> None:
        """Default for sockets created from now on."""
        self._sockopts[option] = value

    def getsockopt(self, option: int) -> Any:
        return self._sockopts[option]

    def set(self, option: int, value: Any) -> None:
        """Set a context option (IO_THREADS before the first tcp/ipc socket, MAX_SOCKETS)."""
        if option == ContextOption.IO_THREADS and not self._io:
            self._n_io = max(int(value), 1)
        elif option == ContextOption.MAX_SOCKETS:
            self._max_sockets = int(value)
        elif option != ContextOption.IO_THREADS:
            raise ZMQError(Errno.EINVAL)

    def get(self, option: int) -> Any:
        if option == ContextOption.IO_THREADS:
            return self._n_io
        if option == ContextOption.MAX_SOCKETS:
            return self._max_sockets
        raise ZMQError(Errno.EINVAL)

    def __getattr__(self, name: str) -> Any:
        if name.upper() in ContextOption.__members__ and not name.startswith("_"):
            try:
                return self.get(ContextOption[name.upper()])
            except ZMQError:
                raise AttributeError(f"context option {name} cannot be read") from None
        option = getattr(SocketOption, name.upper(), None)
        if option is not None and option in self.__dict__.get("_sockopts", {}):
            return self._sockopts[option]
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.upper() in ContextOption.__members__ and not name.startswith("_"):
            self.set(ContextOption[name.upper()], value)
        elif not name.startswith("_") and name != "closed" and hasattr(SocketOption, name.upper()):
            self._sockopts[getattr(SocketOption, name.upper())] = value
        else:
            object.__setattr__(self, name, value)

    # -- internals ------------------------------------------------------------------------------------
    def _choose_io_thread(self) -> IoThread:
        with self._lock:
            if not self._io:
                for i in range(self._n_io):
                    io = IoThread(name=f"mqcore-io-{i}")
                    io.start()
                    self._io.append(io)
            io = self._io[self._next_io % len(self._io)]
            self._next_io += 1
            return io

    def _socket_opened(self, sock: SocketBase) -> None:
        with self._cond:
            self._sockets.add(sock)

    def _socket_closed(self, sock: SocketBase) -> None:
        with self._cond:
            self._sockets.discard(sock)
            self._cond.notify_all()

    def _io_object_started(self) -> None:
        with self._cond:
            self._io_objects += 1

    def _io_object_done(self) -> None:
        with self._cond:
            self._io_objects -= 1
            self._cond.notify_all()

    def _inproc_bind(self, sock: SocketBase, name: str) -> None:
        from mqcore.transports.endpoints import complete_pending

        with self._lock:
            if name in self._inproc_bound:
                raise ZMQError(Errno.EADDRINUSE, f"inproc://{name} is already bound")
            self._inproc_bound[name] = sock
            pending = self._inproc_pending.pop(name, [])
        complete_pending(sock, pending)

    def _inproc_unbind(self, sock: SocketBase, name: str) -> None:
        with self._lock:
            if self._inproc_bound.get(name) is sock:
                del self._inproc_bound[name]

    def _inproc_forget(self, sock: SocketBase) -> None:
        with self._lock:
            for name in [n for n, s in self._inproc_bound.items() if s is sock]:
                del self._inproc_bound[name]
            for name, entries in list(self._inproc_pending.items()):
                kept = [e for e in entries if e[0] is not sock]
                if kept:
                    self._inproc_pending[name] = kept
                else:
                    del self._inproc_pending[name]


Context._shadow_kind = Context  # what Context.shadow(address) must find (named once the class exists)
