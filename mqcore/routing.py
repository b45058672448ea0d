"""Routing strategies over pipes: LoadBalancer (PUSH/DEALER/REQ), FairQueue (PULL/DEALER/SUB/ROUTER/
REP/REQ) and Distributor (PUB; SUB's subscriptions upstream).

Owned by one socket's thread. LoadBalancer and FairQueue keep the libzmq layout: one list whose first
``active`` entries are the pipes that can currently write/read; a pipe that fails is swapped behind
them and comes back on ``activated`` (an activate_write/activate_read command). Activation is
idempotent, so stale or spurious commands are harmless. Messages are whole (lists of frames), so
rotation happens per message.
"""

from __future__ import annotations

from mqcore.pipe import Msg, Pipe


class _PipeSet:
    __slots__ = ("pipes", "active", "current")

    def __init__(self) -> None:
        self.pipes: list[Pipe] = []
        self.active = 0
        self.current = 0

    def _swap(self, i: int, j: int) -> None:
        p = self.pipes
        p[i], p[j] = p[j], p[i]

    def attach(self, pipe: Pipe) -> None:
        """Add ``pipe`` as active."""
        self.pipes.append(pipe)
        self._swap(self.active, len(self.pipes) - 1)
        self.active += 1

    def activated(self, pipe: Pipe) -> None:
        """``pipe`` can be used again (no-op if unknown or already active)."""
        try:
            i = self.pipes.index(pipe)
        except ValueError:
            return
        if i >= self.active:
            self._swap(i, self.active)
            self.active += 1

    def _deactivate_current(self) -> None:
        self.active -= 1
        self._swap(self.current, self.active)
        if self.current >= self.active:
            self.current = 0

    def remove(self, pipe: Pipe) -> None:
        """Forget ``pipe`` entirely."""
        try:
            i = self.pipes.index(pipe)
        except ValueError:
            return
        if i < self.active:
            self.active -= 1
            self._swap(i, self.active)
            i = self.active
        self._swap(i, len(self.pipes) - 1)
        self.pipes.pop()
        if self.current >= self.active:
            self.current = 0

    def __contains__(self, pipe: Pipe) -> bool:
        return pipe in self.pipes


class LoadBalancer(_PipeSet):
    """Round-robin over pipes that are below their HWM."""

    def send(self, msg: Msg) -> Pipe | None:
        """Write ``msg`` to the next writable pipe; None if every pipe is full (EAGAIN)."""
        while self.active:
            pipe = self.pipes[self.current]
            if pipe.send(msg):
                self.current += 1
                if self.current >= self.active:
                    self.current = 0
                return pipe
            self._deactivate_current()
        return None

    def only(self, pipe: Pipe) -> bool:
        """True if ``pipe`` is the one pipe and it is active (a send would go there)."""
        return self.active == 1 and self.pipes[0] is pipe

    def has_out(self) -> bool:
        while self.active:
            if self.pipes[self.current].check_write():
                return True
            self._deactivate_current()
        return False


class FairQueue(_PipeSet):
    """Round-robin over pipes with queued messages; ``last_pipe`` is where the last message came from."""

    __slots__ = ("last_pipe",)

    def __init__(self) -> None:
        super().__init__()
        self.last_pipe: Pipe | None = None

    def recv(self) -> Msg | None:
        """Next message in fair order, or None when nothing is queued (EAGAIN)."""
        if self.active == 1:
            # One peer: ``Pipe.read``'s common cases in line (this runs once per message received).
            pipe = self.pipes[0]
            q = pipe.inbound
            if q:
                if pipe.peer.out_active:  # no writer waiting for room
                    head = q.popleft()
                    pipe.msgs_read += 1
                    self.last_pipe = pipe
                    return head
            elif not pipe.peer_terminated:
                # Empty: armed for activate_read as by ``Pipe.read``, but left active (one pipe needs
                # no rotation), so that its activation after the wait moves nothing.
                pipe.in_active = False
                if not q:
                    return None
                pipe.in_active = True
        while self.active:
            pipe = self.pipes[self.current]
            msg = pipe.read()
            if msg is not None:
                self.last_pipe = pipe
                if self.active > 1:
                    self.current += 1
                    if self.current >= self.active:
                        self.current = 0
                return msg
            if pipe.peer_terminated:
                self.remove(pipe)
            else:
                self._deactivate_current()
        return None

    def has_in(self) -> bool:
        while self.active:
            pipe = self.pipes[self.current]
            if pipe.check_read():
                return True
            if pipe.peer_terminated:
                self.remove(pipe)
            else:
                self._deactivate_current()
        return False

    def terminated(self, pipe: Pipe) -> None:
        """The peer closed ``pipe``: keep it until what it queued is read, then drop it."""
        if pipe.inbound:
            self.activated(pipe)
        else:
            self.remove(pipe)


class Distributor:
    """Send one message to many pipes; a pipe at its HWM misses the message (PUB semantics)."""

    __slots__ = ("pipes",)

    def __init__(self) -> None:
        self.pipes: list[Pipe] = []

    def attach(self, pipe: Pipe) -> None:
        self.pipes.append(pipe)

    def remove(self, pipe: Pipe) -> None:
        try:
            self.pipes.remove(pipe)
        except ValueError:
            pass

    @staticmethod
    def send_to(pipes: list[Pipe], msg: Msg) -> int:
        """Write ``msg`` to each pipe with room (each gets its own frame list); returns how many took it."""
        sent = 0
        last = len(pipes) - 1
        for i, pipe in enumerate(pipes):
            if pipe.check_write():
                pipe.write(msg if i == last else list(msg))
                pipe.flush()
                sent += 1
        return sent

    def send_to_all(self, msg: Msg) -> int:
        return self.send_to(self.pipes, msg)
