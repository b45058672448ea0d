"""Heartbeats against libzmq: libzmq's PINGs get PONGs from mqcore (it never times us out), and
mqcore's PINGs are answered by libzmq (mqcore never times it out), while traffic keeps flowing."""

from __future__ import annotations

from typing import Any

import pytest
import zmq

import mqcore
from tests.mqcore.interop.conftest import Libs, bound_pair


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
