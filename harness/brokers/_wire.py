"""Tiny blocking socket helpers for readiness probes (a handshake, then close)."""

from __future__ import annotations

import socket

from harness.brokers._base import ProbeError


def connect(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProbeError("the broker closed the connection during the handshake")
        buf += chunk
    return bytes(buf)


def recv_until(sock: socket.socket, marker: bytes, limit: int = 65536) -> bytes:
    """Bytes up to and including ``marker``."""
    buf = bytearray()
    while marker not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise ProbeError("the broker closed the connection during the handshake")
        buf += chunk
        if len(buf) > limit:
            raise ProbeError("the broker's handshake answer is too long")
    return bytes(buf[: buf.index(marker) + len(marker)])
