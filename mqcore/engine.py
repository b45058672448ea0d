"""StreamEngine: one tcp/ipc connection — greeting, handshake and ZMTP framing via the sans-IO codec.

Owned by an IO thread, with two doors for the socket's thread (see "Inline IO" below). The engine
moves messages between the OS socket and its session's pipe:
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
Inline IO (NULL/PLAIN only; CURVE keeps every byte in the IO thread because of its nonces): the
IO-thread hand-over costs two thread wake-ups per message under the GIL, so the socket's thread may do
the IO itself when the engine is idle:
* ``send_inline`` (from ``Pipe.flush`` when the IO thread sleeps on an empty pipe and the previous
  attempt is older than INLINE_GAP): drain the pipe, encode, ``send`` in the caller's thread.
* ``recv_inline`` (from the socket's wait/poll/recv while its only pipe is empty): read and decode in
  the caller's thread. While the socket's thread polls our fd (``reader_waiting``) the IO thread does
  not read but *parks* (drops READ); the socket then reads for it until it sleeps some other way
  (Poller, FD/EVENTS, asyncio, a second pipe), which calls ``request_unpark``.
``mqcore.direct`` is a shorter way through the same doors for the common case (its own frame scan,
sends that bypass the pipe); it uses ``inline_failed``, ``inline_decode``, ``keep_backlog``,
``claim_inline`` and ``write_later`` and keeps the same rules.
Rules: everything touching output state (``_out``, the WRITE bit, the pipe's read side, the encoder)
or input state (the decoder, the pipe's write side, ``_handoff``) holds ``_lock`` (re-entrant); the
socket's thread only ever *tries* it, so it never waits for the IO thread. Whatever only the IO thread
may do (commands, handshake bytes, errors, timers, poller changes) is handed to it by command, in
order (``_handoff`` is taken before the IO thread reads again).
Security: the mechanism (NULL, PLAIN, CURVE) and its role come from the options (``mqcore.security``);
a server mechanism asks the ZAP handler through a ``mqcore.zap.ZapClient`` pipe without blocking, and a
refusal is reported as HANDSHAKE_FAILED_AUTH with the ZAP status code (on both sides, as libzmq does).
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
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
from mqcore.zmtp._frames import MORE, encode_messages, frame_header

if TYPE_CHECKING:
    from mqcore.io_thread import IoThread, Timer
    from mqcore.options import Options
    from mqcore.session import Session

log = logging.getLogger("mqcore")

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE
RECV_BYTES = 65536
BATCH_BYTES = 65536
ZERO_COPY = 65536  # frames this large are written from the caller's buffer (sendmsg), never joined
# send_inline hands over to the IO thread when the previous attempt was less than this long ago (s)
# and nothing was read in the socket's thread since: a caller sending back to back is better served
# by the IO thread's batches than by a syscall per message; a caller that read a reply between sends
# (REQ, DEALER, REP round trips) gets the inline write however short the round trip.
INLINE_GAP = 50e-6
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
        self._out: bytes | memoryview | list[bytes | memoryview] = b""
        self._mask = 0
        self._input_stopped = False
        self._pending: list[object] = []
        self._timer: Timer | None = None
        self._heartbeat: Heartbeat | None = None
        self._failure_reported = False  # a HANDSHAKE_FAILED_* event was emitted already
        # Output state (_out, _mask's WRITE bit, the session pipe's read side, the codec's encoder) is
        # shared with the socket's thread through ``send_inline``; both sides hold this lock for it.
        # Re-entrant: _write may close the engine on an error.
        self._lock = threading.RLock()
        self._last_inline = 0.0
        self.direct_ok = False  # mqcore.direct's lasting conditions hold (set by it once they do)
        self.large_frames = False  # mqcore.direct reads large frames header first (_read_large)
        # Events decoded by recv_inline that only the IO thread may handle (commands, a full pipe):
        # (bytes to send, events); taken first by the IO thread's next read, so order is kept.
        self._handoff: tuple[bytes, list] | None = None  # type: ignore[type-arg]
        self._backlog = False  # _handoff holds only messages a full pipe refused (recv_inline's own)
        self.inline_eof = False  # recv_inline saw EOF or an error: the socket's thread stops polling
        # Parking (see recv_inline): while ``reader_waiting`` (set by the socket's thread around its
        # poll of our fd) the IO thread does not read but drops READ from its mask and sets
        # ``parked``; the socket's thread then owns reading until it asks for ``request_unpark``.
        # Both flags change under ``_lock``. Not with heartbeats: PINGs must be answered promptly.
        self.reader_waiting = False
        self.parked = False
        self._unpark_posted = False
        self._may_park = options.heartbeat_ivl <= 0

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
        with self._lock:
            self.alive = False
        pipe = self.session.pipe
        if pipe is not None and pipe.engine is self:
            pipe.inline = pipe.engine = None
        if self._timer is not None:
            self._timer.cancel()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._zap is not None:
            self._zap.close()
        self.io.remove_fd(self.fd)
        with self._lock:  # never while the socket's thread is in send_inline
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
            with self._lock:
                if self._handoff is not None:
                    self._take_handoff()
                if self.reader_waiting and self._may_park and self.alive:
                    self.parked = True  # the socket's thread is polling our fd and reads it
                    self._set_mask(self._mask & ~READ)
                elif self.alive and not self._input_stopped:  # the handoff may have filled the pipe
                    self._read()
        if mask & WRITE and self.alive:
            self._write()

    # -- input in the socket's thread --------------------------------------------------------------
    def recv_inline(self) -> None:
        """Socket's thread, while it waits for input: read and decode the OS socket here.

        The socket's thread polls this engine's fd beside its mailbox (SocketBase._wait) and calls
        this when it is readable; messages go into the pipe as the IO thread would put them, without
        the IO thread's wake-up and its hand-over to the socket. Anything only the IO thread may do
        (commands, handshake replies, errors) is handed to it in order (``_handoff``); messages a full
        pipe refuses wait in ``_handoff`` for this thread's next call (``_backlog``) or the IO thread's
        ``restart_input``. Skipped when the IO thread holds the engine: it is reading already.
        """
        lock = self._lock
        if not lock.acquire(False):
            return
        try:
            if not self.alive or self._input_stopped or not self.handshaken:
                return
            handoff = self._handoff
            if handoff is not None:
                if self._backlog:  # messages that did not fit last time: deliver them first
                    rest = self._put_messages(handoff[1])
                    self._handoff = (b"", rest) if rest else None
                return
            try:
                got = self._pull()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.inline_failed(str(exc))
                return
            if not got:
                self.inline_failed("peer closed the connection")
                return
            self._last_inline = 0.0  # as in mqcore.direct: a send answering this read may go inline
            self._inline_events(self.conn.next_events())
        finally:
            lock.release()

    def inline_failed(self, reason: str) -> None:
        """Socket's thread, holding ``_lock``: its read met EOF or an error, which a parked IO thread
        would not see; the IO thread closes the connection and the socket's thread stops polling it."""
        self.inline_eof = True
        self.io.post(self._error, reason)

    def inline_decode(self, data: bytes, refused: list[Msg]) -> None:
        """Socket's thread, holding ``_lock`` (``mqcore.direct``): decode ``data`` and handle its
        events as ``recv_inline`` does, after ``refused``, messages a full pipe did not take."""
        self.conn.receive_data(data)
        events = self.conn.next_events()
        if refused:
            events = [Message(frames) for frames in refused] + events
        self._inline_events(events)

    def write_later(self, rest: memoryview) -> None:
        """Socket's thread, holding ``_lock`` with no output pending: the rest of a partial direct write
        goes out from the IO thread (which waits for EVENT_WRITE), before anything queued later."""
        self._out = rest
        self.io.post(self.restart_output)

    def keep_backlog(self, refused: list[Msg]) -> None:
        """Socket's thread, holding ``_lock``: messages a full pipe refused, for its next read."""
        self._inline_events([Message(frames) for frames in refused])

    def _inline_events(self, events: list) -> None:  # type: ignore[type-arg]
        """The end of an inline read (``_lock`` held): messages into the pipe, the rest in order to
        the IO thread, or, when only messages a full pipe refused are left, kept for the next read."""
        if self._heartbeat is not None:
            self._heartbeat.last_recv = _monotonic()
        conn = self.conn
        out = conn.data_to_send()
        rest = self._put_messages(events)
        if out or conn.dead or (rest and any(type(ev) is not Message for ev in rest)):
            self._handoff = (out, rest)
            self._backlog = False
            self.io.post(self._take_handoff)
        elif rest:
            # The pipe is full: keep the rest for this thread's next call (or the IO thread's
            # restart_input when the reader drains the pipe to its low-water mark).
            self._handoff = (b"", rest)
            self._backlog = True

    def _put_messages(self, events: list) -> list:  # type: ignore[type-arg]
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

    def request_unpark(self) -> None:
        """Socket's thread, before it sleeps without polling our fd: the IO thread reads again."""
        if self.parked and not self._unpark_posted:
            self._unpark_posted = True
            self.io.post(self._unpark)

    def _unpark(self) -> None:
        with self._lock:
            self._unpark_posted = False
            if self._handoff is not None:
                self._take_handoff()
            if self.parked and not self.reader_waiting:
                self.parked = False
                if not self._input_stopped:
                    self._set_mask(self._mask | READ)

    def _take_handoff(self) -> None:
        with self._lock:
            handoff, self._handoff = self._handoff, None
            self._backlog = False
            if handoff is None or not self.alive:
                return
            out, events = handoff
            if out:
                self._queue(out)
            if events:
                self._deliver(events)
            if self.conn.dead and self.alive:
                self._error("protocol error")

    # -- input ---------------------------------------------------------------------------------------
    def _pull(self) -> int:
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

    def _read(self) -> None:
        try:
            got = self._pull()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._error(str(exc))
            return
        if not got:
            self._error("peer closed the connection")
            return
        if self._heartbeat is not None:
            self._heartbeat.last_recv = _monotonic()
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
        events = self._put_messages(events)  # the common case: all are messages, written in one step
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
            with self._lock:
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
        pipe = self.session.pipe
        if pipe is not None:
            pipe.peer.properties = self._message_properties()
        if pipe is not None and not self.conn.mechanism.wraps_traffic:
            pipe.inline = self.send_inline  # see send_inline (CURVE's nonces stay in the IO thread)
            pipe.engine = self
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
            self._queue(self.conn.encode_ping(ttl_ds))

    def _stop_input(self, pending: list) -> None:  # type: ignore[type-arg]
        # Already stopped (events that were under way): they follow what waits already, never replace it.
        self._pending = self._pending + pending if self._input_stopped else pending
        self._input_stopped = True
        self._set_mask(self._mask & ~READ)

    def restart_input(self) -> None:
        """The pipe has room again (session got activate_write)."""
        with self._lock:
            if self._handoff is not None:
                self._take_handoff()
            self._restart_input()

    def _restart_input(self) -> None:
        if not self._input_stopped or not self.alive:
            return
        self._input_stopped = False
        self.parked = False  # READ comes back on below
        pending, self._pending = self._pending, []
        self._deliver(pending)
        if not self._input_stopped and self.alive:
            self._set_mask(self._mask | READ)

    # -- output --------------------------------------------------------------------------------------
    def _queue(self, data: bytes) -> None:
        with self._lock:
            out = self._out
            if type(out) is list:
                self._out = [*out, data]
            elif out:
                self._out = bytes(out) + data  # type: ignore[arg-type]
            else:
                self._out = data
            self._write()

    def claim_inline(self) -> bool:
        """Socket's thread, before writing in its own thread: True if the previous attempt is at least
        INLINE_GAP old or the socket's thread read since (the inline reads reset it), and ``_lock`` was
        free (then held: the caller releases it); False: the writing stays with the IO thread (busy,
        or sends back to back, which its batches serve better)."""
        now = _monotonic()
        last, self._last_inline = self._last_inline, now
        return now - last >= INLINE_GAP and self._lock.acquire(False)

    def send_inline(self) -> bool:
        """Socket's thread: write what its pipe holds straight to the OS socket, skipping the IO thread.

        Called by ``Pipe.flush`` when the IO thread sleeps on an empty pipe. Only if the engine is idle
        (lock free, nothing pending, not waiting for EVENT_WRITE) it drains the pipe, encodes and sends
        the batch in this thread, so order with earlier messages is kept. True when everything went
        out; False asks the caller to hand over to the IO thread as usual (busy engine, more than one
        batch, a partial write, whose rest waits in ``_out``, or an error, which the IO thread finds).
        """
        if not self.claim_inline():
            return False
        lock = self._lock
        try:
            if not self.alive or self._out or self._mask & WRITE:
                return False
            pipe = self.session.pipe
            queued = pipe.inbound if pipe is not None else None
            if (queued is not None and len(queued) == 1 and self.handshaken and not self.is_sub
                    and sum(map(len, queued[0])) < ZERO_COPY):
                # The round-trip case: one small message waits. Read it (HWM accounting) and encode
                # it here; the pipe stays asleep (in_active False), so the next flush comes here too.
                out: bytes | list[bytes | memoryview] = encode_messages((pipe.read(),))  # type: ignore[arg-type, union-attr]
            else:
                out = self._fill()
            if not out:
                return False
            try:
                rest = self._send_some(out)
            except OSError:
                rest = out  # the IO thread meets the error again and closes
            if not rest:
                pipe = self.session.pipe
                return pipe is None or not pipe.inbound
            self._out = rest
            return False
        finally:
            lock.release()

    def restart_output(self) -> None:
        """The pipe has messages again (session got activate_read)."""
        if self.alive and not (self._mask & WRITE):
            self._write()

    def _fill(self) -> bytes | list[bytes | memoryview]:
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

    def _send_some(self, out: bytes | memoryview | list[bytes | memoryview]) -> bytes | memoryview | list[bytes | memoryview]:
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
        with self._lock:
            self._write_locked()

    def _write_locked(self) -> None:
        while self.alive:
            out = self._out
            if not out:
                out = self._out = self._fill()
                if not out:
                    break
            try:
                rest = self._send_some(out)
            except OSError as exc:
                self._error(str(exc))
                return
            self._out = rest
            if rest:
                self._set_mask(self._mask | WRITE)
                return
        if not self.alive:
            return
        self._set_mask(self._mask & ~WRITE)
        if self.handshaken:
            self.session.output_drained()

    @property
    def has_output(self) -> bool:
        return bool(self._out)
