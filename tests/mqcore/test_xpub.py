"""XPUB/XSUB: subscriptions shown to the application, verbose/manual/nodrop/welcome, XSUB upstream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import mqcore

Pair = Callable[..., tuple[Any, Any]]


def _recv_until(sock: Any, send: Callable[[], None], tries: int = 50) -> bytes:
    """Publish until the subscriber sees a message (subscriptions travel asynchronously)."""
    sock.rcvtimeo = 100
    for _ in range(tries):
        send()
        try:
            return sock.recv()  # type: ignore[no-any-return]
        except mqcore.Again:
            continue
    raise AssertionError("nothing arrived")


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_xpub_sees_first_subscribe_and_last_unsubscribe(make_pair: Pair, ctx: mqcore.Context,
                                                        transport: str) -> None:
    xpub, sub = make_pair(mqcore.XPUB, mqcore.SUB, transport)
    sub.subscribe(b"news")
    assert xpub.recv() == b"\x01news"
    sub2 = ctx.socket(mqcore.SUB)
    sub2.linger = 0
    sub2.connect(xpub.last_endpoint.decode())
    sub2.subscribe(b"news")  # not the first: not shown
    sub2.subscribe(b"sport")
    assert xpub.recv() == b"\x01sport"
    assert _recv_until(sub2, lambda: xpub.send(b"news!")) == b"news!"
    sub.unsubscribe(b"news")
    sub2.close()  # its subscriptions go away with it: news had no subscriber left, nor sport
    got = {xpub.recv(), xpub.recv()}
    assert got == {b"\x00news", b"\x00sport"}


def test_xpub_verbose_passes_every_subscribe(make_pair: Pair, ctx: mqcore.Context) -> None:
    xpub, sub = make_pair(mqcore.XPUB, mqcore.SUB, "inproc")
    xpub.setsockopt(mqcore.XPUB_VERBOSE, 1)
    sub.subscribe(b"a")
    assert xpub.recv() == b"\x01a"
    sub2 = ctx.socket(mqcore.SUB)
    sub2.linger = 0
    sub2.connect(xpub.last_endpoint.decode())
    sub2.subscribe(b"a")
    assert xpub.recv() == b"\x01a"


def test_xpub_manual_decides_subscriptions(make_pair: Pair) -> None:
    xpub, sub = make_pair(mqcore.XPUB, mqcore.SUB, "tcp")
    xpub.setsockopt(mqcore.XPUB_MANUAL, 1)
    sub.subscribe(b"x")
    assert xpub.recv() == b"\x01x"
    xpub.setsockopt(mqcore.SUBSCRIBE, b"y")  # the app maps x -> y for this subscriber
    sub.subscribe(b"y")
    assert xpub.recv() == b"\x01y"
    xpub.send(b"x-not-delivered")
    assert _recv_until(sub, lambda: xpub.send(b"y-delivered")) == b"y-delivered"


def test_xpub_subscribe_without_manual_is_einval(ctx: mqcore.Context) -> None:
    xpub = ctx.socket(mqcore.XPUB)
    with pytest.raises(mqcore.ZMQError):
        xpub.setsockopt(mqcore.SUBSCRIBE, b"a")
    xpub.close(linger=0)


def test_xpub_nodrop_raises_again_at_hwm(make_pair: Pair) -> None:
    xpub, sub = make_pair(mqcore.XPUB, mqcore.SUB, "inproc", sndhwm=2, rcvhwm=2)
    xpub.setsockopt(mqcore.XPUB_NODROP, 1)
    sub.subscribe(b"")
    assert xpub.recv() == b"\x01"
    sent = 0
    with pytest.raises(mqcore.Again):
        for _ in range(100):
            xpub.send(b"m", mqcore.NOBLOCK)
            sent += 1
    assert 0 < sent < 100
    assert [sub.recv() for _ in range(sent)] == [b"m"] * sent


def test_xpub_welcome_message(make_pair: Pair) -> None:
    xpub, sub = make_pair(mqcore.XPUB, mqcore.SUB, "tcp")
    xpub.setsockopt(mqcore.XPUB_WELCOME_MSG, b"hello")
    sub2 = xpub.context.socket(mqcore.SUB)
    sub2.linger = 0
    sub2.rcvtimeo = 5000
    sub2.subscribe(b"hel")
    sub2.connect(xpub.last_endpoint.decode())
    assert xpub.recv() == b"\x01hel"  # XPUB attaches new peers when it runs (as libzmq)
    assert sub2.recv() == b"hello"


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_xsub_sends_subscriptions_as_messages(make_pair: Pair, transport: str) -> None:
    pub, xsub = make_pair(mqcore.XPUB, mqcore.XSUB, transport)
    xsub.send(b"\x01t")
    assert pub.recv() == b"\x01t"
    assert _recv_until(xsub, lambda: pub.send(b"t1")) == b"t1"
    xsub.send(b"\x00t")
    assert pub.recv() == b"\x00t"
    xsub.send(b"upstream data")  # non-subscription messages reach XPUB as they are
    assert pub.recv() == b"upstream data"


def test_xsub_to_pub_filters_on_publisher(make_pair: Pair) -> None:
    pub, xsub = make_pair(mqcore.PUB, mqcore.XSUB, "tcp")
    xsub.send(b"\x01keep")
    got = _recv_until(xsub, lambda: (pub.send(b"drop"), pub.send(b"keep"))[0])
    assert got == b"keep"


def test_xpub_options_read_back(ctx: mqcore.Context) -> None:
    x = ctx.socket(mqcore.XPUB)
    x.linger = 0
    x.setsockopt(mqcore.XPUB_VERBOSE, 1)
    x.setsockopt(mqcore.XPUB_MANUAL, 1)
    x.setsockopt(mqcore.XPUB_WELCOME_MSG, b"hi")
    assert (x.getsockopt(mqcore.XPUB_VERBOSE), x.getsockopt(mqcore.XPUB_MANUAL)) == (1, 1)
    assert x.getsockopt(mqcore.XPUB_WELCOME_MSG) == b"hi"
