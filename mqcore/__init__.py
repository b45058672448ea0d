"""mqcore: a brokerless, libzmq-architected messaging library in pure Python with pyzmq's API.

Replace ``import zmq`` with ``import mqcore as zmq``: Context, Socket, Poller, the constants
(PUSH, SNDHWM, NOBLOCK, POLLIN, EAGAIN, ...) and the errors (ZMQError, Again, ContextTerminated)
carry pyzmq's names and libzmq's values.
"""

from __future__ import annotations

from mqcore.constants import (
    ContextOption,
    Errno,
    Flag,
    PollEvent,
    SocketOption,
    SocketType,
)
from mqcore.context import Context
from mqcore.error import (
    Again,
    ContextTerminated,
    NotDone,
    ZMQBaseError,
    ZMQBindError,
    ZMQError,
    strerror,
)
from mqcore.frame import Frame, Message, MessageTracker
from mqcore.poller import Poller
from mqcore.poller import select_sockets as select
from mqcore.socket import Socket

__version__ = "0.1.0"
VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH = 4, 3, 5


def zmq_version() -> str:
    """The libzmq version whose behaviour mqcore follows."""
    return f"{VERSION_MAJOR}.{VERSION_MINOR}.{VERSION_PATCH}"


def zmq_version_info() -> tuple[int, int, int]:
    return (VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH)


def pyzmq_version() -> str:
    return "27.0.0"


def has(capability: str) -> bool:
    """Which optional transports/mechanisms this build has (pyzmq's ``zmq.has``)."""
    return capability in ("ipc",)


# Module-level constants, as pyzmq exposes them.
for _enum in (SocketType, SocketOption, Flag, PollEvent, ContextOption, Errno):
    for _name, _member in _enum.__members__.items():
        globals()[_name] = _member
del _enum, _name, _member

# typing helpers for the names injected above
PAIR: SocketType
PUB: SocketType
SUB: SocketType
REQ: SocketType
REP: SocketType
DEALER: SocketType
ROUTER: SocketType
PULL: SocketType
PUSH: SocketType
XPUB: SocketType
XSUB: SocketType
NOBLOCK: Flag
DONTWAIT: Flag
SNDMORE: Flag
POLLIN: PollEvent
POLLOUT: PollEvent
POLLERR: PollEvent
EAGAIN: Errno
EFSM: Errno
ETERM: Errno
EHOSTUNREACH: Errno
EMSGSIZE: Errno
ENOTSUP: Errno
EINVAL: Errno
EADDRINUSE: Errno

__all__ = [
    "Context", "Socket", "Poller", "Frame", "Message", "MessageTracker", "select",
    "ZMQBaseError", "ZMQError", "ZMQBindError", "Again", "ContextTerminated", "NotDone", "strerror",
    "SocketType", "SocketOption", "Flag", "PollEvent", "ContextOption", "Errno",
    "zmq_version", "zmq_version_info", "pyzmq_version", "has",
]
