"""Command bodies (stateless): names, metadata properties, PING/PONG and ERROR payloads.

A command frame's body is a name-length byte, the name, then command data (RFC 23/37). Parsers
raise CommandError on malformed input; the connection turns that into a ProtocolViolation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

READY = b"READY"
ERROR = b"ERROR"
SUBSCRIBE = b"SUBSCRIBE"
CANCEL = b"CANCEL"
PING = b"PING"
PONG = b"PONG"

# libzmq's PLAIN writes its ERROR as "\x05ERROR" in C, where the hex escape swallows the "E": the
# body starts "^RROR" (0x5E) with no length byte. libzmq's PLAIN client only recognises that form.
LIBZMQ_PLAIN_ERROR = b"^RROR"

MAX_PING_CONTEXT = 16
MAX_PING_TTL = 0xFFFF
MAX_ERROR_REASON = 255
MAX_PROPERTY_VALUE = (1 << 31) - 1


class CommandError(Exception):
    """A command body is malformed; the message says how."""


def split_command(body: bytes) -> tuple[bytes, bytes]:
    """(name, data) of a command frame body."""
    if not body or body[0] == 0:
        raise CommandError("command frame with an empty name")
    end = 1 + body[0]
    if end > len(body):
        raise CommandError("command name runs past the end of its frame")
    return body[1:end], body[end:]


def encode_properties(properties: Iterable[tuple[str, bytes]]) -> bytes:
    """Metadata as sent in READY: 1-byte name length, name, 4-byte big-endian value length, value."""
    parts: list[bytes] = []
    for name, value in properties:
        raw = name.encode("ascii")
        if not 0 < len(raw) < 256:
            raise ValueError(f"a property name is 1 to 255 characters, not {name!r}")
        if len(value) > MAX_PROPERTY_VALUE:
            raise ValueError(f"the value of property {name!r} is longer than 2**31-1 bytes")
        parts += (bytes((len(raw),)), raw, len(value).to_bytes(4, "big"), bytes(value))
    return b"".join(parts)


def parse_properties(data: bytes) -> dict[str, bytes]:
    """All properties of a metadata block, keyed by name as sent (a later duplicate wins)."""
    properties: dict[str, bytes] = {}
    pos, end = 0, len(data)
    while pos < end:
        name_size = data[pos]
        if name_size == 0:
            raise CommandError("metadata property with an empty name")
        name_end = pos + 1 + name_size
        if name_end + 4 > end:
            raise CommandError("metadata property truncated in its name or value size")
        value_size = int.from_bytes(data[name_end : name_end + 4], "big")
        value_end = name_end + 4 + value_size
        if value_size > MAX_PROPERTY_VALUE or value_end > end:
            raise CommandError("metadata property value runs past the end of its command")
        properties[data[pos + 1 : name_end].decode("latin-1")] = data[name_end + 4 : value_end]
        pos = value_end
    return properties


def find_property(properties: Mapping[str, bytes], name: str) -> bytes | None:
    """The value of property ``name``, matched case-insensitively (RFC 37), or None."""
    wanted = name.lower()
    found = None
    for key, value in properties.items():
        if key.lower() == wanted:
            found = value
    return found


def encode_ping_data(ttl_ds: int, context: bytes) -> bytes:
    if not 0 <= ttl_ds <= MAX_PING_TTL:
        raise ValueError(f"a PING TTL is 0 to {MAX_PING_TTL} deciseconds, not {ttl_ds}")
    check_ping_context(context)
    return ttl_ds.to_bytes(2, "big") + bytes(context)


def check_ping_context(context: bytes) -> None:
    if len(context) > MAX_PING_CONTEXT:
        raise ValueError(f"a PING/PONG context is at most 16 bytes, not {len(context)}")


def parse_ping_data(data: bytes) -> tuple[int, bytes]:
    """(ttl_ds, context); a context longer than 16 bytes is cut to 16, as libzmq does."""
    if len(data) < 2:
        raise CommandError("PING command shorter than its 2-byte TTL")
    return int.from_bytes(data[:2], "big"), data[2 : 2 + MAX_PING_CONTEXT]


def encode_error_data(reason: bytes) -> bytes:
    if len(reason) > MAX_ERROR_REASON:
        raise ValueError(f"an ERROR reason is at most 255 bytes, not {len(reason)}")
    return bytes((len(reason),)) + bytes(reason)


def parse_error_data(data: bytes) -> bytes:
    """The reason of an ERROR command; a body without a valid length byte is taken whole."""
    if data and data[0] == len(data) - 1:
        return data[1:]
    return data
