"""Traffic commands: SUBSCRIBE/CANCEL (3.1 and 3.0 forms), PING/PONG, ERROR, unknown commands."""

from __future__ import annotations

import pytest

from mqcore.zmtp import (
    Cancel,
    Message,
    PeerError,
    Ping,
    Pong,
    ProtocolViolation,
    Subscribe,
    UnknownCommand,
)

from .wire import command, frame, handshaken, raw_peer


def test_subscribe_and_cancel_commands_between_31_peers() -> None:
    sub, pub = handshaken("SUB", "PUB")
    out = sub.encode_subscribe(b"topic") + sub.encode_cancel(b"")
    assert out == command(b"SUBSCRIBE", b"topic") + command(b"CANCEL")
    pub.receive_data(out)
    assert pub.next_events() == [Subscribe(b"topic"), Cancel(b"")]


def test_ping_pong_round_trip() -> None:
    a, b = handshaken("DEALER", "ROUTER")
    out = a.encode_ping(300, b"ctx")
    assert out == command(b"PING", b"\x01\x2cctx")
    b.receive_data(out)
    [ping] = b.next_events()
    assert ping == Ping(300, b"ctx")
    a.receive_data(b.encode_pong(ping.context))
    assert a.next_events() == [Pong(b"ctx")]


def test_ping_context_is_cut_to_16_bytes_on_receive() -> None:
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(command(b"PING", b"\x00\x00" + b"c" * 20) + command(b"PONG", b"p" * 20))
    assert conn.next_events() == [Ping(0, b"c" * 16), Pong(b"p" * 16)]


def test_ping_without_ttl_is_a_violation() -> None:
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(command(b"PING", b"\x00"))
    [event] = conn.next_events()
    assert isinstance(event, ProtocolViolation) and conn.dead


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.encode_ping(-1, b""),
        lambda c: c.encode_ping(65536, b""),
        lambda c: c.encode_ping(0, b"x" * 17),
        lambda c: c.encode_pong(b"x" * 17),
        lambda c: c.encode_error(b"x" * 256),
    ],
)
def test_out_of_range_command_arguments(call) -> None:  # type: ignore[no-untyped-def]
    client, _ = handshaken()
    with pytest.raises(ValueError):
        call(client)


def test_error_after_handshake_is_fatal() -> None:
    a, b = handshaken("PAIR", "PAIR")
    b.receive_data(a.encode_error(b"bye") + frame(b"ignored"))
    assert b.next_events() == [PeerError(b"bye")]
    assert b.dead
    b.receive_data(frame(b"more"))
    assert b.next_events() == []


def test_unknown_command_is_an_event() -> None:
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(command(b"JOIN", b"group") + frame(b"after"))
    assert conn.next_events() == [UnknownCommand(b"JOIN", b"group"), Message([b"after"])]
    assert not conn.dead


def test_command_between_frames_of_a_multipart_message() -> None:
    # libzmq may emit a heartbeat between the frames of a message it is sending.
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(frame(b"a", 0x01) + command(b"PING", b"\x00\x00") + frame(b"b"))
    assert conn.next_events() == [Ping(0, b""), Message([b"a", b"b"])]


# -- ZMTP 3.0 peers -------------------------------------------------------------------------------


def test_subscriptions_to_a_30_peer_are_messages() -> None:
    conn = raw_peer("SUB", b"PUB", version=(3, 0))
    assert conn.peer_version == (3, 0)
    assert conn.encode_subscribe(b"abc") == b"\x00\x04\x01abc"
    assert conn.encode_cancel(b"abc") == b"\x00\x04\x00abc"


def test_publisher_turns_30_subscription_messages_into_events() -> None:
    conn = raw_peer("XPUB", b"XSUB", version=(3, 0))
    conn.receive_data(frame(b"\x01news") + frame(b"\x00news") + frame(b"\x01") + frame(b"\x02data"))
    conn.receive_data(frame(b"\x01a", 0x01) + frame(b"b"))  # multipart: a plain message
    assert conn.next_events() == [
        Subscribe(b"news"),
        Cancel(b"news"),
        Subscribe(b""),
        Message([b"\x02data"]),
        Message([b"\x01a", b"b"]),
    ]


def test_publisher_accepts_message_form_from_31_peers_too() -> None:
    # libzmq 4.2 to 4.3.2 announce ZMTP 3.1 yet send subscriptions as 0x01/0x00 messages.
    conn = raw_peer("PUB", b"SUB")
    conn.receive_data(frame(b"\x01t") + command(b"SUBSCRIBE", b"u"))
    assert conn.next_events() == [Subscribe(b"t"), Subscribe(b"u")]


def test_non_publishers_deliver_0x01_messages_as_messages() -> None:
    conn = raw_peer("SUB", b"PUB", version=(3, 0))
    conn.receive_data(frame(b"\x01x"))
    assert conn.next_events() == [Message([b"\x01x"])]


def test_30_subscription_in_memory_pair_byte_at_a_time() -> None:
    pub = raw_peer("PUB", b"SUB", version=(3, 0))
    data = b"\x00\x04\x01abc" + b"\x00\x02\x00z"
    for index in range(len(data)):
        pub.receive_data(data[index : index + 1])
    assert pub.next_events() == [Subscribe(b"abc"), Cancel(b"z")]
