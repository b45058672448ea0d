"""Socket monitors: connection events of one socket, delivered as two-frame messages on an inproc PAIR.

``socket.monitor("inproc://name", events)`` binds a ``Monitor`` at inproc://name; the application
connects a PAIR socket there and reads one message per event, in libzmq's wire format:
frame 1 is 6 bytes, a u16 event number and a u32 value in native byte order; frame 2 is the
endpoint. ``mqcore.utils.monitor.recv_monitor_message`` turns that into pyzmq's dict.

Threading: events happen in IO threads (connect, accept, handshake, disconnect) and in the socket's
thread (bind, close). ``Monitor.emit`` may be called from any thread: ``_lock`` serialises writers,
so the pipe keeps its single-writer rule; the monitor's end of the pipe has no mailbox (it never
needs commands: ``check_write`` re-reads the reader's progress each time). When the reader falls
HWM events behind, or has gone away, events are dropped, as libzmq's monitor does.
Invariants: at most one reader pipe; once ``stopped``, nothing is written again.
"""

from __future__ import annotations

import struct
import threading
from typing import TYPE_CHECKING, Any

from mqcore.constants import Event, SocketType
from mqcore.options import Options
from mqcore.pipe import Pipe

if TYPE_CHECKING:
    from mqcore.context import Context

__all__ = ["Monitor", "emit", "PROTOCOL_ERROR_ZMTP_UNSPECIFIED", "PROTOCOL_ERROR_ZMTP_INVALID_METADATA"]

#: values of HANDSHAKE_FAILED_PROTOCOL (libzmq's ZMQ_PROTOCOL_ERROR_*)
PROTOCOL_ERROR_ZMTP_UNSPECIFIED = 0x10000000
PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND = 0x10000001
PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE = 0x10000011
PROTOCOL_ERROR_ZMTP_INVALID_METADATA = 0x10000018
PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH = 0x11000001

_pack = struct.Struct("=HI").pack


def protocol_error_code(reason: str) -> int:
    """The ZMQ_PROTOCOL_ERROR_* value libzmq would report for a handshake failure described by
    ``reason`` (a ProtocolViolation sentence)."""
    if "cannot talk to" in reason or "Socket-Type" in reason:
        return PROTOCOL_ERROR_ZMTP_INVALID_METADATA
    if "mechanism mismatch" in reason:
        return PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
    return PROTOCOL_ERROR_ZMTP_UNSPECIFIED


class Monitor:
    """The event source bound at an inproc address (see module comment)."""

    def __init__(self, ctx: Context, address: str, events: int) -> None:
        if not address.startswith("inproc://"):
            from mqcore.constants import Errno
            from mqcore.error import ZMQError

            raise ZMQError(Errno.EPROTONOSUPPORT, "a socket monitor needs an inproc:// address")
        self.ctx = ctx
        self.address = address
        self.name = address[len("inproc://"):]
        self.events = int(events)
        self.stopped = False
        self.pipe: Pipe | None = None
        self._lock = threading.Lock()
        # what the inproc registry expects of a bound socket
        self._opts = Options(SocketType.PAIR)
        self._mailbox = None
        ctx._inproc_bind(self, self.name)  # type: ignore[arg-type]

    # inproc registry protocol ---------------------------------------------------------------------
    def _attach_remote(self, pipe: Pipe, endpoint: str | None = None) -> bool:
        self._attach(pipe, endpoint)
        return True

    def _attach(self, pipe: Pipe, endpoint: str | None = None) -> None:
        pipe.set_owner(self, None)
        with self._lock:
            if self.stopped or (self.pipe is not None and not self.pipe.peer_terminated):
                refuse = True
            else:
                self.pipe, refuse = pipe, False
        if refuse:
            pipe.terminate()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_pipe_"):
            return _ignore  # commands from the reader's pipe end are not needed
        raise AttributeError(name)

    # events -----------------------------------------------------------------------------------------
    def emit(self, event: int, value: int, endpoint: str) -> None:
        """Queue one event for the reader if it is selected and there is room. Any thread."""
        if not self.events & event or self.stopped:
            return
        msg = [_pack(event, value & 0xFFFFFFFF), endpoint.encode()]
        with self._lock:
            pipe = self.pipe
            if pipe is not None and pipe.check_write():
                pipe.write(msg)
                pipe.flush()

    def stop(self) -> None:
        """Send MONITOR_STOPPED (if selected), release the address and the reader's pipe."""
        if self.stopped:
            return
        self.emit(Event.MONITOR_STOPPED, 0, "")
        with self._lock:
            self.stopped = True
            pipe, self.pipe = self.pipe, None
        if pipe is not None:
            pipe.terminate()
        self.ctx._inproc_unbind(self, self.name)  # type: ignore[arg-type]
        self.ctx._inproc_forget(self)  # type: ignore[arg-type]


def _ignore(*args: Any) -> None:
    return None


def emit(owner: Any, event: int, value: int, endpoint: str) -> None:
    """Report ``event`` on the monitor of socket ``owner``, if it has one. Any thread."""
    monitor = getattr(owner, "_monitor", None)
    if monitor is not None:
        monitor.emit(event, value, endpoint)
