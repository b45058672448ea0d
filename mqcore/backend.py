"""The layer under the pyzmq-style API (pyzmq's ``zmq.backend``): mqcore's pure-Python core.

pyzmq picks a Cython or CFFI binding of libzmq here; mqcore has one backend, its own. ``Socket`` is
the core socket (send/recv of single frames, options, bind/connect) that ``mqcore.Socket`` extends.
"""

from __future__ import annotations

from mqcore.context import Context
from mqcore.error import ZMQError, strerror
from mqcore.frame import Frame, Message, MessageTracker
from mqcore.proxy import proxy, proxy_steerable
from mqcore.socket_base import SocketBase as Socket
from mqcore.zmtp import curve_keypair, curve_public

__all__ = [
    "Context", "Socket", "Frame", "Message", "MessageTracker", "ZMQError", "strerror",
    "proxy", "proxy_steerable", "curve_keypair", "curve_public",
]
