"""The pyzmq API surface beyond send/recv: shadows, recv_into, devices, futures from mqcore.asyncio,
bind/connect as context managers, constants' option types, and pyzmq's module names."""

from __future__ import annotations

import array
import asyncio
import copy
import pickle
import struct
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

import mqcore
import mqcore.asyncio as mqa
from mqcore import devices
from mqcore.utils import jsonapi

PairMaker = Callable[..., tuple[Any, Any]]


def test_shadow_socket_acts_on_the_original(ctx: mqcore.Context, make_pair: PairMaker) -> None:
    a, b = make_pair(mqcore.PUSH, mqcore.PULL)
    by_address = mqcore.Socket.shadow(a.underlying)
    by_object = mqcore.Socket(b)
    assert by_address.underlying == a.underlying and by_object._shadow_obj is b
    assert copy.copy(a).underlying == a.underlying
    by_address.send(b"via shadow")
    assert by_object.recv() == b"via shadow"
    del by_address
    assert not a.closed  # dropping a shadow leaves the socket open


def test_shadow_context_and_closed_context_errors(ctx: mqcore.Context) -> None:
    other = mqcore.Context()
    shadow = mqcore.Context.shadow(other.underlying)
    with shadow.socket(mqcore.PUB) as s:
        assert s.context is shadow
    other.term()
    with pytest.raises(mqcore.ZMQError) as exc:
        shadow.socket(mqcore.PUB)
    assert exc.value.errno == mqcore.Errno.EFAULT


def test_shadow_of_unknown_address_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not the underlying address"):
        mqcore.Socket.shadow(12345)


def test_recv_into_truncates_and_reports_full_length(make_pair: PairMaker) -> None:
    a, b = make_pair(mqcore.PAIR, mqcore.PAIR)
    a.send_multipart([b"hello", b"there world"])
    buf = array.array("Q", [0])
    assert b.recv_into(buf) == 5 and buf.tobytes()[:5] == b"hello"
    small = bytearray(4)
    assert b.recv_into(small) == 11 and small == b"ther"
    with pytest.raises(BufferError):
        b.recv_into(memoryview(b"readonly"))
    with pytest.raises(ValueError):
        b.recv_into(bytearray(3), nbytes=4)
    with pytest.raises(mqcore.Again):
        b.recv_into(bytearray(3), flags=mqcore.DONTWAIT)


def test_bind_and_connect_undo_at_block_end(ctx: mqcore.Context) -> None:
    with ctx.socket(mqcore.PUSH) as push, ctx.socket(mqcore.PULL) as pull:
        push.linger = pull.linger = 0
        pull.rcvtimeo = 5000
        with push.bind("tcp://127.0.0.1:0") as bound:
            pull.connect(push.last_endpoint)  # bytes, as pyzmq accepts
            bound.send(b"m")
            assert pull.recv() == b"m"
        with pytest.raises(mqcore.ZMQError, match="tcp://1.2.3.4.5:99"):
            push.bind("tcp://1.2.3.4.5:99")


def test_option_errors_repr_dir_and_pickling(ctx: mqcore.Context) -> None:
    s = ctx.socket(mqcore.SUB)
    with pytest.raises(TypeError):
        s.setsockopt(mqcore.SUBSCRIBE, "str topic")
    with pytest.raises(TypeError):
        s.setsockopt(9999, b"5")
    assert "zmq.Socket(zmq.SUB)" in repr(s) and "IDENTITY" in dir(s)
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(s)
    s.close()
    assert "closed" in repr(s)
    assert "IO_THREADS" in dir(ctx)
    ctx.max_sockets = 50
    assert ctx.get(mqcore.ContextOption.MAX_SOCKETS) == 50


def test_constants_module_names_and_option_types() -> None:
    assert mqcore.constants.SUBSCRIBE is mqcore.SocketOption.SUBSCRIBE
    assert mqcore.IDENTITY._opt_type is mqcore.constants._OptType.bytes  # type: ignore[attr-defined]
    assert mqcore.FD._opt_type is mqcore.constants._OptType.fd  # type: ignore[attr-defined]
    assert mqcore.RECONNECT_STOP_AFTER_DISCONNECT is mqcore.constants.ReconnectStop.AFTER_DISCONNECT  # type: ignore[attr-defined]
    assert jsonapi.loads(jsonapi.dumps({"k": 1})) == {"k": 1}


ALIASED = """
import sys, types
import mqcore
sys.modules["zmq"] = mqcore  # what an application does to run pyzmq code on mqcore; nothing more
import zmq
import zmq.asyncio, zmq.auth.thread, zmq.constants, zmq.devices
from zmq.utils import jsonapi, z85
from zmq.auth.asyncio import AsyncioAuthenticator
assert [zmq.backend.Socket, zmq.sugar.socket.Socket, zmq.error.ZMQError, zmq.utils.jsonapi]
for name in ("asyncio", "auth", "auth.thread", "auth.asyncio", "constants", "devices", "utils"):
    module = sys.modules["zmq." + name]
    assert module is sys.modules["mqcore." + name], name  # one module, whatever name reached it
    assert module.__spec__.name == "mqcore." + name, name
assert zmq.constants.SUBSCRIBE is mqcore.SocketOption.SUBSCRIBE
assert zmq.asyncio.Context is sys.modules["mqcore.asyncio"].Context
for missing in ("zmq.green", "zmq.sugar.socket"):
    try:
        __import__(missing)
    except ImportError as exc:
        assert missing in str(exc), exc
    else:
        raise AssertionError(missing + " imported")
print("ok")
"""


def test_import_zmq_names_what_pyzmq_binds_and_an_alias_gives_mqcores_own_modules() -> None:
    # In a process of its own: this one has pyzmq imported as zmq for the interop tests.
    for name in ("backend", "constants", "error", "sugar", "utils"):
        assert isinstance(getattr(mqcore, name), types.ModuleType), name
    assert mqcore.utils.jsonapi is jsonapi and mqcore.backend.Socket is mqcore.socket_base.SocketBase
    run = subprocess.run([sys.executable, "-c", ALIASED], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "ok", run.stderr


def test_thread_proxy_steerable_forwards_and_reports_statistics(ctx: mqcore.Context) -> None:
    dev = devices.ThreadProxySteerable(mqcore.PULL, mqcore.PUSH, mqcore.PUSH, mqcore.PAIR)
    dev.context_factory = lambda: ctx  # type: ignore[method-assign]
    iface = "tcp://127.0.0.1"
    ports = [dev.bind_in_to_random_port(iface), dev.bind_out_to_random_port(iface),
             dev.bind_mon_to_random_port(iface), dev.bind_ctrl_to_random_port(iface)]
    dev.start()
    socks = [ctx.socket(t) for t in (mqcore.PUSH, mqcore.PULL, mqcore.PULL, mqcore.PAIR)]
    for s, port in zip(socks, ports, strict=True):
        s.linger = 0
        s.rcvtimeo = 5000
        s.connect(f"{iface}:{port}")
    push, pull, mon, ctrl = socks
    push.send(b"hello")
    assert pull.recv() == b"hello" and mon.recv() == b"hello"
    ctrl.send(b"STATISTICS")
    stats = [struct.unpack("=Q", f)[0] for f in ctrl.recv_multipart()]
    assert stats[:2] == [1, 5] and stats[6:] == [1, 5]
    ctrl.send(b"TERMINATE")
    dev.join(5)
    assert dev.launcher is not None and not dev.launcher.is_alive()
    for s in socks:
        s.close()


def test_single_socket_device_echoes(ctx: mqcore.Context) -> None:
    dev = devices.ThreadDevice(devices.QUEUE, mqcore.REP, -1)
    dev.context_factory = lambda: ctx  # type: ignore[method-assign]
    req = ctx.socket(mqcore.REQ)
    req.linger, req.rcvtimeo = 0, 5000
    port = req.bind_to_random_port("tcp://127.0.0.1")
    dev.connect_out(f"tcp://127.0.0.1:{port}")  # out settings apply to the one socket
    dev.start()
    req.send(b"echo")
    assert req.recv() == b"echo"
    req.close()


def test_asyncio_recv_string_is_a_future_done_at_once_when_ready() -> None:
    async def main() -> None:
        ctx = mqa.Context()
        a, b = ctx.socket(mqcore.PAIR), ctx.socket(mqcore.PAIR)
        a.linger = b.linger = 0
        a.bind("inproc://fut")
        b.connect("inproc://fut")
        waiting = b.recv_string()
        assert not waiting.done()
        assert waiting.cancel() and waiting.done()  # cancelled at once, as pyzmq's
        await a.send_string("x")
        await asyncio.sleep(0.05)
        assert b.recv_string().result() == "x"  # a message was queued: done at once
        poll = b.poll(timeout=5000)
        b.close()
        with pytest.raises(asyncio.CancelledError):
            await poll  # closing a polled socket cancels the poll
        a.close()
        ctx.term()

    asyncio.run(main())


def test_attribute_writes_are_options_as_in_pyzmq(ctx: mqcore.Context, make_pair: PairMaker) -> None:
    pub, sub = make_pair(mqcore.PUB, mqcore.SUB)
    sub.subscribe = "a"  # the option, not a replacement of the method
    sub.subscribe(b"b")
    with pytest.raises(AttributeError):
        sub.apple = "foo"
    with pytest.raises(AttributeError):
        sub.apple  # noqa: B018
    sub.rcvtimeo = 2000
    assert sub.getsockopt(mqcore.RCVTIMEO) == 2000
    for _ in range(200):  # until the subscriptions reached the publisher
        pub.send(b"a1")
        if sub.poll(20):
            break
    assert sub.recv() == b"a1"
    pub.send_multipart([b"c", b"skipped"])
    pub.send_multipart([b"b2", b"more"])
    assert sub.recv() == b"b2" and sub.rcvmore and sub.getsockopt(mqcore.RCVMORE) == 1
    assert sub.recv() == b"more" and not sub.rcvmore


def test_ipc_path_too_long_names_the_limit(ctx: mqcore.Context) -> None:
    with ctx.socket(mqcore.PUB) as s, pytest.raises(mqcore.ZMQError) as info:
        s.bind("ipc://" + "a" * (mqcore.IPC_PATH_MAX_LEN + 1))
    assert info.value.errno == mqcore.EINVAL and str(mqcore.IPC_PATH_MAX_LEN) in info.value.strerror


def test_an_option_that_cannot_be_read_is_an_attribute_error_so_mock_specs_work(ctx: mqcore.Context) -> None:
    """pyzmq's test_mockable: ``mock.Mock(spec=socket)`` reads every name of ``dir(socket)``."""
    from unittest import mock

    sock = ctx.socket(mqcore.SUB)
    with pytest.raises(AttributeError, match="blocky attribute is write-only"):
        sock.blocky  # noqa: B018
    assert getattr(sock, "router_raw", "absent") == "absent"
    spec = mock.Mock(spec=sock)
    assert callable(spec.recv) and sock.linger == -1  # readable options still read
    sock.close(0)
    with pytest.raises(mqcore.ZMQError):  # a closed socket is ENOTSOCK, not an AttributeError
        sock.linger  # noqa: B018


def test_versions_all_and_submodules_by_pyzmqs_names() -> None:
    """pyzmq code that checks versions, star-imports or reaches submodules by pyzmq's names finds them:
    ``__version__`` is the pyzmq API followed (== pyzmq_version()), zmq_version the libzmq one, every
    constant is in ``__all__``, and the devices, version and strtypes modules exist under pyzmq's names."""
    import warnings

    from mqcore import sugar
    from mqcore.utils import strtypes

    assert mqcore.pyzmq_version() == mqcore.__version__ and mqcore.__revision__ == ""
    info = mqcore.pyzmq_version_info()
    assert len(info) == 3 and all(isinstance(n, int) for n in info) and info >= (27, 0, 0)
    assert mqcore.zmq_version() == "4.3.5" and mqcore.zmq_version_info() == (4, 3, 5)
    assert sugar.version.pyzmq_version is mqcore.pyzmq_version and mqcore.MQCORE_VERSION != mqcore.__version__
    for name in ("PUSH", "RCVTIMEO", "EAGAIN", "EVENT_CONNECTED", "zmq_version_info", "pyzmq_version_info"):
        assert name in mqcore.__all__
    assert all(hasattr(mqcore, name) for name in mqcore.__all__)
    assert devices.monitoredqueue.monitored_queue is devices.monitored_queue
    assert devices.monitoredqueuedevice.ThreadMonitoredQueue is devices.ThreadMonitoredQueue
    assert devices.proxydevice.Proxy is devices.Proxy and devices.basedevice.Device is devices.Device
    assert devices.proxysteerabledevice.ProxySteerable is devices.ProxySteerable
    with pytest.raises(TypeError, match="in_prefix must be bytes"):
        devices.monitored_queue(None, None, None, "in", b"out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert strtypes.cast_bytes("é") == "é".encode() and strtypes.cast_unicode(b"ab") == "ab"
    assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]


def test_frame_refuses_what_is_not_a_buffer_keeps_one_view_and_reprs_as_pyzmq() -> None:
    assert mqcore.Frame(bytearray(b"ab")).bytes == b"ab" and mqcore.Frame(memoryview(b"cd")).bytes == b"cd"
    for bad in (5, object(), "text"):
        with pytest.raises(TypeError):
            mqcore.Frame(bad)
    with pytest.raises(BufferError):
        mqcore.Frame(memoryview(bytearray(10))[::2])
    frame = mqcore.Frame(b"payload")
    assert frame.buffer is frame.buffer and frame.buffer.tobytes() == b"payload"
    assert repr(mqcore.Frame(b"123456789")) == "<zmq.Frame(b'123456789')>"
    assert repr(mqcore.Frame(b"x" * 20)) == "<zmq.Frame(b'xxxxxxxxxxxx'...20B)>"
    assert repr(mqcore.Frame(b"x" * 2000)) == "<zmq.Frame(b'xxxxxxxxxxxx'...2kB)>"
    assert repr(mqcore.Frame(b"x" * 2_000_000)) == "<zmq.Frame(b'xxxxxxxxxxxx'...2MB)>"
