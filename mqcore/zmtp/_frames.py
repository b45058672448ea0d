"""ZMTP 3.x framing (RFC 23/37), stateless: encoding, and the one scan of frames into messages.

A frame is a flags byte, a size (1 byte, or 8 bytes big-endian when LONG is set) and the body.
Short form is used for bodies of 0-255 bytes, long form above. Encoders build one ``bytes`` with
a single ``b"".join`` over precomputed two-byte headers, so a batch of small frames costs one
list append per header and per body. ``scan_messages`` is the reading side of the same layout for
plain message frames: the decoder's fast path and the engine's direct read both split their bytes
with it, and leave whatever it stops at (commands, partial frames, limits) to the decoder.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

MORE = 0x01
LONG = 0x02
COMMAND = 0x04
RESERVED = 0xF8
MAX_FRAME_SIZE = (1 << 63) - 1  # the 8-byte size field is a signed 63-bit quantity on the wire
SHORT_HEADER = 2  # flags byte + 1-byte size
LONG_HEADER = 9  # flags byte + 8-byte size
SHORT_MAX = 255  # the largest body of a short frame
ENVELOPE_HEADER = 2 * SHORT_HEADER  # an empty short frame with MORE, then a short frame's header

BytesLike = bytes | bytearray | memoryview

_LONG_SIZE = struct.Struct(">Q")
_unpack_size = _LONG_SIZE.unpack_from
_long_header = struct.Struct(">BQ").pack  # flags byte + 8-byte size in one call (hot in encode_messages)

# Headers of short frames, indexed by body size: message frames (last / with MORE) and commands.
_SHORT_LAST = [bytes((0, n)) for n in range(256)]
_SHORT_MORE = [bytes((MORE, n)) for n in range(256)]
_SHORT_COMMAND = [bytes((COMMAND, n)) for n in range(256)]
# An empty frame with MORE, then the header of a last short frame of each size: a REQ/REP envelope.
_ENVELOPE = [_SHORT_MORE[0] + header for header in _SHORT_LAST]


def frame_header(flags: int, size: int) -> bytes:
    """The flags byte and size field for a body of ``size`` bytes (LONG is added when needed)."""
    if size < 256:
        return bytes((flags, size))
    return bytes((flags | LONG,)) + _LONG_SIZE.pack(size)


def _byte_view(frame: BytesLike) -> BytesLike:
    """``frame`` unchanged if its len() counts bytes, else a flat byte view of it."""
    if isinstance(frame, memoryview) and (frame.itemsize != 1 or frame.ndim != 1):
        return frame.cast("B")
    return frame


def encode_message(frames: Sequence[BytesLike]) -> bytes:
    """One multipart message: MORE on every frame but the last. ValueError if ``frames`` is empty.
    Its two commonest forms (a short frame alone, and after an empty delimiter) take one concatenation."""
    count = len(frames)
    if count == 1:
        frame = frames[0]
        if type(frame) is bytes and len(frame) <= SHORT_MAX:
            return _SHORT_LAST[len(frame)] + frame
    elif count == 2 and not frames[0]:
        frame = frames[1]
        if type(frame) is bytes and len(frame) <= SHORT_MAX:
            return _ENVELOPE[len(frame)] + frame
    return encode_messages((frames,))


def encode_messages(messages: Iterable[Sequence[BytesLike]]) -> bytes:
    """Many messages into one buffer, in order. ValueError if any message has no frame."""
    parts: list[BytesLike] = []
    append = parts.append
    short_last = _SHORT_LAST
    for message in messages:
        count = len(message)
        if count == 1:
            frame = message[0]
            if type(frame) is not bytes:
                frame = _byte_view(frame)
            size = len(frame)
            append(short_last[size] if size < 256 else _long_header(LONG, size))
            append(frame)
        elif count:
            last = count - 1
            for index, frame in enumerate(message):
                if type(frame) is not bytes:
                    frame = _byte_view(frame)
                size = len(frame)
                if size < 256:
                    append(_SHORT_MORE[size] if index < last else short_last[size])
                else:
                    append(_long_header(LONG | MORE if index < last else LONG, size))
                append(frame)
        else:
            raise ValueError("a message has at least one frame")
    return b"".join(parts)


def encode_command(name: bytes, data: BytesLike = b"") -> bytes:
    """One command frame: name length byte, name (1-255 bytes), data."""
    if not 0 < len(name) < 256:
        raise ValueError(f"a command name is 1 to 255 bytes, not {len(name)}")
    data = _byte_view(data)
    size = 1 + len(name) + len(data)
    header = _SHORT_COMMAND[size] if size < 256 else frame_header(COMMAND, size)
    return b"".join((header, bytes((len(name),)), name, data))


def scan_messages(buf: bytes, pos: int, limit: int) -> tuple[list[list[bytes]], int]:
    """The complete messages of ``buf`` from ``pos`` (the start of a message), each the list of its
    frames' bodies, and the offset where the scan stopped: the end of ``buf``, or the start of the
    first thing that is not a whole message of message frames of at most ``limit`` bytes each — a
    message not complete in ``buf``, a command, a frame with reserved bits, a frame over ``limit``.
    A decoder goes on from there frame by frame; the scan judges nothing, it only stops."""
    end = len(buf)
    msgs: list[list[bytes]] = []
    append = msgs.append
    short = limit >= SHORT_MAX  # then no short frame is over the limit
    while end - pos >= SHORT_HEADER:
        flags = buf[pos]
        if not flags and short:
            # The commonest message, in line: one short frame.
            stop = pos + SHORT_HEADER + buf[pos + 1]
            if stop > end:
                break
            append([buf[pos + SHORT_HEADER:stop]])
            pos = stop
            continue
        if flags == MORE and short and not buf[pos + 1] and end - pos > 3 and not buf[pos + 2]:
            # The REQ/REP envelope: an empty delimiter, then one short frame.
            start = pos + ENVELOPE_HEADER
            stop = start + buf[pos + 3]
            if stop > end:
                break
            append([b"", buf[start:stop]])
            pos = stop
            continue
        if flags == LONG and end - pos >= LONG_HEADER:
            # One long frame, in line too.
            size = _unpack_size(buf, pos + 1)[0]
            stop = pos + LONG_HEADER + size
            if stop > end or size > limit:
                break
            append([buf[pos + LONG_HEADER:stop]])
            pos = stop
            continue
        # Any other message, frame by frame; ``pos`` moves only past a complete one.
        frames: list[bytes] = []
        at = pos
        while True:
            if flags & ~(MORE | LONG):
                break  # a command or reserved bits
            if not flags & LONG:
                start = at + SHORT_HEADER
                size = buf[at + 1]
            elif end - at >= LONG_HEADER:
                start = at + LONG_HEADER
                size = _unpack_size(buf, at + 1)[0]
            else:
                break
            stop = start + size
            if stop > end or size > limit:
                break
            frames.append(buf[start:stop])
            at = stop
            if not flags & MORE:
                append(frames)
                pos = at
                break
            if end - at < SHORT_HEADER:
                break
            flags = buf[at]
        if pos != at or not frames:  # incomplete, or not a message frame
            break
    return msgs, pos


def lone_message(buf: bytes, limit: int) -> list[bytes] | None:
    """The frames of ``buf`` if it is exactly one message of the two commonest forms — one short frame,
    or an empty delimiter then one short frame (REQ/REP's envelope) — and nothing else, as a round
    trip's read is; else None (then ``scan_messages`` splits it). What ``scan_messages`` would return
    as its only message, without its loop's setup, which costs a lone message twice the check."""
    end = len(buf)
    if end < SHORT_HEADER or limit < SHORT_MAX:
        return None
    flags = buf[0]
    if not flags:
        if end == SHORT_HEADER + buf[1]:
            return [buf[SHORT_HEADER:]]
    elif (flags == MORE and end >= ENVELOPE_HEADER and end == ENVELOPE_HEADER + buf[3]
            and not buf[1] and not buf[2]):
        return [b"", buf[ENVELOPE_HEADER:]]
    return None


def single_long_frame(buf: bytes, pos: int = 0) -> int:
    """The body size announced by the header at ``buf[pos:]`` if it is that of a message of one long
    frame (flags exactly LONG); -1 if it is anything else or ``buf`` holds less than a long header."""
    if len(buf) - pos < LONG_HEADER or buf[pos] != LONG:
        return -1
    size: int = _unpack_size(buf, pos + 1)[0]
    return size
