"""mqcore talking to itself over inproc, tcp and ipc: every pattern, HWM, errors and Poller."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import mqcore

TRANSPORTS = ["inproc", "tcp", "ipc"]
Pair = Callable[..., tuple[Any, Any]]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_push_pull_sizes_and_multipart(make_pair: Pair, transport: str) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, transport)
    for size in (0, 1, 255, 256, 65535, 1 << 20):
        push.send(b"s" * size)
        assert pull.recv() == b"s" * size
    push.send(b"a", mqcore.SNDMORE)
    push.send(b"b")
    assert pull.recv() == b"a" and pull.rcvmore and pull.getsockopt(mqcore.RCVMORE) == 1
    assert pull.recv() == b"b" and not pull.rcvmore
    push.send_string("héllo")
    assert pull.recv_string() == "héllo"
    push.send_json({"a": [1, 2]})
    assert pull.recv_json() == {"a": [1, 2]}
    push.send_pyobj((1, "x"))
    assert pull.recv_pyobj() == (1, "x")
    frame = (push.send(b"zc", copy=False), pull.recv(copy=False))[1]
    assert frame.bytes == b"zc"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_req_rep_and_efsm(make_pair: Pair, transport: str) -> None:
    rep, req = make_pair(mqcore.REP, mqcore.REQ, transport)
    with pytest.raises(mqcore.ZMQError) as info:
        req.recv()
    assert info.value.errno == mqcore.EFSM
    req.send_multipart([b"a", b"b"])
    with pytest.raises(mqcore.ZMQError):
        req.send(b"again")
    assert rep.recv_multipart() == [b"a", b"b"]
    with pytest.raises(mqcore.ZMQError) as info:
        rep.recv()
    assert info.value.errno == mqcore.EFSM
    rep.send(b"reply")
    assert req.recv() == b"reply"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_router_dealer_identities(make_pair: Pair, transport: str, ctx: mqcore.Context) -> None:
    router, d1 = make_pair(mqcore.ROUTER, mqcore.DEALER, transport)
    d2 = ctx.socket(mqcore.DEALER)
    d2.identity = b"second"
    d2.rcvtimeo = 5000
    d2.linger = 0
    d2.connect(router.last_endpoint.decode())
    d1.send(b"from d1")
    rid1, body = router.recv_multipart()
    assert body == b"from d1" and len(rid1) == 5 and rid1[0] == 0
    d2.send(b"from d2")
    assert router.recv_multipart() == [b"second", b"from d2"]
    router.send_multipart([b"second", b"to d2"])
    router.send_multipart([rid1, b"to d1"])
    assert d2.recv() == b"to d2" and d1.recv() == b"to d1"
    router.send_multipart([b"nobody", b"dropped"])  # silently dropped
    router.router_mandatory = 1
    with pytest.raises(mqcore.ZMQError) as info:
        router.send_multipart([b"nobody", b"x"])
    assert info.value.errno == mqcore.EHOSTUNREACH


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pub_sub_filter_and_unsubscribe(make_pair: Pair, transport: str) -> None:
    pub, sub = make_pair(mqcore.PUB, mqcore.SUB, transport)
    sub.subscribe("a")
    sub.subscribe(b"a")  # counted twice
    sub.unsubscribe(b"a")
    deadline = time.monotonic() + 5
    sub.rcvtimeo = 20
    while True:
        pub.send(b"a-sync")
        try:
            sub.recv()
            break
        except mqcore.Again:
            assert time.monotonic() < deadline
    sub.rcvtimeo = 5000
    pub.send(b"b-filtered")
    pub.send(b"a-end")
    got = sub.recv()
    while got == b"a-sync":
        got = sub.recv()
    assert got == b"a-end"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pair_both_ways(make_pair: Pair, transport: str) -> None:
    a, b = make_pair(mqcore.PAIR, mqcore.PAIR, transport)
    a.send(b"1")
    assert b.recv() == b"1"
    b.send(b"2")
    assert a.recv() == b"2"


def test_inproc_connect_before_bind(ctx: mqcore.Context) -> None:
    push = ctx.socket(mqcore.PUSH)
    push.connect("inproc://later")
    push.send(b"early")
    pull = ctx.socket(mqcore.PULL)
    pull.rcvtimeo = 5000
    pull.bind("inproc://later")
    assert pull.recv() == b"early"
    sub = ctx.socket(mqcore.SUB)
    sub.rcvtimeo = 5000
    sub.subscribe(b"")
    sub.connect("inproc://pub-later")
    pub = ctx.socket(mqcore.PUB)
    pub.bind("inproc://pub-later")
    pub.send(b"hi")  # the subscription is already in the pipe: no slow joiner
    assert sub.recv() == b"hi"
    for s in (push, pull, sub, pub):
        s.close(linger=0)


def test_inproc_hwm_is_the_sum_and_noblock_raises_again(make_pair: Pair) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, "inproc", sndhwm=5, rcvhwm=5)
    for i in range(10):
        push.send(b"%d" % i, mqcore.NOBLOCK)
    with pytest.raises(mqcore.Again):
        push.send(b"over", mqcore.NOBLOCK)
    push.sndtimeo = 10
    with pytest.raises(mqcore.Again):
        push.send(b"over")
    assert [pull.recv() for _ in range(10)] == [b"%d" % i for i in range(10)]
    push.send(b"room again", mqcore.NOBLOCK)
    assert pull.recv() == b"room again"


def test_push_moves_between_one_peer_and_several(ctx: mqcore.Context) -> None:
    # With one peer PUSH sends through that pipe alone; a second peer brings load balancing back,
    # and once it leaves, everything goes to the first again.
    push = ctx.socket(mqcore.PUSH)
    pulls = [ctx.socket(mqcore.PULL) for _ in range(2)]
    for s in (push, *pulls):
        s.linger = 0
        s.rcvtimeo = s.sndtimeo = 5000
    pulls[0].bind("inproc://one-or-several-a")
    pulls[1].bind("inproc://one-or-several-b")
    push.connect("inproc://one-or-several-a")
    push.send(b"alone")
    assert pulls[0].recv() == b"alone"
    push.connect("inproc://one-or-several-b")
    for i in range(4):
        push.send(b"%d" % i)
    got = [[pull.recv() for _ in range(2)] for pull in pulls]
    assert sorted(got[0] + got[1]) == [b"0", b"1", b"2", b"3"] and got[0] != got[1]
    pulls[1].close()
    for i in range(4):
        push.send(b"again %d" % i)
    assert [pulls[0].recv() for _ in range(4)] == [b"again %d" % i for i in range(4)]
    push.close()
    pulls[0].close()


def test_pub_drops_at_hwm_and_never_blocks(make_pair: Pair) -> None:
    pub, sub = make_pair(mqcore.PUB, mqcore.SUB, "inproc", sndhwm=3, rcvhwm=3)
    sub.subscribe(b"")
    pub.send(b"sync")
    assert sub.recv() == b"sync"
    for i in range(20):
        pub.send(b"%d" % i, mqcore.NOBLOCK)
    got = []
    sub.rcvtimeo = 50
    while True:
        try:
            got.append(sub.recv())
        except mqcore.Again:
            break
    assert got == [b"%d" % i for i in range(6)]


def test_recv_timeout_and_poller(make_pair: Pair) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, "tcp")
    pull.rcvtimeo = 30
    with pytest.raises(mqcore.Again):
        pull.recv()
    poller = mqcore.Poller()
    poller.register(pull, mqcore.POLLIN)
    poller.register(push, mqcore.POLLOUT)
    assert dict(poller.poll(0)) == {push: mqcore.POLLOUT}
    poller.unregister(push)
    assert poller.poll(20) == []
    push.send(b"x")
    assert poller.poll(5000) == [(pull, mqcore.POLLIN)]
    assert pull.poll(0) == mqcore.POLLIN and pull.getsockopt(mqcore.EVENTS) & mqcore.POLLIN
    assert pull.recv() == b"x"


def test_blocked_recv_gets_eterm_on_term() -> None:
    ctx = mqcore.Context()
    s = ctx.socket(mqcore.PULL)
    s.bind("inproc://eterm")
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            s.recv()
        except mqcore.ZMQError as exc:
            errors.append(exc)
        s.close()

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.05)
    ctx.term()  # returns once the worker has closed its socket
    t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], mqcore.ContextTerminated)
    assert errors[0].errno == mqcore.ETERM
    with pytest.raises(mqcore.ZMQError):
        ctx.socket(mqcore.PUSH)


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_linger_delivers_after_close(ctx: mqcore.Context, transport: str) -> None:
    from tests.mqcore.conftest import endpoint

    pull = ctx.socket(mqcore.PULL)
    pull.rcvtimeo = 5000
    pull.bind(endpoint(transport))
    push = ctx.socket(mqcore.PUSH)
    push.connect(pull.last_endpoint.decode())
    for i in range(100):
        push.send(b"%d" % i)
    push.close(linger=2000)
    assert [pull.recv() for _ in range(100)] == [b"%d" % i for i in range(100)]


def test_unbind_and_disconnect(make_pair: Pair) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, "tcp")
    ep = pull.last_endpoint.decode()
    push.send(b"1")
    assert pull.recv() == b"1"
    push.disconnect(ep)
    with pytest.raises(mqcore.ZMQError):
        push.disconnect(ep)
    pull.unbind(ep)
    push.connect(ep)
    push.send(b"never")
    pull.rcvtimeo = 200
    with pytest.raises(mqcore.Again):
        pull.recv()


def test_reconnect_and_resubscribe_mqcore_only(ctx: mqcore.Context) -> None:
    pub = ctx.socket(mqcore.PUB)
    pub.linger = 0
    pub.bind("tcp://127.0.0.1:*")
    ep = pub.last_endpoint.decode()
    sub = ctx.socket(mqcore.SUB)
    sub.linger = 0
    sub.reconnect_ivl = 20
    sub.subscribe(b"k")
    sub.connect(ep)

    def expect(p: Any, msg: bytes) -> None:
        deadline = time.monotonic() + 5
        sub.rcvtimeo = 50
        while True:
            p.send(msg)
            try:
                if sub.recv() == msg:
                    return
            except mqcore.Again:
                assert time.monotonic() < deadline

    expect(pub, b"k1")
    pub.close()
    pub = ctx.socket(mqcore.PUB)
    pub.linger = 0
    deadline = time.monotonic() + 5
    while True:
        try:
            pub.bind(ep)
            break
        except mqcore.ZMQError:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    expect(pub, b"k2")


def test_context_manager_and_instance() -> None:
    with mqcore.Context() as ctx:
        s = ctx.socket(mqcore.PUSH)
        s.bind("tcp://127.0.0.1:*")
    assert ctx.closed and s.closed
    assert mqcore.Context.instance() is mqcore.Context.instance()


@pytest.mark.parametrize("addr", ["tcp://[::1]:*", "tcp://*:*", "ipc://@mqcore-abstract-test"])
def test_address_forms(ctx: mqcore.Context, addr: str) -> None:
    pull = ctx.socket(mqcore.PULL)
    pull.rcvtimeo = 5000
    pull.linger = 0
    try:
        pull.bind(addr)
    except mqcore.ZMQError as exc:  # no IPv6 on this host
        pytest.skip(str(exc))
    ep = pull.last_endpoint.decode()
    push = ctx.socket(mqcore.PUSH)
    push.linger = 0
    push.connect(ep.replace("0.0.0.0", "127.0.0.1"))
    push.send(b"addr")
    assert pull.recv() == b"addr"
    if addr.startswith("ipc://@"):
        assert ep == addr
