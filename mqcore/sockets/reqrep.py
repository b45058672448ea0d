"""REQ, REP and ROUTER.

ROUTER names each pipe by the peer's routing id (from its READY ``Identity``) or, when the peer sent
none, by an automatic 5-byte id: 0x00 followed by a 32-bit counter starting at a random value (as in
libzmq). A pipe is identified when its id becomes known (``identified`` command) or, at the latest,
when its first message is read. A duplicate id is refused unless ROUTER_HANDOVER is set.
Unroutable sends are dropped, or raise EHOSTUNREACH with ROUTER_MANDATORY (EAGAIN when the peer is at
its HWM).

REQ prepends an empty delimiter (after a 4-byte request id with REQ_CORRELATE), load-balances the request, and accepts the reply only from the pipe
the request went to. REP strips the envelope (frames up to and including the empty delimiter) and
puts it back on the reply. Single-threaded: each instance belongs to its socket's thread.
"""

from __future__ import annotations

import struct

from mqcore._random import RNG
from mqcore.constants import Errno
from mqcore.error import ZMQError
from mqcore.options import Options
from mqcore.pipe import Msg, Pipe
from mqcore.routing import FairQueue, LoadBalancer
from mqcore.sockets.base import SocketImpl

_DELIMITER: Msg = [b""]  # the envelope of a request that came straight from a REQ (never mutated)


class Router(SocketImpl):
    name = "ROUTER"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.fq = FairQueue()
        self.read_activated = self.fq.activated  # type: ignore[method-assign]  # one call less
        self.out: dict[bytes, Pipe] = {}
        self.next_id = RNG.getrandbits(32)

    def _new_id(self) -> bytes:
        while True:
            rid = b"\x00" + struct.pack(">I", self.next_id)
            self.next_id = (self.next_id + 1) & 0xFFFFFFFF
            if rid not in self.out:
                return rid

    def _identify(self, pipe: Pipe) -> bool:
        """Give ``pipe`` its routing id; False if it was refused (duplicate id)."""
        if pipe.routing_id is not None:
            return True
        rid = pipe.peer_routing_id or self._new_id()
        old = self.out.get(rid)
        if old is not None:
            if not self.options.router_handover:
                pipe.terminate()
                self.fq.remove(pipe)
                return False
            old.routing_id = None
            old.terminate()
            self.fq.remove(old)
        pipe.routing_id = rid
        self.out[rid] = pipe
        return True

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)
        if pipe.peer_routing_id is not None:
            self._identify(pipe)

    def identified(self, pipe: Pipe) -> None:
        if pipe in self.fq and pipe.routing_id is None:
            self._identify(pipe)

    def terminated(self, pipe: Pipe) -> None:
        rid = pipe.routing_id
        if rid is not None and self.out.get(rid) is pipe:
            del self.out[rid]
        self.fq.terminated(pipe)

    def xsend(self, msg: Msg) -> bool:
        rid = msg[0]
        pipe = self.out.get(rid)
        if pipe is None or pipe.peer_terminated:
            if self.options.router_mandatory:
                raise ZMQError(Errno.EHOSTUNREACH)
            return True  # silently dropped, as in libzmq
        if len(msg) < 2:
            return True
        if not pipe.check_write():
            return not self.options.router_mandatory  # drop unless mandatory (then EAGAIN)
        pipe.write(msg[1:])
        pipe.flush()
        return True

    def xrecv(self) -> Msg | None:
        fq = self.fq
        while True:
            msg = fq.recv()
            if msg is None:
                return None
            pipe = fq.last_pipe
            assert pipe is not None
            if pipe.routing_id is None and not self._identify(pipe):
                continue
            msg.insert(0, pipe.routing_id)  # type: ignore[arg-type]
            return msg

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        # A message for the peer behind the direct path's pipe: its frames after the routing id. Any
        # other id (unknown: dropped or EHOSTUNREACH) and a routing id alone are xsend's to decide.
        if len(msg) < 2 or self.out.get(msg[0]) is not pipe:
            return None
        return msg[1:]

    def xrecv_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        # From an identified peer: its routing id first, as xrecv gives it.
        rid = pipe.routing_id
        if rid is None:
            return None
        self.fq.last_pipe = pipe
        return [rid, *msg]

    def has_in(self) -> bool:
        return self.fq.has_in()

    def has_out(self) -> bool:
        return True


class Rep(SocketImpl):
    name = "REP"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.fq = FairQueue()
        self.read_activated = self.fq.activated  # type: ignore[method-assign]  # one call less
        self.envelope: Msg | None = None
        self.reply_pipe: Pipe | None = None

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)

    def check_send_start(self) -> None:
        if self.envelope is None:
            raise ZMQError(Errno.EFSM)

    def xsend(self, msg: Msg) -> bool:
        envelope = self.envelope
        if envelope is None:
            raise ZMQError(Errno.EFSM)
        pipe = self.reply_pipe
        self.envelope = self.reply_pipe = None
        if pipe is not None and pipe.check_write():  # a vanished or full requester loses the reply
            pipe.write(envelope + msg)
            pipe.flush()
        return True

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        envelope = self.envelope
        if envelope is None:
            raise ZMQError(Errno.EFSM)
        if self.reply_pipe is not pipe:
            return None
        self.envelope = self.reply_pipe = None
        return envelope + msg

    def xrecv_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        # A request straight from a REQ (the delimiter, one frame), while no reply is owed.
        if len(msg) != 2 or msg[0] or self.envelope is not None:
            return None
        self.envelope = _DELIMITER
        self.reply_pipe = self.fq.last_pipe = pipe
        return [msg[1]]

    def xrecv(self) -> Msg | None:
        if self.envelope is not None:
            raise ZMQError(Errno.EFSM)
        fq = self.fq
        while True:
            msg = fq.recv()
            if msg is None:
                return None
            if not msg[0]:  # straight from a REQ: the delimiter alone is the envelope
                self.envelope = _DELIMITER
                self.reply_pipe = fq.last_pipe
                del msg[0]
                return msg
            for i, frame in enumerate(msg):
                if not frame:
                    self.envelope = msg[: i + 1]
                    self.reply_pipe = fq.last_pipe
                    return msg[i + 1:]
            # no delimiter: malformed request, dropped

    def has_in(self) -> bool:
        return self.envelope is None and self.fq.has_in()

    def has_out(self) -> bool:
        return self.envelope is not None


class Req(SocketImpl):
    name = "REQ"

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        self.fq = FairQueue()
        self.read_activated = self.fq.activated  # type: ignore[method-assign]  # one call less
        self.reply_pipe: Pipe | None = None
        self.expecting_reply = False
        self.request_id = RNG.getrandbits(32)

    def attach(self, pipe: Pipe) -> None:
        self.lb.attach(pipe)
        self.fq.attach(pipe)

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.lb.remove(pipe)
        self.fq.terminated(pipe)
        if pipe is self.reply_pipe and self.options.req_relaxed:
            self.reply_pipe = None
            self.expecting_reply = False

    def check_send_start(self) -> None:
        if self.expecting_reply and not self.options.req_relaxed:
            raise ZMQError(Errno.EFSM)

    def xsend(self, msg: Msg) -> bool:
        options = self.options
        if self.expecting_reply and not options.req_relaxed:
            raise ZMQError(Errno.EFSM)
        if options.req_correlate:
            # REQ_CORRELATE: a request id frame before the delimiter; only its reply is accepted
            self.request_id = (self.request_id + 1) & 0xFFFFFFFF
            envelope = [struct.pack("=I", self.request_id), b""]
            msg[0:0] = envelope
        else:
            envelope = _DELIMITER
            msg.insert(0, b"")
        pipe = self.lb.send(msg)
        if pipe is None:
            del msg[: len(envelope)]
            return False
        self.reply_pipe = pipe
        self.expecting_reply = True
        return True

    def xsend_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        options = self.options
        lb = self.lb
        if options.req_correlate or lb.active != 1 or lb.pipes[0] is not pipe:  # LoadBalancer.only, in line
            return None
        if self.expecting_reply and not options.req_relaxed:
            raise ZMQError(Errno.EFSM)
        self.reply_pipe = pipe
        self.expecting_reply = True
        return [b"", *msg]

    def xrecv_direct(self, msg: Msg, pipe: Pipe) -> Msg | None:
        # The usual reply (the delimiter, one frame) on the pipe the request went to.
        if len(msg) != 2 or msg[0] or pipe is not self.reply_pipe or self.options.req_correlate:
            return None
        self.expecting_reply = False
        self.reply_pipe = None
        self.fq.last_pipe = pipe
        return [msg[1]]

    def xrecv(self) -> Msg | None:
        if not self.expecting_reply:
            raise ZMQError(Errno.EFSM)
        fq = self.fq
        while True:
            msg = fq.recv()
            if msg is None:
                return None
            if fq.last_pipe is not self.reply_pipe:
                continue  # a reply to an older request (REQ_RELAXED): dropped
            if len(msg) == 2 and not msg[0] and not self.options.req_correlate:  # the usual reply
                self.expecting_reply = False
                self.reply_pipe = None
                del msg[0]
                return msg
            if self.options.req_correlate:
                if len(msg) < 3 or msg[0] != struct.pack("=I", self.request_id) or msg[1]:
                    continue  # not the reply to the current request id
                del msg[0]
            if len(msg) < 2 or msg[0]:
                continue  # malformed: dropped
            self.expecting_reply = False
            self.reply_pipe = None
            del msg[0]
            return msg

    def has_in(self) -> bool:
        return self.expecting_reply and self.fq.has_in()

    def has_out(self) -> bool:
        return (not self.expecting_reply or bool(self.options.req_relaxed)) and self.lb.has_out()
