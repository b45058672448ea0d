"""Z85 (RFC 32) with pyzmq's names: ``encode(raw) -> bytes`` and ``decode(text) -> bytes``.

Lengths must be multiples of 4 (raw) and 5 (text); ValueError otherwise or for a character outside
the alphabet. ``decode`` takes str or bytes.
"""

from __future__ import annotations

from mqcore.zmtp import z85_decode as decode
from mqcore.zmtp import z85_encode as encode

__all__ = ["encode", "decode"]
