"""PLAIN and CURVE against real libzmq (through pyzmq) over TCP on loopback, both directions.

Our side is a ZmtpConnection driven over a blocking socket in the test's thread (``TcpDriver``);
libzmq does its own IO in its own thread. Every wait is bounded (socket timeouts, RCVTIMEO).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from mqcore.zmtp import (
    CurveMechanism,
    PeerError,
    PlainMechanism,
    Pong,
    ProtocolViolation,
    Subscribe,
    ZmtpConnection,
    curve_keypair,
)

from .peers import TcpDriver, accept_all, zap_reply

TIMEOUT_MS = 5000
FRAMES_OUT = [b"ours", b"", b"y" * 1000]
FRAMES_BACK = [b"theirs", b"z" * 300]


@pytest.fixture
def ctx() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        yield context
    finally:
        context.destroy(linger=0)


def _zsocket(ctx: zmq.Context[zmq.Socket[bytes]], kind: int) -> zmq.Socket[bytes]:
    sock = ctx.socket(kind)
    sock.linger = 0
    sock.rcvtimeo = sock.sndtimeo = TIMEOUT_MS
    return sock


def _bind(sock: zmq.Socket[bytes]) -> int:
    return sock.bind_to_random_port("tcp://127.0.0.1")


def _dial(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_MS / 1000)


def _listen() -> socket.socket:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(TIMEOUT_MS / 1000)
    return listener


def _accept(listener: socket.socket) -> socket.socket:
    conn, _ = listener.accept()
    listener.close()
    return conn


def _exchange(ours: TcpDriver, theirs: zmq.Socket[bytes]) -> None:
    """A multipart message each way; the libzmq side answers after receiving."""
    ours.send(FRAMES_OUT)
    assert theirs.recv_multipart() == FRAMES_OUT
    theirs.send_multipart(FRAMES_BACK)
    assert ours.receive_message() == FRAMES_BACK


# -- CURVE ---------------------------------------------------------------------------------------


def test_our_curve_client_with_libzmq_server(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = curve_keypair()
    server = _zsocket(ctx, zmq.DEALER)
    server.curve_server = True
    server.curve_secretkey = server_secret
    port = _bind(server)
    conn = ZmtpConnection(
        "DEALER", mechanism=CurveMechanism(False, client_public, client_secret, server_public)
    )
    with _dial(port) as sock:
        ours = TcpDriver(sock, conn)
        ours.handshake()
        _exchange(ours, server)


def test_libzmq_curve_client_with_our_server(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    server_public, server_secret = curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    requests: list[list[bytes]] = []

    def handler(request: list[bytes]) -> list[bytes]:
        requests.append(request)
        return accept_all(request)

    client = _zsocket(ctx, zmq.DEALER)
    client.curve_serverkey = server_public
    client.curve_publickey = client_public
    client.curve_secretkey = client_secret
    with _listen() as listener:
        client.connect(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        sock = _accept(listener)
    with sock:
        conn = ZmtpConnection(
            "DEALER",
            as_server=True,
            mechanism=CurveMechanism(True, b"", server_secret),
            zap_handler=True,
            peer_address=sock.getpeername()[0],
        )
        ours = TcpDriver(sock, conn, zap=handler)
        ours.handshake()
        assert requests[0][3:6] == [b"127.0.0.1", b"", b"CURVE"]
        assert requests[0][6] == zmq.utils.z85.decode(client_public)
        client.send_multipart(FRAMES_BACK)
        assert ours.receive_message() == FRAMES_BACK
        ours.send(FRAMES_OUT)
        assert client.recv_multipart() == FRAMES_OUT


def test_our_curve_subscriber_with_libzmq_xpub(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = curve_keypair()
    xpub = _zsocket(ctx, zmq.XPUB)
    xpub.curve_server = True
    xpub.curve_secretkey = server_secret
    port = _bind(xpub)
    conn = ZmtpConnection("SUB", mechanism=CurveMechanism(False, client_public, client_secret, server_public))
    with _dial(port) as sock:
        ours = TcpDriver(sock, conn)
        ours.handshake()
        sock.sendall(conn.encode_subscribe(b"news") + conn.encode_ping(100))
        assert xpub.recv() == b"\x01news"  # our SUBSCRIBE opened and understood by libzmq
        assert ours.receive() == Pong(b"")  # libzmq answered our PING inside a MESSAGE
        xpub.send_multipart([b"news", b"item"])
        assert ours.receive_message() == [b"news", b"item"]


def test_libzmq_curve_subscriber_with_our_publisher(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    server_public, server_secret = curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    sub = _zsocket(ctx, zmq.SUB)
    sub.curve_serverkey = server_public
    sub.curve_publickey = client_public
    sub.curve_secretkey = client_secret
    sub.subscribe(b"t")
    with _listen() as listener:
        sub.connect(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        sock = _accept(listener)
    with sock:
        conn = ZmtpConnection(
            "PUB", as_server=True, mechanism=CurveMechanism(True, server_public, server_secret)
        )
        ours = TcpDriver(sock, conn)
        ours.handshake()
        assert ours.receive() == Subscribe(b"t")  # libzmq's command-flagged MESSAGE, opened
        ours.send([b"t", b"payload"])
        assert sub.recv_multipart() == [b"t", b"payload"]


def test_libzmq_curve_client_with_wrong_server_key_is_refused(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    _, server_secret = curve_keypair()
    wrong_public, _ = curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    client = _zsocket(ctx, zmq.DEALER)
    client.curve_serverkey = wrong_public
    client.curve_publickey = client_public
    client.curve_secretkey = client_secret
    with _listen() as listener:
        client.connect(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        sock = _accept(listener)
    with sock:
        conn = ZmtpConnection("DEALER", as_server=True, mechanism=CurveMechanism(True, b"", server_secret))
        ours = TcpDriver(sock, conn)
        ours.wait_for(lambda: conn.dead, "the refusal")
        assert any(isinstance(e, ProtocolViolation) and "HELLO" in e.reason for e in ours.events)


# -- PLAIN ---------------------------------------------------------------------------------------


@pytest.fixture
def plain_server(ctx: zmq.Context[zmq.Socket[bytes]]) -> Iterator[tuple[zmq.Socket[bytes], int]]:
    """A libzmq PLAIN server DEALER with pyzmq's ZAP handler knowing admin/secret."""
    auth = ThreadAuthenticator(ctx)
    auth.start()
    try:
        auth.configure_plain(domain="*", passwords={"admin": "secret"})
        server = _zsocket(ctx, zmq.DEALER)
        server.plain_server = True
        yield server, _bind(server)
    finally:
        auth.stop()


def test_our_plain_client_with_libzmq_server(plain_server: tuple[zmq.Socket[bytes], int]) -> None:
    server, port = plain_server
    conn = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"admin", b"secret"))
    with _dial(port) as sock:
        ours = TcpDriver(sock, conn)
        ours.handshake()
        _exchange(ours, server)


def test_our_plain_client_with_wrong_password_is_refused_by_libzmq(
    plain_server: tuple[zmq.Socket[bytes], int],
) -> None:
    _, port = plain_server
    conn = ZmtpConnection("DEALER", mechanism=PlainMechanism(False, b"admin", b"guess"))
    with _dial(port) as sock:
        ours = TcpDriver(sock, conn)
        ours.wait_for(lambda: conn.dead, "the refusal")
    assert PeerError(b"400") in ours.events  # libzmq's "^RROR" spelling, understood


def _plain_client(
    ctx: zmq.Context[zmq.Socket[bytes]], password: bytes
) -> tuple[zmq.Socket[bytes], socket.socket]:
    client = _zsocket(ctx, zmq.DEALER)
    client.plain_username = b"admin"
    client.plain_password = password
    with _listen() as listener:
        client.connect(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        return client, _accept(listener)


def _check_admin(request: list[bytes]) -> list[bytes]:
    if request[5:] == [b"PLAIN", b"admin", b"secret"]:
        return zap_reply(request, user=b"admin")
    return zap_reply(request, b"400", b"no")


def test_libzmq_plain_client_with_our_server(ctx: zmq.Context[zmq.Socket[bytes]]) -> None:
    client, sock = _plain_client(ctx, b"secret")
    with sock:
        conn = ZmtpConnection(
            "DEALER",
            as_server=True,
            mechanism=PlainMechanism(True),
            zap_handler=True,
            peer_address="127.0.0.1",
        )
        ours = TcpDriver(sock, conn, zap=_check_admin)
        ours.handshake()
        assert conn.user_id == b"admin"
        client.send_multipart(FRAMES_BACK)
        assert ours.receive_message() == FRAMES_BACK
        ours.send(FRAMES_OUT)
        assert client.recv_multipart() == FRAMES_OUT


def test_libzmq_plain_client_with_wrong_password_sees_auth_failure(
    ctx: zmq.Context[zmq.Socket[bytes]],
) -> None:
    client, sock = _plain_client(ctx, b"guess")
    monitor = client.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    monitor.rcvtimeo = TIMEOUT_MS
    try:
        with sock:
            conn = ZmtpConnection("DEALER", as_server=True, mechanism=PlainMechanism(True), zap_handler=True)
            ours = TcpDriver(sock, conn, zap=_check_admin)
            ours.wait_for(lambda: conn.dead, "the refusal")
        event = recv_monitor_message(monitor)
        assert event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH and event["value"] == 400
    finally:
        client.disable_monitor()
        monitor.close(0)
