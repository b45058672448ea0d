"""Every socket pair against real libzmq (pyzmq): mqcore on either side, either side binding, tcp and
ipc. Each test has bounded waits (RCVTIMEO/SNDTIMEO), so a failure raises Again instead of hanging."""

from __future__ import annotations

import time

import pytest

from tests.mqcore.interop.conftest import Libs, bound_pair

SIZES = [0, 1, 255, 256, 65535, 1 << 20]
TRANSPORTS = ["tcp", "ipc"]
SIDES = [("mq", "zmq"), ("zmq", "mq")]


def payload(size: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(min(size, 256))) * (size // 256) + bytes(size % 256)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=SIDES, ids=["mq-zmq", "zmq-mq"])
def sides(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=[True, False], ids=["first-binds", "second-binds"])
def first_binds(request: pytest.FixtureRequest) -> bool:
    return request.param  # type: ignore[no-any-return]


def test_push_pull(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    push, pull = bound_pair(libs, (sides[0], "PUSH"), (sides[1], "PULL"), transport, first_binds)
    for size in SIZES:
        push.send(payload(size))
        assert pull.recv() == payload(size)
    push.send_multipart([b"a", b"", payload(300)])
    assert pull.recv_multipart() == [b"a", b"", payload(300)]
    for i in range(200):
        push.send(b"%d" % i)
    assert [pull.recv() for _ in range(200)] == [b"%d" % i for i in range(200)]


def test_pair_pair(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    a, b = bound_pair(libs, (sides[0], "PAIR"), (sides[1], "PAIR"), transport, first_binds)
    for size in SIZES:
        a.send(payload(size, 1))
        assert b.recv() == payload(size, 1)
        b.send(payload(size, 2))
        assert a.recv() == payload(size, 2)
    a.send_multipart([b"x", b"y"])
    assert b.recv_multipart() == [b"x", b"y"]


def test_req_rep(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    req, rep = bound_pair(libs, (sides[0], "REQ"), (sides[1], "REP"), transport, first_binds)
    for size in SIZES:
        req.send(payload(size))
        assert rep.recv() == payload(size)
        rep.send_multipart([b"reply", payload(size)])
        assert req.recv_multipart() == [b"reply", payload(size)]


def test_req_router(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    req, router = bound_pair(libs, (sides[0], "REQ"), (sides[1], "ROUTER"), transport, first_binds)
    for i in range(3):
        req.send(b"hello %d" % i)
        rid, empty, body = router.recv_multipart()
        assert empty == b"" and body == b"hello %d" % i
        assert len(rid) == 5 and rid[0] == 0  # automatic id
        router.send_multipart([rid, b"", b"world %d" % i])
        assert req.recv() == b"world %d" % i


def test_req_router_explicit_identity(libs: Libs, sides: tuple[str, str], transport: str) -> None:
    req, router = bound_pair(libs, (sides[0], "REQ"), (sides[1], "ROUTER"), transport, False,
                             a_opts={"identity": b"client-1"})
    req.send(b"q")
    assert router.recv_multipart() == [b"client-1", b"", b"q"]
    router.send_multipart([b"client-1", b"", b"a"])
    assert req.recv() == b"a"


def test_dealer_rep(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    dealer, rep = bound_pair(libs, (sides[0], "DEALER"), (sides[1], "REP"), transport, first_binds)
    dealer.send_multipart([b"env1", b"", b"body"])
    assert rep.recv() == b"body"
    rep.send(b"answer")
    assert dealer.recv_multipart() == [b"env1", b"", b"answer"]


def test_dealer_router(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    dealer, router = bound_pair(libs, (sides[0], "DEALER"), (sides[1], "ROUTER"), transport, first_binds,
                                a_opts={"identity": b"D1"})
    for size in SIZES:
        dealer.send_multipart([b"head", payload(size)])
        assert router.recv_multipart() == [b"D1", b"head", payload(size)]
        router.send_multipart([b"D1", payload(size, 3)])
        assert dealer.recv() == payload(size, 3)


def test_dealer_dealer(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    a, b = bound_pair(libs, (sides[0], "DEALER"), (sides[1], "DEALER"), transport, first_binds)
    a.send_multipart([b"1", b"2"])
    assert b.recv_multipart() == [b"1", b"2"]
    b.send(b"back")
    assert a.recv() == b"back"


def test_router_router(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    a, b = bound_pair(libs, (sides[0], "ROUTER"), (sides[1], "ROUTER"), transport, first_binds,
                      a_opts={"identity": b"A", "router_mandatory": 1},
                      b_opts={"identity": b"B", "router_mandatory": 1})
    deadline = time.monotonic() + 5
    while True:  # the handshake has to finish before B is routable
        try:
            a.send_multipart([b"B", b"ping"])
            break
        except Exception as exc:
            assert getattr(exc, "errno", None) == 113 and time.monotonic() < deadline  # EHOSTUNREACH
            time.sleep(0.01)
    assert b.recv_multipart() == [b"A", b"ping"]
    b.send_multipart([b"A", b"pong"])
    assert a.recv_multipart() == [b"B", b"pong"]


def test_pub_sub_filtering(libs: Libs, sides: tuple[str, str], transport: str, first_binds: bool) -> None:
    pub, sub = bound_pair(libs, (sides[0], "PUB"), (sides[1], "SUB"), transport, first_binds)
    sub.subscribe(b"weather")
    sub.subscribe("news")
    sub.rcvtimeo = 50
    deadline = time.monotonic() + 5
    while True:  # slow joiner: publish until the subscription has reached the publisher
        pub.send(b"weather sync")
        try:
            if sub.recv() == b"weather sync":
                break
        except Exception:
            assert time.monotonic() < deadline
    sub.rcvtimeo = 5000
    while True:  # drain duplicates of the sync message
        sub.rcvtimeo = 200
        try:
            sub.recv()
        except Exception:
            break
    sub.rcvtimeo = 5000
    pub.send(b"sports: skipped")
    pub.send_multipart([b"news", b"part2"])
    pub.send(b"weather: sunny")
    assert sub.recv_multipart() == [b"news", b"part2"]
    assert sub.recv() == b"weather: sunny"
    sub.unsubscribe(b"news")
    sub.subscribe(b"end")
    deadline = time.monotonic() + 5
    while True:  # wait until both the cancel and the new subscription arrived
        pub.send(b"news: gone")
        pub.send(b"end")
        sub.rcvtimeo = 100
        try:
            got = sub.recv()
        except Exception:
            got = None
        assert time.monotonic() < deadline
        if got == b"end":
            break
    sub.rcvtimeo = 300
    rest = []
    while True:
        try:
            rest.append(sub.recv())
        except Exception:
            break
    assert b"news: gone" not in rest
