"""PAIR, PUSH, PULL and DEALER: load-balanced sends and fair-queued receives.

Single-threaded: each instance belongs to its socket's thread (see sockets/base.py).
"""

from __future__ import annotations

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


class Push(SocketImpl):
    """Load-balances messages over connected peers; blocks (EAGAIN) when all are at the HWM."""

    name = "PUSH"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        self.xsend = self.lb.send  # type: ignore[assignment]  # the pipe it used is truthy: one call less

    def attach(self, pipe: Pipe) -> None:
        self.lb.attach(pipe)

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.lb.remove(pipe)

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
        self.xrecv = self.fq.recv  # type: ignore[method-assign]  # one call less per message

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)

    def read_activated(self, pipe: Pipe) -> None:
        self.fq.activated(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)

    def has_in(self) -> bool:
        return self.fq.has_in()


class Dealer(Pull):
    """Load-balanced sends plus fair-queued receives, no envelope handling."""

    name = "DEALER"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        self.xsend = self.lb.send  # type: ignore[assignment]  # as in Push

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)
        self.lb.attach(pipe)

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)
        self.lb.remove(pipe)

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        return msg if self.lb.only(pipe) else None

    def has_out(self) -> bool:
        return self.lb.has_out()
