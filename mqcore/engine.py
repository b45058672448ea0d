"""StreamEngine: one tcp/ipc connection — greeting, handshake and ZMTP framing via the sans-IO codec.

Owned by an IO thread (everything here runs in it). The engine moves messages between the OS socket
and its session's pipe:
* input: one ``recv`` per readable event (up to 64 KiB), decoded whole; Message events go straight
  into the pipe with one ``flush`` per read (one wake-up of the socket per batch). When the pipe is at
  its HWM the engine keeps the undelivered events and stops reading (TCP back-pressure) until the
  session gets ``activate_write``.
* output: after ``activate_read`` it drains the pipe into batches of up to ``BATCH_BYTES`` encoded by
  ``encode_messages`` and writes them; a partial write waits for EVENT_WRITE.
Subscriptions: SUBSCRIBE/CANCEL commands become ``\\x01topic``/``\\x00topic`` messages for the
socket; a SUB socket's outgoing ``\\x01``/``\\x00`` messages become commands (3.0 peers: messages).
Heartbeats (``mqcore.heartbeat``) start after the handshake. Socket-monitor events (handshake
succeeded/failed, disconnected) go out through ``emit_event``; closing before the handshake reports
HANDSHAKE_FAILED_NO_DETAIL unless a more precise failure was reported already.
Security: the mechanism (NULL, PLAIN, CURVE) and its role come from the options (``mqcore.security``);
a server mechanism asks the ZAP handler through a ``mqcore.zap.ZapClient`` pipe without blocking, and a
refusal is reported as HANDSHAKE_FAILED_AUTH with the ZAP status code (on both sides, as libzmq does).
"""

from __future__ import annotations

import logging
import selectors
import socket
import time
from typing import TYPE_CHECKING

from mqcore import security
from mqcore.constants import SOCKET_TYPE_NAMES, Event, SocketType
from mqcore.heartbeat import Heartbeat
from mqcore.monitor import emit, protocol_error_code
from mqcore.pipe import Msg
from mqcore.zap import ZapClient, handler_bound, next_request_id
from mqcore.zmtp import (
    AuthFailed,
    Cancel,
    HandshakeDone,
    Message,
    PeerError,
    Ping,
    ProtocolViolation,
    Subscribe,
    ZmtpConnection,
)

if TYPE_CHECKING:
    from mqcore.io_thread import IoThread, Timer
    from mqcore.options import Options
    from mqcore.session import Session

log = logging.getLogger("mqcore")

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE
RECV_BYTES = 65536
BATCH_BYTES = 65536
_SUBSCRIBERS = (SocketType.SUB, SocketType.XSUB)
_monotonic = time.monotonic


class StreamEngine:
    """Speaks ZMTP on one connected, non-blocking stream socket for ``session``."""

    def __init__(self, io: IoThread, session: Session, sock: socket.socket, options: Options,
                 as_server: bool) -> None:
        self.io = io
        self.session = session
        self.sock = sock
        self.fd = sock.fileno()
        # Security: the mechanism and its role come from the options; a server asks ZAP (see zap.py)
        # if a handler is bound when the connection starts, as libzmq does.
        self._setup_error = ""
        try:
            mechanism = security.build_mechanism(options)
        except ValueError as exc:  # e.g. a CURVE client without CURVE_SERVERKEY: refused in plug()
            mechanism, self._setup_error = None, str(exc)
        secure = mechanism is not None and mechanism.name != b"NULL"
        zap_server = secure and bool(options.as_server)
        self._asks_zap = zap_server and handler_bound(session.ctx)
        self._zap: ZapClient | None = None
        self.conn = ZmtpConnection(
            socket_type=SOCKET_TYPE_NAMES[options.type], identity=options.routing_id,
            as_server=bool(options.as_server) if secure else as_server, maxmsgsize=options.maxmsgsize,
            mechanism=mechanism, zap_handler=self._asks_zap, zap_domain=options.zap_domain,
            peer_address=security.peer_address(sock) if zap_server else "",
            zap_enforce_domain=bool(options.zap_enforce_domain),
        )
        self.handshake_ivl = options.handshake_ivl
        self.options = options
        self.is_sub = options.type in _SUBSCRIBERS
        self.alive = True
        self.handshaken = False
        self._out: bytes | memoryview = b""
        self._mask = 0
        self._input_stopped = False
        self._pending: list[object] = []
        self._timer: Timer | None = None
        self._heartbeat: Heartbeat | None = None
        self._failure_reported = False  # a HANDSHAKE_FAILED_* event was emitted already

    # -- life cycle ----------------------------------------------------------------------------------
    def plug(self) -> None:
        if self._setup_error:
            self._error(self._setup_error)
            return
        self._out = self.conn.start()
        if self.handshake_ivl > 0:
            self._timer = self.io.add_timer(self.handshake_ivl / 1000.0, self._handshake_timeout)
        self._set_mask(READ)
        self._write()

    def close(self) -> None:
        """Forget the connection (no callback to the session)."""
        if not self.alive:
            return
        self.alive = False
        if self._timer is not None:
            self._timer.cancel()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._zap is not None:
            self._zap.close()
        self.io.remove_fd(self.fd)
        try:
            self.sock.close()
        except OSError:
            pass

    def _error(self, reason: str = "") -> None:
        if not self.alive:
            return
        if reason:
            log.debug("mqcore engine: closing connection: %s", reason)
        if not self.handshaken and not self._failure_reported:
            self.emit_event(Event.HANDSHAKE_FAILED_NO_DETAIL, 0)
        self.emit_event(Event.DISCONNECTED, self.fd)
        self.close()
        self.session.engine_error(self)

    def emit_event(self, event: int, value: int) -> None:
        """Report a socket-monitor event for this connection (e.g. HANDSHAKE_FAILED_AUTH with the ZAP
        status code); the endpoint is the session's. Handshake failures suppress the generic
        HANDSHAKE_FAILED_NO_DETAIL that closing would report."""
        if event & (Event.HANDSHAKE_FAILED_PROTOCOL | Event.HANDSHAKE_FAILED_AUTH
                    | Event.HANDSHAKE_FAILED_NO_DETAIL):
            self._failure_reported = True
        emit(self.session.owner, event, value, self.session.endpoint)

    def _handshake_timeout(self) -> None:
        self._timer = None
        if not self.handshaken:
            self._error("handshake timed out")

    def _set_mask(self, mask: int) -> None:
        if mask != self._mask and self.alive:
            self._mask = mask
            self.io.set_events(self.fd, mask, self._on_io)

    def _on_io(self, mask: int) -> None:
        if mask & READ:
            self._read()
        if mask & WRITE and self.alive:
            self._write()

    # -- input ---------------------------------------------------------------------------------------
    def _read(self) -> None:
        try:
            data = self.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._error(str(exc))
            return
        if not data:
            self._error("peer closed the connection")
            return
        if self._heartbeat is not None:
            self._heartbeat.last_recv = _monotonic()
        self.conn.receive_data(data)
        self._after_input()

    def _after_input(self) -> None:
        """Send handshake replies, relay a ZAP request, deliver events (after bytes or a ZAP reply)."""
        conn = self.conn
        out = conn.data_to_send()
        if out:
            self._queue(out)
        if self._asks_zap and self._zap is None and self.alive:
            self._ask_zap()
        events = conn.next_events()
        if events:
            self._deliver(events)
        if conn.dead and self.alive:
            self._error("protocol error")

    def _deliver(self, events: list) -> None:  # type: ignore[type-arg]
        pipe = self.session.pipe
        i = 0
        n = len(events)
        while i < n:
            ev = events[i]
            if type(ev) is Message:
                if pipe is None or not pipe.check_write():
                    self._stop_input(events[i:])
                    break
                pipe.write(ev.frames)
            elif type(ev) is HandshakeDone:
                if not self._on_handshake(ev):
                    return
                pipe = self.session.pipe
            elif type(ev) is Subscribe or type(ev) is Cancel:
                if pipe is None or not pipe.check_write():
                    self._stop_input(events[i:])
                    break
                pipe.write([(b"\x01" if type(ev) is Subscribe else b"\x00") + ev.topic])
            elif type(ev) is Ping:
                self._queue(self.conn.encode_pong(ev.context))
                if self._heartbeat is not None:
                    self._heartbeat.peer_ping(ev.ttl_ds)
            elif type(ev) is AuthFailed:
                self._auth_failed(ev)
                return
            elif type(ev) is PeerError or type(ev) is ProtocolViolation:
                if pipe is not None:
                    pipe.flush()
                if not self.handshaken and type(ev) is ProtocolViolation:
                    self.emit_event(Event.HANDSHAKE_FAILED_PROTOCOL, protocol_error_code(ev.reason))
                elif not self.handshaken and security.zap_status(ev.reason):  # the server's ZAP said no
                    self.emit_event(Event.HANDSHAKE_FAILED_AUTH, security.zap_status(ev.reason))
                self._error(f"{type(ev).__name__}: {ev.reason!r}")
                return
            i += 1
        if pipe is not None:
            pipe.flush()

    # -- ZAP (RFC 27): the codec says when to ask; the reply comes back through the IO thread ----------
    def _ask_zap(self) -> None:
        frames = self.conn.zap_request(next_request_id())
        if frames is None:
            return
        self._zap = ZapClient(self.session.ctx, self.io, self._on_zap_reply, self._on_zap_lost)
        if not self._zap.send(frames):
            self._error("the ZAP handler at inproc://zeromq.zap.01 went away")

    def _on_zap_reply(self, frames: list[bytes]) -> None:
        if self.alive:
            self.conn.zap_reply(frames)
            self._after_input()

    def _on_zap_lost(self) -> None:
        self._error("the ZAP handler closed before answering")

    def _auth_failed(self, ev: AuthFailed) -> None:
        """The ZAP handler refused the peer; the codec already queued (and we sent) its ERROR."""
        self.emit_event(Event.HANDSHAKE_FAILED_AUTH, ev.status_code)  # as libzmq: the ZAP status code
        self._error(f"ZAP refused the peer: {ev.status_code} {ev.status_text}")

    def _on_handshake(self, ev: HandshakeDone) -> bool:
        self.handshaken = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.session.engine_ready(self, ev.peer_identity):
            self.close()
            return False
        self.emit_event(Event.HANDSHAKE_SUCCEEDED, 0)
        self._heartbeat = Heartbeat(self.io, self.options, self._send_ping, self._error)
        self._heartbeat.start()
        self.restart_output()  # messages queued before the connection existed
        return self.alive

    def _send_ping(self, ttl_ds: int) -> None:
        if self.alive:
            self._queue(self.conn.encode_ping(ttl_ds))

    def _stop_input(self, pending: list) -> None:  # type: ignore[type-arg]
        self._pending = pending
        self._input_stopped = True
        self._set_mask(self._mask & ~READ)

    def restart_input(self) -> None:
        """The pipe has room again (session got activate_write)."""
        if not self._input_stopped or not self.alive:
            return
        self._input_stopped = False
        pending, self._pending = self._pending, []
        self._deliver(pending)
        if not self._input_stopped and self.alive:
            self._set_mask(self._mask | READ)

    # -- output --------------------------------------------------------------------------------------
    def _queue(self, data: bytes) -> None:
        if self._out:
            self._out = bytes(self._out) + data
        else:
            self._out = data
        self._write()

    def restart_output(self) -> None:
        """The pipe has messages again (session got activate_read)."""
        if self.alive and not (self._mask & WRITE):
            self._write()

    def _fill(self) -> bytes:
        pipe = self.session.pipe
        if pipe is None or not self.handshaken:
            return b""
        conn = self.conn
        msgs: list[Msg] = []
        chunks: list[bytes] = []
        size = 0
        read = pipe.read
        while size < BATCH_BYTES:
            msg = read()
            if msg is None:
                break
            if len(msg) == 1:
                frame = msg[0]
                if self.is_sub and frame[:1] in (b"\x00", b"\x01"):
                    if msgs:
                        chunks.append(conn.encode_messages(msgs))
                        msgs = []
                    topic = frame[1:]
                    chunks.append(conn.encode_subscribe(topic) if frame[0] else conn.encode_cancel(topic))
                    continue
                size += len(frame) + 9
            else:
                for frame in msg:
                    size += len(frame) + 9
            msgs.append(msg)
        if msgs:
            chunks.append(conn.encode_messages(msgs))
        if not chunks:
            return b""
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _write(self) -> None:
        sock = self.sock
        while self.alive:
            out = self._out
            if not out:
                out = self._out = self._fill()
                if not out:
                    break
            try:
                n = sock.send(out)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                self._error(str(exc))
                return
            if n < len(out):
                self._out = memoryview(out)[n:] if n else out
                self._set_mask(self._mask | WRITE)
                return
            self._out = b""
        if not self.alive:
            return
        self._set_mask(self._mask & ~WRITE)
        if self.handshaken:
            self.session.output_drained()

    @property
    def has_output(self) -> bool:
        return bool(self._out)
