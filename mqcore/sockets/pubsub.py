"""PUB and SUB.

PUB filters on the publisher side: every pipe's subscriptions live in one ``PipeTrie`` and a message
goes only to the pipes subscribed to a prefix of its first frame; a pipe at its HWM misses the message
(the distributor never blocks). Subscriptions arrive through the pipes as messages whose first byte is
1 (subscribe) or 0 (cancel) — the engine turns ZMTP 3.1 SUBSCRIBE/CANCEL commands into such messages.

SUB keeps a reference-counted ``Trie``: it sends a subscription upstream (to every pipe) on the first
reference only, filters what it receives locally too, and re-sends all subscriptions to a pipe whose
connection was re-established (``hiccuped``) or that just attached.

Seams for XPUB/XSUB: ``Pub.on_subscription`` (XPUB would also queue the message for the user) and
``Sub.send_upstream`` (XSUB would let the user send raw subscription messages).
Single-threaded: each instance belongs to its socket's thread.
"""

from __future__ import annotations

from typing import Any

from mqcore.constants import SocketOption
from mqcore.options import Options
from mqcore.pipe import Msg, Pipe
from mqcore.routing import Distributor, FairQueue
from mqcore.sockets.base import SocketImpl
from mqcore.trie import PipeTrie, Trie


class Pub(SocketImpl):
    name = "PUB"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.dist = Distributor()
        self.subs: PipeTrie[Pipe] = PipeTrie()

    def attach(self, pipe: Pipe) -> None:
        self.dist.attach(pipe)
        self.read_activated(pipe)  # drains and arms activate_read

    def read_activated(self, pipe: Pipe) -> None:
        while True:
            msg = pipe.read()
            if msg is None:
                return
            self.on_subscription(pipe, msg)

    def on_subscription(self, pipe: Pipe, msg: Msg) -> None:
        """Apply one upstream message: ``\\x01topic`` subscribes, ``\\x00topic`` cancels."""
        data = msg[0] if msg else b""
        if not data or pipe.terminated:
            return
        if data[0] == 1:
            self.subs.add(data[1:], pipe)
        elif data[0] == 0:
            self.subs.remove(data[1:], pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.dist.remove(pipe)
        self.subs.remove_item(pipe)

    def xsend(self, msg: Msg) -> bool:
        pipes = self.subs.match(msg[0])
        if pipes:
            self.dist.send_to(pipes, msg)
        return True  # PUB never blocks: a full pipe just misses the message

    def has_out(self) -> bool:
        return True


class Sub(SocketImpl):
    name = "SUB"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.fq = FairQueue()
        self.read_activated = self.fq.activated  # type: ignore[method-assign]  # one call less
        self.dist = Distributor()
        self.subs = Trie()

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)
        self.dist.attach(pipe)
        self.hiccuped(pipe)

    def hiccuped(self, pipe: Pipe) -> None:
        for topic in self.subs:
            if pipe.check_write():
                pipe.write([b"\x01" + topic])
        pipe.flush()

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)
        self.dist.remove(pipe)

    def send_upstream(self, msg: Msg) -> None:
        self.dist.send_to_all(msg)

    def setsockopt(self, option: int, value: Any) -> bool:
        if option not in (SocketOption.SUBSCRIBE, SocketOption.UNSUBSCRIBE):
            return False
        if isinstance(value, str):
            value = value.encode()
        topic = bytes(value)
        if option == SocketOption.SUBSCRIBE:
            if self.subs.add(topic):
                self.send_upstream([b"\x01" + topic])
        elif self.subs.remove(topic):
            self.send_upstream([b"\x00" + topic])
        return True

    def xrecv(self) -> Msg | None:
        fq = self.fq
        check = self.subs.check
        while True:
            msg = fq.recv()
            if msg is None or check(msg[0]):
                return msg

    def has_in(self) -> bool:
        # Drop messages the local filter rejects so that POLLIN means a deliverable message.
        fq = self.fq
        while fq.has_in():
            pipe = fq.pipes[fq.current]
            if self.subs.check(pipe.inbound[0][0]):
                return True
            pipe.read()
        return False
