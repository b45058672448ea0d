"""Events a ZmtpConnection reports for the bytes it received.

Every event is an immutable value (frozen dataclass with slots). They are produced in wire order
and carry only ``bytes``, never a view into the connection's buffers, so a caller may keep them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Event",
    "HandshakeDone",
    "Message",
    "Subscribe",
    "Cancel",
    "Ping",
    "Pong",
    "PeerError",
    "UnknownCommand",
    "ProtocolViolation",
    "AuthFailed",
]


@dataclass(frozen=True, slots=True)
class HandshakeDone:
    """The security handshake succeeded and the peer's metadata was accepted.

    ``metadata`` holds every property of the peer's READY (or the mechanism's equivalent), keyed by
    the name as the peer spelled it (names are case-insensitive on the wire). ``peer_identity`` is
    ``b""`` when the peer sent none.
    """

    peer_socket_type: str
    peer_identity: bytes
    metadata: dict[str, bytes]
    peer_version: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Message:
    """One complete message: all of its frames, in order (at least one frame)."""

    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class Subscribe:
    """The peer subscribes to ``topic`` (a SUBSCRIBE command, or a ZMTP 3.0 ``0x01`` message)."""

    topic: bytes


@dataclass(frozen=True, slots=True)
class Cancel:
    """The peer cancels one subscription to ``topic`` (CANCEL, or a ZMTP 3.0 ``0x00`` message)."""

    topic: bytes


@dataclass(frozen=True, slots=True)
class Ping:
    """A heartbeat request: reply with ``encode_pong(context)``.

    ``ttl_ds`` is the peer's time-to-live hint in tenths of a second (0 = none). ``context`` is at
    most 16 bytes (longer contexts are cut to 16, as libzmq does).
    """

    ttl_ds: int
    context: bytes


@dataclass(frozen=True, slots=True)
class Pong:
    """A heartbeat reply echoing the context of one of our PINGs."""

    context: bytes


@dataclass(frozen=True, slots=True)
class PeerError:
    """The peer sent an ERROR command. This is fatal: the connection is dead afterwards."""

    reason: bytes


@dataclass(frozen=True, slots=True)
class UnknownCommand:
    """A well-formed command this codec does not interpret (``name`` without its length byte)."""

    name: bytes
    body: bytes


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The peer broke the protocol (or was refused); the connection is dead afterwards.

    ``reason`` is one readable sentence for logs and monitor events.
    """

    reason: str


@dataclass(frozen=True, slots=True)
class AuthFailed:
    """The ZAP handler refused the peer (status 300, 400 or 500); the connection is dead afterwards.

    ``status_code`` is the ZAP status (300 = temporary failure, 400 = bad credentials, 500 =
    handler error); ``status_text`` is the handler's explanation, possibly empty.
    """

    status_code: int
    status_text: str


Event = (
    HandshakeDone
    | Message
    | Subscribe
    | Cancel
    | Ping
    | Pong
    | PeerError
    | UnknownCommand
    | ProtocolViolation
    | AuthFailed
)
