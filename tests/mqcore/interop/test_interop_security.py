"""PLAIN and CURVE between mqcore and pyzmq (real libzmq) sockets, with each side's own ZAP handler
(mqcore.auth.thread / zmq.auth.thread ThreadAuthenticator), both directions, tcp and ipc.

Refusals are checked positively where libzmq can tell (its socket monitor reports
EVENT_HANDSHAKE_FAILED_AUTH with the ZAP status) and by a bounded receive that must time out.
Every wait is bounded (RCVTIMEO, monitor timeouts); nothing asserts on timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator as ZmqAuthenticator
from zmq.utils.monitor import recv_monitor_message

import mqcore
import mqcore.auth
from mqcore.auth.thread import ThreadAuthenticator as MqAuthenticator
from tests.mqcore.interop.conftest import TIMEOUT_MS, Libs, endpoint_for, make_socket

REFUSED_WAIT_MS = 400  # how long a refused client waits for a reply that must not come
PASSWORDS = {"admin": "secret"}
MULTIPART = [b"head", b"", b"z" * 3000]


@pytest.fixture
def mq_auth(libs: Libs) -> Iterator[MqAuthenticator]:
    auth = MqAuthenticator(libs.mq)
    auth.start()
    yield auth
    auth.stop()


@pytest.fixture
def zmq_auth(libs: Libs) -> Iterator[ZmqAuthenticator]:
    auth = ZmqAuthenticator(libs.zmq)
    auth.start()
    yield auth
    auth.stop()


def _serve(libs: Libs, lib: str, kind: str, transport: str, **opts: Any) -> Any:
    server = make_socket(libs, lib, kind, **opts)
    server.bind(endpoint_for(transport))
    return server


def _client(libs: Libs, lib: str, kind: str, server: Any, **opts: Any) -> Any:
    client = make_socket(libs, lib, kind, **opts)
    client.connect(server.last_endpoint.decode())
    return client


def _req_rep(req: Any, rep: Any) -> None:
    for i in range(3):
        req.send_multipart([b"q%d" % i, *MULTIPART])
        assert rep.recv_multipart() == [b"q%d" % i, *MULTIPART]
        rep.send_multipart([b"a%d" % i, b"x" * 200])
        assert req.recv_multipart() == [b"a%d" % i, b"x" * 200]


def _dealer_router(dealer: Any, router: Any) -> None:
    dealer.send_multipart(MULTIPART)
    rid, *body = router.recv_multipart()
    assert body == MULTIPART
    router.send_multipart([rid, b"back", b"y" * 70000])
    assert dealer.recv_multipart() == [b"back", b"y" * 70000]


def _gets_nothing(client: Any) -> bool:
    client.rcvtimeo = client.sndtimeo = REFUSED_WAIT_MS
    try:  # libzmq drops a refused connection for good, so even the send may find no peer
        client.send(b"knock")
        client.recv()
    except (zmq.Again, mqcore.Again):
        return True
    return False


def _monitor(sock: Any) -> Any:
    """A monitor socket (pyzmq's or mqcore's, same wire format) for handshake outcomes only."""
    mon = sock.get_monitor_socket(int(zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED))
    mon.rcvtimeo = TIMEOUT_MS
    return mon


def _first_handshake_event(mon: Any) -> tuple[int, int]:
    event = recv_monitor_message(mon)
    return int(event["event"]), int(event["value"])


def _curve_keys(lib_server: str, lib_client: str) -> tuple[tuple[bytes, bytes], tuple[bytes, bytes]]:
    make = {"mq": mqcore.curve_keypair, "zmq": zmq.curve_keypair}
    return make[lib_server](), make[lib_client]()


def _curve_server_opts(keys: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"curve_server": True, "curve_secretkey": keys[1], "curve_publickey": keys[0]}


def _curve_client_opts(server: tuple[bytes, bytes], client: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"curve_serverkey": server[0], "curve_publickey": client[0], "curve_secretkey": client[1]}


# -- PLAIN ---------------------------------------------------------------------------------------------


def test_plain_mqcore_server_pyzmq_client(libs: Libs, mq_auth: MqAuthenticator) -> None:
    mq_auth.configure_plain(domain="*", passwords=PASSWORDS)
    rep = _serve(libs, "mq", "REP", "tcp", plain_server=True)
    server_mon = _monitor(rep)
    req = _client(libs, "zmq", "REQ", rep, plain_username=b"admin", plain_password=b"secret")
    _req_rep(req, rep)
    assert _first_handshake_event(server_mon)[0] == zmq.EVENT_HANDSHAKE_SUCCEEDED
    wrong = make_socket(libs, "zmq", "REQ", plain_username=b"admin", plain_password=b"wrong")
    mon = _monitor(wrong)
    wrong.connect(rep.last_endpoint.decode())
    assert _first_handshake_event(mon) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)  # libzmq read our ERROR
    assert _first_handshake_event(server_mon) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
    assert _gets_nothing(wrong)


def test_plain_pyzmq_server_mqcore_client(libs: Libs, zmq_auth: ZmqAuthenticator) -> None:
    zmq_auth.configure_plain(domain="*", passwords=PASSWORDS)
    rep = _serve(libs, "zmq", "REP", "tcp", plain_server=True)
    mon = _monitor(rep)
    req = _client(libs, "mq", "REQ", rep, plain_username=b"admin", plain_password=b"secret")
    _req_rep(req, rep)
    assert _first_handshake_event(mon)[0] == zmq.EVENT_HANDSHAKE_SUCCEEDED
    wrong = make_socket(libs, "mq", "REQ", plain_username=b"admin", plain_password=b"wrong")
    client_mon = _monitor(wrong)
    wrong.connect(rep.last_endpoint.decode())
    assert _first_handshake_event(mon) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
    assert _first_handshake_event(client_mon) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)  # from its ERROR
    assert _gets_nothing(wrong)


# -- CURVE, encryption only (no ZAP handler: any client knowing the server key) ------------------------


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
@pytest.mark.parametrize("server_lib,client_lib", [("mq", "zmq"), ("zmq", "mq")], ids=["mq-srv", "zmq-srv"])
def test_curve_dealer_router(libs: Libs, transport: str, server_lib: str, client_lib: str) -> None:
    server_keys, client_keys = _curve_keys(server_lib, client_lib)
    router = _serve(libs, server_lib, "ROUTER", transport, **_curve_server_opts(server_keys))
    dealer = _client(libs, client_lib, "DEALER", router, **_curve_client_opts(server_keys, client_keys))
    _dealer_router(dealer, router)


@pytest.mark.parametrize("server_lib,client_lib", [("mq", "zmq"), ("zmq", "mq")], ids=["mq-srv", "zmq-srv"])
def test_curve_req_rep(libs: Libs, server_lib: str, client_lib: str) -> None:
    server_keys, client_keys = _curve_keys(server_lib, client_lib)
    rep = _serve(libs, server_lib, "REP", "tcp", **_curve_server_opts(server_keys))
    req = _client(libs, client_lib, "REQ", rep, **_curve_client_opts(server_keys, client_keys))
    _req_rep(req, rep)


def test_curve_pyzmq_client_with_wrong_server_key(libs: Libs) -> None:
    server_keys, client_keys = _curve_keys("mq", "zmq")
    rep = _serve(libs, "mq", "REP", "tcp", **_curve_server_opts(server_keys))
    wrong_server = (zmq.curve_keypair()[0], b"")
    req = _client(libs, "zmq", "REQ", rep, **_curve_client_opts(wrong_server, client_keys))
    assert _gets_nothing(req)


# -- CURVE with a ZAP allow-list of client keys ---------------------------------------------------------


def test_curve_allow_list_mqcore_server(libs: Libs, mq_auth: MqAuthenticator, tmp_path: Path) -> None:
    server_keys, _ = _curve_keys("mq", "zmq")
    folder = tmp_path / "allowed"
    folder.mkdir()
    public_file, secret_file = zmq.auth.create_certificates(folder, "client")  # we read pyzmq's files
    client_keys = zmq.auth.load_certificate(secret_file)
    assert mqcore.auth.load_certificate(public_file)[0] == client_keys[0]
    mq_auth.configure_curve(domain="*", location=str(folder))
    router = _serve(libs, "mq", "ROUTER", "tcp", **_curve_server_opts(server_keys))
    dealer = _client(libs, "zmq", "DEALER", router, **_curve_client_opts(server_keys, client_keys))
    _dealer_router(dealer, router)
    stranger = make_socket(libs, "zmq", "DEALER", **_curve_client_opts(server_keys, zmq.curve_keypair()))
    mon = _monitor(stranger)
    stranger.connect(router.last_endpoint.decode())
    assert _first_handshake_event(mon) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
    assert _gets_nothing(stranger)


def test_curve_allow_list_pyzmq_server(libs: Libs, zmq_auth: ZmqAuthenticator, tmp_path: Path) -> None:
    server_keys, client_keys = _curve_keys("zmq", "mq")
    folder = tmp_path / "allowed"
    folder.mkdir()
    public_file, secret_file = mqcore.auth.create_certificates(folder, "client")  # pyzmq reads our files
    client_keys = mqcore.auth.load_certificate(secret_file)  # type: ignore[assignment]
    assert zmq.auth.load_certificate(public_file)[0] == client_keys[0]
    zmq_auth.configure_curve(domain="*", location=str(folder))
    router = _serve(libs, "zmq", "ROUTER", "tcp", **_curve_server_opts(server_keys))
    mon = _monitor(router)
    dealer = _client(libs, "mq", "DEALER", router, **_curve_client_opts(server_keys, client_keys))
    _dealer_router(dealer, router)
    assert _first_handshake_event(mon)[0] == zmq.EVENT_HANDSHAKE_SUCCEEDED
    stranger = _client(libs, "mq", "DEALER", router,
                       **_curve_client_opts(server_keys, mqcore.curve_keypair()))
    assert _first_handshake_event(mon) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
    assert _gets_nothing(stranger)


# -- mqcore on both sides -------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_mqcore_to_mqcore_curve_and_plain(libs: Libs, mq_auth: MqAuthenticator, transport: str) -> None:
    mq_auth.configure_plain(passwords=PASSWORDS)
    mq_auth.configure_curve(location=mqcore.auth.CURVE_ALLOW_ANY)
    server_keys, client_keys = _curve_keys("mq", "mq")
    router = _serve(libs, "mq", "ROUTER", transport, **_curve_server_opts(server_keys))
    dealer = _client(libs, "mq", "DEALER", router, **_curve_client_opts(server_keys, client_keys))
    _dealer_router(dealer, router)
    rep = _serve(libs, "mq", "REP", transport, plain_server=True)
    req = _client(libs, "mq", "REQ", rep, plain_username=b"admin", plain_password=b"secret")
    _req_rep(req, rep)
    wrong = _client(libs, "mq", "REQ", rep, plain_username=b"admin", plain_password=b"nope")
    assert _gets_nothing(wrong)
