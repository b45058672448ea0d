"""Security on mqcore sockets: options as libzmq keeps them, PLAIN and CURVE over tcp and ipc with
mqcore's own ThreadAuthenticator, ZAP policy, certificates. Every wait is bounded (RCVTIMEO)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mqcore
from mqcore.auth import CURVE_ALLOW_ANY, Authenticator, create_certificates, load_certificate
from mqcore.auth.thread import ThreadAuthenticator
from mqcore.utils import z85
from tests.mqcore.conftest import TIMEOUT_MS, endpoint

REFUSED_WAIT_MS = 400  # how long a refused client waits for a reply that must not come


@pytest.fixture
def auth(ctx: mqcore.Context) -> Iterator[ThreadAuthenticator]:
    authenticator = ThreadAuthenticator(ctx)
    authenticator.start()
    yield authenticator
    authenticator.stop()


def _socket(ctx: mqcore.Context, kind: int, **opts: Any) -> mqcore.Socket:
    s = ctx.socket(kind)
    s.linger = 0
    s.rcvtimeo = s.sndtimeo = TIMEOUT_MS
    for name, value in opts.items():
        setattr(s, name, value)
    return s


def _pair(ctx: mqcore.Context, transport: str, server_opts: dict[str, Any],
          client_opts: dict[str, Any]) -> tuple[mqcore.Socket, mqcore.Socket]:
    server = _socket(ctx, mqcore.ROUTER, **server_opts)
    server.bind(endpoint(transport))
    client = _socket(ctx, mqcore.DEALER, **client_opts)
    client.connect(server.last_endpoint.decode())
    return server, client


def _round_trip(server: mqcore.Socket, client: mqcore.Socket) -> None:
    client.send_multipart([b"hello", b"", b"x" * 5000])
    rid, *body = server.recv_multipart()
    assert body == [b"hello", b"", b"x" * 5000]
    server.send_multipart([rid, b"back", b"y" * 300])
    assert client.recv_multipart() == [b"back", b"y" * 300]


def _refused(client: mqcore.Socket) -> bool:
    client.rcvtimeo = client.sndtimeo = REFUSED_WAIT_MS
    try:
        client.send(b"knock")
        client.recv()
    except mqcore.Again:
        return True
    return False


# -- options -----------------------------------------------------------------------------------------


def test_security_options_follow_libzmq(ctx: mqcore.Context) -> None:
    s = ctx.socket(mqcore.DEALER)
    assert (s.mechanism, s.plain_server, s.curve_server) == (mqcore.NULL, 0, 0)
    s.plain_username = b"user"
    assert (s.mechanism, s.plain_server, s.plain_username) == (mqcore.PLAIN, 0, b"user")
    s.plain_server = True
    assert (s.mechanism, s.plain_server, s.curve_server) == (mqcore.PLAIN, 1, 0)
    s.plain_server = False
    assert s.mechanism == mqcore.NULL
    s.curve_server = 1
    assert (s.mechanism, s.plain_server, s.curve_server) == (mqcore.CURVE, 0, 1)
    public, secret = mqcore.curve_keypair()
    s.curve_publickey = public
    assert s.curve_server == 1  # a key alone keeps the role
    s.curve_serverkey = z85.decode(public)  # raw form accepted too
    assert (s.mechanism, s.curve_server) == (mqcore.CURVE, 0)
    assert s.curve_serverkey == public and s.curve_publickey == public  # read back as Z85
    assert s.getsockopt(mqcore.CURVE_SECRETKEY) == z85.encode(bytes(32))  # unset reads as zeros
    s.zap_domain = b"global"
    assert s.zap_domain == b"global"
    with pytest.raises(mqcore.ZMQError):
        s.mechanism = mqcore.CURVE  # read-only
    for bad in (b"short", b"~" * 40, b"x" * 256):
        with pytest.raises(mqcore.ZMQError):
            s.curve_secretkey = bad
    with pytest.raises(mqcore.ZMQError):
        s.plain_password = b""
    with pytest.raises(TypeError):
        s.plain_username = "text"  # like pyzmq: bytes only (setsockopt_string encodes)
    s.setsockopt_string(mqcore.PLAIN_USERNAME, "text")
    assert s.plain_username == b"text"
    s.close()


def test_keys_and_z85_helpers() -> None:
    public, secret = mqcore.curve_keypair()
    assert len(public) == len(secret) == 40
    assert mqcore.curve_public(secret) == public
    assert z85.encode(z85.decode(public)) == public
    assert z85.decode(public.decode()) == z85.decode(public)
    assert mqcore.has("curve")


# -- PLAIN -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_plain_with_thread_authenticator(ctx: mqcore.Context, auth: ThreadAuthenticator,
                                         transport: str) -> None:
    auth.configure_plain(domain="*", passwords={"admin": "secret"})
    server, client = _pair(ctx, transport, {"plain_server": True},
                           {"plain_username": b"admin", "plain_password": b"secret"})
    _round_trip(server, client)
    wrong = _socket(ctx, mqcore.DEALER, plain_username=b"admin", plain_password=b"nope")
    wrong.connect(server.last_endpoint.decode())
    assert _refused(wrong)
    _round_trip(server, client)  # the good client is unaffected


def test_plain_without_handler_refuses_everyone(ctx: mqcore.Context) -> None:
    server, client = _pair(ctx, "tcp", {"plain_server": True},
                           {"plain_username": b"admin", "plain_password": b"secret"})
    assert _refused(client)


def test_plain_allow_list_by_address(ctx: mqcore.Context, auth: ThreadAuthenticator) -> None:
    auth.configure_plain(passwords={"admin": "secret"})
    auth.allow("10.9.9.9")  # not us: loopback is refused although the password is right
    server, client = _pair(ctx, "tcp", {"plain_server": True},
                           {"plain_username": b"admin", "plain_password": b"secret"})
    assert _refused(client)


# -- CURVE -------------------------------------------------------------------------------------------


def _curve_opts() -> tuple[dict[str, Any], dict[str, Any], bytes]:
    server_public, server_secret = mqcore.curve_keypair()
    client_public, client_secret = mqcore.curve_keypair()
    server = {"curve_server": True, "curve_secretkey": server_secret}
    client = {"curve_serverkey": server_public, "curve_publickey": client_public,
              "curve_secretkey": client_secret}
    return server, client, client_public


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_curve_without_handler_encrypts(ctx: mqcore.Context, transport: str) -> None:
    server_opts, client_opts, _ = _curve_opts()
    server, client = _pair(ctx, transport, server_opts, client_opts)
    _round_trip(server, client)


def test_curve_with_wrong_server_key_is_refused(ctx: mqcore.Context) -> None:
    server_opts, client_opts, _ = _curve_opts()
    client_opts["curve_serverkey"] = mqcore.curve_keypair()[0]
    server, client = _pair(ctx, "tcp", server_opts, client_opts)
    assert _refused(client)


def test_curve_client_without_keys_never_connects(ctx: mqcore.Context) -> None:
    server_opts, _, _ = _curve_opts()
    server, client = _pair(ctx, "tcp", server_opts, {"curve_serverkey": server_opts["curve_secretkey"]})
    assert _refused(client)


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_curve_allow_list_of_client_keys(ctx: mqcore.Context, auth: ThreadAuthenticator,
                                         tmp_path: Path, transport: str) -> None:
    server_opts, client_opts, client_public = _curve_opts()
    (tmp_path / "client.key").write_text(f'curve\n    public-key = "{client_public.decode()}"\n')
    auth.configure_curve(domain="*", location=str(tmp_path))
    server, client = _pair(ctx, transport, server_opts, client_opts)
    _round_trip(server, client)
    _, stranger_opts, _ = _curve_opts()
    stranger_opts["curve_serverkey"] = client_opts["curve_serverkey"]
    stranger = _socket(ctx, mqcore.DEALER, **stranger_opts)
    stranger.connect(server.last_endpoint.decode())
    assert _refused(stranger)


def test_curve_allow_any_and_user_id(ctx: mqcore.Context, auth: ThreadAuthenticator) -> None:
    auth.configure_curve(location=CURVE_ALLOW_ANY)
    server_opts, client_opts, _ = _curve_opts()
    server, client = _pair(ctx, "tcp", server_opts, client_opts)
    _round_trip(server, client)


def test_received_frames_carry_user_id_and_peer_metadata(ctx: mqcore.Context,
                                                         auth: ThreadAuthenticator) -> None:
    auth.configure_curve(location=CURVE_ALLOW_ANY)
    auth.curve_user_id = lambda key: "custom"  # type: ignore[method-assign]
    server_opts, client_opts, _ = _curve_opts()
    server, client = _pair(ctx, "tcp", server_opts, client_opts)
    client.send(b"hi")
    rid, frame = server.recv_multipart(copy=False)
    assert frame.bytes == b"hi" and frame.get("User-Id") == "custom"
    assert frame["Socket-Type"] == "DEALER" and frame.get("Peer-Address") == "127.0.0.1"
    with pytest.raises(mqcore.ZMQError):
        frame.get("No-Such-Property")


def test_null_with_zap_domain_follows_the_deny_list(ctx: mqcore.Context, auth: ThreadAuthenticator) -> None:
    auth.deny("127.0.0.1")
    server, client = _pair(ctx, "tcp", {"zap_domain": b"global"}, {})
    assert _refused(client)
    open_server, open_client = _pair(ctx, "tcp", {}, {})  # no ZAP_DOMAIN: NULL never asks ZAP
    _round_trip(open_server, open_client)


def test_async_credentials_callback_is_awaited(ctx: mqcore.Context, auth: ThreadAuthenticator) -> None:
    server_opts, client_opts, client_public = _curve_opts()
    seen: list[bytes] = []

    class Provider:
        async def callback(self, domain: str, key: bytes) -> bool:
            await asyncio.sleep(0)
            seen.append(key)
            return key == client_public

    auth.configure_curve_callback(credentials_provider=Provider())
    server, client = _pair(ctx, "tcp", server_opts, client_opts)
    _round_trip(server, client)
    assert seen == [client_public]


def test_zap_handler_stopped_mid_life(ctx: mqcore.Context) -> None:
    authenticator = ThreadAuthenticator(ctx)
    authenticator.start()
    authenticator.configure_plain(passwords={"u": "p"})
    server, client = _pair(ctx, "tcp", {"plain_server": True},
                           {"plain_username": b"u", "plain_password": b"p"})
    _round_trip(server, client)
    authenticator.stop()
    late = _socket(ctx, mqcore.DEALER, plain_username=b"u", plain_password=b"p")
    late.connect(server.last_endpoint.decode())
    assert _refused(late)  # PLAIN with no handler bound refuses
    _round_trip(server, client)  # established connections stay


# -- Authenticator policy without sockets -------------------------------------------------------------


class _Recorder(Authenticator):
    def __init__(self) -> None:
        super().__init__(context=mqcore.Context())
        self.replies: list[list[bytes]] = []

    def _send_zap_reply(self, request_id: bytes, status_code: bytes, status_text: bytes,
                        user_id: str = "anonymous") -> None:
        self.replies.append([request_id, status_code, status_text, user_id.encode()])


def _request(mechanism: bytes, *credentials: bytes, address: bytes = b"127.0.0.1",
             domain: bytes = b"") -> list[bytes]:
    return [b"1.0", b"7", domain, address, b"", mechanism, *credentials]


def _handle(auth: Authenticator, msg: list[bytes]) -> None:
    asyncio.run(auth.handle_zap_message(msg))  # a coroutine, as in pyzmq


def test_authenticator_policy(tmp_path: Path) -> None:
    a = _Recorder()
    _handle(a, _request(b"NULL"))
    _handle(a, _request(b"PLAIN", b"admin", b"secret"))
    a.configure_plain(passwords={"admin": "secret"})
    _handle(a, _request(b"PLAIN", b"admin", b"secret"))
    _handle(a, _request(b"PLAIN", b"admin", b"bad"))
    _handle(a, _request(b"PLAIN", b"nobody", b"secret"))
    _handle(a, [b"2.0", b"8", b"", b"", b"", b"NULL"])
    assert [r[1:3] for r in a.replies] == [
        [b"200", b"OK"], [b"400", b"Domain not found"], [b"200", b"OK"], [b"400", b"Invalid password"],
        [b"400", b"Invalid username"], [b"400", b"Invalid version"],
    ]
    assert a.replies[2][3] == b"admin"
    a.replies.clear()
    public, _ = create_certificates(tmp_path, "client")
    key, secret = load_certificate(public)
    assert secret is None and load_certificate(tmp_path / "client.key_secret")[1] is not None
    a.configure_curve(location=tmp_path)
    _handle(a, _request(b"CURVE", z85.decode(key)))
    _handle(a, _request(b"CURVE", bytes(32)))
    assert [r[1] for r in a.replies] == [b"200", b"400"]
    assert a.replies[0][3] == key
    a.deny("127.0.0.1")
    a.replies.clear()
    _handle(a, _request(b"NULL"))
    _handle(a, _request(b"NULL", address=b"10.0.0.1"))
    assert [r[1] for r in a.replies] == [b"400", b"200"]
    with pytest.raises(ValueError):
        a.allow("10.0.0.2")
    a.context.term()


def test_many_clients_handshake_at_once(ctx: mqcore.Context, auth: ThreadAuthenticator) -> None:
    """Concurrent ZAP requests from one server socket: each connection gets its own answer."""
    auth.configure_plain(passwords={f"user{i}": f"pw{i}" for i in range(8)})
    server = _socket(ctx, mqcore.ROUTER, plain_server=True)
    server.bind(endpoint("tcp"))
    clients = []
    for i in range(8):
        password = f"pw{i}" if i % 2 == 0 else "wrong"
        client = _socket(ctx, mqcore.DEALER, plain_username=f"user{i}".encode(),
                         plain_password=password.encode(), routing_id=b"c%d" % i)
        client.connect(server.last_endpoint.decode())
        client.send(b"hi")
        clients.append(client)
    got = {server.recv_multipart()[0] for _ in range(4)}
    assert got == {b"c0", b"c2", b"c4", b"c6"}
    server.rcvtimeo = REFUSED_WAIT_MS
    with pytest.raises(mqcore.Again):
        server.recv_multipart()  # the four with a wrong password never got through
