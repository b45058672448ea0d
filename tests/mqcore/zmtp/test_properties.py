"""Property tests: garbage never raises, buffering stays bounded, splitting never changes events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqcore.zmtp import Message, ProtocolViolation, ZmtpConnection

from .wire import command, greeting, ready

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS = st.sampled_from([-1, 0, 40, 300, 70_000])


def _bound(conn: ZmtpConnection, limit: int) -> int:
    if conn.peer_version is None:
        return 64
    return max(8, limit) if limit >= 0 else 1 << 62


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[last:point])
        last = point
    return pieces


def _feed(conn: ZmtpConnection, pieces: list[bytes], limit: int) -> list[object]:
    events: list[object] = []
    for piece in pieces:
        conn.receive_data(piece)
        assert conn.buffered_bytes <= _bound(conn, limit)
        conn.data_to_send()
        events += conn.next_events()
    return events


def _check_death(conn: ZmtpConnection, events: list[object]) -> None:
    fatal = [i for i, e in enumerate(events) if isinstance(e, ProtocolViolation)]
    assert len(fatal) <= 1
    if fatal:
        assert fatal[0] == len(events) - 1 and conn.dead


@SETTINGS
@given(
    prefix=st.sampled_from([b"", greeting(), greeting() + ready(b"PUSH"), greeting(3, 0) + ready(b"SUB")]),
    garbage=st.binary(max_size=2000),
    cuts=st.lists(st.integers(min_value=0), max_size=30),
    limit=LIMITS,
    socket_type=st.sampled_from(["PULL", "PUB"]),
)
def test_random_bytes_never_raise_and_stay_bounded(
    prefix: bytes, garbage: bytes, cuts: list[int], limit: int, socket_type: str
) -> None:
    conn = ZmtpConnection(socket_type, maxmsgsize=limit)
    conn.start()
    events = _feed(conn, _split(prefix + garbage, cuts), limit)
    _check_death(conn, events)


frames_st = st.lists(st.binary(max_size=600), min_size=1, max_size=4)
item_st = st.one_of(
    frames_st.map(lambda frames: ("message", frames)),
    st.tuples(st.sampled_from([b"SUBSCRIBE", b"CANCEL", b"PONG", b"JOIN"]), st.binary(max_size=16)),
    st.tuples(st.just(b"PING"), st.binary(min_size=2, max_size=18)),
)


def _stream(items: Sequence[tuple[Any, Any]]) -> bytes:
    sender = ZmtpConnection("DEALER")
    sender.start()
    sender.receive_data(greeting() + ready(b"ROUTER"))
    parts = [greeting(), sender.data_to_send()]
    assert sender.handshake_done
    for kind, payload in items:
        if kind == "message":
            parts.append(sender.encode_message(payload))  # type: ignore[arg-type]
        else:
            parts.append(command(kind, payload))  # type: ignore[arg-type]
    return b"".join(parts)


def _receive(data: bytes, pieces: list[bytes], limit: int = -1) -> list[object]:
    conn = ZmtpConnection("ROUTER", as_server=True, maxmsgsize=limit)
    conn.start()
    return _feed(conn, pieces, limit)


@SETTINGS
@given(items=st.lists(item_st, max_size=12), cuts=st.lists(st.integers(min_value=0), max_size=60))
def test_valid_stream_split_anywhere_decodes_the_same(items: list, cuts: list[int]) -> None:
    data = _stream(items)
    whole = _receive(data, [data])
    assert [e.frames for e in whole if isinstance(e, Message)] == [p for k, p in items if k == "message"]
    assert not any(isinstance(e, ProtocolViolation) for e in whole)
    assert _receive(data, _split(data, cuts)) == whole


@SETTINGS
@given(items=st.lists(item_st, max_size=8), cut=st.integers(min_value=0), limit=LIMITS)
def test_truncated_stream_gives_a_prefix_of_the_events(items: list, cut: int, limit: int) -> None:
    data = _stream(items)
    whole = _receive(data, [data], limit)
    truncated = data[: cut % (len(data) + 1)]
    part = _receive(truncated, _split(truncated, [cut // 7, cut // 3]), limit)
    assert part == whole[: len(part)]


def test_byte_at_a_time_equals_whole() -> None:
    items = [("message", [b"a" * 300, b""]), (b"PING", b"\x00\x05ctx"), ("message", [b"z"])]
    data = _stream(items)
    assert _receive(data, [data[i : i + 1] for i in range(len(data))]) == _receive(data, [data])
