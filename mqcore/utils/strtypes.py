"""String type names and casts (pyzmq's ``zmq.utils.strtypes``, deprecated there since pyzmq 23 and kept for
code that still imports it): the casts warn as pyzmq's do."""

from __future__ import annotations

import builtins
import warnings

bytes = builtins.bytes  # noqa: A001 - pyzmq's module exports these names
unicode = str
basestring = (str,)

__all__ = ["asbytes", "b", "basestring", "bytes", "cast_bytes", "cast_unicode", "u", "unicode"]


def _deprecated() -> None:
    warnings.warn("zmq.utils.strtypes is deprecated in pyzmq 23.", DeprecationWarning, stacklevel=3)


def cast_bytes(s: str | builtins.bytes, encoding: str = "utf8", errors: str = "strict") -> builtins.bytes:
    """``s`` as bytes (str encoded with ``encoding``); TypeError for anything else."""
    _deprecated()
    if isinstance(s, builtins.bytes):
        return s
    if isinstance(s, str):
        return s.encode(encoding, errors)
    raise TypeError(f"expected unicode or bytes, got {s!r}")


def cast_unicode(s: str | builtins.bytes, encoding: str = "utf8", errors: str = "strict") -> str:
    """``s`` as str (bytes decoded with ``encoding``); TypeError for anything else."""
    _deprecated()
    if isinstance(s, builtins.bytes):
        return s.decode(encoding, errors)
    if isinstance(s, str):
        return s
    raise TypeError(f"expected unicode or bytes, got {s!r}")


b = asbytes = cast_bytes
u = cast_unicode
