"""Free loopback TCP ports for private brokers.

The kernel picks each port (bind to port 0); all requested ports are held open together so that one call
never returns the same port twice. A port is free when returned, not reserved: another process could take
it before the broker binds, which the broker's start then reports as a failed start.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct TCP ports on ``host`` that nothing listened on at the time of the call."""
    if count < 1:
        raise ValueError("count must be at least 1")
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def free_port(host: str = LOOPBACK) -> int:
    """One free TCP port on ``host`` (see :func:`free_ports`)."""
    return free_ports(1, host)[0]
