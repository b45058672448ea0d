"""Inline: the socket's thread's door to one connection, and the protocol it keeps with the IO thread.

Handing each message between the IO thread and the socket's thread costs two thread wake-ups under
the GIL, so the socket's thread may do its connection's IO itself (NULL/PLAIN only: CURVE keeps every
byte in the IO thread because of its nonces). What it may do goes through this object alone:
* ``read`` (``SocketBase``, while it waits for input on a socket whose one pipe is this connection's):
  read the OS socket and decode here — the direct read when its conditions hold, else the general
  inline read — messages into the pipe, or the one message of a read straight to the waiting recv.
* ``send`` (``SocketBase``, while it polls this connection): a message written straight to the OS
  socket, without the pipe.
* ``flush_pipe`` (``Pipe.flush``, when the IO thread sleeps on an empty pipe): drain the pipe here.
* ``waiting`` around its poll of ``fd``; ``release`` before it sleeps any other way.

The protocol between the two threads (the one description of it; StreamEngine keeps it through
``lock`` and the IO-thread methods at the end of the class):
1. ``lock`` (re-entrant: a write may close the engine) guards the engine's output state (``out``, the
   WRITE bit of ``mask``, the session pipe's read side, the encoder) and its input state (the decoder,
   the pipe's write side, the hand-over below). The IO thread holds it for every read and write; the
   socket's thread only ever *tries* it, so it never waits for the IO thread: when the lock is taken
   it declines, and the message takes the IO thread's path.
2. Whatever only the IO thread may do (commands, handshake bytes, errors, timers, poller changes) is
   handed to it in order: what an inline read decoded that is not a message goes into the hand-over
   (``_handoff``, with the bytes to send), which the IO thread takes before it reads again
   (``take_handoff``: posted, and at each readable event). Messages a full pipe refused wait there too
   (``backlog``), for the socket's thread's next read or the IO thread's ``restart_input``. EOF or an
   error met in the socket's thread is posted to the IO thread; ``lost`` stops the socket's polling.
3. Parking: while the socket's thread polls ``fd`` (``waiting``, which only it writes), the IO thread
   at a readable event does not read but drops READ and sets ``parked`` (which only it writes, under
   ``lock``): the socket's thread reads from then on, until it sleeps some other way (Poller, FD/EVENTS,
   asyncio, a second pipe) and calls ``release``. Not with our own heartbeats (HEARTBEAT_IVL): the IO
   thread sends and times the PINGs.
4. A parked connection is never left unread: every PARK_CHECK the IO thread looks whether the socket's
   thread read it since the last look or polls it now; when not — its recv returned and the
   application does something else — the IO thread reads what has come (PINGs answered, messages into
   the pipe up to its HWM), as at a readable event, so a peer's heartbeats are answered whatever the
   socket's thread does. The connection stays parked: the socket's thread reads it at its next wait.

The direct read does in one function what the general inline read spreads over the engine, the
connection and the decoder: one ``recv_into`` of a large buffer, the codec's frame scanner
(``scan_messages``) slicing complete messages straight into message lists, one ``write_batch`` into
the pipe (the socket type's ``xrecv`` still takes each message from the pipe, so ordering, envelopes,
HWM accounting and poll readiness stay the pipe path's). A message alone in its read (a round trip's,
which the codec's ``lone_message`` takes whole without the scan's setup) goes into the pipe without
``write_batch`` or, when the recv waits for it and the socket type takes it (``SocketImpl.xrecv_direct``),
straight to that recv. Whatever the scan stops at (a command, a frame
over MAXMSGSIZE, a partial frame) goes to the decoder with the rest of the read, and a message split
between two reads is carried into the next one (``FrameDecoder.held_bytes``). It declines, for the
general read, when the engine is busy, not handshaken or closing, events wait for the IO thread, a
large body is being read in place, or the socket type gets subscriptions. Large frames: once a read
ends inside a single-frame message of ``LARGE`` to ``LARGE_MAX`` bytes, the next reads take each
frame's header alone and its body with one ``recv`` of its size, which is the message's bytes object
(no copy here), up to ``LARGE_BATCH`` per read; anything else returns them to the buffer.

The direct send: the socket type says which frames go on the wire (``SocketImpl.xsend_direct``), they
are encoded and written with one ``send``. It declines (the message takes the pipe) when the engine is
busy or has output waiting, the pipe holds older messages or is closing, the type cannot, a frame is
of ZERO_COPY bytes or more (the IO thread writes those without copying), or the previous send was less
than INLINE_GAP ago with nothing read since (back-to-back sends go to the IO thread in batches; a send
after a read, as in a round trip, goes direct however soon). A partial write leaves the rest as the
engine's pending output for its IO thread; an error is left for the IO thread to report.
"""

from __future__ import annotations

import selectors
import threading
import time
from typing import TYPE_CHECKING, Any

from mqcore.zmtp import (
    LONG_HEADER,
    Message,
    encode_message,
    encode_messages,
    lone_message,
    scan_messages,
    single_long_frame,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mqcore.engine._stream import StreamEngine
    from mqcore.io_thread import Timer
    from mqcore.pipe import Msg, Pipe
    from mqcore.sockets.base import SocketImpl

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE
ZERO_COPY = 65536  # frames this large are written from the caller's buffer (sendmsg) by the IO thread
# An inline write hands over to the IO thread when the previous attempt was less than this long ago (s)
# and nothing was read in the socket's thread since: a caller sending back to back is better served
# by the IO thread's batches than by a syscall per message; a caller that read a reply between sends
# (REQ, DEALER, REP round trips) gets the inline write however short the round trip.
INLINE_GAP = 50e-6
PARK_CHECK = 0.05  # s: how often the IO thread looks whether the socket's thread still reads (rule 4)
PARK_READS = 16  # reads at most at one such look (the pipe's HWM stops them sooner)
BUFFER_BYTES = 65536  # one read: ~600 messages of 100 B, within the default RCVHWM (more spill into the backlog)
HELD_LIMIT = 16384  # bytes of a split message carried into the next read (more: the general path)
LARGE = HELD_LIMIT  # a frame this large, split by a read, makes the next reads take frames header first
# Larger bodies stay with the decoder, which reads them in place into a buffer it reuses: a fresh
# allocation that large is mmapped by malloc, and its page faults cost more than the copy saved.
LARGE_MAX = 120 * 1024
LARGE_BATCH = 8  # large messages per header-first read (then the socket's thread hands them out)
_monotonic = time.monotonic


class Inline:
    """The socket's thread's door to one StreamEngine; see the module docstring for the protocol."""

    __slots__ = (
        "lock", "fd", "parked", "waiting", "backlog", "lost",
        "_engine", "_handoff", "_unpark_posted", "_may_park", "_park_timer", "_read_since_check",
        "_last_send", "_direct_ok", "_large",
    )

    def __init__(self, engine: StreamEngine) -> None:
        self.lock = threading.RLock()
        self.fd = engine.fd
        self.parked = False  # the IO thread leaves reading to the socket's thread (IO thread writes)
        self.waiting = False  # the socket's thread polls ``fd`` now (socket's thread writes)
        self.backlog = False  # the hand-over holds only messages a full pipe refused
        self.lost = False  # EOF or an error met by the socket's thread, or the engine closed
        self._engine = engine
        # (bytes to send, events) from inline reads, for the IO thread; taken before it reads again.
        self._handoff: tuple[bytes, list[Any]] | None = None
        self._unpark_posted = False
        self._may_park = engine.options.heartbeat_ivl <= 0
        self._park_timer: Timer | None = None
        self._read_since_check = False  # the socket's thread read since the IO thread last looked
        self._last_send = 0.0  # monotonic time of the last inline write attempt; 0 after a read
        self._direct_ok = False  # the direct read's lasting conditions hold (checked until they do)
        self._large = False  # the direct read takes large frames header first

    # -- the socket's thread ------------------------------------------------------------------------
    def usable(self) -> bool:
        """Whether the socket's thread may poll and read this connection now."""
        return not self.lost and not self._engine.input_stopped

    def read(self, buffer: bytearray, take: Callable[[Msg, Pipe], Msg | None] | None = None) -> Msg | None:
        """Read the OS socket into ``buffer`` and queue what came on the pipe (its reader marked awake by
        the caller): the direct read when its conditions hold (see the module docstring), else the
        general one. The message ``take`` (the socket type's ``xrecv_direct``, while its recv waits)
        took from a read that held it alone, else None. Nothing happens when the IO thread holds the
        engine: it is reading already."""
        lock = self.lock
        if not lock.acquire(False):
            return None
        try:
            engine = self._engine
            decoder = engine.conn.decoder
            pipe = engine.session.pipe
            if (not engine.alive or engine.input_stopped or self._handoff is not None or pipe is None
                    or decoder.stopped or not (self._direct_ok or self._check_direct())):
                self._read_general()
                return None
            # What the last read left in the decoder (a message split between reads) goes before this
            # read, so the scan starts at a message boundary; a large body stays with the general path.
            held = decoder.held_bytes()
            if held is None or len(held) > HELD_LIMIT:
                self._read_general()
                return None
            if self._large and not held:
                self._read_large(pipe, buffer, decoder.limit)
                return None
            view = memoryview(buffer)
            k = len(held)
            try:
                n = engine.sock.recv_into(view[k:] if k else buffer)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as exc:
                self._failed(str(exc))
                return None
            if not n:
                self._failed("peer closed the connection")
                return None
            if engine.heartbeat is not None:  # a peer's PING TTL counts from it, with or without our IVL
                engine.heartbeat.last_recv = _monotonic()
            self._last_send = 0.0  # a send after this read answers it: not back to back (_claim)
            self._read_since_check = True
            if k:
                decoder.drop_held()
                data = held + view[k:k + n]
                n += k
            else:
                data = bytes(view[:n])
            msg = lone_message(data, decoder.limit)
            if msg is not None:
                # One message alone in the read, as in a round trip: to the waiting recv, or into the
                # pipe in line (Pipe.write_batch's work for one message).
                peer = pipe.peer
                if take is not None and not peer.inbound:
                    got = take(msg, peer)
                    if got is not None:
                        return got
                hwm = pipe.hwm
                if ((not hwm or pipe.msgs_written - peer.msgs_read < hwm) and not pipe.terminated
                        and not pipe.peer_terminated):
                    peer.inbound.append(msg)
                    pipe.msgs_written += 1
                    if not peer.in_active:
                        pipe.flush()
                    return None
                msgs, done = [msg], n
            else:
                msgs, done = scan_messages(data, 0, decoder.limit)
            if done != n and LARGE <= single_long_frame(data, done) <= LARGE_MAX:
                self._large = True  # the next reads take such frames header first (_read_large)
            self._deliver(pipe, msgs, data[done:] if done else data)
            return None
        finally:
            lock.release()

    def send(self, impl: SocketImpl, pipe: Pipe, msg: Msg) -> bool:
        """Write ``msg`` (whole) to the OS socket in this thread; False: nothing was done, use the pipe.
        ``pipe`` is the socket's end of this connection's pipe."""
        if len(msg) == 1:
            if len(msg[0]) >= ZERO_COPY:
                return False
        else:
            for frame in msg:
                if len(frame) >= ZERO_COPY:
                    return False
        now = _monotonic()  # _claim, in line: this runs once per message sent
        last, self._last_send = self._last_send, now
        lock = self.lock
        if now - last < INLINE_GAP or not lock.acquire(False):
            return False
        try:
            engine = self._engine
            if (not engine.alive or engine.out or engine.mask & WRITE or pipe.peer.inbound
                    or pipe.terminated or pipe.peer_terminated):
                return False
            frames = impl.xsend_direct(msg, pipe)
            if frames is None:
                return False
            wire = encode_message(frames)
            try:
                n = engine.sock.send(wire)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                self._failed(str(exc))
                return True
            if n < len(wire):  # the rest goes out from the IO thread, before anything queued later
                engine.out = memoryview(wire)[n:]
                engine.io.post(engine.restart_output)
            return True
        finally:
            lock.release()

    def flush_pipe(self) -> bool:
        """Write what the pipe holds straight to the OS socket (``Pipe.flush``, when the IO thread sleeps
        on an empty pipe). Only if the engine is idle (lock free, nothing pending, not waiting for
        EVENT_WRITE) it drains the pipe, encodes and sends the batch in this thread, so order with
        earlier messages is kept. True when everything went out; False asks the caller to hand over to
        the IO thread as usual (busy engine, more than one batch, a partial write, whose rest waits in
        the engine's output, or an error, which the IO thread finds)."""
        if not self._claim():
            return False
        lock = self.lock
        try:
            engine = self._engine
            if not engine.alive or engine.out or engine.mask & WRITE:
                return False
            pipe = engine.session.pipe
            queued = pipe.inbound if pipe is not None else None
            if (queued is not None and len(queued) == 1 and engine.handshaken and not engine.is_sub
                    and sum(map(len, queued[0])) < ZERO_COPY):
                # The round-trip case: one small message waits. Read it (HWM accounting) and encode
                # it here; the pipe stays asleep (in_active False), so the next flush comes here too.
                out: bytes | list[bytes | memoryview] = encode_messages((pipe.read(),))  # type: ignore[arg-type, union-attr]
            else:
                out = engine.fill()
            if not out:
                return False
            try:
                rest = engine.send_some(out)
            except OSError:
                rest = out  # the IO thread meets the error again and closes
            if not rest:
                pipe = engine.session.pipe
                return pipe is None or not pipe.inbound
            engine.out = rest
            return False
        finally:
            lock.release()

    def release(self) -> None:
        """Before the socket's thread sleeps without polling ``fd``: the IO thread reads again."""
        if self.parked and not self._unpark_posted:
            self._unpark_posted = True
            self._engine.io.post(self._unpark)

    def _claim(self) -> bool:
        """Before writing in this thread: True if the previous attempt is at least INLINE_GAP old or
        this thread read since (reads reset it), and ``lock`` was free (then held: the caller releases
        it); False: the writing stays with the IO thread (busy, or sends back to back)."""
        now = _monotonic()
        last, self._last_send = self._last_send, now
        return now - last >= INLINE_GAP and self.lock.acquire(False)

    def _read_general(self) -> None:
        """The inline read through the engine and its codec, when the direct read's conditions do not
        hold: messages into the pipe as the IO thread would put them; the rest handed over (rule 2)."""
        lock = self.lock
        if not lock.acquire(False):
            return
        try:
            engine = self._engine
            if not engine.alive or engine.input_stopped or not engine.handshaken:
                return
            handoff = self._handoff
            if handoff is not None:
                if self.backlog:  # messages that did not fit last time: deliver them first
                    rest = engine.put_messages(handoff[1])
                    self._handoff = (b"", rest) if rest else None
                    self.backlog = bool(rest)
                return
            if not engine.receive(self._failed):
                return
            self._last_send = 0.0  # a send answering this read may go inline
            self._read_since_check = True
            self._end_read(engine.conn.next_events())
        finally:
            lock.release()

    def _check_direct(self) -> bool:
        """Whether the direct read's conditions that hold for good once they hold (after the handshake,
        for a type that gets no subscriptions) are met; remembered once they are."""
        engine = self._engine
        decoder = engine.conn.decoder
        ok = (engine.handshaken and not engine.is_sub and decoder.messages_allowed
              and not decoder.subscription_messages)
        self._direct_ok = ok
        return ok

    def _read_large(self, pipe: Pipe, buffer: bytearray, limit: int) -> None:
        """The direct read while the stream carries large single-frame messages: each frame's header
        alone, then its body with one ``recv`` of its size, which is the message's bytes object. Up to
        LARGE_BATCH messages; a read that finds anything else leaves its bytes to the decoder and the
        next reads to the buffer."""
        sock = self._engine.sock
        msgs: list[Msg] = []
        undecoded = b""
        failed = ""
        while len(msgs) < LARGE_BATCH:
            try:
                n = sock.recv_into(buffer, LONG_HEADER)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                failed = str(exc)
                break
            if not n:
                failed = "peer closed the connection"
                break
            undecoded = bytes(buffer[:n])
            size = single_long_frame(undecoded)
            if size < LARGE or size > LARGE_MAX or size > limit:
                self._large = False
                break
            try:
                body = sock.recv(size)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                failed = str(exc)
                break
            if len(body) < size:
                undecoded += body  # the rest comes with the next reads, through the decoder
                break
            msgs.append([body])
            undecoded = b""
        if msgs or undecoded:
            heartbeat = self._engine.heartbeat
            if heartbeat is not None:
                heartbeat.last_recv = _monotonic()
            self._last_send = 0.0
            self._read_since_check = True
            self._deliver(pipe, msgs, undecoded)
        if failed:
            self._failed(failed)

    def _deliver(self, pipe: Pipe, msgs: list[Msg], undecoded: bytes) -> None:
        """The end of a direct read (``lock`` held): ``msgs`` into the pipe as far as it has room, then
        ``undecoded`` (the bytes after them, from a message boundary) to the decoder; what that produces
        is handled in order after the messages the pipe refused."""
        rest: list[Msg] = []
        if msgs:
            written = pipe.write_batch(msgs)
            if written and not pipe.peer.in_active:  # the socket's reading thread marks it awake
                pipe.flush()
            if written < len(msgs):
                rest = msgs[written:]
        if undecoded or rest:
            events: list[Any] = [Message(frames) for frames in rest]
            if undecoded:
                conn = self._engine.conn
                conn.receive_data(undecoded)
                events += conn.next_events()
            self._end_read(events)

    def _end_read(self, events: list[Any]) -> None:
        """The end of an inline read (``lock`` held): messages into the pipe, the rest in order to the
        IO thread, or, when only messages a full pipe refused are left, kept for the next read."""
        engine = self._engine
        if engine.heartbeat is not None:
            engine.heartbeat.last_recv = _monotonic()
        conn = engine.conn
        out = conn.data_to_send()
        rest = engine.put_messages(events)
        if out or conn.dead or (rest and any(type(ev) is not Message for ev in rest)):
            self._handoff = (out, rest)
            self.backlog = False
            engine.io.post(self.take_handoff)
        elif rest:
            # The pipe is full: keep the rest for this thread's next read (or the IO thread's
            # restart_input when the reader drains the pipe to its low-water mark).
            self._handoff = (b"", rest)
            self.backlog = True

    def _failed(self, reason: str) -> None:
        """This thread's read or write met EOF or an error, which a parked IO thread would not see:
        the IO thread closes the connection, and this thread stops polling it."""
        self.lost = True
        self._engine.io.post(self._engine.fail, reason)

    # -- the IO thread (StreamEngine) ------------------------------------------------------------------
    def io_may_read(self) -> bool:
        """At a readable event, holding ``lock``: take the hand-over first; True if the IO thread reads
        now, False if the connection parks for the socket's thread (rule 3) or cannot be read."""
        if self._handoff is not None:
            self.take_handoff()
        engine = self._engine
        if not engine.alive:
            return False
        if self.waiting and self._may_park:
            self.parked = True
            engine.set_mask(engine.mask & ~READ)
            if self._park_timer is None:
                self._park_timer = engine.io.add_timer(PARK_CHECK, self._check_park)
            return False
        return not engine.input_stopped  # the hand-over may have filled the pipe

    def take_handoff(self) -> None:
        """Deliver what inline reads left for the IO thread, in order (rule 2)."""
        with self.lock:
            handoff, self._handoff = self._handoff, None
            self.backlog = False
            engine = self._engine
            if handoff is None or not engine.alive:
                return
            out, events = handoff
            if out:
                engine.queue(out)
            if events:
                engine.deliver(events)
            if engine.conn.dead and engine.alive:
                engine.fail("protocol error")

    def unparked(self) -> None:
        """Holding ``lock``: the engine turns READ back on itself (``restart_input``)."""
        self.parked = False

    def closed(self) -> None:
        """Holding ``lock``: the engine closed; the socket's thread stops polling it."""
        self.lost = True
        if self._park_timer is not None:
            self._park_timer.cancel()
            self._park_timer = None

    def _unpark(self) -> None:
        with self.lock:
            self._unpark_posted = False
            if self._handoff is not None:
                self.take_handoff()
            if self.parked and not self.waiting:
                self._resume_reading()

    def _check_park(self) -> None:
        """Every PARK_CHECK while parked: read what has come if the socket's thread did not (rule 4)."""
        self._park_timer = None
        engine = self._engine
        with self.lock:
            if not self.parked or not engine.alive:
                return
            if not self.waiting and not self._read_since_check:
                if self._handoff is not None:
                    self.take_handoff()
                reads = 0
                while reads < PARK_READS and engine.alive and not engine.input_stopped and engine.read():
                    reads += 1
            self._read_since_check = False
            if self.parked and engine.alive:
                self._park_timer = engine.io.add_timer(PARK_CHECK, self._check_park)

    def _resume_reading(self) -> None:
        self.parked = False
        engine = self._engine
        if not engine.input_stopped:
            engine.set_mask(engine.mask | READ)
