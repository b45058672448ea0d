"""NULL handshake: READY metadata, socket-type pairs, identity, ERROR, golden bytes."""

from __future__ import annotations

import pytest

from mqcore.zmtp import (
    SOCKET_TYPES,
    HandshakeDone,
    PeerError,
    ProtocolViolation,
    ZmtpConnection,
    ZmtpStateError,
    compatible,
)

from .wire import command, connect, greeting, prop, ready

COMPATIBLE_PAIRS = [
    ("PAIR", "PAIR"),
    ("PUB", "SUB"),
    ("PUB", "XSUB"),
    ("XPUB", "SUB"),
    ("XPUB", "XSUB"),
    ("PUSH", "PULL"),
    ("REQ", "REP"),
    ("REQ", "ROUTER"),
    ("DEALER", "REP"),
    ("DEALER", "ROUTER"),
    ("DEALER", "DEALER"),
    ("ROUTER", "ROUTER"),
    ("CLIENT", "SERVER"),
    ("RADIO", "DISH"),
    ("SCATTER", "GATHER"),
    ("PEER", "PEER"),
    ("CHANNEL", "CHANNEL"),
]


def test_golden_ready_for_push() -> None:
    # RFC 37: flags 0x04, size 26; name "READY" (length 5); property "Socket-Type" (length 11)
    # with a 4-byte big-endian value length 4 and the value "PUSH". No Identity: none is set.
    expected = b"\x04\x1a\x05READY\x0bSocket-Type\x00\x00\x00\x04PUSH"
    conn = ZmtpConnection("PUSH")
    conn.start()
    conn.receive_data(greeting())
    assert conn.data_to_send() == expected


def test_golden_ready_with_identity() -> None:
    # 6 (name) + 12 + 4 + 6 (Socket-Type) + 9 + 4 + 3 (Identity) = 44
    expected = b"\x04\x2c\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER\x08Identity\x00\x00\x00\x03abc"
    conn = ZmtpConnection("DEALER", identity=b"abc")
    conn.start()
    conn.receive_data(greeting())
    assert conn.data_to_send() == expected


def test_rfc_worked_example_dealer_ready_is_accepted() -> None:
    # The DEALER READY of RFC 37's worked example, byte for byte (size 41, empty Identity).
    example = b"\x04\x29\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER\x08Identity\x00\x00\x00\x00"
    conn = ZmtpConnection("ROUTER", as_server=True)
    conn.start()
    conn.receive_data(greeting() + example)
    [done] = conn.next_events()
    assert done == HandshakeDone("DEALER", b"", {"Socket-Type": b"DEALER", "Identity": b""}, (3, 1))


def test_handshake_in_memory() -> None:
    client, server = connect("PUSH", "PULL")
    [c_done] = client.next_events()
    [s_done] = server.next_events()
    assert c_done == HandshakeDone("PULL", b"", {"Socket-Type": b"PULL"}, (3, 1))
    assert s_done == HandshakeDone("PUSH", b"", {"Socket-Type": b"PUSH"}, (3, 1))
    for conn in (client, server):
        assert conn.handshake_done and not conn.dead
        assert conn.data_to_send() == b""
    assert client.peer_socket_type == "PULL" and server.peer_socket_type == "PUSH"


def test_identity_travels_in_metadata() -> None:
    client = ZmtpConnection("DEALER", identity=b"worker-1")
    server = ZmtpConnection("ROUTER", as_server=True)
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    [done] = server.next_events()
    assert isinstance(done, HandshakeDone)
    assert done.peer_identity == b"worker-1" == server.peer_identity
    assert done.metadata == {"Socket-Type": b"DEALER", "Identity": b"worker-1"}
    assert client.peer_identity == b""


def test_property_names_are_case_insensitive() -> None:
    conn = ZmtpConnection("ROUTER")
    conn.start()
    data = prop(b"socket-type", b"DEALER") + prop(b"IDENTITY", b"id") + prop(b"X-Extra", b"")
    conn.receive_data(greeting() + command(b"READY", data))
    [done] = conn.next_events()
    assert isinstance(done, HandshakeDone)
    assert done.peer_socket_type == "DEALER" and done.peer_identity == b"id"
    assert done.metadata["X-Extra"] == b""


@pytest.mark.parametrize(("a", "b"), COMPATIBLE_PAIRS)
def test_compatible_pairs_connect_both_ways(a: str, b: str) -> None:
    for client_type, server_type in ((a, b), (b, a)):
        client, server = connect(client_type, server_type)
        assert client.handshake_done and server.handshake_done


def test_compatibility_table_is_symmetric_and_exact() -> None:
    allowed = {frozenset(pair) for pair in COMPATIBLE_PAIRS}
    for a in SOCKET_TYPES:
        for b in SOCKET_TYPES:
            assert compatible(a, b) == (frozenset((a, b)) in allowed), (a, b)


@pytest.mark.parametrize(("a", "b"), [("PUSH", "PUSH"), ("PUB", "PULL"), ("REQ", "REQ"), ("SUB", "SUB")])
def test_incompatible_socket_types_are_refused(a: str, b: str) -> None:
    client, server = connect(a, b)
    for conn in (client, server):
        [violation] = conn.next_events()
        assert isinstance(violation, ProtocolViolation)
        assert "cannot talk" in violation.reason
        assert conn.dead and not conn.handshake_done
        with pytest.raises(ZmtpStateError):
            conn.encode_message([b"x"])


def test_refusal_sends_an_error_command() -> None:
    conn = ZmtpConnection("PUSH")
    conn.start()
    conn.receive_data(greeting() + ready(b"PUSH"))
    out = conn.data_to_send()
    reason = b"a PUSH socket cannot talk to a PUSH peer"
    assert out.endswith(command(b"ERROR", bytes((len(reason),)) + reason))


def test_missing_socket_type_is_refused() -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(greeting() + command(b"READY", prop(b"Identity", b"")))
    [violation] = conn.next_events()
    assert isinstance(violation, ProtocolViolation) and "Socket-Type" in violation.reason


@pytest.mark.parametrize(
    "bad",
    [
        command(b"READY", b"\x00"),  # empty property name
        command(b"READY", prop(b"Socket-Type", b"PUSH")[:-1]),  # value cut short
        command(b"READY", b"\x0bSocket-Type\x00\x00"),  # value size cut short
        command(b"HELLO"),  # not a NULL command
        b"\x04\x00",  # command with no name
        b"\x04\x03\x05REA",  # name runs past the frame
        b"\x05\x01\x01",  # command with MORE
        b"\x00\x01x",  # message before the handshake
    ],
)
def test_malformed_handshake_is_a_violation(bad: bytes) -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(greeting() + bad)
    events = conn.next_events()
    assert [type(e) for e in events] == [ProtocolViolation]
    assert conn.dead


def test_peer_error_during_handshake() -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(greeting() + command(b"ERROR", b"\x06denied") + ready(b"PUSH"))
    assert conn.next_events() == [PeerError(b"denied")]
    assert conn.dead and not conn.handshake_done


def test_second_ready_after_handshake_is_not_fatal() -> None:
    client, server = connect("PUSH", "PULL")
    server.next_events()
    server.receive_data(ready(b"PUSH"))
    [event] = server.next_events()
    assert type(event).__name__ == "UnknownCommand" and not server.dead


def test_peer_greeting_and_ready_in_one_read_with_messages() -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(greeting() + ready(b"PUSH") + b"\x00\x02hi")
    events = conn.next_events()
    assert [type(e).__name__ for e in events] == ["HandshakeDone", "Message"]


@pytest.mark.parametrize("socket_type", ["push", "STREAM", ""])
def test_unknown_socket_type_is_a_value_error(socket_type: str) -> None:
    with pytest.raises(ValueError):
        ZmtpConnection(socket_type)


@pytest.mark.parametrize("identity", [b"\x00abc", b"x" * 256])
def test_bad_identity_is_a_value_error(identity: bytes) -> None:
    with pytest.raises(ValueError):
        ZmtpConnection("DEALER", identity=identity)


def test_receive_before_start_is_refused() -> None:
    with pytest.raises(ZmtpStateError):
        ZmtpConnection("PUSH").receive_data(greeting())
