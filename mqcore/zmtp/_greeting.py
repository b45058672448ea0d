"""The 64-byte ZMTP 3.x greeting: building ours and reading the peer's.

Layout (RFC 23/37): 0xFF, 8 padding bytes, 0x7F, major, minor, 20-byte NUL-padded mechanism name,
as-server byte, 31 filler bytes. Padding and filler carry no meaning and are never inspected.

Invariants of GreetingReader: it holds at most 64 bytes; every significant byte is checked as soon
as it arrives (first byte, then the 0x7F at offset 9, then the major version at offset 10), so a
ZMTP 1.0/2.0 peer, which never sends 64 bytes, is refused without waiting for more.
"""

from __future__ import annotations

from dataclasses import dataclass

GREETING_SIZE = 64
OUR_VERSION = (3, 1)
MECHANISM_SIZE = 20

_MAJOR_AT = 10
_MINOR_AT = 11
_MECHANISM_AT = 12
_AS_SERVER_AT = 32


class GreetingError(Exception):
    """The peer's greeting is not a ZMTP 3.x greeting; the message says why."""


@dataclass(frozen=True, slots=True)
class PeerGreeting:
    """What the peer announced: its version, its 20-byte mechanism field and its as-server flag."""

    version: tuple[int, int]
    mechanism: bytes
    as_server: bool


def pad_mechanism(name: bytes) -> bytes:
    """The 20-byte mechanism field for ``name`` (e.g. b"NULL"); ValueError if it cannot fit."""
    if not name or len(name) > MECHANISM_SIZE or b"\0" in name:
        raise ValueError(f"a mechanism name is 1 to 20 non-NUL bytes, not {name!r}")
    return name.ljust(MECHANISM_SIZE, b"\0")


def build_greeting(mechanism: bytes, as_server: bool) -> bytes:
    """Our full greeting: ZMTP 3.1, zero padding and filler."""
    return b"".join(
        (
            b"\xff",
            bytes(8),
            b"\x7f",
            bytes(OUR_VERSION),
            pad_mechanism(mechanism),
            b"\x01" if as_server else b"\x00",
            bytes(31),
        )
    )


def mechanism_label(field: bytes) -> str:
    """A printable form of a 20-byte mechanism field, for error messages."""
    return field.rstrip(b"\0").decode("ascii", "backslashreplace") or "<empty>"


class GreetingReader:
    """Collects the peer's greeting from however many reads it takes."""

    __slots__ = ("_buf", "greeting")

    def __init__(self) -> None:
        self._buf = bytearray()
        self.greeting: PeerGreeting | None = None

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> int:
        """Take greeting bytes from the start of ``data``; return how many were used.

        Sets ``greeting`` once all 64 bytes are in. Raises GreetingError as soon as a significant
        byte proves the peer is not speaking ZMTP 3.x.
        """
        buf = self._buf
        had = len(buf)
        used = min(GREETING_SIZE - had, len(data))
        buf += data[:used]
        have = len(buf)
        if had < 1 <= have and buf[0] != 0xFF:
            raise GreetingError(f"not a ZMTP 3 greeting: first byte is 0x{buf[0]:02x}, not 0xff")
        if had < 10 <= have and buf[9] != 0x7F:
            raise GreetingError(
                f"not a ZMTP 3 greeting: byte 9 is 0x{buf[9]:02x}, not 0x7f (ZMTP 1.0 peer or garbage)"
            )
        if had <= _MAJOR_AT < have and buf[_MAJOR_AT] < 3:
            raise GreetingError(
                f"peer speaks ZMTP major version {buf[_MAJOR_AT]}; ZMTP 3.0 or later is required"
            )
        if have == GREETING_SIZE:
            self.greeting = PeerGreeting(
                version=(buf[_MAJOR_AT], buf[_MINOR_AT]),
                mechanism=bytes(buf[_MECHANISM_AT : _MECHANISM_AT + MECHANISM_SIZE]),
                as_server=buf[_AS_SERVER_AT] != 0,
            )
            self._buf = bytearray()
        return used
