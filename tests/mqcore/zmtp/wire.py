"""Hand-made ZMTP bytes for tests (written from RFC 23/37, independent of the codec) and a helper
that joins two connections in memory."""

from __future__ import annotations

from mqcore.zmtp import ZmtpConnection


def greeting(
    major: int = 3,
    minor: int = 1,
    mechanism: bytes = b"NULL",
    as_server: bool = False,
    padding: bytes = bytes(8),
    filler: bytes = bytes(31),
) -> bytes:
    return (
        b"\xff"
        + padding
        + b"\x7f"
        + bytes((major, minor))
        + mechanism.ljust(20, b"\0")
        + bytes((int(as_server),))
        + filler
    )


def frame(body: bytes, flags: int = 0) -> bytes:
    if len(body) > 255:
        return bytes((flags | 0x02,)) + len(body).to_bytes(8, "big") + body
    return bytes((flags, len(body))) + body


def command(name: bytes, data: bytes = b"") -> bytes:
    return frame(bytes((len(name),)) + name + data, 0x04)


def prop(name: bytes, value: bytes) -> bytes:
    return bytes((len(name),)) + name + len(value).to_bytes(4, "big") + value


def ready(socket_type: bytes, identity: bytes | None = None) -> bytes:
    data = prop(b"Socket-Type", socket_type)
    if identity is not None:
        data += prop(b"Identity", identity)
    return command(b"READY", data)


def shuttle(a: ZmtpConnection, b: ZmtpConnection) -> None:
    """Deliver handshake bytes both ways until neither side has anything to send."""
    while True:
        ab, ba = a.data_to_send(), b.data_to_send()
        if not ab and not ba:
            return
        b.receive_data(ab)
        a.receive_data(ba)


def connect(
    client_type: str = "PUSH", server_type: str = "PULL", **server_options: object
) -> tuple[ZmtpConnection, ZmtpConnection]:
    """A client and a server that exchanged greetings and READY (their events still queued)."""
    client = ZmtpConnection(client_type)
    server = ZmtpConnection(server_type, as_server=True, **server_options)  # type: ignore[arg-type]
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    shuttle(client, server)
    return client, server


def handshaken(client_type: str = "PUSH", server_type: str = "PULL", **server_options: object):
    """connect(), with the HandshakeDone events already drained."""
    client, server = connect(client_type, server_type, **server_options)
    client.next_events()
    server.next_events()
    return client, server


def raw_peer(
    socket_type: str, peer_type: bytes, version: tuple[int, int] = (3, 1), **options: object
) -> ZmtpConnection:
    """A connection whose peer is hand-made bytes of the given version; handshake done, drained."""
    conn = ZmtpConnection(socket_type, **options)  # type: ignore[arg-type]
    conn.start()
    conn.receive_data(greeting(*version) + ready(peer_type))
    conn.data_to_send()
    events = conn.next_events()
    assert conn.handshake_done, events
    return conn
