"""Older peers over raw TCP: a faked ZMTP 3.0 peer talks to mqcore PUB/XPUB/SUB with subscriptions as
messages; ZMTP 1.0/2.0 greetings are refused cleanly (HANDSHAKE_FAILED_PROTOCOL, connection closed)
while the socket keeps serving a libzmq peer."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest

import mqcore
from mqcore.utils.monitor import recv_monitor_message
from tests.mqcore.interop.conftest import Libs, make_socket


def greeting(major: int = 3, minor: int = 0) -> bytes:
    return b"\xff" + bytes(8) + b"\x7f" + bytes((major, minor)) + b"NULL".ljust(20, b"\0") + bytes(32)


def command(name: bytes, data: bytes = b"") -> bytes:
    body = bytes((len(name),)) + name + data
    return (b"\x04" + bytes((len(body),)) if len(body) < 256 else b"\x06" + struct.pack(">Q", len(body))) + body


def ready(socket_type: bytes) -> bytes:
    return command(b"READY", b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type)


def message(body: bytes, more: bool = False) -> bytes:
    flags = 1 if more else 0
    if len(body) < 256:
        return bytes((flags, len(body))) + body
    return bytes((flags | 2,)) + struct.pack(">Q", len(body)) + body


class RawPeer:
    """A blocking raw TCP peer that reads ZMTP frames by hand (so commands and messages differ)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(5)
        self.buf = b""

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_frame(self) -> tuple[int, bytes]:
        flags = self.read_exact(1)[0]
        size = struct.unpack(">Q", self.read_exact(8))[0] if flags & 2 else self.read_exact(1)[0]
        return flags, self.read_exact(size)

    def handshake(self, socket_type: bytes, version: tuple[int, int] = (3, 0)) -> None:
        self.sock.sendall(greeting(*version) + ready(socket_type))
        theirs = self.read_exact(64)
        assert theirs[0] == 0xFF and theirs[10] == 3
        flags, body = self.read_frame()
        assert flags & 4 and body.startswith(b"\x05READY")

    def closed(self) -> bool:
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True


def _connect(sock: Any) -> RawPeer:
    host, port = sock.last_endpoint.decode()[len("tcp://"):].rsplit(":", 1)
    return RawPeer(socket.create_connection((host, int(port))))


@pytest.mark.parametrize("kind", ["PUB", "XPUB"])
def test_zmtp30_subscriber_gets_messages_from_mqcore(libs: Libs, kind: str) -> None:
    pub = make_socket(libs, "mq", kind)
    pub.bind("tcp://127.0.0.1:*")
    peer = _connect(pub)
    peer.handshake(b"SUB")
    peer.sock.sendall(message(b"\x01news"))  # ZMTP 3.0: a subscription is a message
    if kind == "XPUB":
        assert pub.recv() == b"\x01news"
    pub.rcvtimeo = 20
    for _ in range(200):  # until the subscription is applied
        pub.send(b"news: hi")
        pub.send(b"other")
        try:
            peer.sock.settimeout(0.05)
            flags, body = peer.read_frame()
            break
        except TimeoutError:
            continue
    else:
        raise AssertionError("nothing published to the 3.0 peer")
    assert (flags, body) == (0, b"news: hi")
    peer.sock.close()


def test_mqcore_sub_subscribes_a_zmtp30_pub_with_messages(libs: Libs) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(5)
    sub = make_socket(libs, "mq", "SUB")
    sub.subscribe(b"t")
    sub.connect(f"tcp://127.0.0.1:{srv.getsockname()[1]}")
    conn, _ = srv.accept()
    peer = RawPeer(conn)
    peer.handshake(b"PUB")
    flags, body = peer.read_frame()
    assert (flags, body) == (0, b"\x01t")  # a message, not a SUBSCRIBE command, for a 3.0 peer
    peer.sock.sendall(message(b"x-filtered") + message(b"t-kept"))
    assert sub.recv() == b"t-kept"
    sub.unsubscribe(b"t")
    assert peer.read_frame() == (0, b"\x00t")
    conn.close()
    srv.close()


def test_zmtp31_subscriber_uses_commands(libs: Libs) -> None:
    """The same raw peer announcing 3.1 sends SUBSCRIBE as a command; mqcore accepts both."""
    xpub = make_socket(libs, "mq", "XPUB")
    xpub.bind("tcp://127.0.0.1:*")
    peer = _connect(xpub)
    peer.handshake(b"SUB", (3, 1))
    peer.sock.sendall(command(b"SUBSCRIBE", b"cmd"))
    assert xpub.recv() == b"\x01cmd"
    peer.sock.close()


OLD_GREETINGS = {
    "zmtp10": b"\x01\x00",  # length 1, flags 0: an anonymous ZMTP 1.0 identity
    "zmtp20": b"\xff" + bytes(8) + b"\x7f" + b"\x01" + b"\x07" + b"\x00\x00",  # revision 1, PULL
}


@pytest.mark.parametrize("version", sorted(OLD_GREETINGS))
def test_old_peers_are_refused_and_socket_keeps_serving(libs: Libs, version: str) -> None:
    pull = make_socket(libs, "mq", "PULL")
    mon = pull.get_monitor_socket(mqcore.EVENT_HANDSHAKE_FAILED_PROTOCOL)
    mon.rcvtimeo = 5000
    pull.bind("tcp://127.0.0.1:*")
    old = _connect(pull)
    old.sock.sendall(OLD_GREETINGS[version])
    ev = recv_monitor_message(mon)
    assert ev["event"] == mqcore.EVENT_HANDSHAKE_FAILED_PROTOCOL
    assert old.closed()
    good = make_socket(libs, "zmq", "PUSH")
    good.connect(pull.last_endpoint.decode())
    good.send(b"still serving")
    assert pull.recv() == b"still serving"
    mon.close()


@pytest.mark.parametrize(("version", "expected"), [
    ((3, 1), (4, b"\x09SUBSCRIBEt")),  # ZMTP 3.1: a SUBSCRIBE command
    ((3, 0), (0, b"\x01t")),           # ZMTP 3.0: a subscription message
])
def test_xsub_forwards_subscriptions_in_the_peers_form(libs: Libs, version: tuple[int, int],
                                                       expected: tuple[int, bytes]) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(5)
    xsub = make_socket(libs, "mq", "XSUB")
    xsub.connect(f"tcp://127.0.0.1:{srv.getsockname()[1]}")
    conn, _ = srv.accept()
    peer = RawPeer(conn)
    peer.handshake(b"XPUB", version)
    xsub.send(b"\x01t")
    assert peer.read_frame() == expected
    conn.close()
    srv.close()
