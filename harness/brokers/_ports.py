"""Free loopback TCP ports for private brokers.

Ports are drawn at random from below the kernel's ephemeral range (``ip_local_port_range``), where the
outgoing connections of every client on the machine take theirs: a port chosen there could be taken by a
client's connection in the seconds before a JVM broker binds it (seen with RocketMQ, which also binds the
port's neighbours). Each is checked by binding it, and all requested ports are held open together so that
one call never returns the same port twice. A port is free when returned, not reserved: another process
could still take it before the broker binds, which the broker's start then reports as a failed start.
"""

from __future__ import annotations

import random
import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct TCP ports on ``host`` that nothing listened on at the time of the call."""
    if count < 1:
        raise ValueError("count must be at least 1")
    held: list[socket.socket] = []
    low, high = _below_ephemeral()
    try:
        for _ in range(50 * count):
            if len(held) == count:
                break
            s = _bound(host, _RANDOM.randrange(low, high))
            if s is not None:
                held.append(s)
        while len(held) < count:  # the range is crowded: let the kernel choose
            s = _bound(host, 0)
            assert s is not None
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


_RANDOM = random.SystemRandom()


def _below_ephemeral() -> tuple[int, int]:
    """[low, high): ports above the well-known ones and below where the kernel's ephemeral ports begin."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    return (10000, first) if first > 11000 else (first, 65536)


def _bound(host: str, port: int) -> socket.socket | None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
    except OSError:
        s.close()
        if port == 0:
            raise
        return None
    return s


def free_port(host: str = LOOPBACK) -> int:
    """One free TCP port on ``host`` (see :func:`free_ports`)."""
    return free_ports(1, host)[0]
