"""Pipes: a lock-free, batched, bidirectional message channel between two owners.

A pipe pair joins a socket to a session (or, for inproc, two sockets). Each ``Pipe`` endpoint reads
its own ``inbound`` deque and writes the peer's. Items are whole messages (lists of frames), so a
reader never sees half a multipart message.

Threading: each endpoint is used by exactly one owner thread at a time. The endpoints share state
only through atomic deque operations and single-writer counters/flags, like libzmq's ypipe:

* reader side: ``read`` returns None on an empty queue after clearing ``in_active`` and re-checking;
  the writer's ``flush`` wakes the reader (an ``activate_read`` command to its mailbox) only when it
  finds ``in_active`` cleared — one wake-up per batch, not per message.
* HWM: the writer counts ``msgs_written``, the reader ``msgs_read``; ``check_write`` fails when
  ``msgs_written - peer.msgs_read >= hwm`` and clears ``out_active``; the reader re-activates the
  writer (``activate_write``) once the backlog falls to the low-water mark.
* termination: ``terminate`` posts ``pipe_terminated`` to the peer's owner; messages already queued
  stay readable (delayed termination, as in libzmq).
* inline IO: a session-side endpoint may carry ``inline``, its connection's ``mqcore.engine.Inline``
  (set by the StreamEngine at the handshake). Then ``flush`` first offers the batch to it (the engine
  writes it from the writer's thread) and wakes the reader only if that declined; ``Inline`` keeps
  the lock between the two threads.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from mqcore.mailbox import Mailbox

if TYPE_CHECKING:
    from mqcore.engine import Inline

Msg = list[bytes]


class PipeOwner(Protocol):
    """What a pipe calls back on its owner (always through the owner's mailbox)."""

    def _pipe_activate_read(self, pipe: Pipe) -> None: ...
    def _pipe_activate_write(self, pipe: Pipe) -> None: ...
    def _pipe_terminated(self, pipe: Pipe) -> None: ...
    def _pipe_hiccuped(self, pipe: Pipe) -> None: ...


def lwm_for(hwm: int) -> int:
    """Low-water mark: libzmq resumes a writer when the backlog is half the HWM."""
    return (hwm + 1) // 2 if hwm > 0 else 0


class Pipe:
    """One endpoint of a pipe pair. Owned by one thread; see the module comment for the protocol."""

    __slots__ = (
        "inbound", "peer", "owner", "mailbox", "hwm", "lwm", "in_active", "out_active",
        "msgs_read", "msgs_written", "terminated", "peer_terminated", "routing_id",
        "peer_routing_id", "data", "linger", "inline", "properties", "__weakref__",
    )

    def __init__(self, owner: Any, mailbox: Mailbox | None, hwm: int) -> None:
        self.inbound: deque[Msg] = deque()
        self.peer: Pipe = self
        self.owner = owner
        self.mailbox = mailbox
        self.hwm = hwm          # outbound limit in messages, 0 = none
        self.lwm = lwm_for(hwm)  # used by the *peer* (our writer) — see ``read``
        self.in_active = True
        self.out_active = True
        self.msgs_read = 0
        self.msgs_written = 0
        self.terminated = False        # we terminated our end
        self.peer_terminated = False   # the peer terminated its end
        self.routing_id: bytes | None = None       # id the owning ROUTER gave this pipe
        self.peer_routing_id: bytes | None = None  # id the peer announced; None until known
        self.data: Any = None                      # per-pipe state for routing strategies
        self.linger = -1  # ms; set by the terminating socket so the session knows how long to flush
        # The connection behind this (session-side) end, for the socket's thread to do its IO itself:
        # ``flush`` offers it the batch (Inline.flush_pipe) instead of waking us, and the socket reads
        # and writes through it while it waits (SocketBase._inline_engine); None for inproc.
        self.inline: Inline | None = None
        # The connection's metadata for frames read from this (socket-side) end (Frame.get("User-Id")),
        # set by the engine at each handshake; None for inproc.
        self.properties: dict[str, str] | None = None

    # -- binding to an owner --------------------------------------------------------------------
    def set_owner(self, owner: Any, mailbox: Mailbox | None) -> None:
        """Hand this endpoint to ``owner``; commands for it go to ``mailbox``."""
        self.owner = owner
        self.mailbox = mailbox

    def _post(self, name: str) -> None:
        mbox = self.mailbox
        if mbox is not None:
            mbox.post(getattr(self.owner, name), self)

    # -- reading ---------------------------------------------------------------------------------
    def read(self) -> Msg | None:
        """Next message, or None when empty (the writer will then send ``activate_read``)."""
        q = self.inbound
        if q:
            msg = q.popleft()
        else:
            self.in_active = False
            if not q:
                return None
            self.in_active = True
            msg = q.popleft()
        self.msgs_read += 1
        peer = self.peer
        if not peer.out_active and peer.msgs_written - self.msgs_read <= peer.lwm:
            peer.out_active = True
            peer._post("_pipe_activate_write")
        return msg

    def read_batch(self, max_bytes: int) -> list[Msg]:
        """Messages from the front of the queue, in order, until their frames add up to ``max_bytes``
        or more, or the queue is empty (then armed like ``read``). The HWM accounting is done once for
        the batch: the writer is re-activated at most once, when the backlog is at the low-water mark."""
        q = self.inbound
        popleft = q.popleft
        msgs: list[Msg] = []
        append = msgs.append
        size = 0
        while size < max_bytes:
            if not q:
                self.in_active = False
                if not q:
                    break
                self.in_active = True
            msg = popleft()
            append(msg)
            size += len(msg[0]) if len(msg) == 1 else sum(map(len, msg))
        if msgs:
            self.msgs_read += len(msgs)
            peer = self.peer
            if not peer.out_active and peer.msgs_written - self.msgs_read <= peer.lwm:
                peer.out_active = True
                peer._post("_pipe_activate_write")
        return msgs

    def check_read(self) -> bool:
        """True if a message is waiting; otherwise arm ``activate_read`` like ``read``."""
        if self.inbound:
            return True
        self.in_active = False
        if self.inbound:
            self.in_active = True
            return True
        return False

    # -- writing ---------------------------------------------------------------------------------
    def check_write(self) -> bool:
        """True if one more message fits under the HWM; otherwise arm ``activate_write``."""
        if self.terminated or self.peer_terminated:
            return False
        hwm = self.hwm
        if hwm and self.msgs_written - self.peer.msgs_read >= hwm:
            self.out_active = False
            if self.msgs_written - self.peer.msgs_read >= hwm:
                return False
            self.out_active = True
        return True

    def write(self, msg: Msg) -> None:
        """Append a whole message to the peer's queue (visible at once; wake-up happens in flush)."""
        self.peer.inbound.append(msg)
        self.msgs_written += 1

    def write_batch(self, msgs: list[Msg]) -> int:
        """``check_write`` + ``write`` for each of ``msgs`` in order, in one step: returns how many
        were written (the rest did not fit under the HWM, which then arms ``activate_write``)."""
        if self.terminated or self.peer_terminated:
            return 0
        n = len(msgs)
        hwm = self.hwm
        if hwm:
            room = hwm - (self.msgs_written - self.peer.msgs_read)
            if room <= 0:
                if not self.check_write():  # full: arms activate_write
                    return 0
                room = 1  # the reader took one between the two looks
            if room < n:
                msgs = msgs[:room]
                n = room
        self.peer.inbound.extend(msgs)
        self.msgs_written += n
        return n

    def flush(self) -> None:
        """End of a batch: wake the reader if it went to sleep on an empty queue."""
        peer = self.peer
        if not peer.in_active:
            inline = peer.inline
            if inline is not None and inline.flush_pipe():
                return
            peer.in_active = True
            peer._post("_pipe_activate_read")

    def send(self, msg: Msg) -> bool:
        """check_write + write + flush; False (message not taken) at the HWM. The common case (room,
        reader awake) is done here in one call: it runs once per message sent."""
        peer = self.peer
        hwm = self.hwm
        if (self.terminated or self.peer_terminated or (hwm and self.msgs_written - peer.msgs_read >= hwm)
                or type(self) is not Pipe):
            if not self.check_write():
                return False
            self.write(msg)
            self.flush()
            return True
        peer.inbound.append(msg)
        self.msgs_written += 1
        if not peer.in_active:
            self.flush()
        return True

    def drop_inbound(self) -> int:
        """Discard queued inbound messages (reconnect hiccup); returns how many."""
        n = 0
        while self.read() is not None:
            n += 1
        return n

    @property
    def backlog(self) -> int:
        """Messages written by the peer and not yet read here."""
        return len(self.inbound)

    # -- termination -----------------------------------------------------------------------------
    def terminate(self) -> None:
        """Close our end; the peer's owner gets ``_pipe_terminated`` and may drain what is queued."""
        if self.terminated:
            return
        self.terminated = True
        peer = self.peer
        peer.peer_terminated = True
        peer._post("_pipe_terminated")

    def hiccup(self) -> None:
        """Tell the peer's owner the connection behind this pipe was re-established."""
        self.peer._post("_pipe_hiccuped")

    def _post_peer(self, name: str) -> None:
        """Send the peer's owner the command ``name`` (e.g. ``_pipe_identified``)."""
        self.peer._post(name)


class ConflatingPipe(Pipe):
    """A pipe endpoint whose writes replace whatever the reader has not taken yet (CONFLATE).

    No HWM applies; the reader sees at most one message (the newest). Only whole single-part
    messages make sense here, as in libzmq.
    """

    __slots__ = ()

    def write(self, msg: Msg) -> None:
        q = self.peer.inbound
        q.clear()
        q.append(msg)
        self.msgs_written += 1

    def write_batch(self, msgs: list[Msg]) -> int:
        if self.terminated or self.peer_terminated or not msgs:
            return 0
        self.write(msgs[-1])  # only the newest survives anyway
        self.msgs_written += len(msgs) - 1
        return len(msgs)


def make_conflating(a: Pipe, b: Pipe) -> None:
    """Turn a fresh pair into conflating endpoints (before either end is used)."""
    for end in (a, b):
        end.__class__ = ConflatingPipe
        end.hwm = end.lwm = 0


def pipe_pair(
    owner_a: Any, mailbox_a: Mailbox | None, hwm_a: int,
    owner_b: Any, mailbox_b: Mailbox | None, hwm_b: int,
) -> tuple[Pipe, Pipe]:
    """Two joined endpoints; ``hwm_a`` limits what A may have outstanding towards B, and vice versa."""
    a = Pipe(owner_a, mailbox_a, hwm_a)
    b = Pipe(owner_b, mailbox_b, hwm_b)
    a.peer = b
    b.peer = a
    return a, b
