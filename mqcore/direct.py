"""The direct path: the socket's thread sends on, reads and decodes its one connection itself.

Used by ``SocketBase`` while it waits for input on a socket with exactly one pipe whose StreamEngine
is parked (its IO thread leaves reading to the socket's thread; see ``StreamEngine.recv_inline``).
``read_direct`` does in one function what the general inline read spreads over the engine, the
connection and the decoder: one ``recv_into`` of a large buffer, a scan that slices complete message
frames straight into message lists (no event objects), and one ``write_batch`` into the pipe, whose
queue then serves the following ``recv`` calls (batched receive). The socket type's own ``xrecv``
still takes each message from the pipe, so ordering, REQ/REP envelopes, HWM accounting and poll
readiness stay those of the pipe path.

It declines (returns False, and the caller uses ``StreamEngine.recv_inline``) whenever the fast case
does not hold: the engine busy in its IO thread, not handshaken or closing, a large frame body
being read in place by the decoder, events waiting for the IO thread, subscription messages. Bytes
it cannot take as whole message frames (a command such as PING, a frame over MAXMSGSIZE, a partial
frame at the end of the read) go to the connection's decoder with the rest of the read, and the
engine handles what they produce as for any inline read. A message split between two reads is held by
the decoder; the next direct read puts its bytes (``FrameDecoder.held_bytes``) before what it reads,
so a stream that seldom breaks at a message boundary stays on the direct path. A message alone in its
read (a round trip's request or reply) goes into the pipe without the scan or ``write_batch``, or,
when the socket's recv waits for it and the socket type takes it (``SocketImpl.xrecv_direct``: a
REQ's reply, a REP's request, anything a PULL, DEALER or PAIR gets, a ROUTER's from an identified peer,
behind its routing id), straight to that recv, without the pipe and a second ``xrecv``.

Large frames: once a read ends inside a single-frame message of ``LARGE`` to ``LARGE_MAX`` bytes
(``engine.large_frames``), the following reads (``_read_large``) take each frame's 9-byte header
alone and its body with one ``recv`` of its size, whose result is the message's bytes object: no
copy in this process (the buffered read made three: the read's bytes, the decoder's body buffer,
the message) and one poll per batch of up to ``LARGE_BATCH`` messages, where a 64 KiB message that
never fitted the 64 KiB buffer took two. A header of anything else (a small or multipart message, a
command) goes to the decoder and the reads return to the buffer. Larger bodies stay with the decoder,
which reads them in place into a buffer it reuses (a fresh allocation of a megabyte costs more in
page faults than the copy).

``send_direct`` is the sending half, for a socket whose one connection its thread already polls
(``SocketBase._inline_eng``): the socket type says which frames go on the wire
(``SocketImpl.xsend_direct``: REQ adds its delimiter, REP its envelope, ROUTER drops the routing id
of the one peer it serves), they are encoded and written
with one ``send``, and the send counts as done. It declines, and the message takes the pipe, when the
engine is busy or has output waiting, the pipe still holds older messages (order), the pipe is closing,
the type cannot (several peers, REQ_CORRELATE), a frame is large (the IO thread writes those without
copying) or the previous send was less than ``INLINE_GAP`` ago with nothing read since (back-to-back
sends go to the IO thread in batches; a send after a read, as in a round trip, goes direct however
soon). A partial write leaves the rest as the engine's pending output for its IO thread; an error is
left for the IO thread to report, as on the pipe path, where the message would be lost too.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

from mqcore.engine import INLINE_GAP, WRITE, ZERO_COPY
from mqcore.zmtp._frames import _SHORT_LAST, encode_messages

if TYPE_CHECKING:
    from collections.abc import Callable

    from mqcore.engine import StreamEngine
    from mqcore.pipe import Msg, Pipe
    from mqcore.sockets.base import SocketImpl

BUFFER_BYTES = 65536  # one read: ~600 messages of 100 B, within the default RCVHWM (more spill into the backlog)
HELD_LIMIT = 16384  # bytes of a split message carried into the next read (more: the general path)
LARGE = HELD_LIMIT  # a frame this large, split by a read, makes the next reads take frames header first
# Larger bodies stay with the decoder, which reads them in place into a buffer it reuses: a fresh
# allocation that large is mmapped by malloc, and its page faults cost more than the copy saved.
LARGE_MAX = 120 * 1024
LARGE_BATCH = 8  # large messages per _read_large (then the socket's thread hands them out)
_monotonic = time.monotonic
_unpack_size = struct.Struct(">Q").unpack_from
# An empty frame with MORE, then the header of a last short frame of each size: a REQ/REP envelope.
_ENVELOPE_HEADERS = [bytes((1, 0, 0, size)) for size in range(256)]


def scan(buf: bytes, limit: int) -> tuple[list[list[bytes]], int]:
    """Complete messages of ``buf`` from its start, and the offset where the scan stopped: at the end,
    at the start of a multipart message not complete in ``buf``, or at a frame that is not a plain
    message frame within ``limit`` bytes (a command, reserved bits, a partial frame)."""
    end = len(buf)
    last = end - 1
    msgs: list[list[bytes]] = []
    append = msgs.append
    short = limit >= 255  # then no short frame is over the limit
    pos = 0
    while pos < last:
        flags = buf[pos]
        if not flags and short:
            # The common case, in line: a single frame of under 256 bytes.
            stop = pos + 2 + buf[pos + 1]
            if stop > end:
                break
            append([buf[pos + 2:stop]])
            pos = stop
            continue
        if flags == 1 and short and not buf[pos + 1] and pos + 3 < end and not buf[pos + 2]:
            # The REQ/REP envelope: an empty delimiter, then a single short frame.
            stop = pos + 4 + buf[pos + 3]
            if stop > end:
                break
            append([b"", buf[pos + 4:stop]])
            pos = stop
            continue
        if flags == 2 and end - pos >= 9:
            # A single long frame, in line too.
            size = _unpack_size(buf, pos + 1)[0]
            stop = pos + 9 + size
            if stop > end or size > limit:
                break
            append([buf[pos + 9:stop]])
            pos = stop
            continue
        # Any other message, frame by frame; ``pos`` moves only past a complete one.
        frames: list[bytes] = []
        at = pos
        while True:
            if flags < 2:
                start = at + 2
                size = buf[at + 1]
            elif flags < 4 and end - at >= 9:
                start = at + 9
                size = _unpack_size(buf, at + 1)[0]
            else:
                break
            stop = start + size
            if stop > end or size > limit:
                break
            frames.append(buf[start:stop])
            at = stop
            if not flags & 1:
                append(frames)
                pos = at
                break
            if end - at < 2:
                break
            flags = buf[at]
        if pos != at or not frames:  # incomplete, or not a message frame
            break
    return msgs, pos


def _direct_ok(engine: StreamEngine) -> bool:
    """Whether the parts of ``read_direct``'s conditions that hold for good once they hold (after the
    handshake, for a type that gets no subscriptions) are met; remembered in ``engine.direct_ok``."""
    conn = engine.conn
    decoder = conn._decoder
    ok = (engine.handshaken and not engine.is_sub and decoder.messages_allowed
          and not decoder.subscription_messages and conn._greeting is None)
    engine.direct_ok = ok
    return ok


def read_direct(engine: StreamEngine, buffer: bytearray,
                take: Callable[[Msg, Pipe], Msg | None] | None = None) -> bool | Msg:
    """Read ``engine``'s OS socket into ``buffer`` and queue the messages on its pipe; False when
    the fast case does not hold (nothing was read then). Must run in the socket's thread.
    ``take`` (the socket type's ``xrecv_direct``, while its recv waits): a message alone in the
    read, the pipe empty, is offered to it first; what it returns is returned, for ``recv``."""
    lock = engine._lock
    if not lock.acquire(False):
        return False
    try:
        conn = engine.conn
        decoder = conn._decoder
        pipe = engine.session.pipe
        if (not engine.alive or engine._input_stopped or engine._handoff is not None or pipe is None
                or decoder.stopped or not (engine.direct_ok or _direct_ok(engine))):
            return False
        # What the last read left in the decoder (a message split between reads) goes before this
        # read, so the scan starts at a message boundary; a large body stays with the general path.
        held = decoder.held_bytes() if decoder._frames or decoder._need or decoder._body is not None else decoder._tail
        if held is None or len(held) > HELD_LIMIT:
            return False
        if engine.large_frames and not held:
            _read_large(engine, pipe, buffer, decoder.limit)
            return True
        view = memoryview(buffer)
        k = len(held)
        try:
            n = engine.sock.recv_into(view[k:] if k else buffer)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            engine.inline_failed(str(exc))
            return True
        if not n:
            engine.inline_failed("peer closed the connection")
            return True
        if engine._heartbeat is not None:  # a peer's PING TTL counts from it, with or without our IVL
            engine._heartbeat.last_recv = _monotonic()
        engine._last_inline = 0.0  # a send after this read answers it: not back to back (claim_inline)
        if k:
            decoder.drop_held()
            data = held + view[k:k + n]
            n += k
        else:
            data = bytes(view[:n])
        # One message alone in the read, as in a round trip: the scan's first two cases and, when the
        # pipe has room, Pipe.write_batch, in line.
        first = data[0] if decoder.limit >= 255 else -1  # a smaller MAXMSGSIZE: the scan checks sizes
        if not first and n > 1 and n == 2 + data[1]:
            msg: list[bytes] | None = [data[2:]]
        elif first == 1 and n > 3 and n == 4 + data[3] and not data[1] and not data[2]:
            msg = [b"", data[4:]]
        else:
            msg = None
        if msg is None:
            msgs, done = scan(data, decoder.limit)
        else:
            peer = pipe.peer
            if take is not None and not peer.inbound:
                got = take(msg, peer)
                if got is not None:
                    return got
            hwm = pipe.hwm
            if (not hwm or pipe.msgs_written - peer.msgs_read < hwm) and not pipe.terminated and not pipe.peer_terminated:
                peer.inbound.append(msg)
                pipe.msgs_written += 1
                if not peer.in_active:
                    pipe.flush()
                return True
            msgs, done = [msg], n
        if n - done >= 9 and data[done] == 2 and LARGE <= _unpack_size(data, done + 1)[0] <= LARGE_MAX:
            engine.large_frames = True  # the next reads take such frames header first (_read_large)
        _deliver(engine, pipe, msgs, data[done:] if done else data)
        return True
    finally:
        lock.release()


def _deliver(engine: StreamEngine, pipe: Pipe, msgs: list[Msg], undecoded: bytes) -> None:
    """The end of a direct read (``_lock`` held): ``msgs`` into the pipe as far as it has room, then
    ``undecoded`` (the bytes after them, from a message boundary) to the decoder; the engine handles
    what that produces in order after the messages the pipe refused."""
    rest: list[Msg] = []
    if msgs:
        written = pipe.write_batch(msgs)
        if written and not pipe.peer.in_active:  # the socket's reading thread marks it awake
            pipe.flush()
        if written < len(msgs):
            rest = msgs[written:]
    if undecoded:
        engine.inline_decode(undecoded, rest)
    elif rest:
        engine.keep_backlog(rest)


def _read_large(engine: StreamEngine, pipe: Pipe, buffer: bytearray, limit: int) -> None:
    """``read_direct`` while the stream carries large single-frame messages (``engine.large_frames``):
    each frame's header alone, then its body with one ``recv`` of its size, which returns the message's
    bytes object itself: no copy in this process, where reading into the buffer costs three (the read's
    bytes, the decoder's body, the message). Up to LARGE_BATCH messages; a read that finds anything else
    leaves its bytes to the decoder and the next reads to the buffer."""
    sock = engine.sock
    msgs: list[Msg] = []
    undecoded = b""
    failed = ""
    while len(msgs) < LARGE_BATCH:
        try:
            n = sock.recv_into(buffer, 9)
        except (BlockingIOError, InterruptedError):
            break
        except OSError as exc:
            failed = str(exc)
            break
        if not n:
            failed = "peer closed the connection"
            break
        undecoded = bytes(buffer[:n])
        size = _unpack_size(undecoded, 1)[0] if n == 9 and undecoded[0] == 2 else 0
        if size < LARGE or size > LARGE_MAX or size > limit:
            engine.large_frames = False
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
        if engine._heartbeat is not None:
            engine._heartbeat.last_recv = _monotonic()
        engine._last_inline = 0.0
        _deliver(engine, pipe, msgs, undecoded)
    if failed:
        engine.inline_failed(failed)


def send_direct(engine: StreamEngine, impl: SocketImpl, pipe: Pipe, msg: Msg) -> bool:
    """Write ``msg`` (whole) to ``engine``'s OS socket in the socket's thread; False: nothing was done,
    use the pipe. ``pipe`` is the socket's end of the engine's pipe."""
    if len(msg) == 1:
        if len(msg[0]) >= ZERO_COPY:
            return False
    else:
        for frame in msg:
            if len(frame) >= ZERO_COPY:
                return False
    # StreamEngine.claim_inline, in line (this runs once per message sent).
    now = _monotonic()
    last, engine._last_inline = engine._last_inline, now
    lock = engine._lock
    if now - last < INLINE_GAP or not lock.acquire(False):
        return False
    try:
        if (not engine.alive or engine._out or engine._mask & WRITE or pipe.peer.inbound
                or pipe.terminated or pipe.peer_terminated):
            return False
        frames = impl.xsend_direct(msg, pipe)
        if frames is None:
            return False
        # encode_messages' result for its two commonest cases, in line: one short frame alone, and
        # the REQ/REP envelope around one.
        count = len(frames)
        if count == 1 and len(frames[0]) < 256 and type(frames[0]) is bytes:
            wire = _SHORT_LAST[len(frames[0])] + frames[0]
        elif count == 2 and not frames[0] and len(frames[1]) < 256 and type(frames[1]) is bytes:
            wire = _ENVELOPE_HEADERS[len(frames[1])] + frames[1]
        else:
            wire = encode_messages((frames,))
        try:
            n = engine.sock.send(wire)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            engine.inline_failed(str(exc))
            return True
        if n < len(wire):
            engine.write_later(memoryview(wire)[n:])
        return True
    finally:
        lock.release()
