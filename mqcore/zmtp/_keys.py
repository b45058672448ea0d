"""CURVE key helpers: key pairs and public keys as pyzmq makes them, and option coercion.

Keys are Curve25519 keys of 32 bytes. Users meet them as 40-character Z85 text (``zmq.curve_keypair``
returns that); options accept either form and the mechanisms work on raw bytes.
"""

from __future__ import annotations

from nacl import bindings

from mqcore.zmtp._z85 import z85_decode, z85_encode

__all__ = ["KEY_SIZE", "curve_key", "curve_keypair", "curve_public"]

KEY_SIZE = 32
_Z85_KEY_SIZE = 40


def curve_key(value: bytes | bytearray | str, what: str = "a CURVE key") -> bytes:
    """``value`` as 32 raw bytes; it may be 32 raw bytes or 40 Z85 characters (bytes or str).
    ValueError, naming ``what``, for anything else."""
    raw = value.encode("ascii", "replace") if isinstance(value, str) else bytes(value)
    if len(raw) == KEY_SIZE and not isinstance(value, str):
        return raw
    if len(raw) == _Z85_KEY_SIZE:
        try:
            return z85_decode(raw)
        except ValueError as error:
            raise ValueError(f"{what} is not valid Z85: {error}") from None
    raise ValueError(f"{what} must be 32 raw bytes or 40 Z85 characters, not {len(raw)} bytes")


def curve_keypair() -> tuple[bytes, bytes]:
    """A new (public, secret) key pair, each as 40 Z85 bytes, like ``zmq.curve_keypair()``."""
    public, secret = bindings.crypto_box_keypair()
    return z85_encode(public), z85_encode(secret)


def curve_public(secret_key: bytes | str) -> bytes:
    """The Z85 public key belonging to ``secret_key`` (Z85 or raw), like ``zmq.curve_public``."""
    secret = curve_key(secret_key, "the secret key")
    return z85_encode(bindings.crypto_scalarmult_base(secret))
