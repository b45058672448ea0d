"""Frame encoding (ZMTP 3.x framing, RFC 23/37), stateless.

A frame is a flags byte, a size (1 byte, or 8 bytes big-endian when LONG is set) and the body.
Short form is used for bodies of 0-255 bytes, long form above. Encoders build one ``bytes`` with
a single ``b"".join`` over precomputed two-byte headers, so a batch of small frames costs one
list append per header and per body.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

MORE = 0x01
LONG = 0x02
COMMAND = 0x04
RESERVED = 0xF8
MAX_FRAME_SIZE = (1 << 63) - 1  # the 8-byte size field is a signed 63-bit quantity on the wire

BytesLike = bytes | bytearray | memoryview

_LONG_SIZE = struct.Struct(">Q")
_long_header = struct.Struct(">BQ").pack  # flags byte + 8-byte size in one call (hot in encode_messages)

# Headers of short frames, indexed by body size: message frames (last / with MORE) and commands.
_SHORT_LAST = [bytes((0, n)) for n in range(256)]
_SHORT_MORE = [bytes((MORE, n)) for n in range(256)]
_SHORT_COMMAND = [bytes((COMMAND, n)) for n in range(256)]


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
    """One multipart message: MORE on every frame but the last. ValueError if ``frames`` is empty."""
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
