"""Socket options: defaults as in libzmq, typed get/set by option number.

An ``Options`` object belongs to one socket; sessions take a snapshot (``copy()``) when they are
created, so IO threads never read an object the application thread is changing.
"""

from __future__ import annotations

import copy
from typing import Any

from mqcore.constants import Errno, SocketOption
from mqcore.error import ZMQError
from mqcore.security import SECURITY_OPTIONS, get_security_option, set_security_option

Opt = SocketOption

#: mqcore's default BUSY_POLL (libzmq's is 0, off): see SocketBase._poll_input
BUSY_POLL_DEFAULT_US = 100

# option -> (attribute, kind); kind: "int", "bytes", "str" (stored as str, returned as bytes)
_TABLE: dict[int, tuple[str, str]] = {
    Opt.AFFINITY: ("affinity", "int"),
    Opt.ROUTING_ID: ("routing_id", "bytes"),
    Opt.RATE: ("rate", "int"),
    Opt.RECOVERY_IVL: ("recovery_ivl", "int"),
    Opt.SNDBUF: ("sndbuf", "int"),
    Opt.RCVBUF: ("rcvbuf", "int"),
    Opt.LINGER: ("linger", "int"),
    Opt.RECONNECT_IVL: ("reconnect_ivl", "int"),
    Opt.BACKLOG: ("backlog", "int"),
    Opt.RECONNECT_IVL_MAX: ("reconnect_ivl_max", "int"),
    Opt.MAXMSGSIZE: ("maxmsgsize", "int"),
    Opt.SNDHWM: ("sndhwm", "int"),
    Opt.RCVHWM: ("rcvhwm", "int"),
    Opt.MULTICAST_HOPS: ("multicast_hops", "int"),
    Opt.RCVTIMEO: ("rcvtimeo", "int"),
    Opt.SNDTIMEO: ("sndtimeo", "int"),
    Opt.IPV4ONLY: ("ipv4only", "int"),
    Opt.LAST_ENDPOINT: ("last_endpoint", "str"),
    Opt.ROUTER_MANDATORY: ("router_mandatory", "int"),
    Opt.TCP_KEEPALIVE: ("tcp_keepalive", "int"),
    Opt.TCP_KEEPALIVE_CNT: ("tcp_keepalive_cnt", "int"),
    Opt.TCP_KEEPALIVE_IDLE: ("tcp_keepalive_idle", "int"),
    Opt.TCP_KEEPALIVE_INTVL: ("tcp_keepalive_intvl", "int"),
    Opt.IMMEDIATE: ("immediate", "int"),
    Opt.IPV6: ("ipv6", "int"),
    Opt.MECHANISM: ("mechanism", "int"),
    Opt.PROBE_ROUTER: ("probe_router", "int"),
    Opt.REQ_CORRELATE: ("req_correlate", "int"),
    Opt.REQ_RELAXED: ("req_relaxed", "int"),
    Opt.CONFLATE: ("conflate", "int"),
    Opt.ROUTER_HANDOVER: ("router_handover", "int"),
    Opt.TOS: ("tos", "int"),
    Opt.CONNECT_ROUTING_ID: ("connect_routing_id", "bytes"),
    Opt.HANDSHAKE_IVL: ("handshake_ivl", "int"),
    Opt.XPUB_VERBOSE: ("xpub_verbose", "int"),
    Opt.XPUB_NODROP: ("xpub_nodrop", "int"),
    Opt.XPUB_VERBOSER: ("xpub_verboser", "int"),
    Opt.XPUB_MANUAL: ("xpub_manual", "int"),
    Opt.XPUB_WELCOME_MSG: ("xpub_welcome_msg", "bytes"),
    Opt.INVERT_MATCHING: ("invert_matching", "int"),
    Opt.HEARTBEAT_IVL: ("heartbeat_ivl", "int"),
    Opt.HEARTBEAT_TTL: ("heartbeat_ttl", "int"),
    Opt.HEARTBEAT_TIMEOUT: ("heartbeat_timeout", "int"),
    Opt.CONNECT_TIMEOUT: ("connect_timeout", "int"),
    Opt.TCP_MAXRT: ("tcp_maxrt", "int"),
    Opt.BUSY_POLL: ("busy_poll", "int"),
}

#: options that only make sense for reading
READ_ONLY = frozenset({Opt.LAST_ENDPOINT, Opt.TYPE, Opt.RCVMORE, Opt.FD, Opt.EVENTS, Opt.MECHANISM})


class Options:
    """Plain attribute bag with libzmq's defaults."""

    def __init__(self, socket_type: int) -> None:
        self.type = socket_type
        self.affinity = 0
        self.routing_id = b""
        self.rate = 100
        self.recovery_ivl = 10000
        self.sndbuf = -1
        self.rcvbuf = -1
        self.linger = -1            # pyzmq/libzmq default: wait forever on term
        self.reconnect_ivl = 100
        self.backlog = 100
        self.reconnect_ivl_max = 0
        self.maxmsgsize = -1
        self.sndhwm = 1000
        self.rcvhwm = 1000
        self.multicast_hops = 1
        self.rcvtimeo = -1
        self.sndtimeo = -1
        self.ipv4only = 1
        self.last_endpoint = ""
        self.router_mandatory = 0
        self.tcp_keepalive = -1
        self.tcp_keepalive_cnt = -1
        self.tcp_keepalive_idle = -1
        self.tcp_keepalive_intvl = -1
        self.immediate = 0
        self.ipv6 = 0
        self.mechanism = 0
        self.probe_router = 0
        self.req_correlate = 0
        self.req_relaxed = 0
        self.conflate = 0
        self.router_handover = 0
        self.tos = 0
        self.connect_routing_id = b""
        self.handshake_ivl = 30000
        self.xpub_verbose = 0
        self.xpub_nodrop = 0
        self.xpub_verboser = 0
        self.xpub_manual = 0
        self.xpub_welcome_msg = b""
        self.invert_matching = 0
        self.heartbeat_ivl = 0
        self.heartbeat_ttl = 0
        self.heartbeat_timeout = -1
        self.connect_timeout = 0
        self.tcp_maxrt = 0
        # The most microseconds a blocking recv polls without sleeping (SocketBase._poll_input);
        # libzmq passes its value to the kernel's SO_BUSY_POLL, which means the same for a NIC's queue.
        self.busy_poll = BUSY_POLL_DEFAULT_US
        # security (see mqcore/security.py): role, credentials, raw CURVE keys (b"" = unset), ZAP
        self.as_server = 0
        self.plain_username = b""
        self.plain_password = b""
        self.curve_public_key = b""
        self.curve_secret_key = b""
        self.curve_server_key = b""
        self.zap_domain = b""
        self.zap_enforce_domain = 0

    def copy(self) -> Options:
        return copy.copy(self)

    def set(self, option: int, value: Any) -> None:
        """Set by number; ZMQError(EINVAL) for unknown options or bad values."""
        if option == Opt.HWM:
            self.set(Opt.SNDHWM, value)
            self.set(Opt.RCVHWM, value)
            return
        if option in SECURITY_OPTIONS:
            set_security_option(self, option, value)
            return
        entry = _TABLE.get(option)
        if entry is None or option in READ_ONLY:
            raise ZMQError(Errno.EINVAL)
        attr, kind = entry
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                try:
                    value = int(value)
                except (TypeError, ValueError):
                    raise ZMQError(Errno.EINVAL) from None
        elif kind == "bytes":
            if isinstance(value, str):
                raise TypeError(f"option {Opt(option).name} takes bytes, not str")
            value = bytes(value)
            if attr == "routing_id" and (len(value) > 255 or value[:1] == b"\x00"):
                raise ZMQError(Errno.EINVAL)  # ids starting with 0 are reserved for generated ones
        if attr in ("sndhwm", "rcvhwm", "backlog", "reconnect_ivl", "busy_poll") and value < 0:
            raise ZMQError(Errno.EINVAL)
        setattr(self, attr, value)

    def get(self, option: int) -> Any:
        if option == Opt.HWM:
            return self.sndhwm
        if option == Opt.TYPE:
            return self.type
        if option in SECURITY_OPTIONS:
            return get_security_option(self, option)
        entry = _TABLE.get(option)
        if entry is None:
            raise ZMQError(Errno.EINVAL)
        attr, kind = entry
        value = getattr(self, attr)
        if kind == "str":
            return value.encode()
        return value
