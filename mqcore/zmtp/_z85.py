"""Z85 (RFC 32): the printable encoding of CURVE keys, stateless.

Four bytes become five characters from an 85-symbol alphabet, read as one big-endian 32-bit number
written most significant digit first. Lengths must be multiples of 4 (binary) and 5 (text); there is
no padding, as the RFC leaves that to the application.
"""

from __future__ import annotations

import struct

__all__ = ["z85_encode", "z85_decode"]

_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_VALUE = [-1] * 256
for _index, _char in enumerate(_ALPHABET):
    _VALUE[_char] = _index
_WORD = struct.Struct(">I")


def z85_encode(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as Z85 text (ASCII bytes). ValueError if its length is not a multiple of 4."""
    data = bytes(data)
    if len(data) % 4:
        raise ValueError(f"Z85 encodes multiples of 4 bytes, not {len(data)} bytes")
    alphabet = _ALPHABET
    out = bytearray()
    for (value,) in _WORD.iter_unpack(data):
        digits = bytearray(5)
        for position in range(4, -1, -1):
            value, digit = divmod(value, 85)
            digits[position] = alphabet[digit]
        out += digits
    return bytes(out)


def z85_decode(text: bytes | str) -> bytes:
    """The bytes that Z85 ``text`` encodes. ValueError if its length is not a multiple of 5, if it
    holds a character outside the alphabet, or if a group of five exceeds 32 bits."""
    if isinstance(text, str):
        try:
            text = text.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("Z85 text is ASCII only") from None
    text = bytes(text)
    if len(text) % 5:
        raise ValueError(f"Z85 decodes multiples of 5 characters, not {len(text)}")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            digit = _VALUE[char]
            if digit < 0:
                raise ValueError(f"{chr(char)!r} is not a Z85 character")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise ValueError(f"Z85 group {text[start : start + 5]!r} exceeds 32 bits")
        out += _WORD.pack(value)
    return bytes(out)
