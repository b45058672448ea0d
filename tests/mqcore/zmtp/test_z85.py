"""Z85 (RFC 32) and CURVE key helpers, checked against the RFC and against pyzmq."""

from __future__ import annotations

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st
from zmq.utils import z85 as pyzmq_z85

from mqcore.zmtp import curve_keypair, curve_public, z85_decode, z85_encode
from mqcore.zmtp._keys import curve_key

RFC_BYTES = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])


def test_rfc32_test_vector() -> None:
    assert z85_encode(RFC_BYTES) == b"HelloWorld"
    assert z85_decode(b"HelloWorld") == RFC_BYTES
    assert z85_decode("HelloWorld") == RFC_BYTES


def test_extremes_and_empty() -> None:
    assert z85_encode(b"") == b"" and z85_decode(b"") == b""
    assert z85_encode(bytes(4)) == b"00000"
    assert z85_encode(b"\xff" * 4) == b"%nSc0"
    assert z85_decode(b"%nSc0") == b"\xff" * 4


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64).map(lambda b: b[: len(b) - len(b) % 4]))
def test_round_trip_and_agreement_with_pyzmq(data: bytes) -> None:
    text = z85_encode(data)
    assert z85_decode(text) == data
    assert text == pyzmq_z85.encode(data)


@pytest.mark.parametrize("bad", [b"abc", b"Hello Worl", b"#####", "Hellö"])
def test_bad_text_is_refused(bad: bytes | str) -> None:
    with pytest.raises(ValueError):
        z85_decode(bad)


def test_bad_binary_length_is_refused() -> None:
    with pytest.raises(ValueError, match="multiples of 4"):
        z85_encode(b"abc")


def test_keypair_matches_pyzmq() -> None:
    public, secret = curve_keypair()
    assert len(public) == len(secret) == 40
    assert zmq.curve_public(secret) == public
    assert curve_public(secret) == public
    pz_public, pz_secret = zmq.curve_keypair()
    assert curve_public(pz_secret) == pz_public
    assert curve_public(z85_decode(pz_secret)) == pz_public


def test_key_coercion() -> None:
    public, _ = zmq.curve_keypair()
    raw = z85_decode(public)
    assert curve_key(public) == curve_key(public.decode()) == curve_key(raw) == raw
    with pytest.raises(ValueError, match="40 Z85"):
        curve_key(b"x" * 33)
    with pytest.raises(ValueError, match="40 Z85"):
        curve_key(raw.hex()[:32])  # a 32-character str is not raw bytes
