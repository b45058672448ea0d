"""JSON to and from UTF-8 bytes (pyzmq's ``zmq.utils.jsonapi``), as ``send_json``/``recv_json`` use."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps", "loads"]

jsonmod = json  # pyzmq keeps this name for old callers


def dumps(o: object, **kwargs: Any) -> bytes:
    """``o`` as JSON, UTF-8 encoded; keyword arguments go to ``json.dumps``."""
    return json.dumps(o, **kwargs).encode("utf-8")


def loads(s: bytes | str, **kwargs: Any) -> Any:
    """The object in JSON text ``s`` (bytes are UTF-8); keyword arguments go to ``json.loads``."""
    return json.loads(s.decode("utf-8") if isinstance(s, bytes) else s, **kwargs)
