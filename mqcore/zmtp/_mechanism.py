"""Security mechanisms: the pluggable handshake between greeting and traffic.

A Mechanism instance serves exactly one connection. The connection calls ``start`` once the peer's
greeting is accepted, feeds it every handshake command (except ERROR, which the connection handles
for every mechanism), and drains ``take_commands`` into the bytes it sends. When ``ready`` turns
True, ``peer_metadata`` holds the peer's properties and the connection checks the socket types.

Invariants: ``ready`` never goes back to False; commands queued by ``_send`` leave in order; a
failed handshake is signalled by raising MechanismError, after which the mechanism is not used.

Mechanisms that protect traffic (CURVE) set ``wraps_traffic`` and implement ``wrap_frame`` and
``unwrap_command``; the connection then refuses clear-text message frames.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from mqcore.zmtp._commands import READY, CommandError, encode_properties, parse_properties

__all__ = ["HandshakeInfo", "Mechanism", "MechanismError", "NullMechanism"]


@dataclass(frozen=True, slots=True)
class HandshakeInfo:
    """What a mechanism knows about both ends when its handshake starts."""

    socket_type: str
    identity: bytes
    as_server: bool
    peer_as_server: bool
    peer_version: tuple[int, int]

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

    def __init__(self) -> None:
        self._outgoing: list[tuple[bytes, bytes]] = []
        self._ready = False
        self._peer_metadata: dict[str, bytes] = {}

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

    def _send(self, name: bytes, data: bytes) -> None:
        self._outgoing.append((name, data))

    def _finish(self, peer_metadata: dict[str, bytes]) -> None:
        self._peer_metadata = peer_metadata
        self._ready = True


class NullMechanism(Mechanism):
    """NULL (RFC 23/37): no security; each side sends READY with its metadata and reads the peer's."""

    name = b"NULL"
    uses_roles = False  # RFC 37: with NULL the as-server field MUST be zero

    def start(self, info: HandshakeInfo) -> None:
        # Both sides send READY at once, as libzmq does; neither waits for the other's.
        self._send(READY, encode_properties(info.local_metadata()))

    def process_command(self, name: bytes, data: bytes) -> None:
        if name != READY:
            raise MechanismError(
                f"unexpected {name.decode('ascii', 'replace')} command in the NULL handshake"
            )
        if self._ready:
            raise MechanismError("second READY command in the NULL handshake")
        try:
            self._finish(parse_properties(data))
        except CommandError as error:
            raise MechanismError(f"malformed READY: {error}") from None
