"""SocketType behaviour base: what a socket type does with its pipes (libzmq's x* hooks).

A ``SocketImpl`` lives in its socket's thread and is only called by ``SocketBase``. Messages are whole
lists of frames. ``xsend`` returns a false value (False, None) when the message cannot be queued now (EAGAIN; the caller may
block and retry) and raises ZMQError for state errors; ``xrecv`` returns None when nothing is queued.
Subclasses override what their type supports; the defaults raise ENOTSUP like libzmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqcore.constants import Errno
from mqcore.error import ZMQError
from mqcore.pipe import Msg, Pipe

if TYPE_CHECKING:
    from mqcore.options import Options


class SocketImpl:
    """Default behaviour: neither send nor recv supported."""

    #: ZMTP socket-type name used in READY (None for types with no wire identity of their own)
    name = "PAIR"

    def __init__(self, options: Options) -> None:
        self.options = options

    # pipe life cycle -------------------------------------------------------------------------------
    def attach(self, pipe: Pipe) -> None:
        """A new pipe (a connected peer, or a connect-side session) joins this socket."""

    def read_activated(self, pipe: Pipe) -> None:
        """``pipe`` has messages again after ``read``/``check_read`` found it empty."""

    def write_activated(self, pipe: Pipe) -> None:
        """``pipe`` fell below its low-water mark after ``check_write`` found it full."""

    def terminated(self, pipe: Pipe) -> None:
        """The peer closed ``pipe``; forget it once what it queued has been read."""

    def hiccuped(self, pipe: Pipe) -> None:
        """The connection behind ``pipe`` was re-established (SUB resends subscriptions)."""

    def identified(self, pipe: Pipe) -> None:
        """The peer's routing id for ``pipe`` is now known (ROUTER maps it)."""

    # messages --------------------------------------------------------------------------------------
    def xsend(self, msg: Msg) -> bool:
        raise ZMQError(Errno.ENOTSUP)

    def xrecv(self) -> Msg | None:
        raise ZMQError(Errno.ENOTSUP)

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        """The frames to write for ``msg`` straight to ``pipe``'s connection (``Inline.send``), the
        send then counting as done; None when this type cannot send it that way now (use ``xsend``).
        Raises as ``xsend`` for state errors."""
        return None

    def xrecv_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        """What ``recv`` returns for ``msg``, the one message a direct read found, taken before it
        enters ``pipe`` (empty, the socket's end; ``Inline.read``); None: this type does not take
        it that way now, it goes into the pipe. Called only while the socket's recv waits."""
        return None

    def has_in(self) -> bool:
        return False

    def has_out(self) -> bool:
        return False

    def check_send_start(self) -> None:
        """Called before the first frame of a message; raises EFSM/ENOTSUP if sending is not allowed."""

    def setsockopt(self, option: int, value: Any) -> bool:
        """Handle a type-specific option; True if handled."""
        return False
