"""Proxies between the libraries: mqcore.proxy with pyzmq peers, zmq.proxy_steerable with mqcore peers."""

from __future__ import annotations

import threading
from typing import Any

import zmq

import mqcore
from tests.mqcore.interop.conftest import Libs, make_socket
from tests.mqcore.interop.test_interop_xpub import _recv_until


def _forwarder(libs: Libs, lib: str) -> tuple[Any, Any, Any, Any, str, str]:
    """XSUB frontend + XPUB backend of ``lib`` bound on tcp, and a PAIR control pair."""
    front = make_socket(libs, lib, "XSUB")
    back = make_socket(libs, lib, "XPUB")
    front.bind("tcp://127.0.0.1:*")
    back.bind("tcp://127.0.0.1:*")
    ctl_srv, ctl = make_socket(libs, lib, "PAIR"), make_socket(libs, lib, "PAIR")
    addr = f"inproc://proxy-ctl-{id(front):x}"
    ctl_srv.bind(addr)
    ctl.connect(addr)
    return front, back, ctl_srv, ctl, front.last_endpoint.decode(), back.last_endpoint.decode()


def _run_pubsub_through(libs: Libs, proxy_lib: str, peer_lib: str) -> None:
    front, back, ctl_srv, ctl, fe, be = _forwarder(libs, proxy_lib)
    proxy_fn = mqcore.proxy_steerable if proxy_lib == "mq" else zmq.proxy_steerable
    t = threading.Thread(target=proxy_fn, args=(front, back, None, ctl_srv), daemon=True)
    t.start()
    pub = make_socket(libs, peer_lib, "PUB")
    sub = make_socket(libs, peer_lib, "SUB")
    pub.connect(fe)
    sub.connect(be)
    sub.setsockopt(libs.mod(peer_lib).SUBSCRIBE, b"w")
    # the subscription crosses the proxy upstream; then data flows down, filtered at the PUB
    assert _recv_until(sub, lambda: (pub.send(b"x-filtered"), pub.send(b"w1"))[0]) == b"w1"
    ctl.send(b"TERMINATE")
    t.join(10)
    assert not t.is_alive()


def test_mqcore_proxy_between_pyzmq_pub_and_sub(libs: Libs) -> None:
    _run_pubsub_through(libs, "mq", "zmq")


def test_pyzmq_proxy_between_mqcore_pub_and_sub(libs: Libs) -> None:
    _run_pubsub_through(libs, "zmq", "mq")


def test_mqcore_proxy_router_dealer_with_pyzmq_req_rep(libs: Libs) -> None:
    front = make_socket(libs, "mq", "ROUTER")
    back = make_socket(libs, "mq", "DEALER")
    front.bind("tcp://127.0.0.1:*")
    back.bind("tcp://127.0.0.1:*")
    ctl_srv, ctl = make_socket(libs, "mq", "PAIR"), make_socket(libs, "mq", "PAIR")
    ctl_srv.bind("inproc://rr-ctl")
    ctl.connect("inproc://rr-ctl")
    t = threading.Thread(target=mqcore.proxy_steerable, args=(front, back, None, ctl_srv), daemon=True)
    t.start()
    req, rep = make_socket(libs, "zmq", "REQ"), make_socket(libs, "zmq", "REP")
    req.connect(front.last_endpoint.decode())
    rep.connect(back.last_endpoint.decode())
    for i in range(3):
        req.send(b"ping%d" % i)
        assert rep.recv() == b"ping%d" % i
        rep.send(b"pong%d" % i)
        assert req.recv() == b"pong%d" % i
    ctl.send(b"TERMINATE")
    t.join(10)
    assert not t.is_alive()
