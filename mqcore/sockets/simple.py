"""PAIR, PUSH, PULL and DEALER: load-balanced sends and fair-queued receives.

Single-threaded: each instance belongs to its socket's thread (see sockets/base.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mqcore.options import Options
from mqcore.pipe import Msg, Pipe
from mqcore.routing import FairQueue, LoadBalancer
from mqcore.sockets.base import SocketImpl


class Pair(SocketImpl):
    """Exactly one peer; later pipes are refused (terminated) while one is attached."""

    name = "PAIR"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.pipe: Pipe | None = None

    def attach(self, pipe: Pipe) -> None:
        if self.pipe is not None:
            pipe.terminate()
            return
        self.pipe = pipe

    def terminated(self, pipe: Pipe) -> None:
        if pipe is self.pipe and not pipe.inbound:
            self.pipe = None

    def xsend(self, msg: Msg) -> bool:
        pipe = self.pipe
        if pipe is None or not pipe.check_write():
            return False
        pipe.write(msg)
        pipe.flush()
        return True

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        return msg if pipe is self.pipe else None

    def xrecv_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        return msg if pipe is self.pipe else None

    def xrecv(self) -> Msg | None:
        pipe = self.pipe
        if pipe is None:
            return None
        msg = pipe.read()
        if msg is None and pipe.peer_terminated:
            self.pipe = None
        return msg

    def has_in(self) -> bool:
        return self.pipe is not None and self.pipe.check_read()

    def has_out(self) -> bool:
        return self.pipe is not None and self.pipe.check_write()


def send_route(lb: LoadBalancer) -> Callable[[Msg], Any]:
    """What ``xsend`` is for a load-balancing type: the one pipe's own ``send`` when there is one (one
    call less per message; at its HWM it refuses like the balancer), else the balancer's (the pipe it
    used is truthy). SocketBase takes the new one after each attach and termination."""
    pipes = lb.pipes
    return pipes[0].send if len(pipes) == 1 else lb.send


class Push(SocketImpl):
    """Load-balances messages over connected peers; blocks (EAGAIN) when all are at the HWM."""

    name = "PUSH"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        self.xsend = send_route(self.lb)  # type: ignore[method-assign, assignment]

    def attach(self, pipe: Pipe) -> None:
        self.lb.attach(pipe)
        self.xsend = send_route(self.lb)  # type: ignore[method-assign, assignment]

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.lb.remove(pipe)
        self.xsend = send_route(self.lb)  # type: ignore[method-assign, assignment]

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        return msg if self.lb.only(pipe) else None

    def has_out(self) -> bool:
        return self.lb.has_out()


class Pull(SocketImpl):
    """Fair-queues messages from connected peers."""

    name = "PULL"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.fq = FairQueue()
        self.read_activated = self.fq.activated  # type: ignore[method-assign]  # one call less
        self.xrecv = self.fq.recv  # type: ignore[method-assign]  # one call less per message

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)

    def xrecv_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        self.fq.last_pipe = pipe  # the one pipe (the direct path serves a socket with one)
        return msg

    def has_in(self) -> bool:
        return self.fq.has_in()


class Dealer(Pull):
    """Load-balanced sends plus fair-queued receives, no envelope handling."""

    name = "DEALER"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        self.xsend = send_route(self.lb)  # type: ignore[method-assign, assignment]

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)
        self.lb.attach(pipe)
        self.xsend = send_route(self.lb)  # type: ignore[method-assign, assignment]

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)
        self.lb.remove(pipe)
        self.xsend = send_route(self.lb)  # type: ignore[method-assign, assignment]

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        return msg if self.lb.only(pipe) else None

    def has_out(self) -> bool:
        return self.lb.has_out()
