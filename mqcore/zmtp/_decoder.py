"""Frame decoder: one pass over each read, frames out as ``bytes``.

Invariants between calls to ``feed``:
- At most one partial frame is held: either a partial header (``_tail``, under 9 bytes) or a
  parsed header plus the body bytes received so far (``_chunks``, ``_have`` bytes, ``_need``
  still missing), never both. A frame's size is checked against ``limit`` from its header, before
  any of its body is kept, so ``_have`` < size <= limit.
- ``_frames`` holds the complete frames of a multipart message whose last frame has not come.
- Each read is scanned with an offset; bodies are sliced out of it (one copy per frame, none of
  the read). Once messages flow, whole messages are split by ``scan_messages`` (the one frame
  scanner, shared with the engine's direct read); the rest goes frame by frame here. Partial
  bodies are collected as chunks and joined once, so large frames arriving in many reads cost
  linear time. A partial body of ``LARGE_BODY`` bytes or more goes into one ``_body`` buffer
  instead (allocated at its size up to ``SPARE_LIMIT``, then grown as it fills), which the reader
  may fill in place (``body_buffer`` / ``body_received``, e.g. with ``socket.recv_into``): no chunk
  list and no join for large frames.
- Once ``stopped`` is set, nothing more is decoded and the buffers are empty.
- A message frame that is not allowed is a violation, unless ``sealed_frame`` is set: then its body
  goes there (wrapped traffic such as CURVE's MESSAGE). The scanner never sees such frames,
  because it runs only while messages are allowed.

Owned by one ZmtpConnection, which it calls back for commands and violations.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import cast

from mqcore.zmtp._events import Cancel, Event, Message, Subscribe
from mqcore.zmtp._frames import (
    COMMAND,
    LONG,
    LONG_HEADER,
    MAX_FRAME_SIZE,
    MORE,
    RESERVED,
    SHORT_HEADER,
    frame_header,
    scan_messages,
)

LARGE_BODY = 32768
# A large body's buffer is allocated at its size up to this many bytes when its header arrives (and
# kept for the next body); a larger body's buffer starts at this size and doubles as it fills, so that
# memory follows what arrived, never just what a header announced (up to 2**63-1 bytes without
# MAXMSGSIZE).
SPARE_LIMIT = 16 << 20
_unpack_size = struct.Struct(">Q").unpack_from
_new = object.__new__
# Writing the slot directly skips the frozen dataclass's __init__ (object.__setattr__ per field),
# which costs more than the rest of a small frame's decoding. The result equals Message(frames).
_set_frames = cast(Callable[[Message, list[bytes]], None], vars(Message)["frames"].__set__)


class FrameDecoder:
    """Splits a byte stream into frames; message frames become Message events in ``events``."""

    __slots__ = (
        "events",
        "limit",
        "messages_allowed",
        "message_refusal",
        "subscription_messages",
        "sealed_frame",
        "stopped",
        "_on_command",
        "_on_violation",
        "_tail",
        "_flags",
        "_need",
        "_have",
        "_chunks",
        "_body",
        "_size",
        "_spare",
        "_frames",
    )

    def __init__(
        self,
        events: list[Event],
        on_command: Callable[[bytes], None],
        on_violation: Callable[[str], None],
        maxmsgsize: int,
    ) -> None:
        self.events = events
        # -1 means unlimited; either way no frame may exceed the wire format's 2**63-1.
        self.limit = min(maxmsgsize, MAX_FRAME_SIZE) if maxmsgsize >= 0 else MAX_FRAME_SIZE
        self.messages_allowed = False
        self.message_refusal = "message frame before the handshake completed"
        self.subscription_messages = False
        # When set, message frames that are not allowed go here instead (e.g. CURVE MESSAGE bodies).
        self.sealed_frame: Callable[[bytes], None] | None = None
        self.stopped = False
        self._on_command = on_command
        self._on_violation = on_violation
        self._tail = b""
        self._flags = 0
        self._need = 0
        self._have = 0
        self._chunks: list[bytes] = []
        self._body: bytearray | None = None
        self._size = 0  # the large body's size (``_body`` may be longer: it is reused)
        # The last large body's buffer, reused: fresh large allocations cost page faults (mmap).
        self._spare: bytearray | None = None
        self._frames: list[bytes] = []

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the partial frame held: header bytes, or body bytes received so far."""
        return len(self._tail) + self._have

    def body_buffer(self) -> memoryview | None:
        """The missing part of a large partial frame body, to be filled in place (then call
        ``body_received``); None when no large body is partial."""
        body = self._body
        if body is None or self.stopped:
            return None
        have, size = self._have, self._size
        if have == len(body) < size:  # filled as far as allocated
            body = self._grow(have + 1)
        return memoryview(body)[have : min(len(body), size)]

    def _grow(self, least: int) -> bytearray:
        """A larger buffer for the partial large body (at least ``least`` bytes, twice the old size,
        never past the body's size), holding what came so far. A new one, not a resize: a reader may
        still hold a view of the old one."""
        body = self._body
        assert body is not None
        grown = bytearray(min(max(least, 2 * len(body)), self._size))
        grown[: self._have] = memoryview(body)[: self._have]
        self._body = grown
        return grown

    def body_received(self, n: int) -> None:
        """``n`` bytes were written at the start of ``body_buffer()``."""
        if self._body is None or n <= 0:
            return
        self._have += n
        self._need -= n
        if not self._need:
            self._finish_body()

    def _finish_body(self) -> None:
        body, self._body = self._body, None
        self._have = 0
        assert body is not None
        if len(body) <= SPARE_LIMIT:
            self._spare = body
        self.deliver(self._flags, bytes(memoryview(body)[: self._size]))

    def held_bytes(self) -> bytes | None:
        """The wire bytes of what is held between reads: the frames of an unfinished multipart message
        and a partial frame, ``b""`` if none; None while a large body is filled in place. For a reader
        that scans from a message boundary itself (the engine's direct read): it puts these bytes before its
        next read and then calls ``drop_held``."""
        if self._body is not None:
            return None
        if not self._frames and not self._need:
            return self._tail
        parts = [frame_header(MORE, len(frame)) + frame for frame in self._frames]
        if self._need:
            parts.append(frame_header(self._flags & ~LONG, self._have + self._need))
            parts.extend(self._chunks)
        else:
            parts.append(self._tail)
        return b"".join(parts)

    def drop_held(self) -> None:
        """Forget what ``held_bytes`` returned (its reader decodes it now)."""
        self._tail = b""
        self._chunks = []
        self._frames = []
        self._need = self._have = 0

    def stop(self) -> None:
        """Decode nothing more and drop every buffer."""
        self.stopped = True
        self._tail = b""
        self._body = self._spare = None
        self._chunks = []
        self._frames = []
        self._need = self._have = 0

    def feed(self, data: bytes) -> None:
        """Decode all complete frames of ``data`` (following what earlier calls left)."""
        if self.stopped:
            return
        pos = 0
        if self._need:
            need = self._need
            body = self._body
            if body is not None:
                have = self._have
                take = min(need, len(data))
                if have + take > len(body):
                    body = self._grow(have + take)
                body[have : have + take] = memoryview(data)[:take]
                self._have = have + take
                self._need = need - take
                if take < need:
                    return
                self._finish_body()
                if self.stopped:
                    return
                self._scan(data, take)
                return
            if len(data) < need:
                if data:
                    self._chunks.append(data)
                    self._have += len(data)
                    self._need = need - len(data)
                return
            chunks = self._chunks
            chunks.append(data[:need])
            self._chunks = []
            self._need = self._have = 0
            self.deliver(self._flags, b"".join(chunks))
            if self.stopped:
                return
            pos = need
        elif self._tail:
            data = self._tail + data
            self._tail = b""
        self._scan(data, pos)

    def _scan(self, buf: bytes, pos: int) -> None:
        end = len(buf)
        limit = self.limit
        emit = self.events.append
        fast = self.messages_allowed and not self.subscription_messages
        new, set_frames, message = _new, _set_frames, Message
        while end - pos >= SHORT_HEADER:
            if fast and not self._frames:
                # Hot path, once traffic flows: whole messages, split by the one frame scanner.
                msgs, pos = scan_messages(buf, pos, limit)
                for frames in msgs:
                    event = new(message)
                    set_frames(event, frames)
                    emit(event)
                if end - pos < SHORT_HEADER:
                    break
            flags = buf[pos]
            # General path: commands, handshake, limits, partial bodies.
            if flags & LONG:
                if end - pos < LONG_HEADER:
                    break
                size = _unpack_size(buf, pos + 1)[0]
                start = pos + LONG_HEADER
            else:
                size = buf[pos + 1]
                start = pos + SHORT_HEADER
            if flags & RESERVED:
                self.fail(f"reserved bits set in frame flags 0x{flags:02x}")
                return
            if size > limit:
                self._refuse_size(size)
                return
            stop = start + size
            if stop > end:
                # The body is incomplete: keep what came and wait for the rest.
                self._flags = flags
                self._need = stop - end
                if size >= LARGE_BODY:
                    large = self._spare
                    first = min(size, SPARE_LIMIT)
                    if large is None or len(large) < first:
                        large = bytearray(first)
                    self._spare = None
                    self._size = size
                    if end - start > len(large):
                        large = bytearray(end - start)
                    large[: end - start] = memoryview(buf)[start:end]
                    self._body = large
                    self._have = end - start
                elif start < end:
                    self._chunks = [buf[start:]]
                    self._have = end - start
                pos = end
                break
            body = buf[start:stop]
            pos = stop
            self.deliver(flags, body)
            if self.stopped:
                return
            fast = self.messages_allowed and not self.subscription_messages
        if pos < end:
            self._tail = buf[pos:]

    def deliver(self, flags: int, body: bytes) -> None:
        """Handle one complete frame (the general path: commands, handshake, subscriptions)."""
        if flags & RESERVED:
            self.fail(f"reserved bits set in frame flags 0x{flags:02x}")
        elif flags & COMMAND:
            if flags & MORE:
                self.fail("command frame with the MORE flag set")
            else:
                self._on_command(body)
        elif not self.messages_allowed:
            if self.sealed_frame is None:
                self.fail(self.message_refusal)
            else:
                self.sealed_frame(body)
        else:
            self.assemble(flags, body)

    def assemble(self, flags: int, body: bytes) -> None:
        """Add one message frame; emit the message when its last frame arrives."""
        frames = self._frames
        frames.append(body)
        if flags & MORE:
            return
        self._frames = []
        if self.subscription_messages and len(frames) == 1 and body and body[0] <= 1:
            # ZMTP 3.0 form of a subscription: 0x01 (subscribe) or 0x00 (cancel) + topic.
            self.events.append(Subscribe(body[1:]) if body[0] == 1 else Cancel(body[1:]))
        else:
            self.events.append(Message(frames))

    def fail(self, reason: str) -> None:
        self.stop()
        self._on_violation(reason)

    def _refuse_size(self, size: int) -> None:
        if size > MAX_FRAME_SIZE:
            self.fail(f"frame size {size} exceeds the protocol's 2**63-1")
        else:
            self.fail(f"frame of {size} bytes exceeds MAXMSGSIZE ({self.limit})")
