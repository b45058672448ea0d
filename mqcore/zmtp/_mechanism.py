"""Security mechanisms: the pluggable handshake between greeting and traffic.

A Mechanism instance serves exactly one connection. The connection calls ``start`` once the peer's
greeting is accepted, feeds it every handshake command (except ERROR, which the connection handles
for every mechanism), and drains ``take_commands`` into the bytes it sends. When ``ready`` turns
True, ``peer_metadata`` holds the peer's properties and the connection checks the socket types.

Invariants: ``ready`` never goes back to False; commands queued by ``_send`` leave in order; a
failed handshake is signalled by raising MechanismError, after which the mechanism is not used.

Mechanisms that protect traffic (CURVE) set ``wraps_traffic`` and implement ``wrap_frame`` and
``unwrap_command``; the connection then refuses clear-text message frames. The wrapping command
travels in a command frame, or, if ``wraps_in_data_frames`` is set, in a final data frame whose body
is the command (what libzmq does with CURVE's MESSAGE); such frames are then accepted both ways.

A server mechanism that wants the peer's credentials checked (PLAIN, CURVE) calls
``_request_zap(credentials)`` and waits; the connection turns that into a ZAP request for the engine
and, on a 200 reply, calls ``zap_approved``. Any other reply ends the connection without involving
the mechanism. ``HandshakeInfo`` tells the mechanism whether a ZAP handler is bound at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from mqcore.zmtp._commands import READY, CommandError, encode_properties, parse_properties

__all__ = ["HandshakeInfo", "Mechanism", "MechanismError", "NullMechanism", "check_roles"]


@dataclass(frozen=True, slots=True)
class HandshakeInfo:
    """What a mechanism knows about both ends when its handshake starts."""

    socket_type: str
    identity: bytes
    as_server: bool
    peer_as_server: bool
    peer_version: tuple[int, int]
    # ZAP as the engine configured it: whether a handler is bound at inproc://zeromq.zap.01,
    # the socket's ZAP_DOMAIN, and ZAP_ENFORCE_DOMAIN (libzmq's option, off by default).
    zap_handler: bool = False
    zap_domain: bytes = b""
    zap_enforce_domain: bool = False

    def local_metadata(self) -> list[tuple[str, bytes]]:
        """Our standard properties: Socket-Type, and Identity when we have one."""
        properties = [("Socket-Type", self.socket_type.encode("ascii"))]
        if self.identity:
            properties.append(("Identity", self.identity))
        return properties


class MechanismError(Exception):
    """The handshake failed; ``str(error)`` is one sentence saying why (sent in our ERROR command)."""


class Mechanism(ABC):
    """One side of a ZMTP security handshake. Subclass it to add a mechanism.

    Subclasses set ``name`` (the greeting's mechanism field, e.g. ``b"PLAIN"``), queue commands
    with ``_send(name, data)`` and call ``_finish(peer_metadata)`` when the handshake succeeded.
    """

    name: ClassVar[bytes]
    # Whether client and server roles exist; if not, the greeting's as-server byte is always 0.
    uses_roles: ClassVar[bool] = True
    wraps_traffic: ClassVar[bool] = False
    wraps_in_data_frames: ClassVar[bool] = False
    # Body prefix of the ERROR command sent when ZAP refuses the peer (name length byte + name).
    error_prefix: ClassVar[bytes] = b"\x05ERROR"

    def __init__(self) -> None:
        self._outgoing: list[tuple[bytes, bytes]] = []
        self._ready = False
        self._peer_metadata: dict[str, bytes] = {}
        self._zap_credentials: list[bytes] | None = None

    @abstractmethod
    def start(self, info: HandshakeInfo) -> None:
        """The peer's greeting was accepted: queue our first commands, if any."""

    @abstractmethod
    def process_command(self, name: bytes, data: bytes) -> None:
        """Handle one handshake command from the peer; raise MechanismError to refuse."""

    def take_commands(self) -> list[tuple[bytes, bytes]]:
        """The (name, data) commands queued since the last call, oldest first."""
        commands, self._outgoing = self._outgoing, []
        return commands

    @property
    def ready(self) -> bool:
        """Whether the handshake has succeeded on our side."""
        return self._ready

    @property
    def peer_metadata(self) -> dict[str, bytes]:
        """The peer's metadata properties (valid once ``ready``)."""
        return self._peer_metadata

    def wrap_frame(self, flags: int, body: bytes) -> tuple[bytes, bytes]:
        """(command name, data) carrying one protected traffic frame; only if ``wraps_traffic``."""
        raise NotImplementedError(f"{type(self).__name__} does not wrap traffic")

    def unwrap_command(self, name: bytes, data: bytes) -> tuple[int, bytes] | None:
        """(flags, body) of the traffic frame inside a command, or None if it carries none.

        Raise MechanismError if the command is a traffic command that fails to open.
        """
        return None

    def take_zap_credentials(self) -> list[bytes] | None:
        """The credential frames of a ZAP request this mechanism waits on (returned once), or None."""
        credentials, self._zap_credentials = self._zap_credentials, None
        return credentials

    def zap_approved(self) -> None:
        """The ZAP handler admitted the peer (status 200): continue the handshake."""
        raise MechanismError(f"the {self.name.decode()} mechanism did not ask for a ZAP check")

    def _request_zap(self, credentials: list[bytes]) -> None:
        self._zap_credentials = credentials

    def _send(self, name: bytes, data: bytes) -> None:
        self._outgoing.append((name, data))

    def _finish(self, peer_metadata: dict[str, bytes]) -> None:
        self._peer_metadata = peer_metadata
        self._ready = True


class NullMechanism(Mechanism):
    """NULL (RFC 23/37): no security; each side sends READY with its metadata and reads the peer's."""

    name = b"NULL"
    uses_roles = False  # RFC 37: with NULL the as-server field MUST be zero

    def __init__(self) -> None:
        super().__init__()
        self._metadata = b""
        self._waits_zap = False
        self._peer_ready: dict[str, bytes] | None = None

    def start(self, info: HandshakeInfo) -> None:
        # Both sides send READY at once, as libzmq does; neither waits for the other's. As libzmq,
        # a side with a ZAP_DOMAIN (and a handler bound) asks ZAP first, with no credentials.
        self._metadata = encode_properties(info.local_metadata())
        if info.zap_domain and info.zap_handler:
            self._waits_zap = True
            self._request_zap([])
        else:
            self._send(READY, self._metadata)

    def process_command(self, name: bytes, data: bytes) -> None:
        if name != READY:
            raise MechanismError(
                f"unexpected {name.decode('ascii', 'replace')} command in the NULL handshake"
            )
        if self._ready or self._peer_ready is not None:
            raise MechanismError("second READY command in the NULL handshake")
        try:
            self._peer_ready = parse_properties(data)
        except CommandError as error:
            raise MechanismError(f"malformed READY: {error}") from None
        if not self._waits_zap:
            self._finish(self._peer_ready)

    def zap_approved(self) -> None:
        self._waits_zap = False
        self._send(READY, self._metadata)
        if self._peer_ready is not None:
            self._finish(self._peer_ready)


def check_roles(info: HandshakeInfo, as_server: bool, mechanism: str) -> None:
    """Refuse a handshake if the mechanism's role is not the connection's. The peer's as-server
    byte is not checked: libzmq always sends 0 there, even from a PLAIN or CURVE server."""
    if info.as_server != as_server:
        side = "server" if as_server else "client"
        raise MechanismError(f"the {mechanism} mechanism is a {side} but the connection is not")
