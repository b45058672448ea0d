"""The send loop: pace -> stamp -> write the header -> one step -> record, for every sending worker.

What differs between workers is a ``Step`` (what is done with a stamped message: send it, send it and stamp
the ack, make a request and stamp the reply, send it and reconnect when that fails) and a ``SendRecord``
(in memory, or mapped for runs with faults); pacing is the ``Schedule`` (as fast as possible, or open loop
from intended send times). ``send_messages`` runs the loop and returns (messages handed over, error).

At full speed, with no second stamp and a header that holds the stamp, the loop hands over to one of two
full-speed variants of itself (``_full_speed``): at 100 B on two cores every ~100 ns of Python per message
shows as several percent of pyzmq's throughput (``mqbench calibrate``). For drivers that declare
``Capabilities.batch_send`` it sends from one block of messages with the per-message steps in C where the
extension is built (``_hotloop.send_stamped``); otherwise it rewrites one ``bytearray`` through typed views.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.drivers.base import DriverError
from harness.runner import _hot, _keys
from harness.runner._context import Ended, Interrupted, WorkerContext, WorkerSpec
from harness.runner._records import (
    BLOCK_BYTES,
    BLOCK_MAX_SIZE,
    HEADER,
    PROBE_ID,
    SHORT_HEADER,
    SendRecord,
)
from harness.scenario._workload import PAYLOAD_POOL

NEVER = 2**63 - 1  # the deadline of a run without one
# A send that keeps the bytes objects it is given (Capabilities.send_bytes: mqcore) gets them from a pool of
# at most SEND_POOL_BYTES and SEND_POOL_OBJECTS (more than a default high-water mark's worth of 1 KB messages),
# each rewritten in place, its header only, once the library has let it go: a message then costs the harness
# no allocation and no copy of its body (docs/harness-cost.md). Objects the library still holds when their
# turn comes are replaced by new ones, so a small pool costs only allocations.
SEND_POOL_BYTES = 1 << 21
SEND_POOL_OBJECTS = 4096
_PROBE_INTERVAL = 0.01  # seconds between a producer's probes


class Step:
    """What the loop does with one stamped message (subclasses: ``__call__``). Returns the second stamp
    (recorded when ``keeps_second``), ``-1`` for a request without a reply."""

    second = "t_ack"  # name of the second stamp in the records file
    keeps_second = False
    every = 1023  # report progress and look at the stop event every ``every + 1`` messages
    stopped = "stopped by the runner before all messages were sent"
    interrupted = "interrupted by the runner while sending (blocked after {n} messages)"
    #: The driver's own send when the full-speed loops may call it directly, and whether it copies any
    #: buffer (``Capabilities.batch_send``).
    direct: Callable[[Any], None] | None = None
    copies = False
    as_bytes = False  # with ``copies``: hand the send a bytes object per message (Capabilities.send_bytes)

    def __call__(self, buf: bytearray, seq: int, t: int) -> int:
        raise NotImplementedError

    def finish(self, timeout: float) -> None:
        """After the last message: wait until everything handed over has left."""

    def close(self) -> None:
        raise NotImplementedError


class Send(Step):
    """A producer's send; with ``acked`` (``Producer.acks_synchronously``) the ack is stamped on return."""

    def __init__(self, producer: Any, copies: bool, flushes: bool, as_bytes: bool = False) -> None:
        self.producer, self.send, self.flushes = producer, producer.send, flushes
        self.keeps_second = bool(producer.acks_synchronously)
        self.direct = None if self.keeps_second else producer.send
        self.copies, self.as_bytes = copies, as_bytes

    def __call__(self, buf: bytearray, seq: int, t: int) -> int:
        self.send(buf)
        return time.monotonic_ns() if self.keeps_second else 0

    def finish(self, timeout: float) -> None:
        if self.flushes:
            self.producer.flush(timeout)

    def close(self) -> None:
        self.producer.close()


class KeyedSend(Send):
    """A producer's send with a message key (``Producer.send_keyed``), chosen per message as
    ``harness.runner._keys`` defines: in turn or at random (the same keys in every repetition)."""

    def __init__(self, producer: Any, copies: bool, flushes: bool, distribution: str, count: int,
                 index: int) -> None:
        super().__init__(producer, copies, flushes)
        self.direct = None  # the full-speed loops send without keys
        self.send_keyed = producer.send_keyed
        self.names = [b"k%d" % i for i in range(count)]
        self.offset = index
        self.picks = _keys.random_picks(distribution, count, index)
        self.mask = _keys.PICKS - 1

    def __call__(self, buf: bytearray, seq: int, t: int) -> int:
        if self.picks is None:
            key = self.names[(seq + self.offset) % len(self.names)]
        else:
            key = self.names[self.picks[seq & self.mask]]
        self.send_keyed(buf, key)
        return time.monotonic_ns() if self.keeps_second else 0


class Request(Step):
    """A requester's round trip: the second stamp is the reply's arrival."""

    second = "t_recv"
    keeps_second = True
    every = 255
    stopped = "stopped by the runner before all requests were made"
    interrupted = "interrupted by the runner while waiting for reply {n}"

    def __init__(self, requester: Any, timeout: float) -> None:
        self.requester, self.request, self.timeout = requester, requester.request, timeout

    def __call__(self, buf: bytearray, seq: int, t: int) -> int:
        return time.monotonic_ns() if self.request(buf, self.timeout) is not None else -1

    def close(self) -> None:
        self.requester.close()


def sleep_until(deadline_ns: int) -> None:
    """Sleep most of the way, spin the last stretch: sleep() alone overshoots by ~0.1 ms."""
    mono = time.monotonic_ns
    while True:
        left = deadline_ns - mono()
        if left <= 0:
            return
        if left > 1_000_000:
            time.sleep((left - 500_000) / 1e9)
        elif left > 50_000:
            time.sleep(0)


class Profile:
    """A producer's share of a rate profile: (msgs/s, seconds) steps in turn, repeated. ``at(n)`` is the
    intended send time of message ``n`` in ns after the start: message n is due once the steps so far
    allow n messages (a step of rate 0 is a pause)."""

    def __init__(self, steps: tuple[tuple[float, float], ...]) -> None:
        rates = np.array([r for r, _ in steps], dtype=np.float64)
        seconds = np.array([s for _, s in steps], dtype=np.float64)
        counts = rates * seconds
        self.rates, self.round_msgs, self.round_s = rates, float(counts.sum()), float(seconds.sum())
        self.msgs_end = np.cumsum(counts)  # messages due by each step's end, within a round
        self.msgs_start = self.msgs_end - counts
        self.t_start = np.cumsum(seconds) - seconds

    def at(self, n: np.ndarray) -> np.ndarray:
        """Intended send offsets (ns) of messages ``n`` (an int array)."""
        rounds, within = np.divmod(n.astype(np.float64), self.round_msgs)
        step = np.searchsorted(self.msgs_end, within, side="right")
        rate = self.rates[step]
        offset = self.t_start[step] + (within - self.msgs_start[step]) / np.where(rate > 0, rate, 1.0)
        return ((rounds * self.round_s + offset) * 1e9).astype(np.int64)


@dataclass
class Schedule:
    """When a sending worker starts, how much it sends and at what pace: as fast as possible, a fixed
    ``period``, a rate ``profile``, or (a backlog case) the period until the consumers' release and then
    ``period / drain`` from the first message sent after it (``release``)."""

    t0: int  # the common start stamp
    total: int  # messages including warmup (2**32 - 1: until the deadline)
    deadline: int  # stamp at which a duration run stops (NEVER: none)
    period: float  # ns between intended sends; 0.0 = as fast as possible (or the profile's)
    profile: Profile | None = None
    drain: float = 1.0
    release: Any = None  # the shared release stamp of a backlog case (None: not one)
    switched: tuple[int, int] | None = None  # (first seq, its intended stamp) at the drain rate

    @classmethod
    def start(cls, spec: WorkerSpec, ctx: WorkerContext) -> Schedule:
        """Wait for this producer's start (the common start stamp and its phase) and return the schedule
        from it; a duration ends at the same stamp for every producer."""
        start = int(ctx.start_ns.value)
        t0 = start + spec.phase_ns
        sleep_until(t0)
        return cls(
            t0=t0,
            total=spec.total if spec.total is not None else 2**32 - 1,
            deadline=start + spec.duration_ns if spec.duration_ns is not None else NEVER,
            period=1e9 / spec.rate if spec.rate and not spec.rate_profile else 0.0,
            profile=Profile(spec.rate_profile) if spec.rate_profile else None,
            drain=spec.drain_rate,
            release=ctx.release_ns if spec.backlog else None,
        )

    @property
    def simple(self) -> bool:
        """A fixed period (or none) the whole time: the loop computes due times itself."""
        return self.profile is None and self.release is None

    def due(self, seq: int) -> int:
        """The intended send stamp of ``seq`` (paced schedules)."""
        if self.profile is not None:
            return self.t0 + int(self.profile.at(np.array([seq]))[0])
        if self.switched is not None:
            first, at = self.switched
            return at + int((seq - first) * self.period / self.drain)
        return self.t0 + int(seq * self.period)

    def released(self, seq: int) -> bool:
        """A backlog case: True once the consumers are released; from the first call that sees it, ``seq``
        on goes at the drain rate (from its intended time, or now when that passed)."""
        if self.switched is not None:
            return True
        if self.release is None or not self.release.value:
            return False
        self.switched = (seq, max(time.monotonic_ns(), self.t0 + int(seq * self.period)))
        return True

    def intended(self, n: int) -> np.ndarray:
        """Intended send stamps of the first ``n`` messages (empty at full speed)."""
        seqs = np.arange(n, dtype=np.int64)
        if self.profile is not None:
            return self.t0 + self.profile.at(seqs)
        if not self.period:
            return np.zeros(0, np.int64)
        out = (self.t0 + seqs.astype(np.float64) * self.period).astype(np.int64)
        if self.switched is not None and self.drain > 0:
            first, at = self.switched
            later = seqs >= first
            out[later] = (at + (seqs[later] - first).astype(np.float64) * self.period / self.drain).astype(np.int64)
        return out


def payload(spec: WorkerSpec) -> bytearray:
    return bytearray(os.urandom(spec.size)) if spec.payload == "random" else bytearray(spec.size)


def payloads(spec: WorkerSpec) -> list[bytearray]:
    """The bodies a producer sends, in turn (the header is written over each one's start): one, or for
    compressible payloads a pool of distinct ones (``PAYLOAD_POOL``)."""
    if spec.payload == "file":
        with open(spec.payload_file, "rb") as f:
            body = f.read() or b"\0"
        return [bytearray((body * (spec.size // len(body) + 1))[: spec.size])]
    if spec.payload == "compressible":
        return [compressible_body(spec.size, spec.compressible) for _ in range(PAYLOAD_POOL)]
    return [payload(spec)]


def compressible_body(size: int, ratio: float) -> bytearray:
    """``size`` bytes of which about ``ratio`` compresses away: in each 256-byte block, random bytes first
    and zeros after, so that any compressor's window sees the mix (one block of zeros then one of noise
    would compress the same overall but unevenly per batch)."""
    block = 256
    random_part = round(block * (1.0 - ratio))
    out = bytearray(size)
    for start in range(0, size, block):
        n = min(random_part, size - start)
        out[start:start + n] = os.urandom(n)
    return out

def probe_until_start(send: Callable[[bytearray], None], spec: WorkerSpec, ctx: WorkerContext) -> bool:
    """Until the start, send a probe every ``_PROBE_INTERVAL``: a 6-byte message, ``PROBE_ID`` and this
    producer's index. Consumers tell the parent when they have heard every producer they should and leave
    probes out of their records. Returns like ``WorkerContext.wait_start``."""
    probe = bytearray(SHORT_HEADER.pack(PROBE_ID, spec.role.index))
    while not ctx.start.is_set():
        if ctx.stop.is_set():
            return False
        send(probe)
        ctx.start.wait(_PROBE_INTERVAL)
    return not ctx.stop.is_set()


def send_messages(spec: WorkerSpec, ctx: WorkerContext, step: Step, record: SendRecord) -> tuple[int, Schedule, str]:
    """Send from the common start until the count or the deadline, the stop event or an interruption.
    Returns (messages handed over, the schedule, error: "" when none); the record holds their stamps."""
    pool = payloads(spec)
    buf, rounds = pool[0], len(pool)
    pid, slot, progress, stop = spec.role.index, spec.slot, ctx.progress, ctx.stop
    schedule = Schedule.start(spec, ctx)
    total = schedule.total if record.growable else min(schedule.total, record.capacity)
    t0, deadline, period = schedule.t0, schedule.deadline, schedule.period
    simple, due = schedule.simple, schedule.due
    released = schedule.released if schedule.release is not None else None
    pack = HEADER.pack_into if spec.size >= HEADER.size else None
    seq = record.start
    error = ""
    try:
        if (step.direct is not None and not period and simple and rounds == 1 and pack is not None
                and record.growable and sys.byteorder == "little"):
            seq, error = _full_speed(step, buf, pid, total, deadline, record, progress, slot, stop)
            total = seq  # the general loop below has nothing left to do
        mono, pack_short = time.monotonic_ns, SHORT_HEADER.pack_into
        every = step.every if released is None else min(step.every, 63)  # the parent counts the backlog
        t_send, t_second, cap = record.t_send, record.t_second, record.capacity
        t = 0
        try:
            while seq < total:
                if seq == cap:  # duration runs only: grow the buffers
                    cap = record.grow()
                    t_send, t_second = record.t_send, record.t_second
                if released is not None and released(seq):  # the backlog's consumers were released
                    released = None
                    if schedule.drain <= 0:
                        break  # drain_rate 0: the producers stop while the backlog drains
                if not simple:
                    sleep_until(due(seq))
                elif period:
                    sleep_until(t0 + int(seq * period))
                t = mono()
                if t >= deadline:
                    break
                if rounds > 1:
                    buf = pool[seq % rounds]
                if pack is not None:
                    pack(buf, 0, pid, seq, t)
                else:
                    pack_short(buf, 0, pid, seq)
                second = step(buf, seq, t)
                t_send[seq] = t
                if t_second is not None:
                    t_second[seq] = second
                seq += 1
                if not seq & every:
                    progress[slot] = seq
                    if stop.is_set():
                        error = step.stopped
                        break
        except Ended:  # after the message the step was given
            t_send[seq] = t  # that message is recorded (the step logged it as a send error)
            seq += 1
        progress[slot] = seq
        step.finish(spec.request_timeout * 4)
    except DriverError as exc:
        error = str(exc)
        seq = max(seq, record.written())  # a send that failed inside a full-speed batch: its record is kept
    except Interrupted:
        seq = record.written()
        error = step.interrupted.format(n=seq)
    return seq, schedule, error


def _full_speed(
    step: Step, buf: bytearray, pid: int, total: int, deadline: int, record: SendRecord, progress: Any, slot: int,
    stop: Any,
) -> tuple[int, str]:
    """The loop without pacing or a second stamp, into ``record.t_send`` (replaced by an int64 array of the
    stamps also when interrupted: the stamps taken so far are what gets saved)."""
    send = step.direct
    assert send is not None
    blocks = step.copies and len(buf) <= BLOCK_MAX_SIZE
    stamps: Any = np.zeros(record.capacity, np.int64) if blocks else [0] * record.capacity
    box = [stamps]
    try:
        if blocks:
            return _send_blocks(send, buf, pid, total, deadline, box, progress, slot, stop, step.stopped,
                                step.as_bytes)
        return _send_rewritten(send, buf, pid, total, deadline, box, progress, slot, stop, step.stopped)
    finally:
        record.t_send = np.asarray(box[0], dtype=np.int64)
        record.capacity = len(record.t_send)


def _send_rewritten(
    send: Callable[[Any], None], buf: bytearray, pid: int, total: int, deadline: int, box: list[Any],
    progress: Any, slot: int, stop: Any, stopped: str,
) -> tuple[int, str]:
    """For drivers that need a ``bytearray`` and for messages over ``BLOCK_MAX_SIZE``. The producer id is
    written once; per message the sequence number and the stamp go into the header through typed views of
    the buffer (two stores instead of a ``pack_into`` call) and the stamp into a list in the same statement
    (storing the clock's int object costs less than converting it into an array slot). The list grows
    between chunks of 1024, never inside one."""
    mono = time.monotonic_ns
    t_send: list[int] = box[0]
    HEADER.pack_into(buf, 0, pid, 0, 0)
    view = memoryview(buf)
    seq_at = view[2:6].cast("I")
    stamp_at = view[6:14].cast("q")
    try:
        for base in range(0, total, 1024):
            end = min(base + 1024, total)
            if end > len(t_send):
                t_send.extend([0] * len(t_send))
            for seq in range(base, end):
                t = mono()
                if t >= deadline:
                    progress[slot] = seq
                    return seq, ""
                stamp_at[0] = t_send[seq] = t
                seq_at[0] = seq
                send(buf)
            progress[slot] = end
            if stop.is_set():
                return end, stopped
        return total, ""
    finally:
        seq_at.release()
        stamp_at.release()
        view.release()


def block_messages(size: int, pooled: bool) -> int:
    """Messages per block (and batch) of the full-speed sender at ``size`` bytes. A batch's own work (numpy
    over the block, the record, the stop and progress) cost 27 ns a message in batches of 256 (1 KB), about
    four times what it costs in 1,024. The block stays in the L2 cache where the library reads each message
    from it; a pooled sender reads only its headers (and a body when it makes a new object), so its block may
    be four times as large (1,024 messages up to 1 KB; at most 1 MiB a producer, beside its pool)."""
    return max(1, min(1024, (4 * BLOCK_BYTES if pooled else BLOCK_BYTES) // size))


def pool_objects(size: int) -> int:
    """``bytes`` objects in the pool of a sender whose library keeps them (``SEND_POOL_BYTES``)."""
    return min(SEND_POOL_OBJECTS, max(1, SEND_POOL_BYTES // size))


def distinct_messages(size: int, keeps_buffers: bool) -> int:
    """How many distinct message buffers the full-speed sender hands a library in turn at ``size`` bytes:
    the slots of its block to a library that copies what it is given, its pool's objects to one that keeps
    them (mqcore's ``bytes``; the JVM worker's arrays, a new one a message, which such a pool bounds). A bare
    loop sends as many (harness/calibrate.py): what it is measured against differs from the harness in the
    stamping and recording only, not in how many buffers the library's messages spread over."""
    if keeps_buffers:
        return pool_objects(size)
    return block_messages(size, pooled=False) if size <= BLOCK_MAX_SIZE else 1


def _send_blocks(
    send: Callable[[Any], None], payload: bytearray, pid: int, total: int, deadline: int, box: list[Any],
    progress: Any, slot: int, stop: Any, stopped: str, as_bytes: bool = False,
) -> tuple[int, str]:
    """For drivers whose ``send`` copies any buffer: per message only the clock read, one store of the stamp
    into the header and the send.

    The messages live in one block of ``k`` copies of the payload (header fields at fixed offsets). Before
    each batch of ``k`` messages numpy writes all ``k`` sequence numbers and zeroes the stamps; the loop
    then stamps and sends each slot; after the batch numpy copies the ``k`` stamps out of the headers into
    ``box[0]``. A stamp that is still zero marks a message not handed over (the deadline passed first), so
    the record is exact also when a batch ends early. When a send raises (the runner interrupting a blocked
    send, a driver error) the stamps of the batch so far are recorded before the exception goes on, the
    failed message's included: the caller counts the record's leading stamps. With the C extension built,
    ``send_stamped`` runs each batch; the Python loop below is the fallback. ``as_bytes``: the send gets a
    ``bytes`` object of each stamped message (``Capabilities.send_bytes``), made in C by ``send_stamped``,
    which recycles them through a pool (``SEND_POOL_BYTES``): the messages differ only in their header."""
    size = len(payload)
    hot = _hot.send_stamped
    pooled = hot is not None and as_bytes
    k = block_messages(size, pooled)
    block = bytearray(bytes(payload) * k)
    rows = np.frombuffer(
        block,
        dtype=np.dtype({"names": ["producer", "seq", "stamp"], "formats": ["<u2", "<u4", "<i8"],
                        "offsets": [0, 2, 6], "itemsize": size}),
    )
    rows["producer"] = pid
    seqs, stamps = rows["seq"], rows["stamp"]
    view = memoryview(block)
    msgs = [view[i * size:(i + 1) * size] for i in range(k)]
    pool = [None] * pool_objects(size) if pooled else None
    slots = [] if hot is not None else [(msgs[i], view[i * size + 6:i * size + 14].cast("q")) for i in range(k)]
    steps = np.arange(k, dtype=np.uint32)
    mono = time.monotonic_ns
    sent = n = 0
    try:
        while sent < total:
            n = n_batch = min(k, total - sent)
            if sent + n > len(box[0]):  # duration runs outgrow their estimate
                grown = np.zeros(max(sent + n, 2 * len(box[0])), np.int64)
                grown[: len(box[0])] = box[0]
                box[0] = grown
            seqs[:] = steps + sent
            stamps[:] = 0
            if hot is not None:
                hot(send, msgs, block, size, 6, n, deadline, as_bytes, pool, sent)
            else:
                for msg, stamp_at in slots if n == k else slots[:n]:
                    t = mono()
                    if t >= deadline:
                        break
                    stamp_at[0] = t
                    send(bytes(msg) if as_bytes else msg)
            done = n if stamps[n - 1] else int(np.count_nonzero(stamps[:n]))
            box[0][sent:sent + done] = stamps[:done]
            n = 0  # before ``sent`` moves on: an interruption from here on finds this batch recorded
            sent += done
            progress[slot] = sent
            if done < n_batch:  # the deadline passed
                return sent, ""
            if stop.is_set():
                return sent, stopped
        return sent, ""
    finally:
        if n:  # interrupted inside a batch: keep the stamps of the messages handed over
            done = int(np.count_nonzero(stamps[:n]))
            box[0][sent:sent + done] = stamps[:done]

