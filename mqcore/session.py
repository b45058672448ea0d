"""Session: the IO-thread end of a socket's pipe for one endpoint; outlives its engines.

Owned by one IO thread (all methods run there, via commands posted to its mailbox).
* connect side: created by ``connect()`` with its pipe already attached to the socket, so messages
  queue before the connection exists. It connects asynchronously and, whenever the engine dies,
  reconnects after RECONNECT_IVL (doubling to RECONNECT_IVL_MAX, with jitter). A SUB socket's queued
  outbound messages are dropped on reconnect and the socket is told (``hiccup``) to resubscribe.
  With IMMEDIATE the pipe is made only when a connection completes and is dropped when it breaks.
  With CONFLATE (PUB/SUB/PUSH/PULL/DEALER/XPUB/XSUB) the pipes keep only the newest message.
* bind side: created by a listener for one accepted connection; its pipe pair is made when the
  handshake completes, and the session ends with its engine.
When the socket closes (or disconnects) the pipe is terminated; the session then lingers: it keeps
sending what is queued for up to LINGER ms (-1: until done) and then ends. Every session counts as
a live object of the context, so ``Context.term`` waits for lingering sessions.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mqcore.backoff import reconnect_delay
from mqcore.constants import Event, SocketType
from mqcore.engine import WRITE, StreamEngine
from mqcore.error import ZMQError
from mqcore.monitor import emit
from mqcore.pipe import Pipe, make_conflating, pipe_pair
from mqcore.transports import address as addr_mod
from mqcore.transports.keepalive import apply_tcp_keepalive

if TYPE_CHECKING:
    from mqcore.context import Context
    from mqcore.io_thread import IoThread, Timer
    from mqcore.options import Options
    from mqcore.socket_base import SocketBase


#: socket types whose pipes keep only the newest message with CONFLATE (as libzmq)
_CONFLATING = (SocketType.PUB, SocketType.SUB, SocketType.PUSH, SocketType.PULL, SocketType.DEALER,
               SocketType.XPUB, SocketType.XSUB)


class Session:
    """One endpoint's session (see module comment)."""

    def __init__(self, ctx: Context, io: IoThread, owner: SocketBase, options: Options,
                 endpoint: str, connect: bool, on_done: Callable[[Session], None] | None = None) -> None:
        self.ctx = ctx
        self.io = io
        self.owner = owner
        self.options = options
        self.endpoint = endpoint
        self.connect = connect
        self.on_done = on_done
        self.pipe: Pipe | None = None
        self.engine: StreamEngine | None = None
        self.terminating = False
        self.done = False
        self._ivl = options.reconnect_ivl
        self._timer: Timer | None = None
        self._linger_timer: Timer | None = None
        self._connecting: socket.socket | None = None
        ctx._io_object_started()

    def make_connect_pipe(self) -> Pipe | None:
        """Connect side, called in the socket's thread before ``plug``: the socket's end of the pipe,
        or None with IMMEDIATE (the pipe is then made when a connection completes)."""
        if self.options.immediate:
            return None
        spipe, upipe = self._make_pipes()
        self.pipe = spipe
        return upipe

    def _make_pipes(self) -> tuple[Pipe, Pipe]:
        opts = self.options
        spipe, upipe = pipe_pair(self, self.io.mailbox, opts.rcvhwm,
                                 self.owner, self.owner._mailbox, opts.sndhwm)
        if opts.conflate and opts.type in _CONFLATING:
            make_conflating(spipe, upipe)
        return spipe, upipe

    def event(self, event: int, value: int) -> None:
        """Report a socket-monitor event for this session's endpoint (any thread)."""
        emit(self.owner, event, value, self.endpoint)

    # -- IO thread from here on --------------------------------------------------------------------
    def plug(self) -> None:
        if self.connect:
            self._start_connecting()

    def start_engine(self, sock: socket.socket) -> None:
        self.engine = StreamEngine(self.io, self, sock, self.options, as_server=not self.connect)
        self.engine.plug()

    # connecting ---------------------------------------------------------------------------------------
    def _start_connecting(self) -> None:
        self._timer = None
        if self.done:
            return
        transport, rest = addr_mod.split_endpoint(self.endpoint)
        try:
            if transport == "tcp":
                family, sockaddr = addr_mod.resolve_tcp(addr_mod.parse_tcp(rest), False, True)
                target: Any = sockaddr
            else:
                family, target = socket.AF_UNIX, addr_mod.ipc_path(rest)
        except ZMQError:
            self._schedule_reconnect()
            return
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        if transport == "tcp":
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            apply_tcp_keepalive(sock, self.options)
        err = sock.connect_ex(target)
        if err == 0:
            self.event(Event.CONNECTED, sock.fileno())
            self.start_engine(sock)
        elif err in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            self.event(Event.CONNECT_DELAYED, err)
            self._connecting = sock
            self.io.add_fd(sock.fileno(), WRITE, self._on_connect_ready)
        else:
            sock.close()
            self._schedule_reconnect()

    def _on_connect_ready(self, mask: int) -> None:
        sock = self._connecting
        if sock is None:
            return
        self._connecting = None
        self.io.remove_fd(sock.fileno())
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            sock.close()
            self._schedule_reconnect()
        else:
            self.event(Event.CONNECTED, sock.fileno())
            self.start_engine(sock)

    def _schedule_reconnect(self) -> None:
        if self.done or self._timer is not None:
            return
        opts = self.options
        delay, self._ivl = reconnect_delay(self._ivl, opts.reconnect_ivl, opts.reconnect_ivl_max)
        self.event(Event.CONNECT_RETRIED, int(delay * 1000))
        self._timer = self.io.add_timer(delay, self._start_connecting)

    # engine callbacks ---------------------------------------------------------------------------------
    def engine_ready(self, engine: StreamEngine, peer_identity: bytes) -> bool:
        """Handshake done; False refuses the connection (the socket is closed)."""
        if self.done:
            return False
        if self.pipe is None:
            spipe, upipe = self._make_pipes()
            upipe.peer_routing_id = peer_identity
            if not self.owner._attach_remote(upipe, self.endpoint):
                self._finish()
                return False
            self.pipe = spipe
        else:
            self._ivl = self.options.reconnect_ivl
            upipe = self.pipe.peer
            upipe.peer_routing_id = peer_identity
            self.pipe._post_peer("_pipe_identified")
        return True

    def engine_error(self, engine: StreamEngine) -> None:
        if engine is self.engine:
            self.engine = None
        if self.done:
            return
        if self.terminating or not self.connect:
            self._finish()
            return
        pipe = self.pipe
        if pipe is not None and self.options.immediate:
            self.pipe = None  # IMMEDIATE: nothing queues for a peer that is not connected
            pipe.terminate()
            pipe = None
        if pipe is not None and self.options.type in (SocketType.SUB, SocketType.XSUB):
            pipe.drop_inbound()
            pipe.hiccup()
        self._schedule_reconnect()

    def output_drained(self) -> None:
        """The engine wrote everything it could take from the pipe."""
        if self.terminating and self.pipe is not None and not self.pipe.inbound:
            self._finish()

    # pipe commands ------------------------------------------------------------------------------------
    def _pipe_activate_read(self, pipe: Pipe) -> None:
        if self.engine is not None and pipe is self.pipe:
            self.engine.restart_output()

    def _pipe_activate_write(self, pipe: Pipe) -> None:
        if self.engine is not None and pipe is self.pipe:
            self.engine.restart_input()

    def _pipe_hiccuped(self, pipe: Pipe) -> None:
        pass

    def _pipe_terminated(self, pipe: Pipe) -> None:
        """The socket closed or disconnected: linger, then end."""
        if pipe is not self.pipe or self.done:
            return
        self.terminating = True
        linger = pipe.peer.linger
        engine = self.engine
        if linger == 0 or not pipe.inbound and (engine is None or not engine.has_output):
            self._finish()
            return
        if engine is not None:
            engine.restart_output()
            if self.done:
                return
        elif not self.connect:
            self._finish()
            return
        if linger > 0 and self._linger_timer is None:
            self._linger_timer = self.io.add_timer(linger / 1000.0, self._finish)

    def terminate(self) -> None:
        """End now, dropping anything queued (unbind, context shutdown)."""
        self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        for timer in (self._timer, self._linger_timer):
            if timer is not None:
                timer.cancel()
        if self._connecting is not None:
            self.io.remove_fd(self._connecting.fileno())
            self._connecting.close()
            self._connecting = None
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        if self.pipe is not None and not self.pipe.terminated:
            self.pipe.terminate()
        if self.on_done is not None:
            self.on_done(self)
        self.ctx._io_object_done()
