"""Frame and MessageTracker: the small parts of pyzmq's zero-copy API that mqcore mirrors.

mqcore always copies (frames are immutable ``bytes``), so a Frame is a thin wrapper and every tracker
is done at once.
"""

from __future__ import annotations

from typing import Any


class Frame:
    """One message frame, as returned by ``recv(copy=False)``."""

    __slots__ = ("bytes", "more", "tracker", "properties")

    def __init__(self, data: Any = b"", track: bool = False, copy: bool | None = None) -> None:
        if isinstance(data, str):
            raise TypeError("Frame data must be bytes-like, not str")
        self.bytes: bytes = data if type(data) is bytes else bytes(data)
        self.more = False
        self.tracker = MessageTracker() if track else None
        # The connection's metadata (peer's ZMTP properties, ZAP User-Id and metadata, Peer-Address)
        # on received frames, as libzmq attaches it to each message; None for inproc and sent frames.
        self.properties: dict[str, str] | None = None

    @property
    def buffer(self) -> memoryview:
        return memoryview(self.bytes)

    def __bytes__(self) -> bytes:
        return self.bytes

    def __len__(self) -> int:
        return len(self.bytes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Frame):
            return self.bytes == other.bytes
        return self.bytes == other

    def __hash__(self) -> int:
        return hash(self.bytes)

    def __repr__(self) -> str:
        return f"<mqcore.Frame({self.bytes[:32]!r}{'...' if len(self.bytes) > 32 else ''})>"

    def get(self, option: int | str) -> int | str:
        """A frame option (``MORE``; ``SHARED`` is always 0 as mqcore copies) or, by name, a metadata
        property of the connection it came in on (``"Socket-Type"``, ``"User-Id"`` ...);
        ZMQError(EINVAL) for a property it does not have."""
        from mqcore.constants import Errno, MessageOption
        from mqcore.error import ZMQError

        if isinstance(option, str):
            value = None if self.properties is None else self.properties.get(option)
            if value is None:
                raise ZMQError(Errno.EINVAL, f"this message has no {option!r} property")
            return value
        if option == MessageOption.MORE:
            return int(self.more)
        if option == MessageOption.SHARED:
            return 0
        raise ZMQError(Errno.EINVAL)

    __getitem__ = get


Message = Frame


class MessageTracker:
    """Tracks whether a message left mqcore's hands; mqcore copies on send, so it is always done."""

    done = True

    def wait(self, timeout: float | int = -1) -> None:
        return None


FINISHED_TRACKER = MessageTracker()  # what send(..., track=True) returns: mqcore copied the data
