"""Hostile input through real TCP: garbage greetings, truncated frames, absurd sizes (MAXMSGSIZE set),
wrong socket types and disconnects mid-handshake. Each bad connection is dropped, the mqcore socket
keeps serving a libzmq peer, buffered bytes stay bounded and nothing reaches stderr. Also PUSH<->PUSH
between the libraries is refused while both sockets keep working with proper peers."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqcore
from mqcore.utils.monitor import recv_monitor_message
from tests.mqcore.interop.conftest import Libs, make_socket
from tests.mqcore.interop.test_interop_zmtp30 import command, greeting, message, ready

MAXMSGSIZE = 1024
HWM = 50


def _engines(sock: Any) -> list[Any]:
    """The live engines of a bound mqcore socket (read from the test thread; retried on races)."""
    for _ in range(20):
        try:
            found = []
            for entries in list(sock._endpoints.values()):
                for entry in list(entries):
                    if entry[0] == "listener":
                        for session in list(entry[1].sessions):
                            if session.engine is not None:
                                found.append(session.engine)
            return found
        except RuntimeError:  # a set changed size under us
            continue
    return []


def _bounded(sock: Any) -> None:
    for engine in _engines(sock):
        assert engine.conn.buffered_bytes <= MAXMSGSIZE + 9
    for pipe in list(sock._pipes):
        assert pipe.backlog <= 2 * HWM + 1  # pipes never exceed their HWM (plus one batch slack)


junk = st.binary(min_size=1, max_size=200)
hostile_inputs = st.one_of(
    junk,                                                                       # garbage greeting
    st.builds(lambda n: greeting(3, 1)[:n], st.integers(0, 63)),               # cut mid-greeting
    st.builds(lambda j: greeting(3, 1) + j, junk),                              # garbage handshake
    st.builds(lambda t: greeting(3, 1) + ready(t), st.sampled_from([b"PUB", b"SUB", b"PULL", b"XYZ",
                                                                   b"ROUTER", b""])),  # wrong type
    st.builds(lambda size, flags: greeting(3, 1) + ready(b"PUSH") + bytes((flags | 2,))
              + struct.pack(">Q", size), st.integers(MAXMSGSIZE + 1, 2**63 - 1),
              st.sampled_from([0, 1])),                                         # absurd size
    st.builds(lambda body, cut: (greeting(3, 1) + ready(b"PUSH") + message(body))[:-cut],
              st.binary(max_size=300), st.integers(1, 5)),                      # truncated frame
    st.builds(lambda j: greeting(3, 1) + ready(b"PUSH") + command(b"PING", j[:4]) + j, junk),
)


def test_fuzzed_connections_do_not_hurt_the_socket(libs: Libs, capfd: pytest.CaptureFixture[str]) -> None:
    pull = make_socket(libs, "mq", "PULL", maxmsgsize=MAXMSGSIZE, rcvhwm=HWM, handshake_ivl=300)
    pull.bind("tcp://127.0.0.1:*")
    host, port = pull.last_endpoint.decode()[len("tcp://"):].rsplit(":", 1)
    good = make_socket(libs, "zmq", "PUSH")
    good.connect(pull.last_endpoint.decode())
    counter = iter(range(10**6))

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=hostile_inputs, linger_open=st.booleans())
    def one(data: bytes, linger_open: bool) -> None:
        with socket.create_connection((host, int(port))) as raw:
            try:
                raw.sendall(data)
            except OSError:
                pass  # mqcore already dropped us
            if linger_open:
                time.sleep(0.002)
            _bounded(pull)
        n = next(counter)
        good.send(b"good %d" % n)
        assert pull.recv() == b"good %d" % n

    one()
    assert next(counter) >= 50  # hypothesis really ran the examples
    _bounded(pull)
    out, err = capfd.readouterr()
    assert err == ""


@pytest.mark.parametrize("data", [
    greeting(3, 1) + ready(b"PUSH") + b"\x02" + struct.pack(">Q", 2**62),
    greeting(3, 1) + ready(b"PUB"),
    b"GET / HTTP/1.1\r\n\r\n",
    greeting(2, 0),
], ids=["absurd-size", "wrong-type", "http", "zmtp2"])
def test_bad_connection_is_closed_and_reported(libs: Libs, data: bytes) -> None:
    pull = make_socket(libs, "mq", "PULL", maxmsgsize=MAXMSGSIZE)
    mon = pull.get_monitor_socket(mqcore.EVENT_DISCONNECTED)
    mon.rcvtimeo = 5000
    pull.bind("tcp://127.0.0.1:*")
    host, port = pull.last_endpoint.decode()[len("tcp://"):].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as raw:
        raw.settimeout(5)
        raw.sendall(data)
        assert recv_monitor_message(mon)["event"] == mqcore.EVENT_DISCONNECTED
        try:
            while raw.recv(4096):
                pass
        except ConnectionResetError:
            pass
    mon.close()


@pytest.mark.parametrize("mq_binds", [True, False])
def test_push_to_push_is_refused_both_keep_working(libs: Libs, mq_binds: bool) -> None:
    # IMMEDIATE on the connecting side: nothing is queued for a peer that never completes
    mq_push = make_socket(libs, "mq", "PUSH", sndtimeo=200, immediate=int(not mq_binds))
    zmq_push = make_socket(libs, "zmq", "PUSH", immediate=1)  # (libzmq queues to pending peers too)
    failed = mqcore.EVENT_HANDSHAKE_FAILED_PROTOCOL | mqcore.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    mon = mq_push.get_monitor_socket(failed)
    mon.rcvtimeo = 5000
    binder, connecter = (mq_push, zmq_push) if mq_binds else (zmq_push, mq_push)
    binder.bind("tcp://127.0.0.1:*")
    connecter.connect(binder.last_endpoint.decode())
    # PROTOCOL when we read libzmq's READY first; NO_DETAIL when libzmq refused us first and its
    # reset discarded the READY we had not read yet
    assert recv_monitor_message(mon)["event"] & failed
    with pytest.raises(mqcore.Again):
        mq_push.send(b"nobody takes this")  # the refused peer never became a pipe
    mq_pull = make_socket(libs, "mq", "PULL")
    zmq_pull = make_socket(libs, "zmq", "PULL")
    mq_pull.bind("tcp://127.0.0.1:*")
    zmq_pull.bind("tcp://127.0.0.1:*")
    zmq_push.connect(mq_pull.last_endpoint.decode())
    mq_push.connect(zmq_pull.last_endpoint.decode())
    mq_push.sndtimeo = 5000
    for i in range(3):
        zmq_push.send(b"from zmq %d" % i)
        mq_push.send(b"from mq %d" % i)
    assert [mq_pull.recv() for _ in range(3)] == [b"from zmq %d" % i for i in range(3)]
    assert [zmq_pull.recv() for _ in range(3)] == [b"from mq %d" % i for i in range(3)]
    mon.close()
