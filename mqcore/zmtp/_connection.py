"""ZmtpConnection: one ZMTP 3.x connection as a state machine over bytes (no IO).

States and transitions (the only ones there are):

    GREETING  -- peer greeting complete, ZMTP >= 3.0, same mechanism --> HANDSHAKE
    HANDSHAKE -- mechanism ready and socket types compatible ---------> TRAFFIC  (HandshakeDone)
    TRAFFIC   -- messages and commands --------------------------------> TRAFFIC
    HANDSHAKE -- ZAP reply other than 200 (AuthFailed) ----------------> DEAD
    any       -- protocol violation (ProtocolViolation) or ERROR (PeerError) --> DEAD

Rules: DEAD is final and ignores further input. Events come out in wire order. Handshake bytes to
send (our READY; an ERROR when we refuse the peer during the handshake) wait in ``_outgoing`` until
``data_to_send``; the engine sends them before anything ``encode_*`` returns. Nothing here raises
because of what the peer sent; misuse by the caller (encoding before the handshake, calling
``start`` twice) raises ZmtpStateError.

ZAP hand-over (RFC 27), for the engine. The engine owns the ZAP socket (a REQ or DEALER connected to
inproc://zeromq.zap.01) and tells the connection at construction what libzmq would know:
``zap_handler`` (is a handler bound there now?), ``zap_domain`` (ZAP_DOMAIN), ``peer_address`` (the
peer's IP address as text, b"" for ipc/inproc) and ``zap_enforce_domain`` (ZAP_ENFORCE_DOMAIN).
After each ``receive_data`` (besides ``data_to_send`` and ``next_events``) it calls
``zap_request(request_id)``: a list of frames means "deliver this request" (prepend the empty
delimiter on a DEALER; use a distinct request id per connection if several share one socket).
When the reply arrives the engine passes its frames to ``zap_reply`` (with or without the
delimiter), then drains ``data_to_send``/``next_events`` as usual: status 200 continues the
handshake (HandshakeDone follows once it completes; ``user_id`` and ``zap_properties`` hold what
the handler returned); 400 and 500 queue an ERROR carrying the status code (in libzmq's PLAIN
spelling for PLAIN, see ``_commands.LIBZMQ_PLAIN_ERROR``) and produce AuthFailed; 300 (temporary)
produces AuthFailed without an ERROR, as libzmq and RFC 26 do. After AuthFailed the connection is
dead: send ``data_to_send()`` and close.

When ZAP is consulted, as libzmq 4.x does it (ZAP_ENFORCE_DOMAIN off, the default):
- PLAIN server: always; with no handler bound every client is refused (ProtocolViolation).
- CURVE server: whenever a handler is bound; with none, any client that knows the server key is
  admitted (encryption without authentication). With ZAP_ENFORCE_DOMAIN on, ZAP is skipped when
  ZAP_DOMAIN is empty and a missing handler refuses the client.
- NULL: on either side, when ZAP_DOMAIN is set and a handler is bound (no credentials frames).
- Clients never ask ZAP.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from mqcore.zmtp import _commands as cmd
from mqcore.zmtp._decoder import FrameDecoder
from mqcore.zmtp._events import (
    AuthFailed,
    Cancel,
    Event,
    HandshakeDone,
    PeerError,
    Ping,
    Pong,
    ProtocolViolation,
    Subscribe,
    UnknownCommand,
)
from mqcore.zmtp._frames import COMMAND, MORE, BytesLike, encode_command, encode_messages, frame_header
from mqcore.zmtp._greeting import (
    GreetingError,
    GreetingReader,
    PeerGreeting,
    build_greeting,
    mechanism_label,
    pad_mechanism,
)
from mqcore.zmtp._mechanism import HandshakeInfo, Mechanism, MechanismError, NullMechanism
from mqcore.zmtp._socket_types import PUBLISHERS, SOCKET_TYPES, compatible
from mqcore.zmtp._zap import ZapError, build_zap_request, parse_zap_reply

__all__ = ["ZmtpConnection", "ZmtpStateError"]

_SUBSCRIBE_30 = b"\x01"
_CANCEL_30 = b"\x00"


class ZmtpStateError(RuntimeError):
    """The connection was used out of order (e.g. encoding a message before the handshake)."""


class _State(enum.Enum):
    GREETING = "greeting"
    HANDSHAKE = "handshake"
    TRAFFIC = "traffic"
    DEAD = "dead"


class ZmtpConnection:
    """One side of a ZMTP 3.1 connection (speaking 3.0 to 3.0 peers), without any IO.

    Feed received bytes to ``receive_data``, collect events with ``next_events``, send what
    ``start``, ``data_to_send`` and the ``encode_*`` methods return.

    ``maxmsgsize`` (-1 = no limit) bounds every frame, as libzmq's decoder does: each frame of a
    multipart message may reach it, the total may exceed it; commands count too, the peer's READY
    included, so (as in libzmq) a limit under about 40 bytes refuses every peer. A frame over the
    limit is refused from its header, before any of its body is kept. ``as_server`` is announced
    in the greeting only if the mechanism has roles (NULL always announces 0, as RFC 37 requires).
    ``zap_handler``, ``zap_domain``, ``peer_address`` and ``zap_enforce_domain`` configure ZAP for
    a server mechanism (see the module docstring); ``peer_address`` may be str or bytes.

    Raises ValueError at construction for an unknown socket type or an identity that is longer
    than 255 bytes or starts with a zero byte (reserved by RFC 37).
    """

    def __init__(
        self,
        socket_type: str,
        identity: bytes = b"",
        as_server: bool = False,
        maxmsgsize: int = -1,
        mechanism: Mechanism | None = None,
        *,
        zap_handler: bool = False,
        zap_domain: bytes | str = b"",
        peer_address: bytes | str = b"",
        zap_enforce_domain: bool = False,
    ) -> None:
        if socket_type not in SOCKET_TYPES:
            raise ValueError(f"unknown socket type {socket_type!r}; expected one of {sorted(SOCKET_TYPES)}")
        identity = bytes(identity)
        if len(identity) > 255 or identity[:1] == b"\0":
            raise ValueError("an identity is at most 255 bytes and must not start with a zero byte")
        self.socket_type = socket_type
        self.identity = identity
        self.as_server = as_server
        self.maxmsgsize = maxmsgsize
        self.mechanism: Mechanism = mechanism if mechanism is not None else NullMechanism()
        self._mechanism_field = pad_mechanism(self.mechanism.name)
        self._state = _State.GREETING
        self._started = False
        self._greeting: GreetingReader | None = GreetingReader()
        self._events: list[Event] = []
        self._outgoing: list[bytes] = []
        # Public for a reader that scans plain messages itself (``held_bytes``/``drop_held``, ``limit``).
        self.decoder = FrameDecoder(self._events, self._on_command, self._fail, maxmsgsize)
        self._peer_version: tuple[int, int] | None = None
        self._peer_v31 = True
        self._peer_socket_type: str | None = None
        self._peer_identity = b""
        self._peer_metadata: dict[str, bytes] = {}
        self._handshake_done = False
        self.zap_handler = zap_handler
        self.zap_domain = zap_domain.encode() if isinstance(zap_domain, str) else bytes(zap_domain)
        self.peer_address = peer_address.encode() if isinstance(peer_address, str) else bytes(peer_address)
        self.zap_enforce_domain = zap_enforce_domain
        self._zap_credentials: list[bytes] | None = None  # asked for, not yet taken by the engine
        self._zap_request_id: bytes | None = None  # taken, waiting for the reply
        self._user_id = b""
        self._zap_properties: dict[str, bytes] = {}

    # -- state ---------------------------------------------------------------------------------

    @property
    def handshake_done(self) -> bool:
        """True once HandshakeDone was produced (stays True if the connection dies later)."""
        return self._handshake_done

    @property
    def dead(self) -> bool:
        """True after a ProtocolViolation or PeerError: input is ignored; close the transport."""
        return self._state is _State.DEAD

    @property
    def peer_version(self) -> tuple[int, int] | None:
        """(major, minor) from the peer's greeting, or None before it arrived."""
        return self._peer_version

    @property
    def peer_socket_type(self) -> str | None:
        """The peer's Socket-Type once the handshake is done, else None."""
        return self._peer_socket_type

    @property
    def peer_identity(self) -> bytes:
        """The peer's Identity property (``b""`` if none or before the handshake)."""
        return self._peer_identity

    @property
    def peer_metadata(self) -> dict[str, bytes]:
        """All the peer's metadata properties once the handshake is done, else empty."""
        return self._peer_metadata

    @property
    def user_id(self) -> bytes:
        """The user id the ZAP handler returned with status 200 (``b""`` without ZAP)."""
        return self._user_id

    @property
    def zap_properties(self) -> dict[str, bytes]:
        """The metadata the ZAP handler returned with status 200 (empty without ZAP)."""
        return self._zap_properties

    @property
    def buffered_bytes(self) -> int:
        """Bytes held of a partial greeting or partial frame: at most 64, or 8 header bytes, or
        less than MAXMSGSIZE of body (frames of an unfinished multipart message are not counted)."""
        if self._greeting is not None:
            return self._greeting.buffered_bytes
        return self.decoder.buffered_bytes

    def receive_buffer(self) -> memoryview | None:
        """Where the missing bytes of a large partial frame body may be read in place (e.g. with
        ``socket.recv_into``; then call ``received_into``), or None: use ``receive_data``."""
        if self._greeting is not None or self._state is _State.DEAD:
            return None
        return self.decoder.body_buffer()

    def received_into(self, n: int) -> None:
        """``n`` bytes were read into the start of ``receive_buffer()``; decodes what they complete."""
        if self._state is not _State.DEAD:
            self.decoder.body_received(n)

    # -- input ---------------------------------------------------------------------------------

    def start(self) -> bytes:
        """Our full 64-byte greeting, to send first. Call once, before ``receive_data``."""
        if self._started:
            raise ZmtpStateError("start() was already called on this connection")
        self._started = True
        return build_greeting(self.mechanism.name, self.as_server and self.mechanism.uses_roles)

    def receive_data(self, data: BytesLike) -> None:
        """Take bytes read from the peer and decode all they complete. Never raises on bad input:
        a peer's fault becomes a ProtocolViolation event and the connection turns dead."""
        if not self._started:
            raise ZmtpStateError("call start() and send its greeting before receive_data()")
        if self._state is _State.DEAD:
            return
        if type(data) is not bytes:
            data = bytes(data)
        if self._greeting is not None:
            data = self._receive_greeting(data)
            if not data:
                return
        self.decoder.feed(data)

    def next_events(self) -> list[Event]:
        """All events decoded so far, oldest first, and forget them (``[]`` if none)."""
        if self._state is _State.HANDSHAKE:
            self._advance_mechanism()
        events = self._events
        if not events:
            return []
        self._events = self.decoder.events = []
        return events

    def data_to_send(self) -> bytes:
        """Handshake bytes waiting to go to the peer (``b""`` if none). Call after every
        ``receive_data`` and send the result before anything the ``encode_*`` methods return."""
        if self._state is _State.HANDSHAKE:
            self._advance_mechanism()
        if not self._outgoing:
            return b""
        out = b"".join(self._outgoing)
        self._outgoing.clear()
        return out

    def _receive_greeting(self, data: bytes) -> bytes:
        """Feed the greeting reader; return the bytes that follow the greeting."""
        reader = self._greeting
        assert reader is not None
        try:
            used = reader.feed(data)
        except GreetingError as error:
            self._fail(str(error))
            return b""
        if reader.greeting is None:
            return b""
        self._greeting = None
        self._accept_greeting(reader.greeting)
        return data[used:] if self._state is not _State.DEAD else b""

    def _accept_greeting(self, greeting: PeerGreeting) -> None:
        self._peer_version = greeting.version
        self._peer_v31 = greeting.version >= (3, 1)
        if greeting.mechanism != self._mechanism_field:
            self._fail(
                f"security mechanism mismatch: we use {mechanism_label(self._mechanism_field)}, "
                f"the peer uses {mechanism_label(greeting.mechanism)}"
            )
            return
        self._state = _State.HANDSHAKE
        info = HandshakeInfo(
            socket_type=self.socket_type,
            identity=self.identity,
            as_server=self.as_server,
            peer_as_server=greeting.as_server,
            peer_version=greeting.version,
            zap_handler=self.zap_handler,
            zap_domain=self.zap_domain,
            zap_enforce_domain=self.zap_enforce_domain,
        )
        try:
            self.mechanism.start(info)
        except MechanismError as error:
            self._fail(str(error))
            return
        self._advance_mechanism()

    # -- commands ------------------------------------------------------------------------------

    def _on_command(self, body: bytes) -> None:
        try:
            name, data = cmd.split_command(body)
        except cmd.CommandError as error:
            if not body.startswith(cmd.LIBZMQ_PLAIN_ERROR):
                self._fail(str(error))
                return
            name, data = cmd.ERROR, body[len(cmd.LIBZMQ_PLAIN_ERROR) :]
        if name == cmd.ERROR:
            self._events.append(PeerError(cmd.parse_error_data(data)))
            self._die()
        elif self._state is _State.HANDSHAKE:
            try:
                self.mechanism.process_command(name, data)
            except MechanismError as error:
                self._fail(str(error))
                return
            self._advance_mechanism()
        elif self.mechanism.wraps_traffic:
            self._on_wrapped_command(name, data)
        else:
            self._on_traffic_command(name, data)

    def _on_traffic_command(self, name: bytes, data: bytes) -> None:
        try:
            if name == cmd.SUBSCRIBE:
                self._events.append(Subscribe(data))
            elif name == cmd.CANCEL:
                self._events.append(Cancel(data))
            elif name == cmd.PING:
                self._events.append(Ping(*cmd.parse_ping_data(data)))
            elif name == cmd.PONG:
                self._events.append(Pong(data[: cmd.MAX_PING_CONTEXT]))
            else:
                self._events.append(UnknownCommand(name, data))
        except cmd.CommandError as error:
            self._fail(str(error))

    def _on_sealed_frame(self, body: bytes) -> None:
        """A data frame carrying a wrapping command (libzmq's CURVE MESSAGE), after the handshake."""
        try:
            name, data = cmd.split_command(body)
        except cmd.CommandError as error:
            self._fail(str(error))
            return
        self._on_wrapped_command(name, data)

    def _on_wrapped_command(self, name: bytes, data: bytes) -> None:
        try:
            frame = self.mechanism.unwrap_command(name, data)
        except MechanismError as error:
            self._fail(str(error))
            return
        if frame is None:
            self._on_traffic_command(name, data)
            return
        flags, body = frame
        if flags & COMMAND:
            try:
                inner_name, inner_data = cmd.split_command(body)
            except cmd.CommandError as error:
                self._fail(str(error))
                return
            if inner_name == cmd.ERROR:
                self._events.append(PeerError(cmd.parse_error_data(inner_data)))
                self._die()
            else:
                self._on_traffic_command(inner_name, inner_data)
        else:
            self.decoder.assemble(flags, body)

    def _advance_mechanism(self) -> None:
        """Move the mechanism's queued commands to ``_outgoing``; finish the handshake if ready."""
        for name, data in self.mechanism.take_commands():
            self._outgoing.append(encode_command(name, data))
        credentials = self.mechanism.take_zap_credentials()
        if credentials is not None:
            self._zap_credentials = credentials
        if self.mechanism.ready and self._state is _State.HANDSHAKE:
            self._finish_handshake()

    def _finish_handshake(self) -> None:
        metadata = self.mechanism.peer_metadata
        raw_type = cmd.find_property(metadata, "Socket-Type")
        if raw_type is None:
            self._fail("the peer's metadata has no Socket-Type property")
            return
        peer_type = raw_type.decode("ascii", "backslashreplace")
        if not compatible(self.socket_type, peer_type):
            self._fail(f"a {self.socket_type} socket cannot talk to a {peer_type} peer")
            return
        assert self._peer_version is not None
        self._state = _State.TRAFFIC
        self._handshake_done = True
        self._peer_socket_type = peer_type
        self._peer_identity = cmd.find_property(metadata, "Identity") or b""
        self._peer_metadata = metadata
        decoder = self.decoder
        decoder.messages_allowed = not self.mechanism.wraps_traffic
        if self.mechanism.wraps_traffic and self.mechanism.wraps_in_data_frames:
            decoder.sealed_frame = self._on_sealed_frame
        decoder.message_refusal = "clear-text message frame on a connection whose mechanism wraps traffic"
        decoder.subscription_messages = self.socket_type in PUBLISHERS
        self._events.append(HandshakeDone(peer_type, self._peer_identity, metadata, self._peer_version))

    # -- ZAP -----------------------------------------------------------------------------------

    def zap_request(self, request_id: bytes = b"1") -> list[bytes] | None:
        """The frames of the ZAP request the handshake waits on, returned once (version first, no
        delimiter), or None if there is none. ``request_id`` goes into the request and must come
        back in the reply."""
        if self._state is _State.HANDSHAKE:
            self._advance_mechanism()
        credentials = self._zap_credentials
        if credentials is None or self._state is not _State.HANDSHAKE:
            return None
        self._zap_credentials = None
        self._zap_request_id = request_id = bytes(request_id)
        return build_zap_request(
            request_id, self.zap_domain, self.peer_address, self.identity, self.mechanism.name, credentials
        )

    def zap_reply(self, frames: Sequence[BytesLike]) -> None:
        """Take the ZAP handler's reply to ``zap_request``. Never raises for its content: a
        malformed reply becomes a ProtocolViolation; a refusal, AuthFailed. ZmtpStateError if no
        request is waiting for a reply. Ignored once the connection is dead."""
        request_id = self._zap_request_id
        if request_id is None:
            raise ZmtpStateError("no ZAP request is waiting for a reply")
        self._zap_request_id = None
        if self._state is not _State.HANDSHAKE:
            return
        try:
            reply = parse_zap_reply([bytes(frame) for frame in frames], request_id)
        except ZapError as error:
            self._fail(f"bad ZAP reply: {error}")
            return
        if reply.status_code == 200:
            self._user_id = reply.user_id
            self._zap_properties = reply.metadata
            try:
                self.mechanism.zap_approved()
            except MechanismError as error:
                self._fail(str(error))
                return
            self._advance_mechanism()
            return
        if reply.status_code != 300:  # 300 is a temporary failure: close without an ERROR
            body = self.mechanism.error_prefix + cmd.encode_error_data(str(reply.status_code).encode())
            self._outgoing.append(frame_header(COMMAND, len(body)) + body)
        self._events.append(AuthFailed(reply.status_code, reply.status_text))
        self._die()

    # -- failure -------------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        """Record a violation and die; refuse the peer with an ERROR if we are mid-handshake."""
        if self._state is _State.DEAD:
            return
        if self._state is _State.HANDSHAKE:
            self._outgoing.append(encode_command(cmd.ERROR, cmd.encode_error_data(reason.encode()[:255])))
        self._events.append(ProtocolViolation(reason))
        self._die()

    def _die(self) -> None:
        self._state = _State.DEAD
        self._greeting = None
        self.decoder.stop()

    # -- output --------------------------------------------------------------------------------

    def _require_handshake(self) -> None:
        if not self._handshake_done:
            raise ZmtpStateError("the handshake is not done: wait for HandshakeDone before encoding")

    def _frame(self, flags: int, body: BytesLike) -> bytes:
        """One frame (``flags`` without LONG), wrapped by the mechanism if it protects traffic."""
        if self.mechanism.wraps_traffic:
            name, data = self.mechanism.wrap_frame(flags, bytes(body))
            if self.mechanism.wraps_in_data_frames:
                sealed = b"".join((bytes((len(name),)), name, data))
                return frame_header(0, len(sealed)) + sealed
            return encode_command(name, data)
        body = bytes(body)
        return frame_header(flags, len(body)) + body

    def encode_message(self, frames: Sequence[BytesLike]) -> bytes:
        """One multipart message (MORE on all frames but the last). ValueError if no frame;
        ZmtpStateError before the handshake is done."""
        self._require_handshake()
        if self.mechanism.wraps_traffic:
            if not frames:
                raise ValueError("a message has at least one frame")
            last = len(frames) - 1
            return b"".join(self._frame(MORE if i < last else 0, f) for i, f in enumerate(frames))
        return encode_messages((frames,))

    def encode_messages(self, messages: Iterable[Sequence[BytesLike]]) -> bytes:
        """Many messages into one buffer (batching); same rules as ``encode_message``."""
        self._require_handshake()
        if self.mechanism.wraps_traffic:
            return b"".join(self.encode_message(frames) for frames in messages)
        return encode_messages(messages)

    def _command(self, name: bytes, data: bytes) -> bytes:
        self._require_handshake()
        if self.mechanism.wraps_traffic:
            return self._frame(COMMAND, bytes((len(name),)) + name + data)
        return encode_command(name, data)

    def encode_subscribe(self, topic: BytesLike) -> bytes:
        """Subscribe the peer to ``topic``: a SUBSCRIBE command for 3.1+ peers, a 0x01-prefixed
        message for 3.0 peers."""
        self._require_handshake()
        if self._peer_v31:
            return self._command(cmd.SUBSCRIBE, bytes(topic))
        return self._frame(0, _SUBSCRIBE_30 + bytes(topic))

    def encode_cancel(self, topic: BytesLike) -> bytes:
        """Cancel one subscription to ``topic``: CANCEL for 3.1+ peers, 0x00-prefixed message for 3.0."""
        self._require_handshake()
        if self._peer_v31:
            return self._command(cmd.CANCEL, bytes(topic))
        return self._frame(0, _CANCEL_30 + bytes(topic))

    def encode_ping(self, ttl_ds: int, context: BytesLike = b"") -> bytes:
        """A PING with a TTL in deciseconds (0-65535) and a context of at most 16 bytes (else
        ValueError). Encoded whatever the peer's version, as libzmq does."""
        return self._command(cmd.PING, cmd.encode_ping_data(ttl_ds, bytes(context)))

    def encode_pong(self, context: BytesLike = b"") -> bytes:
        """A PONG echoing a PING's context (at most 16 bytes, else ValueError)."""
        context = bytes(context)
        cmd.check_ping_context(context)
        return self._command(cmd.PONG, context)

    def encode_error(self, reason: BytesLike) -> bytes:
        """An ERROR command (reason at most 255 bytes, else ValueError); close after sending it."""
        return self._command(cmd.ERROR, cmd.encode_error_data(bytes(reason)))
