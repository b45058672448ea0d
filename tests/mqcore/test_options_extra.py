"""IMMEDIATE, REQ_RELAXED/REQ_CORRELATE, CONFLATE, ROUTER_HANDOVER and TCP keepalive options."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest

import mqcore
from tests.mqcore.conftest import endpoint


def _sock(ctx: mqcore.Context, kind: int, **opts: Any) -> Any:
    s = ctx.socket(kind)
    s.linger = 0
    s.rcvtimeo = 5000
    s.sndtimeo = 5000
    for k, v in opts.items():
        setattr(s, k, v)
    return s


def _dead_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def test_immediate_queues_only_to_connected_peers(ctx: mqcore.Context) -> None:
    pull = _sock(ctx, mqcore.PULL)
    pull.bind("tcp://127.0.0.1:*")
    push = _sock(ctx, mqcore.PUSH, immediate=1, reconnect_ivl=50)
    push.connect(_dead_endpoint())  # never completes: gets no messages with IMMEDIATE
    push.connect(pull.last_endpoint.decode())
    for i in range(10):
        push.send(b"%d" % i)
    assert sorted(pull.recv() for _ in range(10)) == sorted(b"%d" % i for i in range(10))


def test_immediate_without_connection_blocks(ctx: mqcore.Context) -> None:
    push = _sock(ctx, mqcore.PUSH, immediate=1)
    push.connect(_dead_endpoint())
    with pytest.raises(mqcore.Again):
        push.send(b"x", mqcore.NOBLOCK)
    push.disconnect(push.last_endpoint.decode())


def test_immediate_inproc_and_close_do_not_hang(ctx: mqcore.Context) -> None:
    push = _sock(ctx, mqcore.DEALER, immediate=1)
    push.connect(_dead_endpoint())
    push.close()  # the session without a pipe ends with the socket (context term must not hang)


@pytest.mark.parametrize("transport", ["inproc", "tcp"])
def test_req_relaxed_correlate_drops_stale_reply(ctx: mqcore.Context, transport: str) -> None:
    router = _sock(ctx, mqcore.ROUTER)
    router.bind(endpoint(transport))
    req = _sock(ctx, mqcore.REQ, req_relaxed=1, req_correlate=1)
    req.connect(router.last_endpoint.decode())
    req.send(b"first")
    rid, id1, empty, body = router.recv_multipart()
    assert (len(id1), empty, body) == (4, b"", b"first")
    req.send(b"second")  # relaxed: allowed without waiting for the reply
    rid2, id2, _, body2 = router.recv_multipart()
    assert rid2 == rid and body2 == b"second" and id2 != id1
    router.send_multipart([rid, id1, b"", b"stale"])
    router.send_multipart([rid, id2, b"", b"fresh"])
    assert req.recv() == b"fresh"


def test_req_correlate_with_rep(make_pair: Any) -> None:
    rep, req = make_pair(mqcore.REP, mqcore.REQ, "tcp")
    req.req_correlate = 1
    req.send(b"q")
    assert rep.recv() == b"q"
    rep.send(b"a")
    assert req.recv() == b"a"


def test_req_strict_is_efsm(make_pair: Any) -> None:
    _, req = make_pair(mqcore.REP, mqcore.REQ, "inproc")
    req.send(b"q")
    with pytest.raises(mqcore.ZMQError) as info:
        req.send(b"again")
    assert info.value.errno == mqcore.EFSM


def test_conflate_receiver_keeps_the_newest(ctx: mqcore.Context) -> None:
    pull = _sock(ctx, mqcore.PULL, conflate=1)
    pull.bind("tcp://127.0.0.1:*")
    push = _sock(ctx, mqcore.PUSH)
    push.connect(pull.last_endpoint.decode())
    for i in range(200):
        push.send(b"%d" % i)
    got = [pull.recv()]
    pull.rcvtimeo = 300
    while True:
        try:
            got.append(pull.recv())
        except mqcore.Again:
            break
    assert got[-1] == b"199"
    assert len(got) < 200


def test_conflate_sender_keeps_the_newest_until_connected(ctx: mqcore.Context) -> None:
    ep = _dead_endpoint()
    push = _sock(ctx, mqcore.PUSH, conflate=1, reconnect_ivl=20)
    push.connect(ep)
    for i in range(10):
        push.send(b"%d" % i)
    pull = _sock(ctx, mqcore.PULL)
    pull.bind(ep)
    assert pull.recv() == b"9"
    pull.rcvtimeo = 200
    with pytest.raises(mqcore.Again):
        pull.recv()


@pytest.mark.parametrize("handover", [0, 1])
def test_router_handover(ctx: mqcore.Context, handover: int) -> None:
    router = _sock(ctx, mqcore.ROUTER, router_handover=handover)
    router.bind("tcp://127.0.0.1:*")
    ep = router.last_endpoint.decode()
    first = _sock(ctx, mqcore.DEALER, routing_id=b"same")
    first.connect(ep)
    first.send(b"hello-1")
    assert router.recv_multipart() == [b"same", b"hello-1"]
    second = _sock(ctx, mqcore.DEALER, routing_id=b"same")
    second.connect(ep)
    second.send(b"hello-2")
    if handover:
        assert router.recv_multipart() == [b"same", b"hello-2"]
        router.send_multipart([b"same", b"to-new"])
        assert second.recv() == b"to-new"
    else:
        router.send_multipart([b"same", b"to-old"])
        assert first.recv() == b"to-old"
        router.rcvtimeo = 200
        with pytest.raises(mqcore.Again):
            router.recv_multipart()  # the duplicate was refused


def test_tcp_keepalive_is_applied(ctx: mqcore.Context) -> None:
    pull = _sock(ctx, mqcore.PULL, tcp_keepalive=1, tcp_keepalive_idle=30, tcp_keepalive_intvl=5,
                 tcp_keepalive_cnt=3)
    pull.bind("tcp://127.0.0.1:*")
    push = _sock(ctx, mqcore.PUSH, tcp_keepalive=1, tcp_keepalive_idle=40)
    ep = pull.last_endpoint.decode()
    push.connect(ep)
    push.send(b"x")
    assert pull.recv() == b"x"
    session = push._endpoints[ep][0][1]
    engine = session.engine
    assert engine is not None
    os_sock = engine.sock
    assert os_sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    if hasattr(socket, "TCP_KEEPIDLE"):
        assert os_sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 40
    assert push.tcp_keepalive == 1 and struct.calcsize("=I") == 4


@pytest.mark.parametrize("conflating_side", ["receiver", "sender"])
def test_conflate_over_inproc(ctx: mqcore.Context, conflating_side: str) -> None:
    pull = _sock(ctx, mqcore.PULL, conflate=int(conflating_side == "receiver"))
    push = _sock(ctx, mqcore.PUSH, conflate=int(conflating_side == "sender"))
    pull.bind(endpoint("inproc"))
    push.connect(pull.last_endpoint.decode())
    for i in range(10):
        push.send(b"%d" % i)
    assert pull.recv() == b"9"
    pull.rcvtimeo = 50
    with pytest.raises(mqcore.Again):
        pull.recv()


def test_immediate_inproc_waits_for_the_bind(ctx: mqcore.Context) -> None:
    ep = endpoint("inproc")
    push = _sock(ctx, mqcore.PUSH, immediate=1)
    push.connect(ep)  # nobody bound yet: nothing may be queued
    with pytest.raises(mqcore.Again):
        push.send(b"early", mqcore.NOBLOCK)
    pull = _sock(ctx, mqcore.PULL)
    pull.bind(ep)
    push.send(b"after bind")
    assert pull.recv() == b"after bind"
