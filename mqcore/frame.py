"""Frame and MessageTracker: the small parts of pyzmq's zero-copy API that mqcore mirrors.

mqcore always copies (frames are immutable ``bytes``), so a Frame is a thin wrapper and every tracker
is done at once.
"""

from __future__ import annotations

from typing import Any

#: (smallest size, unit, bytes per unit) for a frame's repr, as pyzmq writes sizes
_SIZE_UNITS = ((10**9, "GB", 10**9), (2**20, "MB", 10**6), (1000, "kB", 1000), (0, "B", 1))


class Frame:
    """One message frame, as returned by ``recv(copy=False)``."""

    __slots__ = ("bytes", "more", "tracker", "properties", "_buffer")

    def __init__(self, data: Any = b"", track: bool = False, copy: bool | None = None) -> None:
        if type(data) is not bytes:
            if isinstance(data, str):
                raise TypeError("Frame data must be bytes-like, not str")
            view = memoryview(data)  # TypeError for an object without the buffer protocol (5, object())
            if not view.contiguous:
                raise BufferError("Frame data must be a contiguous buffer")
            data = view.tobytes()
        self.bytes: bytes = data
        self.more = False
        self.tracker = MessageTracker() if track else None
        # The connection's metadata (peer's ZMTP properties, ZAP User-Id and metadata, Peer-Address)
        # on received frames, as libzmq attaches it to each message; None for inproc and sent frames.
        self.properties: dict[str, str] | None = None
        self._buffer: memoryview | None = None

    @property
    def buffer(self) -> memoryview:
        """A read-only memoryview of the frame's bytes (the same object each time, as in pyzmq)."""
        if self._buffer is None:
            self._buffer = memoryview(self.bytes)
        return self._buffer

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
        """pyzmq's form: ``<zmq.Frame(b'...')>``, a frame over 16 bytes cut to 12 and its size appended."""
        n = len(self.bytes)
        if n <= 16:
            return f"<zmq.{type(self).__name__}({self.bytes!r})>"
        unit, scale = next((u, s) for least, u, s in _SIZE_UNITS if n >= least)
        return f"<zmq.{type(self).__name__}({self.bytes[:12]!r}...{n // scale}{unit})>"

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
