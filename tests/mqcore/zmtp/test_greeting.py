"""The 64-byte greeting: layout, incremental parsing, version acceptance and refusal."""

from __future__ import annotations

import pytest

from mqcore.zmtp import HandshakeDone, ProtocolViolation, ZmtpConnection

from .wire import greeting, ready


def test_our_greeting_layout() -> None:
    out = ZmtpConnection("PUSH").start()
    assert len(out) == 64
    assert out[0] == 0xFF and out[9] == 0x7F
    assert out[10:12] == b"\x03\x01"
    assert out[12:32] == b"NULL" + bytes(16)
    assert out[32] == 0
    assert out[33:] == bytes(31)
    assert out == greeting()


def test_as_server_byte_is_zero_with_null() -> None:
    # RFC 37: "When a peer uses the NULL security mechanism, the as-server field MUST be zero."
    assert ZmtpConnection("PULL", as_server=True).start()[32] == 0


def test_start_twice_is_refused() -> None:
    from mqcore.zmtp import ZmtpStateError

    conn = ZmtpConnection("PUSH")
    conn.start()
    with pytest.raises(ZmtpStateError):
        conn.start()


def test_greeting_and_ready_one_byte_at_a_time() -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    stream = greeting(padding=b"\x00" * 7 + b"\x01") + ready(b"PUSH")
    for index in range(len(stream)):
        conn.receive_data(stream[index : index + 1])
        if index < 63:
            assert conn.peer_version is None
            assert conn.data_to_send() == b""
    assert conn.peer_version == (3, 1)
    assert conn.data_to_send().startswith(b"\x04")
    events = conn.next_events()
    assert [type(e) for e in events] == [HandshakeDone]
    assert conn.handshake_done and not conn.dead


@pytest.mark.parametrize("version", [(3, 0), (3, 1), (3, 2), (4, 0), (255, 255)])
def test_higher_and_equal_versions_are_accepted(version: tuple[int, int]) -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(greeting(*version) + ready(b"PUSH"))
    [done] = conn.next_events()
    assert isinstance(done, HandshakeDone)
    assert done.peer_version == version == conn.peer_version


def test_padding_and_filler_are_never_validated() -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    # libzmq puts its identity size + 1 in the padding; anything goes in the filler.
    conn.receive_data(greeting(padding=b"\x00" * 7 + b"\x05", filler=b"\xaa" * 31) + ready(b"PUSH"))
    assert conn.handshake_done


def _refused(data: bytes) -> ProtocolViolation:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(data)
    events = conn.next_events()
    assert conn.dead
    assert len(events) == 1 and isinstance(events[0], ProtocolViolation), events
    assert conn.data_to_send() == b""
    return events[0]


def test_zmtp_2_peer_is_refused_from_its_first_11_bytes() -> None:
    # A ZMTP 2.0 peer sends signature + revision 1, then its socket type, and waits for us.
    violation = _refused(b"\xff" + bytes(8) + b"\x7f" + b"\x01" + b"\x05")
    assert "major version 1" in violation.reason


def test_zmtp_1_peer_is_refused() -> None:
    # ZMTP 1.0: an identity frame (length, flags, body) instead of a signature.
    _refused(b"\x01\x00")


def test_signature_without_7f_is_refused() -> None:
    _refused(b"\xff" + bytes(8) + b"\x7e")


def test_garbage_is_refused_at_once() -> None:
    _refused(b"GET / HTTP/1.1\r\n\r\n")


def test_mechanism_mismatch_is_refused() -> None:
    violation = _refused(greeting(mechanism=b"PLAIN"))
    assert "PLAIN" in violation.reason and "NULL" in violation.reason


def test_data_after_refusal_is_ignored() -> None:
    conn = ZmtpConnection("PULL")
    conn.start()
    conn.receive_data(b"\x00")
    conn.receive_data(greeting() + ready(b"PUSH"))
    assert [type(e) for e in conn.next_events()] == [ProtocolViolation]
    assert conn.next_events() == [] and conn.buffered_bytes == 0
