"""The Mechanism seam, exercised with a toy mechanism that wraps traffic and finishes late."""

from __future__ import annotations

import pytest

from mqcore.zmtp import (
    HandshakeDone,
    HandshakeInfo,
    Mechanism,
    MechanismError,
    Message,
    Ping,
    ProtocolViolation,
    Subscribe,
    ZmtpConnection,
)
from mqcore.zmtp._commands import encode_properties, parse_properties

from .wire import command, frame, greeting, shuttle

KEY = 0x5A


def _xor(data: bytes) -> bytes:
    return bytes(b ^ KEY for b in data)


class ToyMechanism(Mechanism):
    """HELLO carries metadata; the server holds its answer until approve() (like a ZAP reply)."""

    name = b"X-TOY"
    wraps_traffic = True

    def __init__(self, hold: bool = False) -> None:
        super().__init__()
        self._hold = hold
        self._peer: dict[str, bytes] | None = None

    def start(self, info: HandshakeInfo) -> None:
        self._send(b"HELLO", encode_properties(info.local_metadata()))

    def process_command(self, name: bytes, data: bytes) -> None:
        if name != b"HELLO":
            raise MechanismError("expected HELLO")
        self._peer = parse_properties(data)
        if not self._hold:
            self._finish(self._peer)

    def approve(self) -> None:
        assert self._peer is not None
        self._finish(self._peer)

    def wrap_frame(self, flags: int, body: bytes) -> tuple[bytes, bytes]:
        return b"BOX", bytes((flags,)) + _xor(body)

    def unwrap_command(self, name: bytes, data: bytes) -> tuple[int, bytes] | None:
        if name != b"BOX":
            return None
        if not data:
            raise MechanismError("empty BOX")
        return data[0], _xor(data[1:])


def _pair(hold: bool = False) -> tuple[ZmtpConnection, ZmtpConnection, ToyMechanism]:
    server_mechanism = ToyMechanism(hold)
    client = ZmtpConnection("SUB", mechanism=ToyMechanism())
    server = ZmtpConnection("PUB", as_server=True, mechanism=server_mechanism)
    client_greeting, server_greeting = client.start(), server.start()
    assert client_greeting[12:32] == b"X-TOY" + bytes(15)
    assert (client_greeting[32], server_greeting[32]) == (0, 1)  # this mechanism has roles
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    shuttle(client, server)
    return client, server, server_mechanism


def test_toy_handshake_and_wrapped_traffic() -> None:
    client, server, _ = _pair()
    assert [type(e) for e in client.next_events()] == [HandshakeDone]
    assert [type(e) for e in server.next_events()] == [HandshakeDone]
    out = client.encode_subscribe(b"t") + client.encode_ping(7, b"c") + client.encode_message([b"ab", b"c"])
    assert b"SUBSCRIBE" not in out and b"ab" not in out  # everything travels inside BOX commands
    server.receive_data(out)
    assert server.next_events() == [Subscribe(b"t"), Ping(7, b"c"), Message([b"ab", b"c"])]


def test_handshake_that_finishes_outside_receive_data() -> None:
    client, server, mechanism = _pair(hold=True)
    assert not server.handshake_done and server.next_events() == []
    mechanism.approve()
    assert [type(e) for e in server.next_events()] == [HandshakeDone]
    assert server.handshake_done and server.peer_socket_type == "SUB"


def test_clear_text_message_is_refused_when_traffic_is_wrapped() -> None:
    client, server, _ = _pair()
    server.next_events()
    server.receive_data(frame(b"plain"))
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and server.dead


def test_mechanism_error_is_a_violation_with_an_error_command() -> None:
    conn = ZmtpConnection("PUB", mechanism=ToyMechanism())
    conn.start()
    conn.receive_data(greeting(mechanism=b"X-TOY") + command(b"WHAT"))
    [violation] = conn.next_events()
    assert violation == ProtocolViolation("expected HELLO")
    assert conn.data_to_send().endswith(command(b"ERROR", b"\x0eexpected HELLO"))


def test_null_peer_against_toy_is_a_mechanism_mismatch() -> None:
    conn = ZmtpConnection("PUB", mechanism=ToyMechanism())
    conn.start()
    conn.receive_data(greeting())
    [violation] = conn.next_events()
    assert isinstance(violation, ProtocolViolation) and "mismatch" in violation.reason


def test_mechanism_name_must_fit_the_greeting() -> None:
    class Long(ToyMechanism):
        name = b"X" * 21

    with pytest.raises(ValueError):
        ZmtpConnection("PUB", mechanism=Long())
