"""bind/connect/unbind/disconnect for every transport, run in the socket's thread.

tcp/ipc: ``bind`` opens the listening socket here and plugs a Listener into an IO thread;
``connect`` creates a connect-side Session whose pipe is attached to the socket at once.
inproc: no OS socket and no IO thread — the context keeps a registry of bound names; a connect pairs
the two sockets' pipes directly (before or after the bind: an early connect waits in the registry
and is completed by the bind, as in libzmq).

``sock._endpoints`` maps an endpoint string to what was created for it: ("listener", Listener),
("session", Session, socket-side Pipe), ("inproc-bind", name) or ("pipe", Pipe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqcore.constants import Errno, Event, SocketType
from mqcore.error import ZMQError
from mqcore.monitor import emit
from mqcore.pipe import ConflatingPipe, Pipe, make_conflating, pipe_pair
from mqcore.session import Session
from mqcore.transports import address as addr_mod
from mqcore.transports.stream import Listener, open_listening_socket

if TYPE_CHECKING:
    from mqcore.options import Options
    from mqcore.socket_base import SocketBase


_CONFLATING = frozenset({SocketType.PUB, SocketType.SUB, SocketType.PUSH, SocketType.PULL,
                         SocketType.DEALER, SocketType.XPUB, SocketType.XSUB})


def _conflates(opts: Options) -> bool:
    return bool(opts.conflate) and opts.type in _CONFLATING


def _sum_hwm(a: int, b: int) -> int:
    return 0 if a == 0 or b == 0 else a + b


def bind(sock: SocketBase, endpoint: str) -> str:
    transport, rest = addr_mod.split_endpoint(endpoint)
    ctx = sock.context
    if transport == "inproc":
        ctx._inproc_bind(sock, rest)
        sock._endpoints.setdefault(endpoint, []).append(("inproc-bind", rest))
        return endpoint
    try:
        os_sock, resolved = open_listening_socket(transport, rest, sock._opts)
    except ZMQError as exc:
        emit(sock, Event.BIND_FAILED, exc.errno or 0, endpoint)
        raise
    emit(sock, Event.LISTENING, os_sock.fileno(), resolved)
    io = ctx._choose_io_thread()
    listener = Listener(ctx, io, sock, os_sock, resolved, sock._opts.copy())
    entry = ("listener", listener)
    sock._endpoints.setdefault(resolved, []).append(entry)
    if endpoint != resolved:
        sock._endpoints.setdefault(endpoint, []).append(entry)
    io.post(listener.plug)
    return resolved


def connect(sock: SocketBase, endpoint: str) -> None:
    transport, rest = addr_mod.split_endpoint(endpoint)
    if transport == "inproc":
        inproc_connect(sock, rest, endpoint)
        return
    if transport == "tcp":
        addr = addr_mod.parse_tcp(rest)
        if not addr.host or addr.port == 0:
            raise ZMQError(Errno.EINVAL, f"cannot connect to {endpoint!r}")
    ctx = sock.context
    io = ctx._choose_io_thread()
    session = Session(ctx, io, sock, sock._opts.copy(), endpoint, connect=True)
    upipe = session.make_connect_pipe()  # None with IMMEDIATE
    sock._endpoints.setdefault(endpoint, []).append(("session", session, upipe))
    if upipe is not None:
        sock._attach(upipe)
    io.post(session.plug)


def inproc_connect(sock: SocketBase, name: str, endpoint: str) -> None:
    """Join ``sock`` to the socket bound at inproc://name (now, or when it binds)."""
    ctx = sock.context
    opts = sock._opts
    with ctx._lock:
        peer = ctx._inproc_bound.get(name)
        if peer is None:
            mine, theirs = pipe_pair(sock, sock._mailbox, opts.sndhwm, None, None, opts.rcvhwm)
            theirs.peer_routing_id = opts.routing_id
            if _conflates(opts):
                make_conflating(mine, theirs)  # (the binder's CONFLATE is unknown yet: ours decides)
            ctx._inproc_pending.setdefault(name, []).append((sock, theirs))
        else:
            popts = peer._opts
            mine, theirs = pipe_pair(sock, sock._mailbox, _sum_hwm(opts.sndhwm, popts.rcvhwm),
                                     peer, peer._mailbox, _sum_hwm(popts.sndhwm, opts.rcvhwm))
            theirs.peer_routing_id = opts.routing_id
            mine.peer_routing_id = popts.routing_id
            if _conflates(opts) or _conflates(popts):
                make_conflating(mine, theirs)
            if not peer._attach_remote(theirs):
                theirs.terminate()
    sock._endpoints.setdefault(endpoint, []).append(("pipe", mine))
    if peer is None and opts.immediate:
        return  # IMMEDIATE: the pipe joins the socket when the bind completes it
    sock._attach(mine)


def complete_pending(binder: SocketBase, pending: list[tuple[SocketBase, Pipe]]) -> None:
    """Attach connections that were made before ``binder`` bound (called in the binder's thread)."""
    bopts = binder._opts
    for connecter, theirs in pending:
        mine = theirs.peer
        copts = connecter._opts
        if type(mine) is not ConflatingPipe:
            mine.hwm = _sum_hwm(copts.sndhwm, bopts.rcvhwm)
            mine.lwm = (mine.hwm + 1) // 2
            theirs.hwm = _sum_hwm(bopts.sndhwm, copts.rcvhwm)
            theirs.lwm = (theirs.hwm + 1) // 2
        theirs.set_owner(binder, binder._mailbox)
        mine.peer_routing_id = bopts.routing_id
        theirs._post_peer("_pipe_identified")  # the connecter's ROUTER learns our id
        if copts.immediate and not connecter._attach_remote(mine):
            mine.terminate()  # the connecter closed meanwhile
        binder._attach(theirs)


def _take(sock: SocketBase, endpoint: str) -> list[tuple]:  # type: ignore[type-arg]
    entries = sock._endpoints.pop(endpoint, None)
    if not entries:
        raise ZMQError(Errno.ENOENT, f"no such endpoint: {endpoint}")
    for key in [k for k, v in sock._endpoints.items() if any(e in v for e in entries)]:
        del sock._endpoints[key]  # the other spelling of the same endpoint
    return entries


def _stop(sock: SocketBase, entry: tuple, closing: bool) -> None:  # type: ignore[type-arg]
    kind = entry[0]
    if kind == "listener":
        listener = entry[1]
        listener.io.post(listener.close, not closing)
    elif kind == "session":
        if entry[2] is None:  # IMMEDIATE: the session owns no pipe until connected
            session = entry[1]
            session.io.post(session.terminate)
        else:
            _drop_pipe(sock, entry[2])
    elif kind == "pipe":
        _drop_pipe(sock, entry[1])
    elif kind == "inproc-bind":
        sock.context._inproc_unbind(sock, entry[1])


def _drop_pipe(sock: SocketBase, pipe: Pipe) -> None:
    if pipe in sock._pipes:
        sock._pipes.discard(pipe)
        sock._impl.terminated(pipe)
    pipe.linger = sock._opts.linger
    pipe.terminate()


def unbind(sock: SocketBase, endpoint: str) -> None:
    entries = sock._endpoints.get(endpoint, [])
    if not any(e[0] in ("listener", "inproc-bind") for e in entries):
        raise ZMQError(Errno.ENOENT, f"{endpoint} is not bound")
    for entry in _take(sock, endpoint):
        _stop(sock, entry, closing=False)


def disconnect(sock: SocketBase, endpoint: str) -> None:
    entries = _take(sock, endpoint)
    for entry in entries:
        _stop(sock, entry, closing=False)


def close_all(sock: SocketBase) -> None:
    """Socket close: stop every listener and inproc binding (pipes are terminated by the socket)."""
    seen: set[int] = set()
    for entries in sock._endpoints.values():
        for entry in entries:
            if id(entry) in seen:
                continue
            seen.add(id(entry))
            if entry[0] in ("listener", "inproc-bind") or entry[0] == "session" and entry[2] is None:
                _stop(sock, entry, closing=True)
    sock._endpoints.clear()
    sock.context._inproc_forget(sock)
