"""Listener for tcp and ipc: the OS socket is bound in the caller's thread (so errors and the resolved
endpoint are reported synchronously by ``bind``), then handed to an IO thread that accepts
connections and gives each a bind-side Session with a StreamEngine.

After ``plug`` the listener is touched only by its IO thread; ``close`` (posted by unbind/close)
stops accepting and ends the sessions it created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from typing import TYPE_CHECKING, Any

from mqcore.constants import Errno, Event
from mqcore.engine import READ
from mqcore.error import ZMQError
from mqcore.monitor import emit
from mqcore.session import Session
from mqcore.transports import address as addr_mod
from mqcore.transports.keepalive import apply_tcp_keepalive

if TYPE_CHECKING:
    from mqcore.context import Context
    from mqcore.io_thread import IoThread
    from mqcore.options import Options
    from mqcore.socket_base import SocketBase


def open_listening_socket(transport: str, rest: str, options: Options) -> tuple[socket.socket, str]:
    """Create, bind and listen; returns (socket, resolved endpoint). Raises ZMQError(EADDRINUSE...)."""
    if transport == "tcp":
        family, sockaddr = addr_mod.resolve_tcp(addr_mod.parse_tcp(rest), True, bool(options.ipv6))
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if options.ipv6 else 1)
        target: Any = sockaddr
    else:
        path = addr_mod.ipc_path(rest)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if not path.startswith("\0"):
            with contextlib.suppress(OSError):
                os.unlink(path)  # a stale socket file from an earlier run (libzmq does the same)
        target = path
    try:
        sock.bind(target)
        sock.listen(max(options.backlog, 1))
    except OSError as exc:
        sock.close()
        code = exc.errno or Errno.EINVAL
        if code == errno.EACCES:
            code = Errno.EADDRINUSE if transport == "ipc" else code
        raise ZMQError(code, f"{exc.strerror}: {transport}://{rest}") from None
    sock.setblocking(False)
    if transport == "tcp":
        return sock, addr_mod.format_tcp(sock.getsockname())
    return sock, addr_mod.format_ipc(target)  # type: ignore[arg-type]


class Listener:
    """Accepts connections on a bound socket for ``owner`` (see module comment)."""

    def __init__(self, ctx: Context, io: IoThread, owner: SocketBase, sock: socket.socket,
                 endpoint: str, options: Options) -> None:
        self.ctx = ctx
        self.io = io
        self.owner = owner
        self.sock = sock
        self.endpoint = endpoint
        self.options = options
        self.is_tcp = endpoint.startswith("tcp://")
        self.sessions: set[Session] = set()
        self.closed = False
        ctx._io_object_started()

    def plug(self) -> None:
        if not self.closed:
            self.io.add_fd(self.sock.fileno(), READ, self._on_ready)

    def _on_ready(self, mask: int) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                emit(self.owner, Event.ACCEPT_FAILED, exc.errno or 0, self.endpoint)
                return  # e.g. EMFILE: try again on the next event
            conn.setblocking(False)
            if self.is_tcp:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                apply_tcp_keepalive(conn, self.options)
            emit(self.owner, Event.ACCEPTED, conn.fileno(), self.endpoint)
            session = Session(self.ctx, self.io, self.owner, self.options, self.endpoint,
                              connect=False, on_done=self.sessions.discard)
            self.sessions.add(session)
            session.start_engine(conn)

    def close(self, kill_attached: bool = True) -> None:
        """Stop listening. Sessions still handshaking end now; attached ones too unless
        ``kill_attached`` is False (socket close: they linger through their pipes instead)."""
        if self.closed:
            return
        self.closed = True
        fd = self.sock.fileno()
        self.io.remove_fd(fd)
        self.sock.close()
        emit(self.owner, Event.CLOSED, fd, self.endpoint)
        if self.endpoint.startswith("ipc://") and not self.endpoint.startswith("ipc://@"):
            with contextlib.suppress(OSError):
                os.unlink(self.endpoint[len("ipc://"):])
        for session in list(self.sessions):
            if kill_attached or session.pipe is None:
                session.terminate()
        self.ctx._io_object_done()
