"""Public constants with pyzmq's names and libzmq's numeric values.

Socket types, socket options, send/recv flags, poll events and error numbers. Each group is an
IntEnum/IntFlag (like pyzmq's ``zmq.SocketType`` etc.); ``mqcore/__init__.py`` also re-exports every
member as a module-level name so ``zmq.PUSH`` style code works unchanged.
"""

from __future__ import annotations

import errno as _errno
from enum import Enum, IntEnum, IntFlag


class SocketType(IntEnum):
    """Socket types (ZMQ_PAIR ... ZMQ_XSUB)."""

    PAIR = 0
    PUB = 1
    SUB = 2
    REQ = 3
    REP = 4
    DEALER = 5
    ROUTER = 6
    PULL = 7
    PUSH = 8
    XPUB = 9
    XSUB = 10
    STREAM = 11
    XREQ = 5
    XREP = 6


class SocketOption(IntEnum):
    """Socket options, numbered as in libzmq's zmq.h."""

    HWM = 1
    AFFINITY = 4
    ROUTING_ID = 5
    SUBSCRIBE = 6
    UNSUBSCRIBE = 7
    RATE = 8
    RECOVERY_IVL = 9
    SNDBUF = 11
    RCVBUF = 12
    RCVMORE = 13
    FD = 14
    EVENTS = 15
    TYPE = 16
    LINGER = 17
    RECONNECT_IVL = 18
    BACKLOG = 19
    RECONNECT_IVL_MAX = 21
    MAXMSGSIZE = 22
    SNDHWM = 23
    RCVHWM = 24
    MULTICAST_HOPS = 25
    RCVTIMEO = 27
    SNDTIMEO = 28
    IPV4ONLY = 31
    LAST_ENDPOINT = 32
    ROUTER_MANDATORY = 33
    TCP_KEEPALIVE = 34
    TCP_KEEPALIVE_CNT = 35
    TCP_KEEPALIVE_IDLE = 36
    TCP_KEEPALIVE_INTVL = 37
    IMMEDIATE = 39
    XPUB_VERBOSE = 40
    ROUTER_RAW = 41
    IPV6 = 42
    MECHANISM = 43
    PLAIN_SERVER = 44
    PLAIN_USERNAME = 45
    PLAIN_PASSWORD = 46
    CURVE_SERVER = 47
    CURVE_PUBLICKEY = 48
    CURVE_SECRETKEY = 49
    CURVE_SERVERKEY = 50
    PROBE_ROUTER = 51
    REQ_CORRELATE = 52
    REQ_RELAXED = 53
    CONFLATE = 54
    ZAP_DOMAIN = 55
    ROUTER_HANDOVER = 56
    TOS = 57
    CONNECT_ROUTING_ID = 61
    HANDSHAKE_IVL = 66
    XPUB_NODROP = 69
    BLOCKY = 70
    XPUB_MANUAL = 71
    XPUB_WELCOME_MSG = 72
    INVERT_MATCHING = 74
    HEARTBEAT_IVL = 75
    HEARTBEAT_TTL = 76
    HEARTBEAT_TIMEOUT = 77
    XPUB_VERBOSER = 78
    CONNECT_TIMEOUT = 79
    TCP_MAXRT = 80
    ZAP_ENFORCE_DOMAIN = 93
    BUSY_POLL = 113
    # pyzmq aliases
    IDENTITY = 5
    CONNECT_RID = 61
    DELAY_ATTACH_ON_CONNECT = 39


class _OptType(Enum):
    """How an option's value is passed (pyzmq's ``zmq.constants._OptType``); ``SocketOption._opt_type``."""

    int = "int"
    int64 = "int64"
    bytes = "bytes"
    fd = "fd"


_INT64_OPTIONS = frozenset({"AFFINITY", "MAXMSGSIZE"})
_BYTES_OPTIONS = frozenset({
    "ROUTING_ID", "SUBSCRIBE", "UNSUBSCRIBE", "LAST_ENDPOINT", "PLAIN_USERNAME", "PLAIN_PASSWORD",
    "CURVE_PUBLICKEY", "CURVE_SECRETKEY", "CURVE_SERVERKEY", "ZAP_DOMAIN", "CONNECT_ROUTING_ID",
    "XPUB_WELCOME_MSG",
})


def _opt_type(option: SocketOption) -> _OptType:
    if option.name in _BYTES_OPTIONS:
        return _OptType.bytes
    if option.name in _INT64_OPTIONS:
        return _OptType.int64
    return _OptType.fd if option.name == "FD" else _OptType.int


SocketOption._opt_type = property(_opt_type)  # type: ignore[attr-defined]


class ReconnectStop(IntFlag):
    """Values of the RECONNECT_STOP option (pyzmq's ``zmq.constants.ReconnectStop``)."""

    CONN_REFUSED = 1
    HANDSHAKE_FAILED = 2
    AFTER_DISCONNECT = 4


class SecurityMechanism(IntEnum):
    """Values of the MECHANISM option (pyzmq's ``zmq.SecurityMechanism``)."""

    NULL = 0
    PLAIN = 1
    CURVE = 2
    GSSAPI = 3


class Flag(IntFlag):
    """send/recv flags."""

    DONTWAIT = 1
    SNDMORE = 2
    NOBLOCK = 1


class PollEvent(IntFlag):
    """Poll event bits (also the value of the EVENTS option)."""

    POLLIN = 1
    POLLOUT = 2
    POLLERR = 4
    POLLPRI = 8


class Event(IntFlag):
    """Socket monitor events (libzmq's ZMQ_EVENT_*), as pyzmq's ``zmq.Event``."""

    CONNECTED = 0x0001
    CONNECT_DELAYED = 0x0002
    CONNECT_RETRIED = 0x0004
    LISTENING = 0x0008
    BIND_FAILED = 0x0010
    ACCEPTED = 0x0020
    ACCEPT_FAILED = 0x0040
    CLOSED = 0x0080
    CLOSE_FAILED = 0x0100
    DISCONNECTED = 0x0200
    MONITOR_STOPPED = 0x0400
    HANDSHAKE_FAILED_NO_DETAIL = 0x0800
    HANDSHAKE_SUCCEEDED = 0x1000
    HANDSHAKE_FAILED_PROTOCOL = 0x2000
    HANDSHAKE_FAILED_AUTH = 0x4000
    ALL_V1 = 0x07FF
    ALL = 0xFFFF
    PROTOCOL_ERROR_WS_UNSPECIFIED = 0x30000000
    PROTOCOL_ERROR_ZMTP_UNSPECIFIED = 0x10000000
    PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND = 0x10000001
    PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE = 0x10000002
    PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE = 0x10000003
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED = 0x10000011
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE = 0x10000012
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO = 0x10000013
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE = 0x10000014
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_ERROR = 0x10000015
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY = 0x10000016
    PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME = 0x10000017
    PROTOCOL_ERROR_ZMTP_INVALID_METADATA = 0x10000018
    PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC = 0x11000001
    PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH = 0x11000002
    PROTOCOL_ERROR_ZAP_UNSPECIFIED = 0x20000000
    PROTOCOL_ERROR_ZAP_MALFORMED_REPLY = 0x20000001
    PROTOCOL_ERROR_ZAP_BAD_REQUEST_ID = 0x20000002
    PROTOCOL_ERROR_ZAP_BAD_VERSION = 0x20000003
    PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE = 0x20000004
    PROTOCOL_ERROR_ZAP_INVALID_METADATA = 0x20000005
    PIPES_STATS = 0x10000
    ALL_V2 = 0x1ffff


class ContextOption(IntEnum):
    """Context options (ctx.get/set)."""

    IO_THREADS = 1
    MAX_SOCKETS = 2
    SOCKET_LIMIT = 3
    THREAD_PRIORITY = 3
    THREAD_SCHED_POLICY = 4
    MAX_MSGSZ = 5
    MSG_T_SIZE = 6
    THREAD_AFFINITY_CPU_ADD = 7
    THREAD_AFFINITY_CPU_REMOVE = 8
    THREAD_NAME_PREFIX = 9


_HAUSNUMERO = 156384712


class Errno(IntEnum):
    """Error numbers as pyzmq exposes them (POSIX values plus libzmq's own range)."""

    EAGAIN = _errno.EAGAIN
    EINVAL = _errno.EINVAL
    EFAULT = _errno.EFAULT
    ENOMEM = _errno.ENOMEM
    ENODEV = _errno.ENODEV
    EMSGSIZE = _errno.EMSGSIZE
    EAFNOSUPPORT = _errno.EAFNOSUPPORT
    ENETUNREACH = _errno.ENETUNREACH
    ECONNABORTED = _errno.ECONNABORTED
    ECONNRESET = _errno.ECONNRESET
    ENOTCONN = _errno.ENOTCONN
    ETIMEDOUT = _errno.ETIMEDOUT
    EHOSTUNREACH = _errno.EHOSTUNREACH
    ENETRESET = _errno.ENETRESET
    ENOTSUP = _errno.ENOTSUP
    EPROTONOSUPPORT = _errno.EPROTONOSUPPORT
    ENOBUFS = _errno.ENOBUFS
    ENETDOWN = _errno.ENETDOWN
    EADDRINUSE = _errno.EADDRINUSE
    EADDRNOTAVAIL = _errno.EADDRNOTAVAIL
    ECONNREFUSED = _errno.ECONNREFUSED
    EINPROGRESS = _errno.EINPROGRESS
    ENOTSOCK = _errno.ENOTSOCK
    ENOENT = _errno.ENOENT
    EFSM = _HAUSNUMERO + 51
    ENOCOMPATPROTO = _HAUSNUMERO + 52
    ETERM = _HAUSNUMERO + 53
    EMTHREAD = _HAUSNUMERO + 54


class MessageOption(IntEnum):
    """Options of a received Frame (``Frame.get``)."""

    MORE = 1
    SRCFD = 2
    SHARED = 3


#: socket type number -> the name the ZMTP codec expects in READY.
SOCKET_TYPE_NAMES: dict[int, str] = {int(t): t.name for t in SocketType if t.name not in ("XREQ", "XREP")}


# pyzmq's ``zmq.constants`` also has every member as a module-level name (``SUBSCRIBE``, ``PUSH``).
for _enum in (SocketType, SocketOption, Flag, PollEvent, ContextOption, Errno, SecurityMechanism,
              MessageOption):
    globals().update(_enum.__members__)
globals().update({f"RECONNECT_STOP_{n}": m for n, m in ReconnectStop.__members__.items()})
IPC_PATH_MAX_LEN = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
__all__ = sorted(n for n, v in globals().items() if n.isupper() or isinstance(v, type) and n[0] != "_")
del _enum
