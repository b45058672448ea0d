"""Authenticator: a ZAP 1.0 handler (RFC 27) with pyzmq's policy and names.

Policy, as pyzmq applies it to each request:
1. Addresses: with an allow list only listed IP addresses pass the address check; otherwise with a
   deny list listed addresses are refused. (Use one or the other.)
2. Mechanism, unless refused in 1: NULL is admitted; PLAIN needs the user name and password given for
   the domain by ``configure_plain`` (even from an allowed address); CURVE needs ``CURVE_ALLOW_ANY``,
   the client key among the certificates of the domain's folder, or a callback's approval. An empty
   domain means ``"*"``.
Replies are 200 with a user id (``"anonymous"`` for NULL, the user name for PLAIN, the Z85 client key
for CURVE), 400 with a reason otherwise. The object serves one REP socket bound at
inproc://zeromq.zap.01 (``start``); ``ThreadAuthenticator`` runs it in a thread.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

import mqcore
from mqcore.auth.certs import load_certificates
from mqcore.zmtp import ZAP_ENDPOINT, z85_encode

__all__ = ["Authenticator", "CURVE_ALLOW_ANY", "CredentialsProvider"]

#: pass as ``location`` to ``configure_curve`` to admit every client that knows the server key
CURVE_ALLOW_ANY = "*"
VERSION = b"1.0"


class CredentialsProvider(Protocol):
    """What ``configure_curve_callback`` takes: ``callback(domain, z85_client_key)`` -> admit?
    (a bool, or an awaitable of one: the handler awaits it before answering)."""

    def callback(self, domain: str, key: bytes) -> bool | Awaitable[bool]: ...


class Authenticator:
    """A ZAP handler's policy (see module docstring). Configure from any thread; the handler
    thread only reads the sets and dicts, which are swapped or updated atomically."""

    def __init__(self, context: mqcore.Context | None = None, encoding: str = "utf-8",
                 log: logging.Logger | None = None) -> None:
        self.context = context if context is not None else mqcore.Context.instance()
        self.encoding = encoding
        self.allow_any = False
        self.credentials_providers: dict[str, CredentialsProvider] = {}
        self.zap_socket: mqcore.Socket | None = None
        self._allowed: set[str] = set()
        self._denied: set[str] = set()
        self.passwords: dict[str, Mapping[str, str]] = {}
        self.certs: dict[str, dict[bytes, bool]] = {}
        self.log = log or logging.getLogger("mqcore.auth")

    # -- life cycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the ZAP socket at inproc://zeromq.zap.01. ZMQError(EADDRINUSE) if a handler is
        already bound in this context."""
        # A plain socket even in an asyncio context: the handler reads it when a poller says so.
        sock = self.context.socket(mqcore.REP, socket_class=mqcore.Socket)
        sock.setsockopt(mqcore.SocketOption.LINGER, 1)
        sock.bind(ZAP_ENDPOINT)
        self.zap_socket = sock

    def stop(self) -> None:
        """Close the ZAP socket; connections handshaking from now on get no ZAP answers."""
        if self.zap_socket is not None:
            self.zap_socket.close()
        self.zap_socket = None

    # -- configuration -------------------------------------------------------------------------------
    def allow(self, *addresses: str) -> None:
        """Admit only these IP addresses (PLAIN still checks passwords). ValueError after ``deny``."""
        if self._denied:
            raise ValueError("use allow or deny, not both")
        self._allowed.update(addresses)

    def deny(self, *addresses: str) -> None:
        """Refuse these IP addresses. ValueError after ``allow``."""
        if self._allowed:
            raise ValueError("use allow or deny, not both")
        self._denied.update(addresses)

    def configure_plain(self, domain: str = "*", passwords: Mapping[str, str] | None = None) -> None:
        """PLAIN for ``domain``: ``passwords`` maps user names to passwords."""
        if passwords:
            self.passwords[domain] = dict(passwords)

    def configure_curve(self, domain: str = "*", location: str | os.PathLike[str] = "") -> None:
        """CURVE for ``domain``: ``CURVE_ALLOW_ANY`` admits every client, otherwise ``location`` is a
        folder of public certificates (``*.key``) whose keys are admitted. A folder that cannot be
        read is logged and admits nobody."""
        if location == CURVE_ALLOW_ANY:
            self.allow_any = True
            return
        self.allow_any = False
        try:
            self.certs[domain] = load_certificates(location)
        except (OSError, ValueError) as exc:
            self.log.error("Failed to load CURVE certs from %s: %s", location, exc)

    def configure_curve_callback(self, domain: str = "*",
                                 credentials_provider: CredentialsProvider | None = None) -> None:
        """CURVE for ``domain``: ``credentials_provider.callback(domain, z85_key)`` decides."""
        self.allow_any = False
        if credentials_provider is None:
            self.log.error("None credentials_provider provided for domain:%s", domain)
            return
        self.credentials_providers[domain] = credentials_provider

    def curve_user_id(self, client_public_key: bytes) -> str:
        """The user id returned for an admitted CURVE client: its key in Z85."""
        return z85_encode(client_public_key).decode("ascii")

    # -- requests ------------------------------------------------------------------------------------
    async def handle_zap_message(self, msg: Sequence[bytes]) -> None:
        """Answer one ZAP request (frames after the delimiter) on ``zap_socket``; a coroutine, as in
        pyzmq, because a CURVE credentials callback may be one."""
        if len(msg) < 6:
            self.log.error("Invalid ZAP message, not enough frames: %r", msg)
            self._send_zap_reply(msg[1] if len(msg) > 1 else b"", b"400", b"Not enough frames")
            return
        version, request_id, domain_b, address_b, _identity, mechanism = msg[:6]
        credentials = list(msg[6:])
        if version != VERSION:
            self.log.error("Invalid ZAP version: %r", version)
            self._send_zap_reply(request_id, b"400", b"Invalid version")
            return
        domain = domain_b.decode(self.encoding, "replace")
        address = address_b.decode(self.encoding, "replace")
        allowed, denied, reason = self._check_address(address)
        username = "anonymous"
        if not denied:
            if mechanism == b"NULL" and not allowed:
                allowed = True  # NULL passes unless the address was refused
            elif mechanism == b"PLAIN":
                if len(credentials) != 2:
                    self._send_zap_reply(request_id, b"400", b"Invalid PLAIN credentials")
                    return
                username, password = (c.decode(self.encoding, "replace") for c in credentials)
                allowed, reason = self._authenticate_plain(domain, username, password)
            elif mechanism == b"CURVE":
                if len(credentials) != 1:
                    self._send_zap_reply(request_id, b"400", b"Invalid CURVE credentials")
                    return
                allowed, reason = await self._authenticate_curve(domain, credentials[0])
                if allowed:
                    username = self.curve_user_id(credentials[0])
            elif mechanism != b"NULL":
                allowed, reason = False, f"Unsupported mechanism {mechanism!r}"
        if allowed:
            self._send_zap_reply(request_id, b"200", b"OK", username)
        else:
            self._send_zap_reply(request_id, b"400", reason.encode(self.encoding))

    def _check_address(self, address: str) -> tuple[bool, bool, str]:
        """(allowed, denied, reason) from the allow/deny lists."""
        if self._allowed:
            if address in self._allowed:
                return True, False, "OK"
            return False, True, "Address not allowed"
        if self._denied:
            if address in self._denied:
                return False, True, "Address denied"
            return True, False, "OK"
        return False, False, "NO ACCESS"

    def _authenticate_plain(self, domain: str, username: str, password: str) -> tuple[bool, str]:
        domain = domain or "*"
        users = self.passwords.get(domain)
        if users is None:
            return False, "Domain not found"
        if username not in users:
            return False, "Invalid username"
        if users[username] != password:
            return False, "Invalid password"
        return True, "OK"

    async def _authenticate_curve(self, domain: str, client_key: bytes) -> tuple[bool, str]:
        domain = domain or "*"
        if self.allow_any:
            return True, "OK"
        provider = self.credentials_providers.get(domain)
        if provider is not None:
            admit = provider.callback(domain, z85_encode(client_key))
            if inspect.isawaitable(admit):
                admit = await admit
            if admit:
                return True, "OK"
            return False, "Unknown key"
        certs = self.certs.get(domain)
        if certs is None:
            return False, "Unknown domain"
        if certs.get(z85_encode(client_key)):
            return True, "OK"
        return False, "Unknown key"

    def _send_zap_reply(self, request_id: bytes, status_code: bytes, status_text: bytes,
                        user_id: str = "anonymous") -> None:
        user = user_id.encode(self.encoding) if status_code == b"200" else b""
        reply: list[Any] = [VERSION, request_id, status_code, status_text, user, b""]
        if self.zap_socket is not None:
            self.zap_socket.send_multipart(reply)
