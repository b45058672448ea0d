"""Bounded memory under hostile or greedy peers: a partial frame near MAXMSGSIZE is buffered at most
once, an oversized header is refused before any body is kept, and a flooding peer is held at the
receiver's RCVHWM by TCP back-pressure (the pipe never grows past it)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import mqcore
from tests.mqcore.interop.test_interop_hostile import _engines
from tests.mqcore.interop.test_interop_zmtp30 import greeting, ready

LIMIT = 4096


def _raw_to(sock: Any) -> socket.socket:
    host, port = sock.last_endpoint.decode()[len("tcp://"):].rsplit(":", 1)
    raw = socket.create_connection((host, int(port)))
    raw.settimeout(5)
    return raw


def _wait(predicate: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def test_partial_frame_is_buffered_within_maxmsgsize(ctx: mqcore.Context) -> None:
    pull = ctx.socket(mqcore.PULL)
    pull.linger = 0
    pull.maxmsgsize = LIMIT
    pull.bind("tcp://127.0.0.1:*")
    raw = _raw_to(pull)
    body_len = LIMIT
    raw.sendall(greeting(3, 1) + ready(b"PUSH") + b"\x02" + struct.pack(">Q", body_len) + b"x" * (LIMIT - 10))
    assert _wait(lambda: any(e.conn.buffered_bytes >= LIMIT - 10 for e in _engines(pull)))
    assert all(e.conn.buffered_bytes <= LIMIT + 9 for e in _engines(pull))
    raw.sendall(b"x" * 10)
    pull.rcvtimeo = 5000
    assert pull.recv() == b"x" * LIMIT
    raw.close()


def test_oversized_header_is_refused_before_its_body(ctx: mqcore.Context) -> None:
    pull = ctx.socket(mqcore.PULL)
    pull.linger = 0
    pull.maxmsgsize = LIMIT
    mon = pull.get_monitor_socket(mqcore.EVENT_DISCONNECTED)
    mon.rcvtimeo = 5000
    pull.bind("tcp://127.0.0.1:*")
    raw = _raw_to(pull)
    raw.sendall(greeting(3, 1) + ready(b"PUSH") + b"\x02" + struct.pack(">Q", LIMIT + 1) + b"y" * 100)
    mon.recv_multipart()  # DISCONNECTED
    assert _wait(lambda: _engines(pull) == [])  # the session let go of the engine
    raw.close()
    mon.close()


def test_flooding_peer_is_held_at_rcvhwm(ctx: mqcore.Context) -> None:
    hwm = 20
    pull, push = ctx.socket(mqcore.PULL), ctx.socket(mqcore.PUSH)
    for s in (pull, push):
        s.linger = 0
    pull.rcvhwm = hwm
    push.sndhwm = 100000
    pull.bind("tcp://127.0.0.1:*")
    push.connect(pull.last_endpoint.decode())
    for i in range(5000):
        push.send(b"%d" % i)
    pull.rcvtimeo = 5000
    assert pull.recv() == b"0"  # (runs the socket's commands: the pipe is attached)
    # A blocking recv may have read the connection in this thread and left the IO thread parked (inline
    # IO, mqcore/engine/_inline.py); waiting some other way (EVENTS, like a poller) hands reading back to the IO
    # thread, which must then fill the pipe up to the HWM and no further.
    pull.getsockopt(mqcore.EVENTS)
    assert _wait(lambda: sum(p.backlog for p in pull._pipes) >= hwm - 1)
    assert all(p.backlog <= hwm for p in pull._pipes)
    for i in range(1, 5000):
        assert pull.recv() == b"%d" % i
