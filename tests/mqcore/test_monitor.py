"""Socket monitor: libzmq's event numbers and two-frame format, read with recv_monitor_message."""

from __future__ import annotations

import socket as pysocket
import struct
from typing import Any

import pytest

import mqcore
from mqcore.utils.monitor import parse_monitor_message, recv_monitor_message


def _events_until(mon: Any, wanted: int, limit: int = 30) -> list[dict[str, Any]]:
    """Read events until one equals ``wanted``; returns all read (RCVTIMEO bounds the wait)."""
    seen = []
    for _ in range(limit):
        ev = recv_monitor_message(mon)
        seen.append(ev)
        if ev["event"] == wanted:
            return seen
    raise AssertionError(f"{wanted!r} never came: {seen}")


def _sock(ctx: mqcore.Context, kind: int) -> Any:
    s = ctx.socket(kind)
    s.linger = 0
    s.rcvtimeo = 5000
    return s


def test_event_numbers_match_libzmq() -> None:
    assert (mqcore.EVENT_CONNECTED, mqcore.EVENT_CONNECT_DELAYED, mqcore.EVENT_CONNECT_RETRIED) == (1, 2, 4)
    assert (mqcore.EVENT_LISTENING, mqcore.EVENT_BIND_FAILED, mqcore.EVENT_ACCEPTED) == (8, 16, 32)
    assert (mqcore.EVENT_ACCEPT_FAILED, mqcore.EVENT_CLOSED, mqcore.EVENT_CLOSE_FAILED) == (64, 128, 256)
    assert (mqcore.EVENT_DISCONNECTED, mqcore.EVENT_MONITOR_STOPPED) == (512, 1024)
    assert mqcore.EVENT_HANDSHAKE_FAILED_NO_DETAIL == 2048
    assert mqcore.EVENT_HANDSHAKE_SUCCEEDED == 4096
    assert (mqcore.EVENT_HANDSHAKE_FAILED_PROTOCOL, mqcore.EVENT_HANDSHAKE_FAILED_AUTH) == (8192, 16384)


def test_wire_format_is_two_frames() -> None:
    ev = parse_monitor_message([struct.pack("=HI", 8, 7), b"tcp://x:1"])
    assert ev == {"event": mqcore.EVENT_LISTENING, "value": 7, "endpoint": b"tcp://x:1"}
    with pytest.raises(ValueError):
        parse_monitor_message([b"short"])


def test_bind_accept_handshake_disconnect_events(ctx: mqcore.Context) -> None:
    server = _sock(ctx, mqcore.PULL)
    mon = server.get_monitor_socket()
    mon.rcvtimeo = 5000
    server.bind("tcp://127.0.0.1:*")
    ep = server.last_endpoint
    ev = recv_monitor_message(mon)
    assert ev["event"] == mqcore.EVENT_LISTENING and ev["endpoint"] == ep
    client = _sock(ctx, mqcore.PUSH)
    client.connect(ep.decode())
    client.send(b"x")
    assert server.recv() == b"x"
    seen = _events_until(mon, mqcore.EVENT_HANDSHAKE_SUCCEEDED)
    assert mqcore.EVENT_ACCEPTED in [e["event"] for e in seen]
    client.close()
    _events_until(mon, mqcore.EVENT_DISCONNECTED)
    server.disable_monitor()
    _events_until(mon, mqcore.EVENT_MONITOR_STOPPED)
    mon.close()


def test_connect_side_events_and_retries(ctx: mqcore.Context) -> None:
    with pysocket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = _sock(ctx, mqcore.DEALER)
    client.reconnect_ivl = 20
    mon = client.get_monitor_socket(mqcore.EVENT_CONNECT_RETRIED | mqcore.EVENT_CONNECTED
                                    | mqcore.EVENT_HANDSHAKE_SUCCEEDED)
    mon.rcvtimeo = 5000
    client.connect(f"tcp://127.0.0.1:{port}")  # nobody listens yet
    ev = recv_monitor_message(mon)
    assert ev["event"] == mqcore.EVENT_CONNECT_RETRIED and ev["endpoint"] == f"tcp://127.0.0.1:{port}".encode()
    server = _sock(ctx, mqcore.ROUTER)
    server.bind(f"tcp://127.0.0.1:{port}")
    _events_until(mon, mqcore.EVENT_HANDSHAKE_SUCCEEDED)
    client.disable_monitor()
    mon.close()


def test_bind_failed_event(ctx: mqcore.Context) -> None:
    a, b = _sock(ctx, mqcore.PULL), _sock(ctx, mqcore.PULL)
    a.bind("tcp://127.0.0.1:*")
    mon = b.get_monitor_socket()
    mon.rcvtimeo = 5000
    with pytest.raises(mqcore.ZMQError):
        b.bind(a.last_endpoint.decode())
    ev = recv_monitor_message(mon)
    assert ev["event"] == mqcore.EVENT_BIND_FAILED and ev["value"] == mqcore.EADDRINUSE
    mon.close()


def test_incompatible_peer_gives_handshake_failed_protocol(ctx: mqcore.Context) -> None:
    server = _sock(ctx, mqcore.PUSH)
    mon = server.get_monitor_socket(mqcore.EVENT_HANDSHAKE_FAILED_PROTOCOL)
    mon.rcvtimeo = 5000
    server.bind("tcp://127.0.0.1:*")
    other = _sock(ctx, mqcore.PUSH)
    other.connect(server.last_endpoint.decode())
    ev = recv_monitor_message(mon)
    assert ev["event"] == mqcore.EVENT_HANDSHAKE_FAILED_PROTOCOL
    mon.close()


def test_monitor_needs_inproc(ctx: mqcore.Context) -> None:
    s = _sock(ctx, mqcore.PUB)
    with pytest.raises(mqcore.ZMQError):
        s.monitor("tcp://127.0.0.1:5999")


def test_closing_the_socket_stops_the_monitor(ctx: mqcore.Context) -> None:
    s = _sock(ctx, mqcore.PUB)
    mon = s.get_monitor_socket()
    mon.rcvtimeo = 5000
    s.close()
    assert recv_monitor_message(mon)["event"] == mqcore.EVENT_MONITOR_STOPPED
    mon.close()


def test_pyzmq_parses_our_monitor_messages(ctx: mqcore.Context) -> None:
    zmq_monitor = pytest.importorskip("zmq.utils.monitor")
    s = _sock(ctx, mqcore.PULL)
    mon = s.get_monitor_socket(mqcore.EVENT_LISTENING)
    mon.rcvtimeo = 5000
    s.bind("tcp://127.0.0.1:*")
    ev = zmq_monitor.parse_monitor_message(mon.recv_multipart())
    assert ev["event"] == mqcore.EVENT_LISTENING and ev["endpoint"] == s.last_endpoint
    mon.close()

