"""CURVE (RFC 26 CurveZMQ on ZMTP 3.x), wire-compatible with libzmq 4.x, using PyNaCl.

Keys: C/c and S/s are the client's and server's long-term public/secret keys, C'/c' and S'/s' the
short-term keys made for this connection. Box[x](A->B) is crypto_box from A's secret to B's public.

    client                                              server
    HELLO    C', Box[64 zeros](C'->S)            --->   (proves the client knows S)
                                                 <---   WELCOME  Box[S' + cookie](S->C')
    INITIATE cookie, Box[C + vouch + meta](C'->S') ->   vouch = Box[C' + S](C->S'); ask ZAP (C)
                                                 <---   READY    Box[meta](S'->C')
    MESSAGE  Box[flags + frame](C'->S')          <-->   MESSAGE  Box[flags + frame](S'->C')

Nonces: a 16-byte prefix per command ("CurveZMQHELLO---", "CurveZMQINITIATE", "CurveZMQREADY---",
"CurveZMQMESSAGEC" client->server, "CurveZMQMESSAGES" server->client) plus an 8-byte big-endian
short nonce that each side counts from 1 over HELLO/INITIATE (client) or READY (server) and then
every MESSAGE; WELCOME, cookie and vouch use 8-byte prefixes ("WELCOME-", "COOKIE--", "VOUCH---")
plus 16 random bytes. The cookie (C' + s' under a key only this connection knows) lets the server
check that INITIATE answers its own WELCOME.

Invariants: each state expects exactly one command; the short nonces we send strictly increase and
every MESSAGE must carry a nonce above the peer's last one (replays are refused). MESSAGE's flags
byte uses libzmq's message flags (0x01 more, 0x02 command), translated to and from ZMTP's frame
flags at this seam. Short-term secrets and the cookie key are dropped once the handshake is done.
"""

from __future__ import annotations

import enum
import struct

from nacl import bindings
from nacl.exceptions import CryptoError

from mqcore.zmtp._commands import READY, CommandError, encode_properties, parse_properties
from mqcore.zmtp._frames import COMMAND, MORE
from mqcore.zmtp._keys import curve_key
from mqcore.zmtp._mechanism import HandshakeInfo, Mechanism, MechanismError, check_roles

__all__ = ["CurveMechanism"]

HELLO = b"HELLO"
WELCOME = b"WELCOME"
INITIATE = b"INITIATE"
MESSAGE = b"MESSAGE"

_HELLO_NONCE = b"CurveZMQHELLO---"
_INITIATE_NONCE = b"CurveZMQINITIATE"
_READY_NONCE = b"CurveZMQREADY---"
_CLIENT_MESSAGE_NONCE = b"CurveZMQMESSAGEC"
_SERVER_MESSAGE_NONCE = b"CurveZMQMESSAGES"
_WELCOME_NONCE = b"WELCOME-"
_COOKIE_NONCE = b"COOKIE--"
_VOUCH_NONCE = b"VOUCH---"

_VERSION = b"\x01\x00"
_HELLO_PADDING = bytes(72)  # anti-amplification: HELLO is as long as WELCOME
_HELLO_SIZE = 194  # data after the name: version 2, padding 72, C' 32, nonce 8, box 80
_WELCOME_SIZE = 160  # long nonce 16, box 144 (S' 32 + cookie 96 + MAC 16)
_COOKIE_SIZE = 96  # long nonce 16, secretbox 80
_INITIATE_MIN = _COOKIE_SIZE + 8 + 16 + 128  # cookie, short nonce, MAC, C + vouch nonce + vouch
_MAC = 16
_MESSAGE_MIN = 8 + _MAC + 1  # short nonce, MAC, flags byte
_MAX_NONCE = (1 << 64) - 1

# libzmq's message flags inside a MESSAGE box.
_MSG_MORE = 0x01
_MSG_COMMAND = 0x02

_nonce = struct.Struct(">Q")
_random = bindings.randombytes
_box = bindings.crypto_box
_box_open = bindings.crypto_box_open
_seal = bindings.crypto_box_easy_afternm
_unseal = bindings.crypto_box_open_easy_afternm


class _State(enum.Enum):
    CLIENT_WAIT_WELCOME = "client waits for WELCOME"
    CLIENT_WAIT_READY = "client waits for READY"
    SERVER_WAIT_HELLO = "server waits for HELLO"
    SERVER_WAIT_INITIATE = "server waits for INITIATE"
    SERVER_WAIT_ZAP = "server waits for the ZAP reply"
    TRAFFIC = "traffic flows"


_EXPECTS: dict[_State, bytes] = {
    _State.CLIENT_WAIT_WELCOME: WELCOME,
    _State.CLIENT_WAIT_READY: READY,
    _State.SERVER_WAIT_HELLO: HELLO,
    _State.SERVER_WAIT_INITIATE: INITIATE,
}


class CurveMechanism(Mechanism):
    """One side of a CURVE handshake, and the encryption of its traffic.

    Keys may be 32 raw bytes or 40 Z85 characters. A server needs only ``secret_key``
    (``public_key`` may be ``b""``); a client needs ``server_key``, the server's public key.
    ValueError for a malformed key, a public key that does not belong to the secret key, or a
    client without ``server_key``. After the handshake ``peer_key`` is the peer's long-term public
    key (for a server: the client key it passed to ZAP).
    """

    name = b"CURVE"
    wraps_traffic = True
    wraps_in_data_frames = True  # libzmq sends MESSAGE as a final data frame, not a command frame

    def __init__(
        self,
        as_server: bool,
        public_key: bytes | str,
        secret_key: bytes | str,
        server_key: bytes | str | None = None,
    ) -> None:
        super().__init__()
        self.as_server = as_server
        self._secret = curve_key(secret_key, "the CURVE secret key")
        self.public_key = bindings.crypto_scalarmult_base(self._secret)
        if public_key and curve_key(public_key, "the CURVE public key") != self.public_key:
            raise ValueError("the CURVE public key does not belong to the secret key")
        if as_server:
            self._server_key = self.public_key
        elif server_key is None:
            raise ValueError("a CURVE client needs the server's public key (server_key)")
        else:
            self._server_key = curve_key(server_key, "the CURVE server key")
        self.peer_key: bytes | None = None if as_server else self._server_key
        self._short_public, self._short_secret = bindings.crypto_box_keypair()
        self._peer_short_public = b""
        self._shared = b""  # crypto_box_beforenm of the two short-term keys
        self._cookie_key = b""
        self._send_nonce = 1
        self._peer_nonce = 0
        self._send_prefix = _SERVER_MESSAGE_NONCE if as_server else _CLIENT_MESSAGE_NONCE
        self._receive_prefix = _CLIENT_MESSAGE_NONCE if as_server else _SERVER_MESSAGE_NONCE
        self._state = _State.SERVER_WAIT_HELLO if as_server else _State.CLIENT_WAIT_WELCOME
        self._info: HandshakeInfo | None = None
        self._pending_peer: dict[str, bytes] = {}

    # -- handshake -----------------------------------------------------------------------------

    def start(self, info: HandshakeInfo) -> None:
        check_roles(info, self.as_server, "CURVE")
        self._info = info
        if not self.as_server:
            short = self._next_nonce()
            signature = _box(bytes(64), _HELLO_NONCE + short, self._server_key, self._short_secret)
            self._send(HELLO, _VERSION + _HELLO_PADDING + self._short_public + short + signature)

    def process_command(self, name: bytes, data: bytes) -> None:
        if name != _EXPECTS.get(self._state):
            raise MechanismError(
                f"unexpected {name.decode('ascii', 'replace')} command: the CURVE {self._state.value}"
            )
        if name == HELLO:
            self._on_hello(data)
        elif name == WELCOME:
            self._on_welcome(data)
        elif name == INITIATE:
            self._on_initiate(data)
        else:
            self._on_ready(data)

    def zap_approved(self) -> None:
        if self._state is not _State.SERVER_WAIT_ZAP:
            raise MechanismError("ZAP approval while the CURVE server was not waiting for it")
        self._send_ready()

    def _on_hello(self, data: bytes) -> None:
        if len(data) != _HELLO_SIZE:
            raise MechanismError(f"malformed HELLO: {len(data) + 6} bytes, not 200")
        if data[:2] != _VERSION:
            raise MechanismError(f"HELLO for CurveZMQ version {data[0]}.{data[1]}; only 1.0 is known")
        client_short = data[74:106]
        short = data[106:114]
        try:
            _box_open(data[114:], _HELLO_NONCE + short, client_short, self._secret)
        except CryptoError:
            raise MechanismError("cannot open the HELLO box: the client has the wrong server key") from None
        self._peer_short_public = client_short
        self._peer_nonce = _nonce.unpack(short)[0]
        self._cookie_key = _random(32)
        cookie_nonce = _random(16)
        cookie = bindings.crypto_secretbox(
            client_short + self._short_secret, _COOKIE_NONCE + cookie_nonce, self._cookie_key
        )
        welcome_nonce = _random(16)
        welcome = _box(
            self._short_public + cookie_nonce + cookie,
            _WELCOME_NONCE + welcome_nonce,
            client_short,
            self._secret,
        )
        self._send(WELCOME, welcome_nonce + welcome)
        self._state = _State.SERVER_WAIT_INITIATE

    def _on_welcome(self, data: bytes) -> None:
        if len(data) != _WELCOME_SIZE:
            raise MechanismError(f"malformed WELCOME: {len(data) + 8} bytes, not 168")
        try:
            plain = _box_open(data[16:], _WELCOME_NONCE + data[:16], self._server_key, self._short_secret)
        except CryptoError:
            raise MechanismError("cannot open the WELCOME box: the server has another key") from None
        server_short, cookie = plain[:32], plain[32:]
        self._shared = bindings.crypto_box_beforenm(server_short, self._short_secret)
        vouch_nonce = _random(16)
        vouch = _box(
            self._short_public + self._server_key, _VOUCH_NONCE + vouch_nonce, server_short, self._secret
        )
        assert self._info is not None
        metadata = encode_properties(self._info.local_metadata())
        short = self._next_nonce()
        box = _seal(self.public_key + vouch_nonce + vouch + metadata, _INITIATE_NONCE + short, self._shared)
        self._send(INITIATE, cookie + short + box)
        self._state = _State.CLIENT_WAIT_READY

    def _on_initiate(self, data: bytes) -> None:
        if len(data) < _INITIATE_MIN:
            raise MechanismError(f"malformed INITIATE: {len(data) + 9} bytes, under 257")
        try:
            cookie = bindings.crypto_secretbox_open(
                data[16:_COOKIE_SIZE], _COOKIE_NONCE + data[:16], self._cookie_key
            )
        except CryptoError:
            raise MechanismError("cannot open the INITIATE cookie: it is not from our WELCOME") from None
        if cookie != self._peer_short_public + self._short_secret:
            raise MechanismError("the INITIATE cookie does not match this connection")
        short = data[_COOKIE_SIZE : _COOKIE_SIZE + 8]
        self._shared = bindings.crypto_box_beforenm(self._peer_short_public, self._short_secret)
        try:
            plain = _unseal(data[_COOKIE_SIZE + 8 :], _INITIATE_NONCE + short, self._shared)
        except CryptoError:
            raise MechanismError("cannot open the INITIATE box") from None
        client_key, vouch_nonce, vouch = plain[:32], plain[32:48], plain[48:128]
        try:
            vouched = _box_open(vouch, _VOUCH_NONCE + vouch_nonce, client_key, self._short_secret)
        except CryptoError:
            raise MechanismError("cannot open the INITIATE vouch: the client key is not genuine") from None
        if vouched != self._peer_short_public + self.public_key:
            raise MechanismError("the INITIATE vouch names another connection or server")
        self._peer_nonce = _nonce.unpack(short)[0]
        try:
            self._pending_peer = parse_properties(plain[128:])
        except CommandError as error:
            raise MechanismError(f"malformed INITIATE metadata: {error}") from None
        self.peer_key = client_key
        self._cookie_key = b""
        if self._zap_wanted():
            self._request_zap([client_key])
            self._state = _State.SERVER_WAIT_ZAP
        else:
            self._send_ready()

    def _zap_wanted(self) -> bool:
        """libzmq's rule: ask ZAP when a handler is bound (unless ZAP_ENFORCE_DOMAIN is set and the
        domain is empty); with no handler admit any client (the "Stonehouse" pattern) unless
        ZAP_ENFORCE_DOMAIN requires one."""
        info = self._info
        assert info is not None
        if info.zap_enforce_domain and not info.zap_domain:
            return False
        if info.zap_handler:
            return True
        if info.zap_enforce_domain:
            raise MechanismError("ZAP_ENFORCE_DOMAIN is set but no ZAP handler is bound")
        return False

    def _send_ready(self) -> None:
        assert self._info is not None
        short = self._next_nonce()
        box = _seal(encode_properties(self._info.local_metadata()), _READY_NONCE + short, self._shared)
        self._send(READY, short + box)
        self._enter_traffic(self._pending_peer)

    def _on_ready(self, data: bytes) -> None:
        if len(data) < 8 + _MAC:
            raise MechanismError(f"malformed READY: {len(data) + 6} bytes, under 30")
        short = data[:8]
        try:
            plain = _unseal(data[8:], _READY_NONCE + short, self._shared)
        except CryptoError:
            raise MechanismError("cannot open the READY box") from None
        try:
            peer = parse_properties(plain)
        except CommandError as error:
            raise MechanismError(f"malformed READY metadata: {error}") from None
        self._peer_nonce = _nonce.unpack(short)[0]
        self._enter_traffic(peer)

    def _enter_traffic(self, peer_metadata: dict[str, bytes]) -> None:
        self._state = _State.TRAFFIC
        self._short_secret = b""
        self._pending_peer = {}
        self._finish(peer_metadata)

    def _next_nonce(self) -> bytes:
        nonce = self._send_nonce
        if nonce > _MAX_NONCE:
            raise MechanismError("CURVE short nonces are exhausted; reconnect")
        self._send_nonce = nonce + 1
        return _nonce.pack(nonce)

    # -- traffic -------------------------------------------------------------------------------

    def wrap_frame(self, flags: int, body: bytes) -> tuple[bytes, bytes]:
        short = self._next_nonce()
        inner = (_MSG_MORE if flags & MORE else 0) | (_MSG_COMMAND if flags & COMMAND else 0)
        return MESSAGE, short + _seal(bytes((inner,)) + body, self._send_prefix + short, self._shared)

    def unwrap_command(self, name: bytes, data: bytes) -> tuple[int, bytes] | None:
        if name != MESSAGE:
            raise MechanismError(
                f"unexpected {name.decode('ascii', 'replace')} command: CURVE traffic travels in MESSAGE"
            )
        if len(data) < _MESSAGE_MIN:
            raise MechanismError(f"malformed MESSAGE: {len(data) + 8} bytes, under 41")
        short = data[:8]
        nonce = _nonce.unpack(short)[0]
        if nonce <= self._peer_nonce:
            raise MechanismError("MESSAGE nonce did not increase: replayed or reordered traffic")
        try:
            plain = _unseal(data[8:], self._receive_prefix + short, self._shared)
        except CryptoError:
            raise MechanismError("cannot open a MESSAGE box: corrupted or forged traffic") from None
        self._peer_nonce = nonce
        inner = plain[0]
        return (MORE if inner & _MSG_MORE else 0) | (COMMAND if inner & _MSG_COMMAND else 0), plain[1:]
