"""CURVE in memory: handshake, encrypted traffic both ways, ZAP, wrong keys, tampering, replays."""

from __future__ import annotations

import pytest
import zmq

from mqcore.zmtp import (
    AuthFailed,
    CurveMechanism,
    HandshakeDone,
    Message,
    PeerError,
    Ping,
    Pong,
    ProtocolViolation,
    Subscribe,
    ZmtpConnection,
    curve_keypair,
    z85_decode,
)
from mqcore.zmtp._frames import COMMAND, MORE

from .peers import accept_all, secure_pair, zap_reply
from .wire import command, frame, greeting

SERVER_PUBLIC, SERVER_SECRET = curve_keypair()
CLIENT_PUBLIC, CLIENT_SECRET = curve_keypair()


def _mechanisms(server_key: bytes = SERVER_PUBLIC) -> tuple[CurveMechanism, CurveMechanism]:
    client = CurveMechanism(False, CLIENT_PUBLIC, CLIENT_SECRET, server_key)
    server = CurveMechanism(True, SERVER_PUBLIC, SERVER_SECRET)
    return client, server


def _pair(**options: object) -> tuple[ZmtpConnection, ZmtpConnection]:
    client, server = secure_pair(*_mechanisms(), **options)  # type: ignore[arg-type]
    assert [type(e) for e in client.next_events()] == [HandshakeDone]
    assert [type(e) for e in server.next_events()] == [HandshakeDone]
    return client, server


def test_handshake_without_zap_handler_admits_the_client() -> None:
    client, server = _pair()
    assert client.peer_socket_type == "DEALER" and server.peer_socket_type == "DEALER"
    assert isinstance(server.mechanism, CurveMechanism)
    assert server.mechanism.peer_key == z85_decode(CLIENT_PUBLIC)


def test_multipart_messages_both_ways_are_encrypted() -> None:
    client, server = _pair()
    frames = [b"hello", b"", b"x" * 70_000]
    wire = client.encode_message(frames)
    assert b"hello" not in wire and wire.count(b"\x07MESSAGE") == 3
    server.receive_data(wire)
    assert server.next_events() == [Message(frames)]
    back = server.encode_messages([[b"a", b"b"], [b"c"]])
    for i in range(0, len(back), 7):  # byte-wise dribbles decode the same
        client.receive_data(back[i : i + 7])
    assert client.next_events() == [Message([b"a", b"b"]), Message([b"c"])]


def test_ready_and_first_message_in_one_read() -> None:
    client_mechanism, server_mechanism = _mechanisms()
    client = ZmtpConnection("DEALER", mechanism=client_mechanism)
    server = ZmtpConnection("DEALER", as_server=True, mechanism=server_mechanism)
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting + client.data_to_send())  # nothing to send before the greeting
    client.receive_data(server_greeting)
    server.receive_data(client.data_to_send())  # HELLO
    client.receive_data(server.data_to_send())  # WELCOME
    server.receive_data(client.data_to_send())  # INITIATE
    assert server.handshake_done
    client.receive_data(server.data_to_send() + server.encode_message([b"early", b"bird"]))
    events = client.next_events()
    assert [type(e) for e in events] == [HandshakeDone, Message] and events[1] == Message([b"early", b"bird"])


def test_commands_travel_inside_messages() -> None:
    client, server = secure_pair(*_mechanisms(), client_type="SUB", server_type="PUB")
    client.next_events()
    server.next_events()
    wire = client.encode_subscribe(b"topic") + client.encode_ping(10, b"ctx")
    assert b"SUBSCRIBE" not in wire
    server.receive_data(wire)
    assert server.next_events() == [Subscribe(b"topic"), Ping(10, b"ctx")]
    client.receive_data(server.encode_pong(b"ctx"))
    assert client.next_events() == [Pong(b"ctx")]


def test_wire_form_matches_libzmq() -> None:
    client, server = _pair()
    # Each frame travels as its own final data frame (flags 0) whose body is a MESSAGE command;
    # MORE and COMMAND live in the flags byte inside the box, with libzmq's values (0x01, 0x02).
    wire = client.encode_message([b"a", b"b"])
    first_size = wire[1]
    assert wire[0] == 0 and wire[2 + first_size] == 0
    assert wire[2:10] == b"\x07MESSAGE" and wire[10:18] == (3).to_bytes(8, "big")  # after HELLO, INITIATE
    mechanism = server.mechanism
    assert isinstance(mechanism, CurveMechanism)
    assert mechanism.unwrap_command(b"MESSAGE", wire[10 : 2 + first_size]) == (MORE, b"a")
    sub = client.encode_subscribe(b"t")
    assert mechanism.unwrap_command(b"MESSAGE", sub[10:]) == (COMMAND, b"\x09SUBSCRIBEt")


def test_message_in_a_command_frame_is_accepted_too() -> None:
    client, server = _pair()
    wire = client.encode_message([b"x"])
    server.receive_data(command(b"MESSAGE", wire[10:]))
    assert server.next_events() == [Message([b"x"])]


def test_zap_is_asked_when_a_handler_is_bound() -> None:
    requests: list[list[bytes]] = []

    def handler(request: list[bytes]) -> list[bytes]:
        requests.append(request)
        return accept_all(request)

    client, server = _pair(zap=handler, zap_domain="dom", peer_address="127.0.0.1")
    assert requests == [[b"1.0", b"1", b"dom", b"127.0.0.1", b"", b"CURVE", z85_decode(CLIENT_PUBLIC)]]
    assert server.user_id == b"anyone"


def test_zap_refusal_sends_error_and_fails() -> None:
    client, server = secure_pair(
        *_mechanisms(), zap=lambda request: zap_reply(request, b"400", b"unknown key")
    )
    assert server.next_events() == [AuthFailed(400, "unknown key")]
    assert client.next_events() == [PeerError(b"400")]
    assert client.dead and server.dead


def test_enforce_domain_without_handler_refuses() -> None:
    client, server = secure_pair(*_mechanisms(), zap_domain=b"d", zap_enforce_domain=True)
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and "ZAP_ENFORCE_DOMAIN" in violation.reason
    assert isinstance(client.next_events()[0], PeerError)


def test_enforce_domain_with_empty_domain_skips_zap() -> None:
    def never(request: list[bytes]) -> list[bytes]:
        raise AssertionError("ZAP must not be asked")

    client, server = secure_pair(*_mechanisms(), zap=never, zap_enforce_domain=True)
    assert client.handshake_done and server.handshake_done


def test_wrong_server_key_fails_the_handshake() -> None:
    other_public, _ = curve_keypair()
    client, server = secure_pair(*_mechanisms(server_key=other_public))
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and "HELLO" in violation.reason
    [error] = client.next_events()
    assert isinstance(error, PeerError)
    assert not client.handshake_done and not server.handshake_done


def test_tampered_message_is_refused() -> None:
    client, server = _pair()
    wire = bytearray(client.encode_message([b"payload"]))
    wire[-1] ^= 1
    server.receive_data(bytes(wire))
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and "MESSAGE box" in violation.reason


def test_replayed_message_is_refused() -> None:
    client, server = _pair()
    wire = client.encode_message([b"once"])
    server.receive_data(wire + wire)
    events = server.next_events()
    assert events[0] == Message([b"once"])
    assert isinstance(events[1], ProtocolViolation) and "nonce" in events[1].reason


def test_clear_text_traffic_is_refused_after_the_handshake() -> None:
    client, server = _pair()
    server.receive_data(frame(b"plain"))
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation)
    client2, server2 = _pair()
    server2.receive_data(command(b"PING", b"\x00\x01"))
    [violation] = server2.next_events()
    assert isinstance(violation, ProtocolViolation) and "MESSAGE" in violation.reason


def test_malformed_hello_is_refused() -> None:
    server = ZmtpConnection("DEALER", as_server=True, mechanism=_mechanisms()[1])
    server.start()
    server.receive_data(greeting(mechanism=b"CURVE") + command(b"HELLO", b"\x01\x00" + bytes(10)))
    [violation] = server.next_events()
    assert isinstance(violation, ProtocolViolation) and "malformed HELLO" in violation.reason


def test_golden_hello_layout() -> None:
    client = ZmtpConnection("DEALER", mechanism=_mechanisms()[0])
    client.start()
    client.receive_data(greeting(mechanism=b"CURVE", as_server=True))
    hello = client.data_to_send()
    # Frame: flags 0x04, size 200; name; version 1.0; 72 zero bytes; C'; short nonce 1; 80-byte box.
    assert hello[:2] == b"\x04\xc8" and hello[2:8] == b"\x05HELLO" and hello[8:10] == b"\x01\x00"
    assert hello[10:82] == bytes(72) and hello[114:122] == (1).to_bytes(8, "big")
    assert len(hello) == 202


@pytest.mark.parametrize("form", ["z85", "raw", "str"])
def test_keys_from_pyzmq_are_accepted_in_any_form(form: str) -> None:
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()

    def convert(key: bytes) -> bytes | str:
        if form == "raw":
            return z85_decode(key)
        return key.decode() if form == "str" else key

    client, server = secure_pair(
        CurveMechanism(False, convert(client_public), convert(client_secret), convert(server_public)),
        CurveMechanism(True, convert(server_public), convert(server_secret)),
    )
    assert client.handshake_done and server.handshake_done


def test_bad_keys_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="server_key"):
        CurveMechanism(False, CLIENT_PUBLIC, CLIENT_SECRET, None)
    with pytest.raises(ValueError, match="does not belong"):
        CurveMechanism(False, SERVER_PUBLIC, CLIENT_SECRET, SERVER_PUBLIC)
    with pytest.raises(ValueError, match="32 raw bytes or 40 Z85"):
        CurveMechanism(True, b"", b"short")
    with pytest.raises(ValueError, match="Z85"):
        CurveMechanism(True, b"", b"~" * 40)
    server = CurveMechanism(True, b"", SERVER_SECRET)  # a server may omit its public key
    assert server.public_key == z85_decode(SERVER_PUBLIC)
