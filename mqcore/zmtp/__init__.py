"""Sans-IO ZMTP 3.1 codec (RFC 37, speaking 3.0 to 3.0 peers): bytes in, events out.

No sockets, threads or event loops here: an engine feeds ``ZmtpConnection.receive_data`` with what
it read, acts on ``next_events()``, and writes what ``start``, ``data_to_send`` and the
``encode_*`` methods return. The framing is public too, for an engine that frames plain messages
itself: ``scan_messages`` splits bytes into whole messages (the decoder's own fast path),
``lone_message`` takes a read that is one common message alone (a round trip's),
``encode_message(s)`` and ``frame_header`` write them. Mechanisms plug in through ``Mechanism``: NULL (the default),
``PlainMechanism`` and ``CurveMechanism``. Server mechanisms check clients through ZAP, which the
engine relays: see ``ZmtpConnection.zap_request``/``zap_reply`` and the ``_connection`` module
docstring for the hand-over. CURVE keys are 32 raw bytes or 40 Z85 characters (``curve_keypair``).
"""

from mqcore.zmtp._connection import ZmtpConnection, ZmtpStateError
from mqcore.zmtp._curve import CurveMechanism
from mqcore.zmtp._decoder import FrameDecoder
from mqcore.zmtp._events import (
    AuthFailed,
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
from mqcore.zmtp._frames import (
    COMMAND,
    LONG,
    LONG_HEADER,
    MORE,
    encode_message,
    encode_messages,
    frame_header,
    lone_message,
    scan_messages,
    single_long_frame,
)
from mqcore.zmtp._greeting import GREETING_SIZE, OUR_VERSION
from mqcore.zmtp._keys import curve_keypair, curve_public
from mqcore.zmtp._mechanism import HandshakeInfo, Mechanism, MechanismError, NullMechanism
from mqcore.zmtp._plain import PlainMechanism
from mqcore.zmtp._socket_types import SOCKET_TYPES, compatible
from mqcore.zmtp._z85 import z85_decode, z85_encode
from mqcore.zmtp._zap import ZAP_ENDPOINT

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
    "AuthFailed",
    "Mechanism",
    "MechanismError",
    "HandshakeInfo",
    "NullMechanism",
    "PlainMechanism",
    "CurveMechanism",
    "curve_keypair",
    "curve_public",
    "z85_encode",
    "z85_decode",
    "ZAP_ENDPOINT",
    "SOCKET_TYPES",
    "compatible",
    "GREETING_SIZE",
    "OUR_VERSION",
    "MORE",
    "LONG",
    "COMMAND",
    "LONG_HEADER",
    "FrameDecoder",
    "encode_message",
    "encode_messages",
    "frame_header",
    "lone_message",
    "scan_messages",
    "single_long_frame",
]
