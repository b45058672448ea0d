"""pyzmq's ``zmq.sugar``: the Python layer over the backend, by the submodule names pyzmq uses
(``zmq.sugar.context.Context``, ``zmq.sugar.socket.Socket``, ``zmq.sugar.version`` ...). In mqcore all of it is Python."""

from __future__ import annotations

from mqcore import context, error, frame, socket, version
from mqcore import poller as poll

__all__ = ["context", "error", "frame", "poll", "socket", "version"]
