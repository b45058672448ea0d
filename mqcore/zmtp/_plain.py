"""PLAIN (RFC 24 on ZMTP 3.x): user name and password in clear text, checked by a ZAP handler.

    client                               server
    HELLO (username, password)  --->     ask ZAP; on 200:
                                <---     WELCOME
    INITIATE (metadata)         --->
                                <---     READY (metadata)

Invariants: each state expects exactly one command (``_EXPECTS``); anything else is refused. The
server never sends WELCOME before the ZAP handler said 200, and refuses every client when no
handler is bound (as libzmq does: PLAIN without ZAP would admit anyone). A refusal by ZAP is
handled by the connection (ERROR with the status code, then close); that ERROR uses libzmq's
PLAIN spelling (see ``LIBZMQ_PLAIN_ERROR``), and both spellings are accepted from the peer. Traffic is not wrapped, so
messages take the NULL fast path.
"""

from __future__ import annotations

import enum

from mqcore.zmtp._commands import LIBZMQ_PLAIN_ERROR, READY, CommandError, encode_properties, parse_properties
from mqcore.zmtp._mechanism import HandshakeInfo, Mechanism, MechanismError, check_roles

__all__ = ["PlainMechanism"]

HELLO = b"HELLO"
WELCOME = b"WELCOME"
INITIATE = b"INITIATE"


class _State(enum.Enum):
    CLIENT_WAIT_WELCOME = "client waits for WELCOME"
    CLIENT_WAIT_READY = "client waits for READY"
    SERVER_WAIT_HELLO = "server waits for HELLO"
    SERVER_WAIT_ZAP = "server waits for the ZAP reply"
    SERVER_WAIT_INITIATE = "server waits for INITIATE"
    DONE = "done"


_EXPECTS: dict[_State, bytes] = {
    _State.CLIENT_WAIT_WELCOME: WELCOME,
    _State.CLIENT_WAIT_READY: READY,
    _State.SERVER_WAIT_HELLO: HELLO,
    _State.SERVER_WAIT_INITIATE: INITIATE,
}


def _short_string(value: bytes, what: str) -> bytes:
    value = bytes(value)
    if len(value) > 255:
        raise ValueError(f"a PLAIN {what} is at most 255 bytes, not {len(value)}")
    return value


class PlainMechanism(Mechanism):
    """One side of a PLAIN handshake. The client sends ``username``/``password``; the server
    ignores its own and asks ZAP. ValueError if either is longer than 255 bytes."""

    name = b"PLAIN"
    # A ZAP refusal is sent the way libzmq's PLAIN server writes it, so libzmq clients report
    # the status code (an authentication failure) instead of an unexpected command.
    error_prefix = LIBZMQ_PLAIN_ERROR

    def __init__(self, as_server: bool, username: bytes = b"", password: bytes = b"") -> None:
        super().__init__()
        self.as_server = as_server
        self.username = _short_string(username, "user name")
        self.password = _short_string(password, "password")
        self._state = _State.SERVER_WAIT_HELLO if as_server else _State.CLIENT_WAIT_WELCOME
        self._info: HandshakeInfo | None = None
        self._metadata: bytes = b""

    def start(self, info: HandshakeInfo) -> None:
        check_roles(info, self.as_server, "PLAIN")
        self._info = info
        self._metadata = encode_properties(info.local_metadata())
        if not self.as_server:
            hello = (
                bytes((len(self.username),)) + self.username + bytes((len(self.password),)) + self.password
            )
            self._send(HELLO, hello)

    def process_command(self, name: bytes, data: bytes) -> None:
        expected = _EXPECTS.get(self._state)
        if name != expected:
            raise MechanismError(
                f"unexpected {name.decode('ascii', 'replace')} command: the PLAIN {self._state.value}"
            )
        if name == HELLO:
            self._on_hello(data)
        elif name == WELCOME:
            if data:
                raise MechanismError("malformed WELCOME: it carries no data")
            self._send(INITIATE, self._metadata)
            self._state = _State.CLIENT_WAIT_READY
        else:  # INITIATE at the server, READY at the client: the peer's metadata
            peer = self._parse_metadata(name, data)
            if name == INITIATE:
                self._send(READY, self._metadata)
            self._state = _State.DONE
            self._finish(peer)

    def zap_approved(self) -> None:
        if self._state is not _State.SERVER_WAIT_ZAP:
            raise MechanismError("ZAP approval while the PLAIN server was not waiting for it")
        self._send(WELCOME, b"")
        self._state = _State.SERVER_WAIT_INITIATE

    def _on_hello(self, data: bytes) -> None:
        assert self._info is not None
        if not data or len(data) < 1 + data[0] + 1:
            raise MechanismError("malformed HELLO: user name or password missing")
        username_end = 1 + data[0]
        password_size = data[username_end]
        if len(data) != username_end + 1 + password_size:
            raise MechanismError("malformed HELLO: password size does not match the command")
        if not self._info.zap_handler:
            raise MechanismError(
                "no ZAP handler is bound at inproc://zeromq.zap.01, so PLAIN credentials cannot be checked"
            )
        self._request_zap([data[1:username_end], data[username_end + 1 :]])
        self._state = _State.SERVER_WAIT_ZAP

    @staticmethod
    def _parse_metadata(name: bytes, data: bytes) -> dict[str, bytes]:
        try:
            return parse_properties(data)
        except CommandError as error:
            raise MechanismError(f"malformed {name.decode()}: {error}") from None
