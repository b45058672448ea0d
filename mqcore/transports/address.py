"""Endpoint parsing and formatting (pure functions, any thread).

``tcp://host:port`` (host ``*`` = all interfaces, port ``*``/0 = ephemeral, IPv6 as ``[::1]``),
``ipc://path`` (``@name`` = Linux abstract namespace, ``*`` = a fresh temporary path),
``inproc://name``.
"""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from dataclasses import dataclass

from mqcore.constants import IPC_PATH_MAX_LEN, Errno
from mqcore.error import ZMQError

TRANSPORTS = ("tcp", "ipc", "inproc")


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """``"tcp://a:1"`` -> ``("tcp", "a:1")``; EINVAL if malformed, EPROTONOSUPPORT if unknown."""
    if not isinstance(endpoint, str):
        raise TypeError("endpoint must be str")
    transport, sep, rest = endpoint.partition("://")
    if not sep or not rest:
        raise ZMQError(Errno.EINVAL, f"invalid endpoint {endpoint!r}")
    if transport not in TRANSPORTS:
        raise ZMQError(Errno.EPROTONOSUPPORT, f"transport {transport!r} is not supported by mqcore")
    return transport, rest


@dataclass(frozen=True)
class TcpAddress:
    host: str      # literal or name, without brackets; "" = any
    port: int      # 0 = ephemeral


def parse_tcp(rest: str) -> TcpAddress:
    """Split ``host:port`` / ``[v6]:port`` / ``*:*``; EINVAL on a malformed address."""
    if ";" in rest:  # "source;destination" form: use the destination
        rest = rest.split(";", 1)[1]
    host, sep, port_s = rest.rpartition(":")
    if not sep or not host:
        raise ZMQError(Errno.EINVAL, f"invalid tcp address {rest!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "*":
        host = ""
    if port_s in ("*", "0"):
        port = 0
    else:
        try:
            port = int(port_s)
        except ValueError:
            raise ZMQError(Errno.EINVAL, f"invalid tcp port in {rest!r}") from None
        if not 0 < port < 65536:
            raise ZMQError(Errno.EINVAL, f"invalid tcp port in {rest!r}")
    return TcpAddress(host, port)


def resolve_tcp(addr: TcpAddress, passive: bool, ipv6: bool) -> tuple[int, tuple[object, ...]]:
    """(family, sockaddr) for a bind (passive) or connect; EINVAL if the host does not resolve."""
    host = addr.host
    if not host:
        if not passive:
            raise ZMQError(Errno.EINVAL, "cannot connect to '*'")
        return (socket.AF_INET6, ("::", addr.port, 0, 0)) if ipv6 else (socket.AF_INET, ("0.0.0.0", addr.port))
    try:
        infos = socket.getaddrinfo(host, addr.port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                                   0, socket.AI_PASSIVE if passive else 0)
    except socket.gaierror:
        raise ZMQError(Errno.EINVAL, f"cannot resolve {host!r}") from None
    if not ipv6 and ":" not in host:  # prefer IPv4 unless IPv6 was asked for
        v4 = [i for i in infos if i[0] == socket.AF_INET]
        if v4:
            infos = v4  # type: ignore[assignment]
    family, _, _, _, sockaddr = infos[0]
    return family, sockaddr


def format_tcp(sockaddr: tuple[object, ...]) -> str:
    host, port = sockaddr[0], sockaddr[1]
    if ":" in str(host):
        return f"tcp://[{host}]:{port}"
    return f"tcp://{host}:{port}"


def ipc_path(rest: str) -> str:
    """Filesystem path or abstract name (leading NUL) for ``ipc://rest``."""
    if rest == "*":
        return os.path.join(tempfile.gettempdir(), f"mqcore-{uuid.uuid4().hex[:12]}.ipc")
    path = "\0" + rest[1:] if rest.startswith("@") else rest
    if len(path.encode()) > IPC_PATH_MAX_LEN:
        raise ZMQError(Errno.EINVAL, f"ipc path {rest!r} is longer than {IPC_PATH_MAX_LEN} bytes "
                                     "(the size of sockaddr_un.sun_path); use a shorter path")
    return path


def format_ipc(path: str) -> str:
    if path.startswith("\0"):
        return "ipc://@" + path[1:]
    return "ipc://" + path
