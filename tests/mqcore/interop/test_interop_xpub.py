"""XPUB/XSUB subscription forwarding between mqcore and pyzmq (libzmq), both directions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.mqcore.interop.conftest import Libs, bound_pair

OTHER = {"mq": "zmq", "zmq": "mq"}


def _recv_until(sock: Any, send: Any, tries: int = 50) -> bytes:
    """Publish until the subscriber gets something (subscriptions travel asynchronously)."""
    old = sock.rcvtimeo
    sock.rcvtimeo = 100
    try:
        for _ in range(tries):
            send()
            try:
                return sock.recv()  # type: ignore[no-any-return]
            except Exception as exc:
                if "Resource temporarily unavailable" not in str(exc):
                    raise
        raise AssertionError("nothing arrived")
    finally:
        sock.rcvtimeo = old


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
@pytest.mark.parametrize("xpub_lib", ["mq", "zmq"])
def test_xpub_sees_sub_subscriptions(libs: Libs, xpub_lib: str, transport: str) -> None:
    xpub, sub = bound_pair(libs, (xpub_lib, "XPUB"), (OTHER[xpub_lib], "SUB"), transport)
    sub.setsockopt(libs.mod(OTHER[xpub_lib]).SUBSCRIBE, b"topic")
    assert xpub.recv() == b"\x01topic"
    assert _recv_until(sub, lambda: xpub.send(b"topic-1")) == b"topic-1"
    sub.setsockopt(libs.mod(OTHER[xpub_lib]).UNSUBSCRIBE, b"topic")
    assert xpub.recv() == b"\x00topic"


@pytest.mark.parametrize("xsub_binds", [True, False])
@pytest.mark.parametrize("xsub_lib", ["mq", "zmq"])
def test_xsub_forwards_subscriptions_to_xpub(libs: Libs, xsub_lib: str, xsub_binds: bool) -> None:
    xsub, xpub = bound_pair(libs, (xsub_lib, "XSUB"), (OTHER[xsub_lib], "XPUB"), "tcp",
                            a_binds=xsub_binds)
    # a subscription sent before the connection exists is lost on the bind side: resend until seen
    sent = 0
    while True:
        xsub.send(b"\x01abc")
        sent += 1
        if xpub.poll(100):
            break
        assert sent < 50, "subscription never arrived"
    assert xpub.recv() == b"\x01abc"  # only the first subscription is shown
    assert _recv_until(xsub, lambda: xpub.send(b"abc!")) == b"abc!"
    for _ in range(sent):  # XSUB counts references: the last cancel goes upstream
        xsub.send(b"\x00abc")
    assert xpub.recv() == b"\x00abc"


@pytest.mark.parametrize("xsub_lib", ["mq", "zmq"])
def test_xsub_to_plain_pub(libs: Libs, xsub_lib: str) -> None:
    pub, xsub = bound_pair(libs, (OTHER[xsub_lib], "PUB"), (xsub_lib, "XSUB"), "tcp")
    xsub.send(b"\x01k")
    assert _recv_until(xsub, lambda: (pub.send(b"other"), pub.send(b"k1"))[0]) == b"k1"


def test_xpub_verbose_against_libzmq_subs(libs: Libs) -> None:
    xpub, sub = bound_pair(libs, ("mq", "XPUB"), ("zmq", "SUB"), "tcp", a_opts={"xpub_verbose": 1})
    sub2 = libs.zmq.socket(libs.mod("zmq").SUB)
    sub2.linger = 0
    sub2.connect(xpub.last_endpoint.decode())
    sub.subscribe(b"v")
    sub2.subscribe(b"v")
    assert [xpub.recv(), xpub.recv()] == [b"\x01v", b"\x01v"]
