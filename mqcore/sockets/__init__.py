"""Socket-type behaviours, one class per type, chosen by ``make_impl``."""

from __future__ import annotations

from mqcore.constants import Errno, SocketType
from mqcore.error import ZMQError
from mqcore.options import Options
from mqcore.sockets.base import SocketImpl
from mqcore.sockets.pubsub import Pub, Sub
from mqcore.sockets.reqrep import Rep, Req, Router
from mqcore.sockets.simple import Dealer, Pair, Pull, Push
from mqcore.sockets.xpubsub import XPub, XSub

_TYPES: dict[int, type[SocketImpl]] = {
    SocketType.PAIR: Pair,
    SocketType.PUB: Pub,
    SocketType.SUB: Sub,
    SocketType.REQ: Req,
    SocketType.REP: Rep,
    SocketType.DEALER: Dealer,
    SocketType.ROUTER: Router,
    SocketType.PULL: Pull,
    SocketType.PUSH: Push,
    SocketType.XPUB: XPub,
    SocketType.XSUB: XSub,
}


def make_impl(socket_type: int, options: Options) -> SocketImpl:
    """The behaviour object for ``socket_type``; ZMQError(EINVAL) for types mqcore does not have yet."""
    cls = _TYPES.get(socket_type)
    if cls is None:
        raise ZMQError(Errno.EINVAL, f"socket type {socket_type} is not supported by mqcore")
    return cls(options)


__all__ = ["SocketImpl", "make_impl"]
