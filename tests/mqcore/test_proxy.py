"""mqcore.proxy / proxy_steerable in a thread: forwarding both ways, capture, PAUSE/RESUME/TERMINATE."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import mqcore


def _sock(ctx: mqcore.Context, kind: int, **opts: Any) -> Any:
    s = ctx.socket(kind)
    s.linger = 0
    s.rcvtimeo = 5000
    s.sndtimeo = 5000
    for k, v in opts.items():
        setattr(s, k, v)
    return s


def _recv_until(sock: Any, send: Any, tries: int = 50) -> bytes:
    sock.rcvtimeo = 100
    for _ in range(tries):
        send()
        try:
            return sock.recv()  # type: ignore[no-any-return]
        except mqcore.Again:
            continue
    raise AssertionError("nothing arrived")


def test_proxy_router_dealer_with_capture(ctx: mqcore.Context) -> None:
    front, back = _sock(ctx, mqcore.ROUTER), _sock(ctx, mqcore.DEALER)
    cap_in, cap_out = _sock(ctx, mqcore.PAIR), _sock(ctx, mqcore.PAIR)
    fe, be, ce = (f"inproc://{n}-{uuid.uuid4().hex[:6]}" for n in ("f", "b", "c"))
    front.bind(fe)
    back.bind(be)
    cap_out.bind(ce)
    cap_in.connect(ce)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mqcore.proxy(front, back, cap_in)
        except mqcore.ContextTerminated:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    req, rep = _sock(ctx, mqcore.REQ), _sock(ctx, mqcore.REP)
    req.connect(fe)
    rep.connect(be)
    for i in range(5):
        req.send(b"q%d" % i)
        assert rep.recv() == b"q%d" % i
        rep.send(b"a%d" % i)
        assert req.recv() == b"a%d" % i
    assert cap_out.recv_multipart()[-1] == b"q0"
    for s in (req, rep, cap_out):
        s.close()
    # terminating the context ends the proxy; the sockets it used are then closed here
    closer = threading.Thread(target=ctx.term, daemon=True)
    closer.start()
    t.join(10)
    assert not t.is_alive() and not errors
    for s in (front, back, cap_in):
        s.close()
    closer.join(10)
    assert not closer.is_alive()


def test_proxy_steerable_pause_resume_terminate_statistics(ctx: mqcore.Context) -> None:
    front, back = _sock(ctx, mqcore.XSUB), _sock(ctx, mqcore.XPUB)
    ctl_srv, ctl = _sock(ctx, mqcore.REP), _sock(ctx, mqcore.REQ)
    fe, be, ce = (f"inproc://{n}-{uuid.uuid4().hex[:6]}" for n in ("f", "b", "c"))
    front.bind(fe)
    back.bind(be)
    ctl_srv.bind(ce)
    ctl.connect(ce)
    t = threading.Thread(target=mqcore.proxy_steerable, args=(front, back, None, ctl_srv), daemon=True)
    t.start()
    pub, sub = _sock(ctx, mqcore.PUB), _sock(ctx, mqcore.SUB)
    pub.connect(fe)
    sub.connect(be)
    sub.subscribe(b"")
    assert _recv_until(sub, lambda: pub.send(b"m")) == b"m"
    ctl.send(b"STATISTICS")
    stats = ctl.recv_multipart()
    assert len(stats) == 8 and all(len(f) == 8 for f in stats)
    ctl.send(b"PAUSE")
    assert ctl.recv() == b""  # a REP control socket gets an empty reply to other commands
    ctl.send(b"TERMINATE")
    assert ctl.recv() == b""
    t.join(10)
    assert not t.is_alive()


@pytest.mark.parametrize("command", [b"TERMINATE"])
def test_proxy_steerable_terminate_with_pair(ctx: mqcore.Context, command: bytes) -> None:
    front, back = _sock(ctx, mqcore.PULL), _sock(ctx, mqcore.PUSH)
    ctl_srv, ctl = _sock(ctx, mqcore.PAIR), _sock(ctx, mqcore.PAIR)
    fe, be, ce = (f"inproc://{n}-{uuid.uuid4().hex[:6]}" for n in ("f", "b", "c"))
    front.bind(fe)
    back.bind(be)
    ctl_srv.bind(ce)
    ctl.connect(ce)
    t = threading.Thread(target=mqcore.proxy_steerable, args=(front, back, None, ctl_srv), daemon=True)
    t.start()
    push, pull = _sock(ctx, mqcore.PUSH), _sock(ctx, mqcore.PULL)
    push.connect(fe)
    pull.connect(be)
    push.send(b"one")
    assert pull.recv() == b"one"
    ctl.send(b"PAUSE")
    push.send(b"two")
    pull.rcvtimeo = 300
    with pytest.raises(mqcore.Again):
        pull.recv()
    ctl.send(b"RESUME")
    pull.rcvtimeo = 5000
    assert pull.recv() == b"two"
    ctl.send(command)
    t.join(10)
    assert not t.is_alive()
