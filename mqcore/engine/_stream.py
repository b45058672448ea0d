"""StreamEngine: one tcp/ipc connection in its IO thread — greeting, handshake, ZMTP framing via the
sans-IO codec, heartbeats, ZAP, socket-monitor events.

The engine moves messages between the OS socket and its session's pipe:
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

Owned by an IO thread; the socket's thread may do the connection's IO itself through the engine's
``Inline`` part (``mqcore/engine/_inline.py``, which keeps the lock both threads share and states its
rules). Besides what the session calls, the engine's public members are there for that part, which
uses them under its lock: ``out``, ``mask``, ``input_stopped``, ``heartbeat``, ``pull``, ``receive``,
``read``, ``fill``, ``send_some``, ``put_messages``, ``queue``, ``deliver``, ``fail``, ``set_mask``.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import TYPE_CHECKING

from mqcore import security
from mqcore.constants import SOCKET_TYPE_NAMES, Event, SocketType
from mqcore.engine._inline import READ, WRITE, ZERO_COPY, Inline
from mqcore.heartbeat import Heartbeat
from mqcore.monitor import emit, protocol_error_code
from mqcore.pipe import Msg
from mqcore.zap import ZapClient, handler_bound, next_request_id
from mqcore.zmtp import (
    MORE,
    AuthFailed,
    Cancel,
    HandshakeDone,
    Message,
    PeerError,
    Ping,
    ProtocolViolation,
    Subscribe,
    ZmtpConnection,
    frame_header,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mqcore.io_thread import IoThread, Timer
    from mqcore.options import Options
    from mqcore.session import Session

log = logging.getLogger("mqcore")

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
        # NULL asks ZAP on either side when the socket has a ZAP_DOMAIN (libzmq's rule).
        zap_server = bool(options.as_server) if secure else bool(options.zap_domain)
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
        # Output not written yet, and the events registered with the IO thread's poller.
        self.out: bytes | memoryview | list[bytes | memoryview] = b""
        self.mask = 0
        self.input_stopped = False  # the pipe is full: no reading until restart_input
        self._pending: list[object] = []
        self._timer: Timer | None = None
        self.heartbeat: Heartbeat | None = None
        self._failure_reported = False  # a HANDSHAKE_FAILED_* event was emitted already
        # The socket's thread's door to this connection; its lock guards the state both threads use.
        self.inline = Inline(self)

    # -- life cycle ----------------------------------------------------------------------------------
    def plug(self) -> None:
        if self._setup_error:
            self.fail(self._setup_error)
            return
        self.out = self.conn.start()
        if self.handshake_ivl > 0:
            self._timer = self.io.add_timer(self.handshake_ivl / 1000.0, self._handshake_timeout)
        self.set_mask(READ)
        self._write()

    def close(self) -> None:
        """Forget the connection (no callback to the session)."""
        if not self.alive:
            return
        inline = self.inline
        with inline.lock:
            self.alive = False
            inline.closed()
        pipe = self.session.pipe
        if pipe is not None and pipe.inline is inline:
            pipe.inline = None
        if self._timer is not None:
            self._timer.cancel()
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        if self._zap is not None:
            self._zap.close()
        self.io.remove_fd(self.fd)
        with inline.lock:  # never while the socket's thread writes
            try:
                self.sock.close()
            except OSError:
                pass

    def fail(self, reason: str = "") -> None:
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
            self.fail("handshake timed out")

    def set_mask(self, mask: int) -> None:
        if mask != self.mask and self.alive:
            self.mask = mask
            self.io.set_events(self.fd, mask, self._on_io)

    def _on_io(self, mask: int) -> None:
        if mask & READ:
            inline = self.inline
            with inline.lock:
                if inline.io_may_read():  # else parked: the socket's thread polls our fd and reads it
                    self.read()
        if mask & WRITE and self.alive:
            self._write()

    def put_messages(self, events: list) -> list:  # type: ignore[type-arg]
        """Write the leading Message events into the pipe while it has room; the rest is returned."""
        pipe = self.session.pipe
        if pipe is None:
            return events
        n = len(events)
        message = Message
        msgs = [ev.frames for ev in events if type(ev) is message]
        if len(msgs) < n:  # other events among them: only the leading messages
            i = 0
            while type(events[i]) is message:
                i += 1
            msgs = msgs[:i]
        i = pipe.write_batch(msgs) if msgs else 0
        if i:
            pipe.flush()
        return events[i:] if i < n else []

    # -- input ---------------------------------------------------------------------------------------
    def pull(self) -> int:
        """One read from the OS socket into the codec: bytes read, 0 at EOF; raises as ``recv``.
        The rest of a large frame body is read in place (``recv_into``), no chunks to join."""
        conn = self.conn
        view = conn.receive_buffer()
        if view is not None:
            n: int = self.sock.recv_into(view)
            if n:
                conn.received_into(n)
            return n
        data = self.sock.recv(RECV_BYTES)
        if data:
            conn.receive_data(data)
        return len(data)

    def receive(self, failed: Callable[[str], None]) -> bool:
        """One read (``pull``): True if bytes came, False if none; EOF or an error also goes to
        ``failed`` with the reason (``fail`` here, the hand-over of it in the socket's thread)."""
        try:
            got = self.pull()
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            failed(str(exc))
            return False
        if not got:
            failed("peer closed the connection")
            return False
        return True

    def read(self) -> bool:
        """IO thread: one read from the OS socket and what it brings (handshake, events into the pipe,
        replies); False when nothing came (or the connection closed)."""
        if not self.receive(self.fail):
            return False
        if self.heartbeat is not None:
            self.heartbeat.last_recv = _monotonic()
        self._after_input()
        return True

    def _after_input(self) -> None:
        """Send handshake replies, relay a ZAP request, deliver events (after bytes or a ZAP reply)."""
        conn = self.conn
        out = conn.data_to_send()
        if out:
            self.queue(out)
        if self._asks_zap and self._zap is None and self.alive:
            self._ask_zap()
        events = conn.next_events()
        if events:
            self.deliver(events)
        if conn.dead and self.alive:
            self.fail("protocol error")

    def deliver(self, events: list) -> None:  # type: ignore[type-arg]
        events = self.put_messages(events)  # the common case: all are messages, written in one step
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
                self.queue(self.conn.encode_pong(ev.context))
                if self.heartbeat is not None:
                    self.heartbeat.peer_ping(ev.ttl_ds)
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
                self.fail(f"{type(ev).__name__}: {ev.reason!r}")
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
            self.fail("the ZAP handler at inproc://zeromq.zap.01 went away")

    def _on_zap_reply(self, frames: list[bytes]) -> None:
        if self.alive:
            with self.inline.lock:
                self.conn.zap_reply(frames)
                self._after_input()

    def _on_zap_lost(self) -> None:
        self.fail("the ZAP handler closed before answering")

    def _auth_failed(self, ev: AuthFailed) -> None:
        """The ZAP handler refused the peer; the codec already queued (and we sent) its ERROR."""
        self.emit_event(Event.HANDSHAKE_FAILED_AUTH, ev.status_code)  # as libzmq: the ZAP status code
        self.fail(f"ZAP refused the peer: {ev.status_code} {ev.status_text}")

    def _on_handshake(self, ev: HandshakeDone) -> bool:
        self.handshaken = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.session.engine_ready(self, ev.peer_identity):
            self.close()
            return False
        self.emit_event(Event.HANDSHAKE_SUCCEEDED, 0)
        self.heartbeat = Heartbeat(self.io, self.options, self._send_ping, self.fail)
        self.heartbeat.start()
        pipe = self.session.pipe
        if pipe is not None:
            pipe.peer.properties = self._message_properties()
        if pipe is not None and not self.conn.mechanism.wraps_traffic:
            pipe.inline = self.inline  # the socket's thread's door (CURVE's nonces stay in the IO thread)
        self.restart_output()  # messages queued before the connection existed
        return self.alive

    def _message_properties(self) -> dict[str, str]:
        """What libzmq attaches to each received message: Peer-Address, the ZAP handler's User-Id and
        metadata, the peer's ZMTP properties (the first of a name wins, in that order)."""
        conn = self.conn
        props = {name: value.decode("utf-8", "replace") for name, value in conn.peer_metadata.items()}
        props.update((name, value.decode("utf-8", "replace")) for name, value in conn.zap_properties.items())
        if conn.user_id:
            props["User-Id"] = conn.user_id.decode("utf-8", "replace")
        address = security.peer_address(self.sock)
        if address:
            props["Peer-Address"] = address
        return props

    def _send_ping(self, ttl_ds: int) -> None:
        if self.alive:
            self.queue(self.conn.encode_ping(ttl_ds))

    def _stop_input(self, pending: list) -> None:  # type: ignore[type-arg]
        # Already stopped (events that were under way): they follow what waits already, never replace it.
        self._pending = self._pending + pending if self.input_stopped else pending
        self.input_stopped = True
        self.set_mask(self.mask & ~READ)

    def restart_input(self) -> None:
        """The pipe has room again (session got activate_write)."""
        inline = self.inline
        with inline.lock:
            inline.take_handoff()
            if not self.input_stopped or not self.alive:
                return
            self.input_stopped = False
            inline.unparked()  # READ comes back on below
            pending, self._pending = self._pending, []
            self.deliver(pending)
            if not self.input_stopped and self.alive:
                self.set_mask(self.mask | READ)

    # -- output --------------------------------------------------------------------------------------
    def queue(self, data: bytes) -> None:
        """Write ``data`` after what is pending (handshake bytes, PING/PONG, a hand-over's replies)."""
        with self.inline.lock:
            out = self.out
            if type(out) is list:
                self.out = [*out, data]
            elif out:
                self.out = bytes(out) + data  # type: ignore[arg-type]
            else:
                self.out = data
            self._write()

    def restart_output(self) -> None:
        """The pipe has messages again (session got activate_read)."""
        if self.alive and not (self.mask & WRITE):
            self._write()

    def fill(self) -> bytes | list[bytes | memoryview]:
        """The next batch from the pipe, encoded: one buffer, or a list of buffers (for ``sendmsg``)
        when it carries frames of ZERO_COPY bytes or more, which are sent without being copied."""
        pipe = self.session.pipe
        if pipe is None or not self.handshaken:
            return b""
        conn = self.conn
        batch = pipe.read_batch(BATCH_BYTES)
        if not batch:
            return b""
        zero_copy = not conn.mechanism.wraps_traffic
        # read_batch stops after the message that reaches BATCH_BYTES (<= ZERO_COPY), so only the last
        # message can hold a large frame: without one, and with no subscriptions, one encode does.
        if not self.is_sub and (not zero_copy or max(map(len, batch[-1])) < ZERO_COPY):
            return conn.encode_messages(batch)
        msgs: list[Msg] = []
        chunks: list[bytes] = []
        vectored = False
        for msg in batch:
            if len(msg) == 1:
                frame = msg[0]
                if self.is_sub and frame[:1] in (b"\x00", b"\x01"):
                    if msgs:
                        chunks.append(conn.encode_messages(msgs))
                        msgs = []
                    topic = frame[1:]
                    chunks.append(conn.encode_subscribe(topic) if frame[0] else conn.encode_cancel(topic))
                    continue
                n = len(frame)
                if n >= ZERO_COPY and zero_copy:
                    if msgs:
                        chunks.append(conn.encode_messages(msgs))
                        msgs = []
                    chunks.append(frame_header(0, n))
                    chunks.append(frame)
                    vectored = True
                    continue
            else:
                if max(map(len, msg)) >= ZERO_COPY and zero_copy:
                    if msgs:
                        chunks.append(conn.encode_messages(msgs))
                        msgs = []
                    last = len(msg) - 1
                    for i, frame in enumerate(msg):
                        chunks.append(frame_header(MORE if i < last else 0, len(frame)))
                        chunks.append(frame)
                    vectored = True
                    continue
            msgs.append(msg)
        if msgs:
            chunks.append(conn.encode_messages(msgs))
        if not chunks:
            return b""
        if vectored:
            return chunks  # type: ignore[return-value]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def send_some(self, out: bytes | memoryview | list[bytes | memoryview]) -> bytes | memoryview | list[bytes | memoryview]:
        """Write what the OS takes now; returns what is left (``b""`` when all went). Raises OSError
        (not BlockingIOError/InterruptedError: then nothing went)."""
        try:
            n = self.sock.sendmsg(out) if type(out) is list else self.sock.send(out)  # type: ignore[arg-type]
        except (BlockingIOError, InterruptedError):
            return out
        if type(out) is list:
            for i, chunk in enumerate(out):
                size = len(chunk)
                if n < size:
                    return [memoryview(chunk)[n:], *out[i + 1:]] if n else out[i:]
                n -= size
            return b""
        if n < len(out):
            return memoryview(out)[n:] if n else out  # type: ignore[arg-type]
        return b""

    def _write(self) -> None:
        with self.inline.lock:
            self._write_locked()

    def _write_locked(self) -> None:
        while self.alive:
            out = self.out
            if not out:
                out = self.out = self.fill()
                if not out:
                    break
            try:
                rest = self.send_some(out)
            except OSError as exc:
                self.fail(str(exc))
                return
            self.out = rest
            if rest:
                self.set_mask(self.mask | WRITE)
                return
        if not self.alive:
            return
        self.set_mask(self.mask & ~WRITE)
        if self.handshaken:
            self.session.output_drained()

    @property
    def has_output(self) -> bool:
        return bool(self.out)
