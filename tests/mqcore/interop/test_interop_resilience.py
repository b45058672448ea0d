"""Reconnect after the peer restarts on the same port, and HWM back-pressure, against libzmq."""

from __future__ import annotations

import errno
import socket
import time

import pytest

import mqcore
from tests.mqcore.interop.conftest import Libs, make_socket


def _free_port(libs: Libs) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bind(sock: object, ep: str) -> None:
    """Bind, retrying briefly: libzmq releases a closed listener asynchronously."""
    deadline = time.monotonic() + 5
    while True:
        try:
            sock.bind(ep)  # type: ignore[attr-defined]
            return
        except Exception as exc:
            if getattr(exc, "errno", None) != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _recv_eventually(sock: object, send: object, want: bytes, seconds: float = 8.0) -> None:
    """Call ``send()`` until ``sock`` receives ``want`` (slow joiner / reconnect in progress)."""
    deadline = time.monotonic() + seconds
    sock.rcvtimeo = 100  # type: ignore[attr-defined]
    while True:
        send()  # type: ignore[operator]
        try:
            if sock.recv() == want:  # type: ignore[attr-defined]
                return
        except (mqcore.Again, Exception):
            pass
        assert time.monotonic() < deadline, "peer never came back"


@pytest.mark.parametrize("restarting", ["zmq", "mq"])
def test_push_reconnects_after_peer_restart(libs: Libs, restarting: str) -> None:
    other = "mq" if restarting == "zmq" else "zmq"
    port = _free_port(libs)
    ep = f"tcp://127.0.0.1:{port}"
    push = make_socket(libs, other, "PUSH", reconnect_ivl=50)
    push.connect(ep)
    pull = make_socket(libs, restarting, "PULL")
    _bind(pull, ep)
    push.send(b"first")
    assert pull.recv() == b"first"
    pull.close()
    time.sleep(0.2)
    pull = make_socket(libs, restarting, "PULL")
    _bind(pull, ep)
    _recv_eventually(pull, lambda: push.send(b"again", mqcore.NOBLOCK if other == "mq" else 1), b"again")


@pytest.mark.parametrize("sub_lib", ["mq", "zmq"])
def test_sub_resubscribes_after_publisher_restart(libs: Libs, sub_lib: str) -> None:
    pub_lib = "zmq" if sub_lib == "mq" else "mq"
    port = _free_port(libs)
    ep = f"tcp://127.0.0.1:{port}"
    sub = make_socket(libs, sub_lib, "SUB", reconnect_ivl=50)
    sub.subscribe(b"t")
    sub.connect(ep)
    pub = make_socket(libs, pub_lib, "PUB")
    _bind(pub, ep)
    _recv_eventually(sub, lambda: pub.send(b"t1"), b"t1")
    pub.close()
    time.sleep(0.2)
    pub = make_socket(libs, pub_lib, "PUB")
    _bind(pub, ep)
    # the new publisher only sends what was subscribed after the reconnect
    _recv_eventually(sub, lambda: (pub.send(b"x-filtered"), pub.send(b"t2")), b"t2")


@pytest.mark.parametrize("sender_lib", ["mq", "zmq"])
def test_nonblocking_send_into_stalled_peer_raises_again(libs: Libs, sender_lib: str) -> None:
    receiver_lib = "zmq" if sender_lib == "mq" else "mq"
    pull = make_socket(libs, receiver_lib, "PULL", rcvhwm=10)
    pull.bind("tcp://127.0.0.1:*")
    push = make_socket(libs, sender_lib, "PUSH", sndhwm=10)
    push.connect(pull.last_endpoint.decode())
    push.send(b"hello")
    assert pull.recv() == b"hello"  # connected
    chunk = b"z" * 65536
    mod = libs.mod(sender_lib)
    sent = 0
    with pytest.raises(mod.Again):
        for _ in range(20000):  # bounded: HWMs plus kernel socket buffers
            push.send(chunk, mod.NOBLOCK)
            sent += 1
            if sent % 50 == 0:
                time.sleep(0.01)  # let the IO threads move data into the kernel buffers
    assert sent >= 1
    # the stall clears once the receiver reads
    for _ in range(sent):
        assert pull.recv() == chunk
