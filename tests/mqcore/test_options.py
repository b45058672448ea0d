"""Constants, errors and socket options match pyzmq's names, values and behaviour."""

from __future__ import annotations

import pytest
import zmq

import mqcore

SOCKET_TYPES = ["PAIR", "PUB", "SUB", "REQ", "REP", "DEALER", "ROUTER", "PULL", "PUSH", "XPUB", "XSUB"]
OPTIONS = ["IDENTITY", "ROUTING_ID", "SUBSCRIBE", "UNSUBSCRIBE", "SNDHWM", "RCVHWM", "LINGER", "RCVTIMEO",
           "SNDTIMEO", "RCVMORE", "FD", "EVENTS", "TYPE", "RECONNECT_IVL", "RECONNECT_IVL_MAX",
           "MAXMSGSIZE", "LAST_ENDPOINT", "ROUTER_MANDATORY", "IMMEDIATE", "IPV6", "REQ_RELAXED",
           "REQ_CORRELATE", "ROUTER_HANDOVER", "HEARTBEAT_IVL", "HWM", "BACKLOG", "CONFLATE"]
ERRNOS = ["EAGAIN", "EFSM", "EHOSTUNREACH", "ETERM", "EMSGSIZE", "ENOTSUP", "EINVAL", "EADDRINUSE",
          "ENOTSOCK", "EPROTONOSUPPORT"]


@pytest.mark.parametrize("name", SOCKET_TYPES + OPTIONS + ERRNOS + ["NOBLOCK", "DONTWAIT", "SNDMORE",
                                                                    "POLLIN", "POLLOUT", "POLLERR"])
def test_constant_values_match_pyzmq(name: str) -> None:
    assert int(getattr(mqcore, name)) == int(getattr(zmq, name))


def test_enums_and_errors() -> None:
    assert mqcore.SocketType.PUSH == 8 and isinstance(mqcore.SNDMORE, mqcore.Flag)
    err = mqcore.ZMQError(mqcore.EFSM)
    assert err.errno == mqcore.EFSM and "state" in str(err)
    assert issubclass(mqcore.Again, mqcore.ZMQError) and mqcore.Again().errno == mqcore.EAGAIN
    assert mqcore.ContextTerminated().errno == mqcore.ETERM


def test_option_attributes_and_defaults(ctx: mqcore.Context) -> None:
    s = ctx.socket(mqcore.DEALER)
    assert s.sndhwm == 1000 and s.rcvhwm == 1000 and s.linger == -1 and s.rcvtimeo == -1
    assert s.reconnect_ivl == 100
    s.sndhwm = 10
    s.setsockopt(mqcore.RCVHWM, 20)
    assert s.getsockopt(mqcore.SNDHWM) == 10 and s.rcvhwm == 20
    s.hwm = 5
    assert (s.sndhwm, s.rcvhwm) == (5, 5)
    s.identity = b"me"
    assert s.routing_id == b"me" and s.getsockopt(mqcore.IDENTITY) == b"me"
    assert s.getsockopt(mqcore.TYPE) == mqcore.DEALER and s.type == mqcore.DEALER
    assert s.getsockopt(mqcore.RCVMORE) == 0
    assert isinstance(s.fd, int) and isinstance(s.FD, int)
    assert s.getsockopt(mqcore.EVENTS) == 0  # nothing connected
    s.bind("tcp://127.0.0.1:*")
    assert s.last_endpoint.startswith(b"tcp://127.0.0.1:")
    with pytest.raises(mqcore.ZMQError) as info:
        s.setsockopt(9999, 1)
    assert info.value.errno == mqcore.EINVAL


def test_closed_socket_raises_enotsock(ctx: mqcore.Context) -> None:
    s = ctx.socket(mqcore.PUSH)
    s.close()
    assert s.closed
    with pytest.raises(mqcore.ZMQError) as info:
        s.send(b"x")
    assert info.value.errno == mqcore.ENOTSOCK


def test_bad_endpoints(ctx: mqcore.Context) -> None:
    s = ctx.socket(mqcore.PULL)
    with pytest.raises(mqcore.ZMQError) as info:
        s.bind("bogus://x")
    assert info.value.errno == mqcore.EPROTONOSUPPORT
    with pytest.raises(mqcore.ZMQError) as info:
        s.bind("tcp://127.0.0.1")
    assert info.value.errno == mqcore.EINVAL
    s.bind("tcp://127.0.0.1:*")
    other = ctx.socket(mqcore.PULL)
    with pytest.raises(mqcore.ZMQError) as info:
        other.bind(s.last_endpoint.decode())
    assert info.value.errno == mqcore.EADDRINUSE


def test_send_str_is_a_type_error(ctx: mqcore.Context) -> None:
    s = ctx.socket(mqcore.PUSH)
    with pytest.raises(TypeError):
        s.send("text")  # type: ignore[arg-type]
