"""Helpers for secured connections: an in-memory pump that also relays ZAP, and a driver that runs
one ZmtpConnection over a real blocking TCP socket (for interop with libzmq through pyzmq).

Every wait is bounded: the driver gives up with AssertionError after ``timeout`` seconds.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence

from mqcore.zmtp import Event, HandshakeDone, Mechanism, Message, ZmtpConnection

ZapHandler = Callable[[list[bytes]], list[bytes]]


def zap_reply(
    request: Sequence[bytes], status: bytes = b"200", text: bytes = b"OK", user: bytes = b""
) -> list[bytes]:
    """A well-formed reply to ``request`` (as REP would send it, no delimiter)."""
    return [b"1.0", request[1], status, text, user, b""]


def accept_all(request: list[bytes]) -> list[bytes]:
    return zap_reply(request, user=b"anyone")


def secure_pair(
    client_mechanism: Mechanism,
    server_mechanism: Mechanism,
    client_type: str = "DEALER",
    server_type: str = "DEALER",
    zap: ZapHandler | None = None,
    **server_options: object,
) -> tuple[ZmtpConnection, ZmtpConnection]:
    """A client and a server joined in memory; the server's ZAP requests go to ``zap``."""
    client = ZmtpConnection(client_type, mechanism=client_mechanism)
    server = ZmtpConnection(
        server_type,
        as_server=True,
        mechanism=server_mechanism,
        zap_handler=zap is not None,
        **server_options,  # type: ignore[arg-type]
    )
    client_greeting, server_greeting = client.start(), server.start()
    server.receive_data(client_greeting)
    client.receive_data(server_greeting)
    pump(client, server, zap)
    return client, server


def pump(a: ZmtpConnection, b: ZmtpConnection, zap: ZapHandler | None = None) -> None:
    """Move handshake bytes both ways, answering ZAP requests with ``zap`` (if given; else they
    are left for the test to take), until nothing moves."""
    for _ in range(100):
        moved = False
        if zap is not None:
            for conn in (a, b):
                request = conn.zap_request()
                if request is not None:
                    conn.zap_reply(zap(request))
                    moved = True
        ab, ba = a.data_to_send(), b.data_to_send()
        if ab or ba:
            moved = True
            b.receive_data(ab)
            a.receive_data(ba)
        if not moved:
            return
    raise AssertionError("the handshake did not settle in 100 rounds")


class TcpDriver:
    """Runs ``conn`` over a connected blocking socket, in the caller's thread."""

    def __init__(
        self, sock: socket.socket, conn: ZmtpConnection, zap: ZapHandler | None = None, timeout: float = 10.0
    ) -> None:
        self.sock = sock
        self.conn = conn
        self.zap = zap
        self.timeout = timeout
        self.events: list[Event] = []
        sock.settimeout(0.05)
        sock.sendall(conn.start())

    def _step(self) -> None:
        request = self.conn.zap_request()
        if request is not None:
            assert self.zap is not None, f"unexpected ZAP request {request}"
            self.conn.zap_reply(self.zap(request))
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)
        self.events += self.conn.next_events()
        if self.conn.dead:
            return
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return
        if not data:
            raise ConnectionError("the peer closed the connection")
        self.conn.receive_data(data)
        self.events += self.conn.next_events()

    def wait_for(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; events so far: {self.events}")
            try:
                self._step()
            except ConnectionError:
                if done():
                    return
                raise
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def handshake(self) -> None:
        self.wait_for(lambda: self.conn.handshake_done or self.conn.dead, "the handshake")
        assert self.conn.handshake_done, self.events

    def send(self, frames: Sequence[bytes]) -> None:
        self.sock.sendall(self.conn.encode_message(frames))

    def receive(self) -> Event:
        """The next event that is not HandshakeDone (a Message, Subscribe, ...)."""
        self.wait_for(lambda: any(not isinstance(e, HandshakeDone) for e in self.events), "an event")
        index = next(i for i, e in enumerate(self.events) if not isinstance(e, HandshakeDone))
        return self.events.pop(index)

    def receive_message(self) -> list[bytes]:
        event = self.receive()
        assert isinstance(event, Message), event
        return event.frames
