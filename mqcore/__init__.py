"""mqcore: a brokerless, libzmq-architected messaging library in pure Python with pyzmq's API.

Replace ``import zmq`` with ``import mqcore as zmq``: Context, Socket, Poller, the constants
(PUSH, SNDHWM, NOBLOCK, POLLIN, EAGAIN, ...) and the errors (ZMQError, Again, ContextTerminated)
carry pyzmq's names and libzmq's values.
"""

from __future__ import annotations

# The submodules ``import zmq`` binds (pyzmq's zmq.backend, .constants, .error, .sugar, .utils with
# .utils.jsonapi), bound here too; devices, auth and asyncio are importable submodules as in pyzmq.
# After ``sys.modules["zmq"] = mqcore``, ``import zmq.<sub>`` gives mqcore's own module (_alias).
from mqcore import _alias, backend, constants, devices, error, sugar, utils, version
from mqcore.constants import (
    IPC_PATH_MAX_LEN,
    ContextOption,
    Errno,
    Event,
    Flag,
    MessageOption,
    PollEvent,
    ReconnectStop,
    SecurityMechanism,
    SocketOption,
    SocketType,
)
from mqcore.context import Context
from mqcore.devices import FORWARDER, QUEUE, STREAMER, device
from mqcore.error import (
    Again,
    ContextTerminated,
    NotDone,
    ZMQBaseError,
    ZMQBindError,
    ZMQError,
    ZMQVersionError,
    strerror,
)
from mqcore.frame import FINISHED_TRACKER, Frame, Message, MessageTracker
from mqcore.poller import Poller
from mqcore.poller import select_sockets as select
from mqcore.proxy import proxy, proxy_steerable
from mqcore.socket import Socket
from mqcore.version import (
    MQCORE_VERSION,
    __revision__,
    __version__,
    pyzmq_version,
    pyzmq_version_info,
    zmq_version,
    zmq_version_info,
)
from mqcore.zmtp import curve_keypair, curve_public

_alias.install()


def has(capability: str) -> bool:
    """Which optional transports/mechanisms this build has (pyzmq's ``zmq.has``)."""
    return capability in ("ipc", "curve")


# Module-level constants, as pyzmq exposes them.
for _enum in (SocketType, SocketOption, Flag, PollEvent, ContextOption, Errno, SecurityMechanism,
              MessageOption):
    for _name, _member in _enum.__members__.items():
        globals()[_name] = _member
for _rs_name, _rs in ReconnectStop.__members__.items():
    globals()["RECONNECT_STOP_" + _rs_name] = _rs
_FINISHED_TRACKER = FINISHED_TRACKER  # pyzmq's name for the tracker of a copied message
for _ev_name, _ev in Event.__members__.items():
    globals()["EVENT_" + _ev_name] = _ev
del _enum, _name, _member, _ev_name, _ev, _rs_name, _rs

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
NULL: SecurityMechanism
PLAIN: SecurityMechanism
CURVE: SecurityMechanism
EVENT_CONNECTED: Event
EVENT_CONNECT_DELAYED: Event
EVENT_CONNECT_RETRIED: Event
EVENT_LISTENING: Event
EVENT_BIND_FAILED: Event
EVENT_ACCEPTED: Event
EVENT_ACCEPT_FAILED: Event
EVENT_CLOSED: Event
EVENT_CLOSE_FAILED: Event
EVENT_DISCONNECTED: Event
EVENT_MONITOR_STOPPED: Event
EVENT_HANDSHAKE_FAILED_NO_DETAIL: Event
EVENT_HANDSHAKE_SUCCEEDED: Event
EVENT_HANDSHAKE_FAILED_PROTOCOL: Event
EVENT_HANDSHAKE_FAILED_AUTH: Event
EVENT_ALL: Event

__all__ = [
    "Context", "Socket", "Poller", "Frame", "Message", "MessageTracker", "select",
    "ZMQBaseError", "ZMQError", "ZMQBindError", "ZMQVersionError", "Again", "ContextTerminated", "NotDone", "strerror",
    "SocketType", "SocketOption", "MessageOption", "Flag", "PollEvent", "ContextOption", "Errno", "Event",
    "proxy", "proxy_steerable", "devices", "device", "QUEUE", "FORWARDER", "STREAMER",
    "zmq_version", "zmq_version_info", "pyzmq_version", "pyzmq_version_info", "__version__", "__revision__",
    "MQCORE_VERSION", "has",
    "SecurityMechanism", "curve_keypair", "curve_public", "ReconnectStop", "IPC_PATH_MAX_LEN",
    "backend", "constants", "error", "sugar", "utils", "version",
]
# and, as in pyzmq, every constant set above (PUSH, RCVTIMEO, EAGAIN, EVENT_CONNECTED ...)
__all__ += [name for name, value in list(globals().items())
            if name.isupper() and name not in __all__ and isinstance(value, (int, bytes))]
