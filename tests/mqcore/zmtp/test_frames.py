"""Message framing: sizes, short/long forms, multipart, MAXMSGSIZE, malformed frames."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mqcore.zmtp import Message, ProtocolViolation, ZmtpConnection, ZmtpStateError

from .wire import frame, greeting, handshaken, raw_peer

SIZES = [0, 1, 255, 256, 65535, 1 << 20]


@pytest.mark.parametrize("size", SIZES)
def test_message_sizes_round_trip(size: int) -> None:
    client, server = handshaken()
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    server.receive_data(client.encode_message([body]))
    assert server.next_events() == [Message([body])]
    assert server.buffered_bytes == 0


@pytest.mark.parametrize(
    ("size", "header"), [(0, b"\x00\x00"), (255, b"\x00\xff"), (256, b"\x02" + bytes(6) + b"\x01\x00")]
)
def test_encoder_picks_short_form_up_to_255(size: int, header: bytes) -> None:
    client, _ = handshaken()
    out = client.encode_message([b"a" * size])
    assert out == header + b"a" * size


def test_multipart_flags() -> None:
    client, server = handshaken()
    out = client.encode_message([b"a", b"b" * 300, b"c"])
    assert out == frame(b"a", 0x01) + frame(b"b" * 300, 0x01) + frame(b"c")
    server.receive_data(out)
    assert server.next_events() == [Message([b"a", b"b" * 300, b"c"])]


def test_batch_of_messages_in_one_buffer() -> None:
    client, server = handshaken()
    messages = [[b"%d" % i] for i in range(1000)] + [[b"", b"x"], [b"y" * 70000]]
    server.receive_data(client.encode_messages(messages))
    assert [e.frames for e in server.next_events() if isinstance(e, Message)] == messages


def test_bytes_like_frames_are_accepted() -> None:
    client, server = handshaken()
    wide = memoryview(bytearray(b"abcdefgh")).cast("I")  # len() counts 2 items, 8 bytes
    server.receive_data(client.encode_messages([[bytearray(b"ba")], [memoryview(b"mv"), wide]]))
    assert server.next_events() == [Message([b"ba"]), Message([b"mv", b"abcdefgh"])]


def test_receive_accepts_bytearray_and_memoryview() -> None:
    client, server = handshaken()
    data = client.encode_messages([[b"one"], [b"two"]])
    server.receive_data(bytearray(data[:3]))
    server.receive_data(memoryview(data)[3:])
    assert server.next_events() == [Message([b"one"]), Message([b"two"])]


def test_empty_message_is_a_value_error() -> None:
    client, _ = handshaken()
    with pytest.raises(ValueError):
        client.encode_message([])
    with pytest.raises(ValueError):
        client.encode_messages([[b"x"], []])


def test_encoding_before_the_handshake_is_refused() -> None:
    from mqcore.zmtp import ZmtpConnection

    conn = ZmtpConnection("PUSH")
    conn.start()
    with pytest.raises(ZmtpStateError):
        conn.encode_message([b"x"])


def test_large_frame_in_small_reads() -> None:
    client, server = handshaken()
    body = b"q" * (1 << 20)
    data = client.encode_message([body, b"tail"])
    for start in range(0, len(data), 4096):
        server.receive_data(data[start : start + 4096])
        assert server.buffered_bytes <= len(body)
    assert server.next_events() == [Message([body, b"tail"])]


def _violation(conn_events: Sequence[object]) -> ProtocolViolation:
    assert len(conn_events) == 1 and isinstance(conn_events[0], ProtocolViolation), conn_events
    return conn_events[0]


@pytest.mark.parametrize("flags", [0x08, 0x10, 0x80, 0xF8])
def test_reserved_flag_bits_are_a_violation(flags: int) -> None:
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(bytes((flags, 1)) + b"x")
    _violation(conn.next_events())
    assert conn.dead


def test_size_beyond_2_63_is_a_violation() -> None:
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(b"\x02\x80" + bytes(7))
    assert "2**63-1" in _violation(conn.next_events()).reason


def test_command_with_more_is_a_violation() -> None:
    conn = raw_peer("PULL", b"PUSH")
    conn.receive_data(b"\x05\x05\x04PING")
    _violation(conn.next_events())


def test_maxmsgsize_allows_exactly_the_limit() -> None:
    conn = raw_peer("PULL", b"PUSH", maxmsgsize=100)
    conn.receive_data(frame(b"a" * 100))
    assert conn.next_events() == [Message([b"a" * 100])]


def test_maxmsgsize_refuses_from_the_header_before_any_body() -> None:
    conn = raw_peer("PULL", b"PUSH", maxmsgsize=1000)
    conn.receive_data(frame(b"ok") + b"\x02" + (1 << 40).to_bytes(8, "big"))
    events = conn.next_events()
    assert events[0] == Message([b"ok"])
    assert "MAXMSGSIZE" in _violation(events[1:]).reason
    assert conn.dead and conn.buffered_bytes == 0
    conn.receive_data(b"x" * 5000)  # the "body" is ignored
    assert conn.next_events() == [] and conn.buffered_bytes == 0



@pytest.mark.parametrize("prefix", [b"", "handshaken"])
def test_a_huge_announced_frame_holds_only_what_arrived(prefix: object) -> None:
    # No MAXMSGSIZE: a header may announce 2**62 bytes (before or after the handshake); the body's
    # buffer follows what arrived (it doubles as it fills), never the announced size.
    if prefix:
        conn = raw_peer("PULL", b"PUSH")
    else:
        conn = ZmtpConnection("PULL")
        conn.start()
        conn.receive_data(greeting())
    conn.receive_data(b"\x02" + (1 << 62).to_bytes(8, "big") + b"x" * 100_000)
    assert conn.buffered_bytes == 100_000
    if prefix:  # after the handshake the rest may be read in place, into a buffer of bounded size
        view = conn.receive_buffer()
        assert view is not None and 0 < len(view) < 64 << 20

def test_maxmsgsize_short_frame_header_alone_is_enough() -> None:
    conn = raw_peer("PULL", b"PUSH", maxmsgsize=40)
    conn.receive_data(b"\x00\x29")
    _violation(conn.next_events())


def test_maxmsgsize_applies_per_frame_of_a_multipart_message() -> None:
    # libzmq's v2_decoder checks each frame's size against ZMQ_MAXMSGSIZE, not the message total.
    conn = raw_peer("PULL", b"PUSH", maxmsgsize=100)
    conn.receive_data(frame(b"a" * 100, 0x01) + frame(b"b" * 100, 0x01) + frame(b"c" * 100))
    assert conn.next_events() == [Message([b"a" * 100, b"b" * 100, b"c" * 100])]
    conn.receive_data(frame(b"a" * 10, 0x01) + frame(b"b" * 101))
    _violation(conn.next_events())


def test_maxmsgsize_applies_to_commands_too() -> None:
    conn = raw_peer("PUB", b"SUB", maxmsgsize=40)
    conn.receive_data(b"\x04\x29\x09SUBSCRIBE" + b"t" * 31)
    _violation(conn.next_events())


def test_maxmsgsize_applies_to_the_handshake_as_in_libzmq() -> None:
    # libzmq decodes READY with the same limit ("the handshake fails if this is too small").
    from mqcore.zmtp import ZmtpConnection

    from .wire import greeting, ready

    conn = ZmtpConnection("PULL", maxmsgsize=20)
    conn.start()
    conn.receive_data(greeting() + ready(b"PUSH"))
    _violation(conn.next_events())


def test_partial_frame_header_is_kept() -> None:
    conn = raw_peer("PULL", b"PUSH")
    data = frame(b"x" * 300)
    conn.receive_data(data[:5])
    assert conn.buffered_bytes == 5
    conn.receive_data(data[5:20])
    assert conn.buffered_bytes == 11
    conn.receive_data(data[20:])
    assert conn.next_events() == [Message([b"x" * 300])]
    assert conn.buffered_bytes == 0


def test_a_body_larger_than_its_first_buffer_is_read_in_place_as_the_buffer_grows() -> None:
    from mqcore.zmtp._decoder import SPARE_LIMIT

    body = bytes(range(256)) * ((SPARE_LIMIT + 300_000) // 256)
    conn = raw_peer("PULL", b"PUSH")
    wire = frame(body)
    conn.receive_data(wire[:70_000])
    at = 70_000
    sizes = set()
    while at < len(wire):
        view = conn.receive_buffer()
        assert view is not None
        sizes.add(len(view))
        n = min(len(view), 3_000_000)
        view[:n] = wire[at:at + n]
        conn.received_into(n)
        at += n
    assert conn.next_events() == [Message([body])]
    assert conn.buffered_bytes == 0 and len(sizes) > 2
