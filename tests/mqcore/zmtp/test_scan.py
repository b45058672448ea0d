"""The one frame scanner (``scan_messages``) against the decoder: on arbitrary frame streams cut at
arbitrary places, a reader that scans each read itself and leaves the rest to the decoder (as the
engine's direct read does) sees what the decoder alone sees: the same messages, commands and
violations, in the same order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqcore.zmtp import COMMAND, MORE, FrameDecoder, Message, encode_messages, lone_message, scan_messages

from .wire import frame

LIMITS = (-1, 0, 1, 100, 255, 256, 5000)


def _body(draw: Any) -> bytes:
    size = draw(st.one_of(st.integers(0, 20), st.integers(250, 300), st.integers(1000, 3000)))
    return bytes([draw(st.integers(0, 255))]) * size


@st.composite
def frame_streams(draw: Any) -> bytes:
    """Wire bytes of frames with any flags: messages (single or multipart, short or long form),
    commands, and now and then a frame no peer may send (reserved bits, a command with MORE)."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["message", "message", "multipart", "command", "bad"]))
        if kind == "message":
            parts.append(frame(_body(draw)))
        elif kind == "multipart":
            count = draw(st.integers(2, 4))
            parts.extend(frame(_body(draw), MORE if i < count - 1 else 0) for i in range(count))
        elif kind == "command":
            parts.append(frame(b"\x04PING" + _body(draw), COMMAND))
        else:
            parts.append(frame(_body(draw), draw(st.sampled_from([0x08, 0x80, COMMAND | MORE]))))
    return b"".join(parts)


@st.composite
def cuts(draw: Any, wire: bytes) -> list[bytes]:
    """``wire`` cut into reads at arbitrary places (empty reads included)."""
    points = sorted(draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    bounds = [0, *points, len(wire)]
    return [wire[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _decoder(limit: int, seen: list[Any]) -> FrameDecoder:
    decoder = FrameDecoder(seen, lambda body: seen.append(("command", body)),
                           lambda reason: seen.append(("violation", reason)), limit)
    decoder.messages_allowed = True
    return decoder


def _decoded(reads: list[bytes], limit: int) -> list[Any]:
    seen: list[Any] = []
    decoder = _decoder(limit, seen)
    for data in reads:
        decoder.feed(data)
    return seen


def _scanned_first(reads: list[bytes], limit: int) -> list[Any]:
    """Each read scanned from a message boundary (after the bytes the decoder holds), the rest to the
    decoder: the direct read's scheme (a read that is one common message alone taken whole first)."""
    seen: list[Any] = []
    decoder = _decoder(limit, seen)
    for data in reads:
        held = decoder.held_bytes()
        if held is None or decoder.stopped:  # a large body is filled in place: the decoder's alone
            decoder.feed(data)
            continue
        decoder.drop_held()
        data = held + data
        lone = lone_message(data, decoder.limit)
        msgs, done = ([lone], len(data)) if lone is not None else scan_messages(data, 0, decoder.limit)
        seen.extend(Message(m) for m in msgs)
        decoder.feed(data[done:])
    return seen


@settings(max_examples=200, deadline=None)
@given(data=st.data(), limit=st.sampled_from(LIMITS))
def test_scanning_first_agrees_with_the_decoder_on_any_split(data: Any, limit: int) -> None:
    wire = data.draw(frame_streams())
    reads = data.draw(cuts(wire))
    expected = _decoded([wire], limit)
    assert _decoded(reads, limit) == expected
    assert _scanned_first(reads, limit) == expected


@settings(max_examples=300, deadline=None)
@given(data=st.data(), limit=st.sampled_from(LIMITS))
def test_a_lone_message_is_what_the_scan_finds_alone(data: Any, limit: int) -> None:
    wire = data.draw(st.one_of(
        frame_streams(),
        st.builds(lambda body: encode_messages([[body]]), st.binary(max_size=300)),
        st.builds(lambda body: encode_messages([[b"", body]]), st.binary(max_size=300)),
    ))
    wire = wire[:data.draw(st.integers(0, len(wire)))] if data.draw(st.booleans()) else wire
    limit = _decoder(limit, []).limit
    lone = lone_message(wire, limit)
    msgs, done = scan_messages(wire, 0, limit)
    if lone is not None:
        assert (msgs, done) == ([lone], len(wire))
    else:  # what it declines is not one common message alone, or the limit is under a short frame's size
        common = len(msgs) == 1 and done == len(wire) and (
            (len(msgs[0]) == 1 and len(msgs[0][0]) <= 255)
            or (len(msgs[0]) == 2 and msgs[0][0] == b"" and len(msgs[0][1]) <= 255))
        assert not common or limit < 255


@settings(max_examples=100, deadline=None)
@given(msgs=st.lists(st.lists(st.binary(max_size=300), min_size=1, max_size=4), max_size=20),
       cut=st.integers(0, 10_000))
def test_scan_returns_whole_messages_and_stops_at_the_first_incomplete_one(msgs: list[list[bytes]], cut: int) -> None:
    wire = encode_messages(msgs)
    assert scan_messages(wire, 0, 1 << 20) == (msgs, len(wire))
    cut = min(cut, len(wire))
    got, done = scan_messages(wire[:cut], 0, 1 << 20)
    assert got == msgs[:len(got)]
    assert done == len(encode_messages(got))
    assert len(got) == len(msgs) or len(encode_messages(msgs[:len(got) + 1])) > cut


def test_scan_takes_whole_messages_and_stops_before_anything_else() -> None:
    msgs = [[b"a"], [b"b" * 300], [b"c", b"", b"d" * 70000]]
    wire = encode_messages(msgs)
    assert scan_messages(wire, 0, 1 << 20) == (msgs, len(wire))
    # A partial multipart message: the scan stops at its start, so the decoder gets all of it.
    first = encode_messages(msgs[:2])
    assert scan_messages(wire[:-5], 0, 1 << 20) == (msgs[:2], len(first))
    # A command (e.g. PING) and a frame over the size limit stop the scan where they start.
    assert scan_messages(first + frame(b"\x04PING\x00\x00", COMMAND), 0, 1 << 20) == (msgs[:2], len(first))
    assert scan_messages(wire, 0, 1000) == (msgs[:2], len(first))
    assert scan_messages(b"\x00", 0, 10) == ([], 0)
    # REQ/REP envelopes (an empty delimiter, then the body), whole or cut anywhere after the first.
    replies = [[b"", b"r%d" % i] for i in range(3)] + [[b"", b""], [b"", b"", b"x"]]
    wire = encode_messages(replies)
    assert scan_messages(wire, 0, 1 << 20) == (replies, len(wire))
    for cut in range(len(encode_messages(replies[:1])), len(wire)):
        msgs, done = scan_messages(wire[:cut], 0, 1 << 20)
        assert msgs == replies[:len(msgs)] and done == len(encode_messages(msgs)) and done <= cut
        assert len(encode_messages(replies[:len(msgs) + 1])) > cut  # the next one is not complete


def test_held_bytes_carry_a_split_message_into_the_next_scan() -> None:
    # Wherever a read ends, the decoder's held bytes put before the rest of the stream scan to the
    # messages the decoder did not emit; only a large body being filled in place is not offered.
    msgs = [[b"a"], [b"", b"b" * 300], [b"c" * 40000], [b"d", b"e" * 255, b"f"], [b"g" * 1000]]
    wire = encode_messages(msgs)
    large_start = len(encode_messages(msgs[:2])) + 9
    for cut in range(len(wire) + 1):
        events: list[Any] = []
        decoder = FrameDecoder(events, lambda body: None, lambda reason: pytest.fail(reason), -1)
        decoder.messages_allowed = True
        decoder.feed(wire[:cut])
        emitted = [ev.frames for ev in events]
        held = decoder.held_bytes()
        if held is None:
            assert large_start <= cut < large_start + 40000  # in the 40000-byte body, read in place
            continue
        decoder.drop_held()
        assert decoder.held_bytes() == b""
        rest, done = scan_messages(held + wire[cut:], 0, 1 << 20)
        assert emitted + rest == msgs
        assert done == len(held) + len(wire) - cut
    assert scan_messages(wire, len(encode_messages(msgs[:2])), 1 << 20) == (msgs[2:], len(wire))  # from a later start


def test_lone_message_declines_whatever_is_not_one_common_message_alone() -> None:
    limit = _decoder(-1, []).limit
    assert lone_message(encode_messages([[b"abc"]]), limit) == [b"abc"]
    assert lone_message(encode_messages([[b"", b"abc"]]), limit) == [b"", b"abc"]
    assert lone_message(b"\x01\x00\x01\x03abc", limit) is None  # the envelope's body frame has MORE
    assert lone_message(b"\x01\x01\x00\x02ab", limit) is None  # the delimiter is not empty
    assert lone_message(b"\x04\x03abc", limit) is None  # a command
    assert lone_message(encode_messages([[b"a"], [b"b"]]), limit) is None  # two messages
    assert lone_message(encode_messages([[b"abc"]]), 2) is None  # over a MAXMSGSIZE under 255 bytes
