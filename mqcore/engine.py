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
"""

from __future__ import annotations

import logging
import selectors
import socket
from typing import TYPE_CHECKING

from mqcore.constants import SOCKET_TYPE_NAMES, SocketType
from mqcore.pipe import Msg
from mqcore.zmtp import (
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


class StreamEngine:
    """Speaks ZMTP on one connected, non-blocking stream socket for ``session``."""

    def __init__(self, io: IoThread, session: Session, sock: socket.socket, options: Options,
                 as_server: bool) -> None:
        self.io = io
        self.session = session
        self.sock = sock
        self.fd = sock.fileno()
        self.conn = ZmtpConnection(
            socket_type=SOCKET_TYPE_NAMES[options.type], identity=options.routing_id,
            as_server=as_server, maxmsgsize=options.maxmsgsize,
        )
        self.handshake_ivl = options.handshake_ivl
        self.is_sub = options.type in _SUBSCRIBERS
        self.alive = True
        self.handshaken = False
        self._out: bytes | memoryview = b""
        self._mask = 0
        self._input_stopped = False
        self._pending: list[object] = []
        self._timer: Timer | None = None

    # -- life cycle ----------------------------------------------------------------------------------
    def plug(self) -> None:
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
        self.close()
        self.session.engine_error(self)

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
        conn = self.conn
        conn.receive_data(data)
        out = conn.data_to_send()
        if out:
            self._queue(out)
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
            elif type(ev) is PeerError or type(ev) is ProtocolViolation:
                if pipe is not None:
                    pipe.flush()
                self._error(f"{type(ev).__name__}: {ev.reason!r}")
                return
            i += 1
        if pipe is not None:
            pipe.flush()

    def _on_handshake(self, ev: HandshakeDone) -> bool:
        self.handshaken = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.session.engine_ready(self, ev.peer_identity):
            self.close()
            return False
        self.restart_output()  # messages queued before the connection existed
        return self.alive

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
