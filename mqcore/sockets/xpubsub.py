"""XPUB and XSUB: PUB and SUB that show subscriptions to the application.

XPUB (a ``Pub``) passes subscription messages (``\\x01topic`` / ``\\x00topic``) up to ``recv``:
a subscribe only when it is the first for its topic (every one with XPUB_VERBOSE), an unsubscribe
only when the last subscriber of the topic left (every one with XPUB_VERBOSER), including the
implicit unsubscribes of a peer that disconnected. Other messages arriving from XSUB peers are
passed up as they are. With XPUB_MANUAL nothing is applied automatically: every subscription
message is passed up and the application decides with ``setsockopt(SUBSCRIBE/UNSUBSCRIBE)``,
which applies to the pipe of the subscription message received last. With XPUB_NODROP a message
that some matching subscriber cannot take now raises Again instead of being dropped for it.
XPUB_WELCOME_MSG is written to every new subscriber.

XSUB (a ``Sub``) sends whatever the application sends upstream to every publisher: ``\\x01topic``
subscribes (sent every time), ``\\x00topic`` cancels (sent when a subscription existed), anything
else goes up unchanged. The engine turns single-frame ``\\x01``/``\\x00`` messages into SUBSCRIBE /
CANCEL commands (3.0 peers: messages). Received messages are filtered like SUB's.

Invariants (XPUB): ``counts[topic]`` is the number of pipes subscribed to ``topic`` in the trie and
``topics[pipe]`` the topics of ``pipe``; both change only together with ``subs``. Single-threaded:
each instance belongs to its socket's thread.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from mqcore.constants import Errno, SocketOption
from mqcore.error import ZMQError
from mqcore.options import Options
from mqcore.pipe import Msg, Pipe
from mqcore.sockets.pubsub import Pub, Sub

Opt = SocketOption


def _as_topic(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


class XPub(Pub):
    name = "XPUB"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.pending: deque[tuple[Msg, Pipe | None]] = deque()
        self.counts: dict[bytes, int] = {}
        self.topics: dict[Pipe, set[bytes]] = {}
        self.last_pipe: Pipe | None = None
        self.verboser = bool(options.xpub_verboser)
        self.verbose = bool(options.xpub_verbose) or self.verboser
        self.manual = bool(options.xpub_manual)
        self.nodrop = bool(options.xpub_nodrop)
        self.welcome: bytes | None = options.xpub_welcome_msg or None

    # subscription bookkeeping -------------------------------------------------------------------
    def _add(self, topic: bytes, pipe: Pipe) -> bool:
        """Subscribe ``pipe``; True if it is the first subscriber of ``topic``."""
        if not self.subs.add(topic, pipe):
            return False
        self.topics.setdefault(pipe, set()).add(topic)
        n = self.counts.get(topic, 0) + 1
        self.counts[topic] = n
        return n == 1

    def _remove(self, topic: bytes, pipe: Pipe) -> bool:
        """Unsubscribe ``pipe``; True if ``topic`` has no subscriber left."""
        if not self.subs.remove(topic, pipe):
            return False
        self.topics.get(pipe, set()).discard(topic)
        n = self.counts[topic] - 1
        if n:
            self.counts[topic] = n
            return False
        del self.counts[topic]
        return True

    # pipes ------------------------------------------------------------------------------------------
    def attach(self, pipe: Pipe) -> None:
        if self.welcome is not None and pipe.check_write():
            pipe.write([self.welcome])
            pipe.flush()
        super().attach(pipe)

    def write_activated(self, pipe: Pipe) -> None:
        """Nothing to do: a blocked NODROP send retries after every command."""

    def on_subscription(self, pipe: Pipe, msg: Msg) -> None:
        data = msg[0] if msg else b""
        if pipe.terminated:
            return
        if len(msg) != 1 or not data or data[0] > 1:
            self.pending.append((msg, pipe))  # a user message from an XSUB
            return
        subscribe = data[0] == 1
        topic = data[1:]
        if self.manual:
            self.pending.append((msg, pipe))
            return
        if subscribe:
            notify = self._add(topic, pipe) or self.verbose
        else:
            notify = self._remove(topic, pipe) or self.verboser
        if notify:
            self.pending.append((msg, pipe))

    def terminated(self, pipe: Pipe) -> None:
        # drain what the peer still queued (its last subscriptions), then forget it
        while True:
            msg = pipe.read()
            if msg is None:
                break
            if msg and msg[0][:1] not in (b"\x00", b"\x01"):
                self.pending.append((msg, pipe))
        for topic in sorted(self.topics.pop(pipe, set())):
            self.subs.remove(topic, pipe)
            n = self.counts[topic] - 1
            if n:
                self.counts[topic] = n
            else:
                del self.counts[topic]
                self.pending.append(([b"\x00" + topic], None))
        if self.last_pipe is pipe:
            self.last_pipe = None
        self.dist.remove(pipe)

    # options --------------------------------------------------------------------------------------
    def setsockopt(self, option: int, value: Any) -> bool:
        """XPUB options take effect here and are also stored (False: the options record them);
        SUBSCRIBE/UNSUBSCRIBE work only with XPUB_MANUAL, after a subscription was received."""
        if option == Opt.XPUB_VERBOSE:
            self.verbose = bool(value)
        elif option == Opt.XPUB_VERBOSER:
            self.verbose = self.verboser = bool(value)
        elif option == Opt.XPUB_MANUAL:
            self.manual = bool(value)
        elif option == Opt.XPUB_NODROP:
            self.nodrop = bool(value)
        elif option == Opt.XPUB_WELCOME_MSG:
            self.welcome = _as_topic(value) if value else None
            return value is None  # (None clears it; the options keep bytes only)
        if option in (Opt.XPUB_VERBOSE, Opt.XPUB_VERBOSER, Opt.XPUB_MANUAL, Opt.XPUB_NODROP,
                      Opt.XPUB_WELCOME_MSG):
            return False
        if option in (Opt.SUBSCRIBE, Opt.UNSUBSCRIBE):
            pipe = self.last_pipe
            if not self.manual or pipe is None:
                raise ZMQError(Errno.EINVAL)
            topic = _as_topic(value)
            if option == Opt.SUBSCRIBE:
                self._add(topic, pipe)
            else:
                self._remove(topic, pipe)
            return True
        return False

    # messages -------------------------------------------------------------------------------------
    def xsend(self, msg: Msg) -> bool:
        pipes = self.subs.match(msg[0])
        if not pipes:
            return True
        if self.nodrop:
            for pipe in pipes:
                if not pipe.check_write():
                    return False  # EAGAIN: retried when the subscriber catches up
        self.dist.send_to(pipes, msg)
        return True

    def xrecv(self) -> Msg | None:
        if not self.pending:
            return None
        msg, pipe = self.pending.popleft()
        if pipe is not None:
            self.last_pipe = pipe
        return msg

    def has_in(self) -> bool:
        return bool(self.pending)

    def has_out(self) -> bool:
        if not self.nodrop:
            return True
        return all(p.check_write() for p in self.dist.pipes)


class XSub(Sub):
    name = "XSUB"

    def xsend(self, msg: Msg) -> bool:
        data = msg[0]
        if len(msg) == 1 and data[:1] == b"\x01":
            self.subs.add(data[1:])
            self.send_upstream(msg)
        elif len(msg) == 1 and data[:1] == b"\x00":
            if self.subs.remove(data[1:]):
                self.send_upstream(msg)
        else:
            self.send_upstream(msg)
        return True

    def has_out(self) -> bool:
        return True
