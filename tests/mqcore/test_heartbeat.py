"""Heartbeats through real TCP against a fake ZMTP peer built on the sans-IO codec: PING/PONG, TTL,
HEARTBEAT_TIMEOUT dropping a silent peer (DISCONNECTED) and reconnecting."""

from __future__ import annotations

import socket
from typing import Any

import mqcore
from mqcore.utils.monitor import recv_monitor_message
from mqcore.zmtp import Event, Message, Ping, Pong, ZmtpConnection


class FakePeer:
    """One raw TCP connection speaking ZMTP through ``ZmtpConnection`` (blocking, with timeouts)."""

    def __init__(self, sock: socket.socket, socket_type: str) -> None:
        self.sock = sock
        self.sock.settimeout(5)
        self.conn = ZmtpConnection(socket_type)
        self.sock.sendall(self.conn.start())
        self.events: list[Event] = []

    def pump(self) -> list[Event]:
        """Read once (blocking up to the timeout); returns the new events ([] on EOF)."""
        data = self.sock.recv(65536)
        if not data:
            return []
        self.conn.receive_data(data)
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)
        events = self.conn.next_events()
        self.events += events
        return events

    def handshake(self) -> None:
        while not self.conn.handshake_done:
            assert self.pump() or self.conn.handshake_done or not self.conn.dead

    def wait_for(self, kind: type) -> Any:
        for _ in range(200):
            for ev in self.pump():
                if isinstance(ev, kind):
                    return ev
        raise AssertionError(f"no {kind.__name__}")

    def closed_by_peer(self) -> bool:
        """Read until EOF (True) or timeout (False), ignoring what arrives."""
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True

    def close(self) -> None:
        self.sock.close()


def listen() -> tuple[socket.socket, str]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(5)
    return srv, f"tcp://127.0.0.1:{srv.getsockname()[1]}"


def test_mqcore_pings_and_drops_a_silent_peer(ctx: mqcore.Context) -> None:
    srv, ep = listen()
    dealer = ctx.socket(mqcore.DEALER)
    dealer.linger = 0
    dealer.heartbeat_ivl = 50
    dealer.heartbeat_timeout = 200
    dealer.heartbeat_ttl = 1000
    dealer.reconnect_ivl = 50
    mon = dealer.get_monitor_socket(mqcore.EVENT_DISCONNECTED | mqcore.EVENT_HANDSHAKE_SUCCEEDED)
    mon.rcvtimeo = 5000
    dealer.connect(ep)
    conn, _ = srv.accept()
    peer = FakePeer(conn, "ROUTER")
    peer.handshake()
    ping = peer.wait_for(Ping)
    assert ping.ttl_ds == 10
    assert recv_monitor_message(mon)["event"] == mqcore.EVENT_HANDSHAKE_SUCCEEDED
    # now the peer stops answering: mqcore closes the connection and reconnects
    assert recv_monitor_message(mon)["event"] == mqcore.EVENT_DISCONNECTED
    assert peer.closed_by_peer()
    peer.close()
    again, _ = srv.accept()  # the reconnect
    peer2 = FakePeer(again, "ROUTER")
    peer2.handshake()
    dealer.send(b"after")
    msg = peer2.wait_for(Message)
    assert msg.frames == [b"after"]
    peer2.close()
    srv.close()
    mon.close()


def test_mqcore_answers_ping_with_pong_and_honours_ttl(ctx: mqcore.Context) -> None:
    pull = ctx.socket(mqcore.PULL)
    pull.linger = 0
    mon = pull.get_monitor_socket(mqcore.EVENT_DISCONNECTED)
    mon.rcvtimeo = 5000
    pull.bind("tcp://127.0.0.1:*")
    host, port = pull.last_endpoint.decode()[len("tcp://"):].rsplit(":", 1)
    peer = FakePeer(socket.create_connection((host, int(port))), "PUSH")
    peer.handshake()
    peer.sock.sendall(peer.conn.encode_ping(3, b"ctx-1"))  # TTL 0.3 s
    pong = peer.wait_for(Pong)
    assert pong.context == b"ctx-1"
    # silent afterwards: the TTL runs out and mqcore drops the connection
    assert recv_monitor_message(mon)["event"] == mqcore.EVENT_DISCONNECTED
    assert peer.closed_by_peer()
    peer.close()
    mon.close()


def test_heartbeats_between_mqcore_sockets_keep_traffic_flowing(make_pair: Any) -> None:
    a, b = make_pair(mqcore.PAIR, mqcore.PAIR, "tcp", heartbeat_ivl=20, heartbeat_timeout=2000)
    for i in range(20):
        a.send(b"%d" % i)
        assert b.recv() == b"%d" % i
        assert b.poll(10) == 0  # let a few heartbeat intervals pass between messages


