"""Heartbeats against libzmq: libzmq's PINGs get PONGs from mqcore (it never times us out), and
mqcore's PINGs are answered by libzmq (mqcore never times it out), while traffic keeps flowing, and
while an mqcore socket's thread does something else than read under a CPU hog."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import zmq

import mqcore
from tests.mqcore.interop.conftest import Libs, bound_pair, make_socket

HOG_PAIRS = 8  # connections at once: each may be parked for its socket's thread when its recv returns
IDLE_S = 2.0  # four of the libzmq peer's heartbeat timeouts


def _disconnects(mon: Any, lib: str) -> int:
    """DISCONNECTED events queued on a monitor socket so far (non-blocking drain)."""
    count = 0
    while True:
        try:
            frames = mon.recv_multipart(zmq.NOBLOCK if lib == "zmq" else mqcore.NOBLOCK)
        except (zmq.Again, mqcore.Again):
            return count
        event = int.from_bytes(frames[0][:2], "little")
        count += event == 0x200


@pytest.mark.parametrize("pinger", ["zmq", "mq"])
def test_heartbeating_side_keeps_a_responsive_peer(libs: Libs, pinger: str) -> None:
    other = "mq" if pinger == "zmq" else "zmq"
    hb = {"heartbeat_ivl": 30, "heartbeat_timeout": 300, "heartbeat_ttl": 500}
    router, dealer = bound_pair(libs, (pinger, "ROUTER"), (other, "DEALER"), "tcp", a_opts=hb)
    mon = router.get_monitor_socket()
    mon.rcvtimeo = 100
    for i in range(12):  # ~12 poll waits of 50 ms: many heartbeat intervals and timeouts
        dealer.send(b"req%d" % i)
        rid, body = router.recv_multipart()
        assert body == b"req%d" % i
        router.send_multipart([rid, b"rep%d" % i])
        assert dealer.recv() == b"rep%d" % i
        dealer.poll(50)
    assert _disconnects(mon, pinger) == 0
    router.disable_monitor()
    mon.close()


def test_pyzmq_ttl_is_honoured_while_mqcore_is_alive(libs: Libs) -> None:
    """libzmq announces a TTL in its PINGs; mqcore keeps talking, so the connection stays up."""
    pub, sub = bound_pair(libs, ("zmq", "PUB"), ("mq", "SUB"), "tcp",
                          a_opts={"heartbeat_ivl": 30, "heartbeat_ttl": 200})
    sub.subscribe(b"")
    mon = sub.get_monitor_socket(mqcore.EVENT_DISCONNECTED)
    got = 0
    sub.rcvtimeo = 50
    for _ in range(40):
        pub.send(b"tick")
        try:
            sub.recv()
            got += 1
        except mqcore.Again:
            pass
    assert got > 0
    assert _disconnects(mon, "mq") == 0
    mon.close()


@contextmanager
def cpu_hog() -> Iterator[None]:
    """Every core kept busy by a process of its own (Python busy loops), stopped on the way out."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_an_idle_socket_answers_a_libzmq_peers_heartbeats_under_a_cpu_hog(libs: Libs) -> None:
    """A ROUTER's connection stays read (and its PINGs answered) after the ROUTER's recv returned and
    the application left it alone: libzmq DEALERs with a 500 ms heartbeat timeout keep their links to
    mqcore ROUTERs that received a message and were then left idle, while every core is busy."""
    pairs = []
    for _ in range(HOG_PAIRS):
        router = make_socket(libs, "mq", "ROUTER")
        router.bind("tcp://127.0.0.1:*")
        dealer = make_socket(libs, "zmq", "DEALER", heartbeat_ivl=100, heartbeat_timeout=500)
        monitor = dealer.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        dealer.connect(router.last_endpoint.decode())
        pairs.append((router, dealer, monitor))
    with cpu_hog():
        for step in (b"first", b"second"):
            for router, dealer, _ in pairs:
                dealer.send(step)
                assert router.recv_multipart()[1] == step
            time.sleep(IDLE_S)  # the ROUTERs' thread does something else than read
        for router, dealer, _ in pairs:
            dealer.send(b"later")
            assert router.recv_multipart()[1] == b"later"
    dropped = [i for i, (_, _, monitor) in enumerate(pairs) if _disconnects(monitor, "zmq")]
    assert dropped == [], f"links dropped by the libzmq peer (PINGs unanswered): pairs {dropped}"
    for _, _, monitor in pairs:
        monitor.close()
