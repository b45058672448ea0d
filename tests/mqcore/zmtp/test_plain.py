"""PLAIN in memory: HELLO/WELCOME/INITIATE/READY, the ZAP hand-over, refusals and golden bytes."""

from __future__ import annotations

import pytest

from mqcore.zmtp import (
    AuthFailed,
    HandshakeDone,
    Message,
    PeerError,
    PlainMechanism,
    ProtocolViolation,
    ZmtpConnection,
    ZmtpStateError,
)

from .peers import pump, secure_pair, zap_reply
from .wire import command, greeting, prop

USERS = {b"admin": b"secret"}


def check_password(request: list[bytes]) -> list[bytes]:
    username, password = request[6:]
    if USERS.get(username) == password:
        return zap_reply(request, user=username)
    return zap_reply(request, b"400", b"bad password")


def _pair(password: bytes = b"secret", **server_options: object) -> tuple[ZmtpConnection, ZmtpConnection]:
    return secure_pair(
        PlainMechanism(False, b"admin", password),
        PlainMechanism(True),
        zap=check_password,
        **server_options,  # type: ignore[arg-type]
    )


def test_right_password_completes_the_handshake_and_carries_traffic() -> None:
    client, server = _pair(zap_domain="global", peer_address="10.0.0.7")
    [c_done] = client.next_events()
    [s_done] = server.next_events()
    assert isinstance(c_done, HandshakeDone) and c_done.peer_socket_type == "DEALER"
    assert isinstance(s_done, HandshakeDone) and server.user_id == b"admin"
    server.receive_data(client.encode_message([b"a", b"", b"c" * 300]))
    assert server.next_events() == [Message([b"a", b"", b"c" * 300])]
    client.receive_data(server.encode_message([b"back"]))
    assert client.next_events() == [Message([b"back"])]


def test_zap_request_frames() -> None:
    client = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"admin", b"secret"))
    server = ZmtpConnection(
        "ROUTER",
        identity=b"srv",
        as_server=True,
        mechanism=PlainMechanism(True),
        zap_handler=True,
        zap_domain=b"global",
        peer_address="192.168.55.1",
    )
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    pump(client, server)  # no handler answers: the server keeps waiting
    assert server.zap_request(b"0001") == [
        b"1.0",
        b"0001",
        b"global",
        b"192.168.55.1",
        b"srv",
        b"PLAIN",
        b"admin",
        b"secret",
    ]
    assert server.zap_request() is None  # returned once
    assert not server.handshake_done and server.data_to_send() == b""
    server.zap_reply([b"", b"1.0", b"0001", b"200", b"OK", b"joe", prop(b"Tenant", b"blue")])
    pump(client, server)
    assert server.handshake_done and client.handshake_done
    assert server.user_id == b"joe" and server.zap_properties == {"Tenant": b"blue"}


def test_wrong_password_sends_error_400_and_fails_both_sides() -> None:
    client, server = _pair(password=b"guess")
    assert server.next_events() == [AuthFailed(400, "bad password")]
    assert client.next_events() == [PeerError(b"400")]
    assert server.dead and client.dead and not server.handshake_done


def test_refusal_uses_libzmq_plain_error_spelling() -> None:
    # libzmq's PLAIN writes ERROR as b"^RROR" + reason (a C hex escape ate the "E" and the length
    # byte); libzmq clients only recognise that form, so our PLAIN server sends it too.
    client = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"u", b"p"))
    server = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True), zap_handler=True)
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    server.receive_data(client.data_to_send())
    request = server.zap_request()
    assert request is not None
    server.zap_reply(zap_reply(request, b"400"))
    assert server.data_to_send() == b"\x04\x09^RROR\x03400"


def test_both_error_spellings_are_understood() -> None:
    for error in (b"\x04\x09^RROR\x03400", command(b"ERROR", b"\x03400")):
        conn = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"u", b"p"))
        conn.start()
        conn.receive_data(greeting(mechanism=b"PLAIN", as_server=True) + error)
        assert conn.next_events() == [PeerError(b"400")]


def test_temporary_failure_300_closes_without_error() -> None:
    client = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"u", b"p"))
    server = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True), zap_handler=True)
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    server.receive_data(client.data_to_send())
    request = server.zap_request()
    assert request is not None
    server.zap_reply(zap_reply(request, b"300", b"try later"))
    assert server.next_events() == [AuthFailed(300, "try later")]
    assert server.data_to_send() == b"" and server.dead


def test_without_a_zap_handler_every_client_is_refused() -> None:
    client = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"admin", b"secret"))
    server = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True))
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    pump(client, server)
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and "ZAP handler" in violation.reason
    assert isinstance(client.next_events()[0], PeerError)


@pytest.mark.parametrize(
    "reply",
    [
        [b"1.0", b"1", b"200", b"OK", b""],  # a frame short
        [b"2.0", b"1", b"200", b"OK", b"", b""],
        [b"1.0", b"other", b"200", b"OK", b"", b""],
        [b"1.0", b"1", b"201", b"OK", b"", b""],
        [b"1.0", b"1", b"200", b"OK", b"", b"\x05Trunc"],
    ],
)
def test_malformed_zap_reply_is_a_violation(reply: list[bytes]) -> None:
    server = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True), zap_handler=True)
    server.start()
    server.receive_data(greeting(mechanism=b"PLAIN") + command(b"HELLO", b"\x01u\x01p"))
    assert server.zap_request() is not None
    server.zap_reply(reply)
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and "ZAP reply" in violation.reason


def test_zap_reply_without_a_request_is_misuse() -> None:
    server = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True), zap_handler=True)
    with pytest.raises(ZmtpStateError):
        server.zap_reply([b"1.0", b"1", b"200", b"", b"", b""])


def test_golden_client_hello_and_initiate() -> None:
    conn = ZmtpConnection("PUSH", mechanism=PlainMechanism(False, b"admin", b"secret"))
    hello = conn.start()
    assert hello[12:33] == b"PLAIN" + bytes(15) + b"\x00"  # mechanism field, as-server 0
    conn.receive_data(greeting(mechanism=b"PLAIN", as_server=True))
    assert conn.data_to_send() == b"\x04\x13\x05HELLO\x05admin\x06secret"
    conn.receive_data(command(b"WELCOME"))
    assert conn.data_to_send() == command(b"INITIATE", prop(b"Socket-Type", b"PUSH"))
    conn.receive_data(command(b"READY", prop(b"Socket-Type", b"PULL")))
    assert [type(e) for e in conn.next_events()] == [HandshakeDone]


@pytest.mark.parametrize(
    ("hello", "reason"),
    [
        (b"", "malformed HELLO"),
        (b"\x05adm", "malformed HELLO"),
        (b"\x01u\x05p", "malformed HELLO"),
        (b"\x01u\x01pX", "malformed HELLO"),
    ],
)
def test_malformed_hello(hello: bytes, reason: str) -> None:
    server = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True), zap_handler=True)
    server.start()
    server.receive_data(greeting(mechanism=b"PLAIN") + command(b"HELLO", hello))
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and reason in violation.reason
    assert server.data_to_send().endswith(
        b"ERROR" + bytes((len(violation.reason),)) + violation.reason.encode()
    )


def test_commands_out_of_order_are_refused() -> None:
    client = ZmtpConnection("DEALER", mechanism=PlainMechanism(False))
    client.start()
    client.receive_data(greeting(mechanism=b"PLAIN", as_server=True) + command(b"READY"))
    [violation] = client.next_events()
    assert isinstance(violation, ProtocolViolation) and "unexpected READY" in violation.reason


def test_mechanism_role_must_match_the_connection() -> None:
    conn = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(False))
    conn.start()
    conn.receive_data(greeting(mechanism=b"PLAIN"))
    [violation] = conn.next_events()
    assert isinstance(violation, ProtocolViolation) and "is a client" in violation.reason


def test_peer_as_server_byte_is_not_checked() -> None:
    # libzmq sends as-server 0 from PLAIN and CURVE servers too; a client must still talk to them.
    conn = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"u", b"p"))
    conn.start()
    conn.receive_data(greeting(mechanism=b"PLAIN", as_server=False) + command(b"WELCOME"))
    assert conn.next_events() == [] and not conn.dead


def test_credentials_longer_than_255_bytes_are_refused() -> None:
    with pytest.raises(ValueError):
        PlainMechanism(False, b"u" * 256)
