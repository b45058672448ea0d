"""Sans-IO ZMTP 3.1 codec (RFC 37, speaking 3.0 to 3.0 peers): bytes in, events out.

No sockets, threads or event loops here: an engine feeds ``ZmtpConnection.receive_data`` with what
it read, acts on ``next_events()``, and writes what ``start``, ``data_to_send`` and the
``encode_*`` methods return. Mechanisms plug in through ``Mechanism``; NULL is built in.
"""

from mqcore.zmtp._connection import ZmtpConnection, ZmtpStateError
from mqcore.zmtp._events import (
    Cancel,
    Event,
    HandshakeDone,
    Message,
    PeerError,
    Ping,
    Pong,
    ProtocolViolation,
    Subscribe,
    UnknownCommand,
)
from mqcore.zmtp._frames import COMMAND, LONG, MORE
from mqcore.zmtp._greeting import GREETING_SIZE, OUR_VERSION
from mqcore.zmtp._mechanism import HandshakeInfo, Mechanism, MechanismError, NullMechanism
from mqcore.zmtp._socket_types import SOCKET_TYPES, compatible

__all__ = [
    "ZmtpConnection",
    "ZmtpStateError",
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
    "Mechanism",
    "MechanismError",
    "HandshakeInfo",
    "NullMechanism",
    "SOCKET_TYPES",
    "compatible",
    "GREETING_SIZE",
    "OUR_VERSION",
    "MORE",
    "LONG",
    "COMMAND",
]
