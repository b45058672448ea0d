"""Public constants with pyzmq's names and libzmq's numeric values.

Socket types, socket options, send/recv flags, poll events and error numbers. Each group is an
IntEnum/IntFlag (like pyzmq's ``zmq.SocketType`` etc.); ``mqcore/__init__.py`` also re-exports every
member as a module-level name so ``zmq.PUSH`` style code works unchanged.
"""

from __future__ import annotations

import errno as _errno
from enum import IntEnum, IntFlag


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
    # pyzmq aliases
    IDENTITY = 5
    CONNECT_RID = 61
    DELAY_ATTACH_ON_CONNECT = 39


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


#: socket type number -> the name the ZMTP codec expects in READY.
SOCKET_TYPE_NAMES: dict[int, str] = {int(t): t.name for t in SocketType if t.name not in ("XREQ", "XREP")}
