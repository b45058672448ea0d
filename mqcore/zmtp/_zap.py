"""ZAP 1.0 (RFC 27) messages, stateless: the request a server mechanism sends, the reply it reads.

Frames are given without the empty address delimiter that a REQ socket adds (a DEALER adds it by
hand). A reply may be passed with or without that delimiter: the version frame is never empty, so
a leading empty frame can only be the delimiter. Reply checks follow libzmq's: 1.0, the echoed
request id, a status of exactly 200/300/400/500, and metadata in ZMTP property format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mqcore.zmtp._commands import CommandError, parse_properties

__all__ = ["ZAP_ENDPOINT", "ZAP_VERSION", "ZapError", "ZapReply", "build_zap_request", "parse_zap_reply"]

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_VERSION = b"1.0"
STATUS_CODES = frozenset((200, 300, 400, 500))
_REPLY_FRAMES = 6  # version, request id, status code, status text, user id, metadata


class ZapError(Exception):
    """A ZAP reply is malformed; the message says how."""


@dataclass(frozen=True, slots=True)
class ZapReply:
    """A well-formed ZAP reply: only ``status_code`` 200 admits the peer."""

    status_code: int
    status_text: str
    user_id: bytes
    metadata: dict[str, bytes]


def build_zap_request(
    request_id: bytes,
    domain: bytes,
    address: bytes,
    identity: bytes,
    mechanism: bytes,
    credentials: Sequence[bytes],
) -> list[bytes]:
    """The frames of one ZAP request, version first (no delimiter)."""
    return [ZAP_VERSION, request_id, domain, address, identity, mechanism, *credentials]


def parse_zap_reply(frames: Sequence[bytes], request_id: bytes) -> ZapReply:
    """Check and decode the reply to the request ``request_id``; ZapError if it is malformed."""
    frames = [bytes(frame) for frame in frames]
    if len(frames) == _REPLY_FRAMES + 1 and frames[0] == b"":
        frames = frames[1:]
    if len(frames) != _REPLY_FRAMES:
        raise ZapError(f"a ZAP reply has {_REPLY_FRAMES} frames after the delimiter, not {len(frames)}")
    version, echoed_id, status, text, user_id, metadata = frames
    if version != ZAP_VERSION:
        raise ZapError(f"ZAP version {version!r}, expected b'1.0'")
    if echoed_id != request_id:
        raise ZapError(f"ZAP reply for request {echoed_id!r}, expected {request_id!r}")
    code = int(status) if len(status) == 3 and status.isdigit() else 0
    if code not in STATUS_CODES:
        raise ZapError(f"ZAP status code {status!r} is not one of 200, 300, 400, 500")
    try:
        properties = parse_properties(metadata)
    except CommandError as error:
        raise ZapError(f"ZAP metadata: {error}") from None
    return ZapReply(code, text.decode("utf-8", "replace"), user_id, properties)
