"""Reading socket-monitor messages (pyzmq's ``zmq.utils.monitor``)."""

from __future__ import annotations

import struct
from typing import Any, TypedDict

from mqcore.constants import Event

__all__ = ["parse_monitor_message", "recv_monitor_message"]


class MonitorMessage(TypedDict):
    """One event: ``event`` (an ``Event``), ``value`` (fd, errno, interval or error code by event),
    ``endpoint`` (bytes)."""

    event: int
    value: int
    endpoint: bytes


def parse_monitor_message(msg: list[bytes]) -> MonitorMessage:
    """Decode the two frames of a monitor message; ValueError if they are not one."""
    if len(msg) != 2 or len(msg[0]) != 6:
        raise ValueError(f"not a monitor message: {msg!r}")
    event, value = struct.unpack("=HI", msg[0])
    try:
        event = Event(event)
    except ValueError:
        pass
    return {"event": event, "value": value, "endpoint": msg[1]}


def recv_monitor_message(socket: Any, flags: int = 0) -> Any:
    """Receive and decode one event from a monitor socket (honours RCVTIMEO and NOBLOCK): a
    MonitorMessage, or for an ``mqcore.asyncio`` socket a future of one."""
    got = socket.recv_multipart(flags)
    if isinstance(got, list):
        return parse_monitor_message(got)
    from mqcore.asyncio import _then

    return _then(got, parse_monitor_message)
