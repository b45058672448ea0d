"""Poller (the proxy's engine) over mqcore sockets, plain fds and objects with fileno(); mqcore.select;
ContextTerminated out of a blocked poll."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest

import mqcore


def test_poller_mixes_sockets_fds_and_fileno_objects(make_pair: Any) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, "inproc")
    rfd, wfd = os.pipe()
    a, b = socket.socketpair()
    try:
        poller = mqcore.Poller()
        poller.register(pull, mqcore.POLLIN)
        poller.register(rfd, mqcore.POLLIN)
        poller.register(a, mqcore.POLLIN)
        assert poller.poll(10) == []
        os.write(wfd, b"x")
        b.send(b"y")
        push.send(b"z")
        got = dict(poller.poll(1000))
        # objects with fileno() come back as their fd, as pyzmq's Poller gives them
        assert got == {pull: mqcore.POLLIN, rfd: mqcore.POLLIN, a.fileno(): mqcore.POLLIN}
        poller.unregister(rfd)
        assert rfd not in dict(poller.poll(0))
    finally:
        for fd in (rfd, wfd):
            os.close(fd)
        a.close()
        b.close()


def test_select_over_sockets_and_fds(make_pair: Any) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, "inproc")
    rfd, wfd = os.pipe()
    try:
        r, w, x = mqcore.select([pull, rfd], [push], [], 0.5)
        assert r == [] and w == [push] and x == []
        push.send(b"m")
        os.write(wfd, b"x")
        r, _, _ = mqcore.select([pull, rfd], [], [], 1.0)
        assert set(r) == {pull, rfd}
    finally:
        os.close(rfd)
        os.close(wfd)


def test_blocked_poll_raises_context_terminated() -> None:
    ctx = mqcore.Context()
    s = ctx.socket(mqcore.PULL)
    s.linger = 0
    s.bind("inproc://poll-term")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            p = mqcore.Poller()
            p.register(s, mqcore.POLLIN)
            p.poll()
        except BaseException as exc:
            errors.append(exc)
        finally:
            s.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ctx.term()
    t.join(10)
    assert len(errors) == 1 and isinstance(errors[0], mqcore.ContextTerminated)


def test_proxy_returns_by_context_terminated_in_its_thread() -> None:
    ctx = mqcore.Context()
    front, back = ctx.socket(mqcore.PULL), ctx.socket(mqcore.PUSH)
    for s in (front, back):
        s.linger = 0
    front.bind("inproc://pt-front")
    back.bind("inproc://pt-back")
    raised: list[BaseException] = []

    def run() -> None:
        try:
            mqcore.proxy(front, back)
        except BaseException as exc:
            raised.append(exc)
        finally:
            front.close()
            back.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ctx.term()
    t.join(10)
    assert not t.is_alive()
    with pytest.raises(mqcore.ContextTerminated):
        raise raised[0]
