"""Worker processes: one per producer, consumer, requester or replier.

Each worker owns its clock stamps (``time.monotonic_ns``, shared by all processes of one host) and keeps
them in preallocated buffers (``array('q')``, or a list of ints in the hottest loops, converted at the end);
recording costs a few attribute-free operations per message so that it limits what is measured as little as
Python allows (``mqbench calibrate`` measures how little). At full speed the per-message steps of the zmq and
mqcore loops run in C where the extension is built (``_hotloop.c``: the same clock, the same driver calls). At the end a worker saves its arrays to
``<out>.npz`` (temp name + rename) and reports on the status queue. SIGINT is ignored here: the parent handles Ctrl-C and stops workers.

Protocol with the parent (all objects from one multiprocessing context):
  status.put(("ready", name)) -> parent sets ``start`` once every worker is ready and writes the common
  start stamp into ``start_ns`` -> producers pace from it -> status.put(("done", name, count, error)) ->
  parent sets ``stop`` when consumers have what they should get (or the run stalled) -> workers close.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time
import traceback
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.drivers import load_class
from harness.drivers.base import BrokerEndpoint, DriverError, Role

# The per-message loops in C (setup.py builds them where a compiler is available); MQBENCH_PYTHON_LOOPS=1
# makes the runner use the Python loops anyway, to compare the two (docs/harness-cost.md).
recv_stamped: Callable[..., int] | None = None
send_stamped: Callable[..., int] | None = None
_PYTHON_LOOPS_FORCED = os.environ.get("MQBENCH_PYTHON_LOOPS", "") not in ("", "0")
if not _PYTHON_LOOPS_FORCED:
    try:
        from harness.runner import _hotloop
    except ImportError:  # pragma: no cover - the tests force the Python loops by patching these names
        pass
    else:
        recv_stamped, send_stamped = _hotloop.recv_stamped, _hotloop.send_stamped

#: Which per-message loops this process runs: recorded in every run's manifest.
HOT_LOOPS = (
    "C" if send_stamped is not None
    else "Python (MQBENCH_PYTHON_LOOPS is set)" if _PYTHON_LOOPS_FORCED
    else "Python (harness/runner/_hotloop.c is not built)"
)

HEADER = struct.Struct("<HIq")  # producer id, sequence number, send stamp (ns)
SHORT_HEADER = struct.Struct("<HI")  # for messages shorter than HEADER
PROBE_ID = 0xFFFF  # producer id of probes (scenarios allow at most 65535 producers: ids 0..65534)
_PROBE_PREFIX = PROBE_ID.to_bytes(2, "little")
_PROBE_INTERVAL = 0.01  # seconds between a producer's probes
_HEADER_DTYPE = np.dtype([("producer", "<u2"), ("seq", "<u4")])


@dataclass(frozen=True)
class WorkerSpec:
    kind: str  # "producer" | "consumer" | "requester" | "replier"
    name: str  # e.g. "producer-0"
    slot: int  # index into the shared progress array
    system: str
    driver: str  # "module:Class", imported as is in the worker (no registry lookup there)
    options: dict[str, Any]
    broker: BrokerEndpoint | None
    plan: dict[str, Any]
    role: Role
    size: int
    payload: str  # "random" | "fixed"
    total: int | None  # messages to send including warmup (None: until the deadline)
    duration_ns: int | None
    rate: float | None  # this producer's msgs/s; None = as fast as possible
    capacity: int  # records to preallocate
    out: str  # path prefix of the records file
    request_timeout: float = 5.0
    consumer_rate: float | None = None  # a slow consumer: msgs/s it handles at most (pause after the stamp)
    resilient: bool = False  # runs with faults: mapped records, reconnects (harness.runner._resilient)
    # Slow-joiner handshake (Driver.slow_joiner, pub/sub): a producer sends probes until the start; a consumer
    # reports ("subscribed", name) once it has heard one from each producer listed here.
    probe: bool = False
    probe_from: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class Interrupted(BaseException):
    """Raised in a worker by SIGUSR1: the parent wants it to save what it has and stop, even mid-send."""


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted


def _leading_stamps(stamps: array | np.ndarray) -> int:
    """How many stamps were written: they are positive and written in order into a zeroed buffer."""
    arr = np.frombuffer(stamps, dtype=np.int64)
    zero = np.flatnonzero(arr == 0)
    return int(zero[0]) if zero.size else int(arr.size)


def worker_main(spec: WorkerSpec, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    """Entry point of every worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, _interrupt)
    try:
        driver = load_class(spec.driver)(spec.options, spec.broker)
        if getattr(driver, "runs_in_jvm", False):  # Java clients: this process relays to the JVM worker
            from harness.runner.jvm import relay

            relay(spec, driver, status, start, stop, start_ns, progress)
            return
        body = {"producer": _producer, "consumer": _consumer, "requester": _requester, "replier": _replier}
        if spec.resilient:
            from harness.runner import _resilient

            body.update(producer=_resilient.producer, consumer=_resilient.consumer)
        body[spec.kind](spec, driver, status, start, stop, start_ns, progress)
    except DriverError as exc:
        status.put(("error", spec.name, str(exc)))
    except Interrupted:
        status.put(("error", spec.name, "stopped by the runner before it was ready"))
    except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then exit
        detail = traceback.format_exc(limit=6)
        status.put(("error", spec.name, f"{type(exc).__name__}: {exc}\n{detail}"))


def _wait_start(start: Any, stop: Any) -> bool:
    while not start.wait(0.1):
        if stop.is_set():
            return False
    return not stop.is_set()


def _probe_until_start(send: Callable[[bytearray], None], spec: WorkerSpec, start: Any, stop: Any) -> bool:
    """Until the start, send a probe every ``_PROBE_INTERVAL``: a 6-byte message, ``PROBE_ID`` and this
    producer's index. Consumers tell the parent when they have heard every producer they should
    (``_await_probes``) and leave probes out of their records. Returns like ``_wait_start``."""
    probe = bytearray(SHORT_HEADER.pack(PROBE_ID, spec.role.index))
    while not start.is_set():
        if stop.is_set():
            return False
        send(probe)
        start.wait(_PROBE_INTERVAL)
    return not stop.is_set()


def _await_probes(
    recv: Callable[[], bytes], timed_out: type[BaseException], spec: WorkerSpec, status: Any, start: Any,
    stop: Any, record: Callable[[bytes, int], None],
) -> bool:
    """A consumer until the start: receive, and report ``("subscribed", name)`` once a probe from each of
    ``spec.probe_from`` has arrived. A message that is not a probe can only arrive once the start is set and
    before this loop has seen it: it is recorded like any other. Returns like ``_wait_start``."""
    missing = set(spec.probe_from)
    reported = False
    mono = time.monotonic_ns
    while not start.is_set():
        if stop.is_set():
            return False
        try:
            msg = recv()
        except timed_out:
            continue
        t = mono()
        if msg[:2] == _PROBE_PREFIX and len(msg) >= SHORT_HEADER.size:
            missing.discard(SHORT_HEADER.unpack_from(msg)[1])
            if not missing and not reported:
                status.put(("subscribed", spec.name))
                reported = True
        else:
            record(msg, t)
    return not stop.is_set()


def _payload(spec: WorkerSpec) -> bytearray:
    if spec.payload == "random":
        return bytearray(os.urandom(spec.size))
    return bytearray(spec.size)


def _save(path: str, **arrays: Any) -> None:
    tmp = f"{path}.tmp.npz"
    np.savez(tmp, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
    os.replace(tmp, f"{path}.npz")


def _sleep_until(deadline_ns: int) -> None:
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


@dataclass(frozen=True)
class _Schedule:
    """When a sending worker starts, how much it sends and at what pace (shared by producer and requester)."""

    t0: int  # the common start stamp
    total: int  # messages including warmup (2**32 - 1: until the deadline)
    deadline: int | None  # stamp at which a duration run stops
    period: float  # ns between intended sends; 0.0 = as fast as possible

    @classmethod
    def start(cls, spec: WorkerSpec, start_ns: Any) -> _Schedule:
        """Wait for the common start stamp and return the schedule from it."""
        t0 = int(start_ns.value)
        _sleep_until(t0)
        return cls(
            t0=t0,
            total=spec.total if spec.total is not None else 2**32 - 1,
            deadline=t0 + spec.duration_ns if spec.duration_ns is not None else None,
            period=1e9 / spec.rate if spec.rate else 0.0,
        )

    def intended(self, n: int) -> np.ndarray:
        """Intended send stamps of the first ``n`` messages (empty at full speed)."""
        if not self.period:
            return np.zeros(0, np.int64)
        return (self.t0 + np.arange(n, dtype=np.float64) * self.period).astype(np.int64)


def _header_writers(spec: WorkerSpec) -> tuple[Callable[..., None] | None, Callable[..., None]]:
    """(full header writer or None when the message is too short for the stamp, short header writer)."""
    return (HEADER.pack_into if spec.size >= HEADER.size else None), SHORT_HEADER.pack_into


def _hold_until_stop(stop: Any) -> None:
    """Keep the connection open until the consumers are done: closing now could drop queued messages."""
    try:
        while not stop.wait(0.2):
            pass
    except Interrupted:
        pass


def _producer(spec: WorkerSpec, driver: Any, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    producer = driver.create_producer(spec.plan, spec.role)
    status.put(("ready", spec.name))
    if not (_probe_until_start(producer.send, spec, start, stop) if spec.probe else _wait_start(start, stop)):
        producer.close()
        return
    buf = _payload(spec)
    pid = spec.role.index
    cap = spec.capacity
    t_send = array("q", bytes(8 * cap))
    t_ack = array("q", bytes(8 * cap)) if producer.acks_synchronously else None
    schedule = _Schedule.start(spec, start_ns)
    t0, total, deadline, period = schedule.t0, schedule.total, schedule.deadline, schedule.period
    mono = time.monotonic_ns
    send = producer.send
    pack, pack_short = _header_writers(spec)
    error = ""
    seq = 0
    try:
        if not period and t_ack is None and pack is not None and sys.byteorder == "little":
            end = deadline if deadline is not None else _NEVER
            if producer.copies_buffers and spec.size <= _BLOCK_MAX_SIZE:
                record = _SendRecord(np.zeros(cap, np.int64))
                try:
                    seq, error = _blast_block(total, end, send, buf, pid, record, progress, spec.slot, stop)
                finally:  # also when interrupted: the stamps taken so far are what gets saved
                    t_send = record.stamps  # type: ignore[assignment]
                    cap = len(t_send)
            else:
                stamps = [0] * cap
                try:
                    seq, error = _blast(total, end, send, buf, pid, stamps, progress, spec.slot, stop)
                finally:  # also when interrupted: the stamps taken so far are what gets saved
                    t_send = array("q", stamps)
                    cap = len(t_send)
                    del stamps
            total = seq  # the general loop below has nothing left to do
        while seq < total:
            if seq == cap:  # duration runs only: grow the buffers
                t_send.extend(bytes(8 * cap))
                if t_ack is not None:
                    t_ack.extend(bytes(8 * cap))
                cap *= 2
            if period:
                _sleep_until(t0 + int(seq * period))
            t = mono()
            if deadline is not None and t >= deadline:
                break
            if pack is not None:
                pack(buf, 0, pid, seq, t)
            else:
                pack_short(buf, 0, pid, seq)
            send(buf)
            t_send[seq] = t
            if t_ack is not None:
                t_ack[seq] = mono()
            seq += 1
            if not seq & 1023:
                progress[spec.slot] = seq
                if stop.is_set():
                    error = "stopped by the runner before all messages were sent"
                    break
        progress[spec.slot] = seq
        producer.flush(spec.request_timeout * 4)
    except DriverError as exc:
        error = str(exc)
        seq = max(seq, _leading_stamps(t_send))  # a send that failed inside a blast: its record is kept
    except Interrupted:
        seq = _leading_stamps(t_send)
        error = f"interrupted by the runner while sending (blocked after {seq} messages)"
    n = seq
    _save(
        spec.out,
        t_send=np.frombuffer(t_send, dtype=np.int64, count=n),
        t_ack=np.frombuffer(t_ack, dtype=np.int64, count=n) if t_ack is not None else np.zeros(0, np.int64),
        t_intended=schedule.intended(n),
    )
    status.put(("done", spec.name, n, error))
    _hold_until_stop(stop)
    producer.close()


def _recorder(
    capacity_hint: int, rate: float | None = None, report: Callable[[int], None] | None = None
) -> tuple[Callable[[bytes], None], list[int], bytearray, list[int]]:
    """The consumer's per-message callback: one stamp and the 6 header bytes, appended; nothing parsed.

    Defaults bind everything the callback touches, so each message costs two C calls and a slice.
    Messages shorter than a header are counted as foreign and dropped. With ``rate`` (a slow consumer) the
    callback then pauses so that at most ``rate`` messages per second are handled, and passes the count to
    ``report`` every 64 messages (a slow consumer may stay inside one ``poll`` for seconds).
    """
    t_recv: list[int] = []  # a list: appending the clock's int object is cheaper than an array('q') slot
    headers = bytearray()
    foreign = [0]
    size = SHORT_HEADER.size
    if rate:
        from harness.runner._resilient import pacer

        pace = pacer(rate)
        assert pace is not None

        def on_slow_message(payload: bytes) -> None:
            t = time.monotonic_ns()
            if len(payload) >= size:
                headers.extend(payload[:size])
                t_recv.append(t)
                if report is not None and not len(t_recv) & 63:
                    report(len(t_recv))
            else:
                foreign[0] += 1
            pace(t)

        return on_slow_message, t_recv, headers, foreign

    def on_message(
        payload: bytes, stamp: Callable[[int], None] = t_recv.append, keep: Callable[[bytes], None] = headers.extend,
        mono: Callable[[], int] = time.monotonic_ns, size: int = size,
    ) -> None:
        t = mono()
        if len(payload) >= size:
            keep(payload[:size])  # header before stamp, as in _record_batch
            stamp(t)
        else:
            foreign[0] += 1

    return on_message, t_recv, headers, foreign


_NEVER = 2**63 - 1


def _blast(
    total: int, deadline: int, send: Callable[[bytearray], None], buf: bytearray, pid: int, t_send: list[int],
    progress: Any, slot: int, stop: Any,
) -> tuple[int, str]:
    """Full speed, no acks, no schedule, for drivers that need a ``bytearray`` and for messages over
    ``_BLOCK_MAX_SIZE`` (``_blast_block`` serves the rest); a count, a deadline (``_NEVER`` for none) or
    both. ``t_send`` is preallocated and grows between chunks of 1024, never inside one.

    The producer id is written once; per message the sequence number and the stamp go into the header
    through typed views of the buffer (two stores instead of a ``pack_into`` call) and the stamp into
    ``t_send`` in the same statement. ``t_send`` is a list: storing the clock's int object costs less than
    converting it into an ``array('q')`` slot (the caller converts once at the end). At 100 B on two cores
    every ~100 ns of Python per message here shows as several percent of pyzmq's throughput (``mqbench
    calibrate``), hence these measures and the two copies of the loop."""
    mono = time.monotonic_ns
    HEADER.pack_into(buf, 0, pid, 0, 0)
    view = memoryview(buf)
    seq_at = view[2:6].cast("I")
    stamp_at = view[6:14].cast("q")
    try:
        for base in range(0, total, 1024):
            end = min(base + 1024, total)
            if end > len(t_send):
                t_send.extend([0] * len(t_send))
            if deadline == _NEVER:
                for seq in range(base, end):
                    stamp_at[0] = t_send[seq] = mono()
                    seq_at[0] = seq
                    send(buf)
            else:
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
                return end, "stopped by the runner before all messages were sent"
        return total, ""
    finally:
        seq_at.release()
        stamp_at.release()
        view.release()


_BLOCK_MAX_SIZE = 4096  # larger messages: per-message Python work is small next to copying the payload
_BLOCK_BYTES = 1 << 18  # a block of messages that stays in the L2 cache


@dataclass
class _SendRecord:
    """The send stamps of a full-speed run: a zeroed int64 array that ``_blast_block`` fills and grows."""

    stamps: np.ndarray

    def room(self, end: int) -> None:
        """Make ``stamps`` hold at least ``end`` entries (duration runs outgrow their estimate)."""
        if end > len(self.stamps):
            grown = np.zeros(max(end, 2 * len(self.stamps)), np.int64)
            grown[: len(self.stamps)] = self.stamps
            self.stamps = grown


def _blast_block(
    total: int, deadline: int, send: Callable[[memoryview], None], payload: bytearray, pid: int,
    record: _SendRecord, progress: Any, slot: int, stop: Any,
) -> tuple[int, str]:
    """``_blast`` for drivers whose ``send`` copies any buffer (``Producer.copies_buffers``): per message
    only the clock read, one store of the stamp into the header and the send.

    The messages live in one block of ``k`` copies of the payload (header fields at fixed offsets). Before
    each batch of ``k`` messages numpy writes all ``k`` sequence numbers and zeroes the stamps; the loop
    then stamps and sends each slot (a memoryview of it, plus a typed view of its stamp field); after the
    batch numpy copies the ``k`` stamps out of the headers into ``record``. A stamp that is still zero
    marks a message not handed over (the deadline passed first), so the record is exact also when a batch
    ends early. When a send raises (the runner interrupting a blocked send, a driver error) the stamps of
    the batch so far are recorded before the exception goes on, the failed message's included: the caller
    counts the record's leading stamps. With the C extension built, ``send_stamped`` runs each batch (the
    same steps, without the bytecode around them); the Python loops below are the fallback. Returns
    (messages sent, error)."""
    size = len(payload)
    k = max(1, min(1024, _BLOCK_BYTES // size))
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
    hot = send_stamped
    slots = [] if hot is not None else [(msgs[i], view[i * size + 6:i * size + 14].cast("q")) for i in range(k)]
    steps = np.arange(k, dtype=np.uint32)
    mono = time.monotonic_ns
    sent = n = 0
    try:
        while sent < total:
            n = n_batch = min(k, total - sent)
            record.room(sent + n)
            seqs[:] = steps + sent
            stamps[:] = 0
            if hot is not None:
                hot(send, msgs, block, size, 6, n, deadline)
            elif deadline == _NEVER:
                for msg, stamp_at in slots if n == k else slots[:n]:
                    stamp_at[0] = mono()
                    send(msg)
            else:
                for msg, stamp_at in slots if n == k else slots[:n]:
                    t = mono()
                    if t >= deadline:
                        break
                    stamp_at[0] = t
                    send(msg)
            done = n if stamps[n - 1] else int(np.count_nonzero(stamps[:n]))
            record.stamps[sent:sent + done] = stamps[:done]
            n = 0  # before ``sent`` moves on: an interruption from here on finds this batch recorded
            sent += done
            progress[slot] = sent
            if done < n_batch:  # the deadline passed
                return sent, ""
            if stop.is_set():
                return sent, "stopped by the runner before all messages were sent"
        return sent, ""
    finally:
        if n:  # interrupted inside a batch: keep the stamps of the messages handed over
            done = int(np.count_nonzero(stamps[:n]))
            record.stamps[sent:sent + done] = stamps[:done]


def _receive_loop(
    recv: Callable[[], bytes], timed_out: type[BaseException], stop: Any, progress: Any, slot: int,
    t_recv: list[int], headers: bytearray, foreign: list[int], size: int,
) -> None:
    """The consumer's loop for pull-style drivers (``Consumer.receiver``): what ``_recorder``'s callback
    does, in batches. Per message only the receive, the clock read and two stores into lists reused from
    batch to batch; the headers of a batch are cut out by ``_record_batch`` at once. A batch ends after
    ``k`` messages or a receive timeout. Interrupted by the runner, the batch is recorded up to the message
    being received (one that was received and stamped just before the interruption may be left out). With
    the C extension built, ``recv_stamped`` runs each batch and the Python loop is the fallback."""
    k = max(1, min(1024, _BLOCK_BYTES // max(size, 1)))
    mono = time.monotonic_ns
    batch: list[Any] = [None] * k
    stamps = [0] * k
    hot = recv_stamped
    hot_stamps = np.zeros(k, np.int64)
    while not stop.is_set():
        n = 0
        try:
            if hot is not None:  # the C loop: it ends the batch itself when a receive times out
                hot_stamps[:] = 0
                n = hot(recv, timed_out, batch, hot_stamps, k)
            else:
                for n in range(k):  # n: messages of this batch so far, also when a receive times out
                    batch[n] = recv()
                    stamps[n] = mono()
                n = k
        except timed_out:
            pass
        finally:
            if hot is not None:
                if not n:  # interrupted inside the C loop: every message it stored has its stamp
                    n = _leading_stamps(hot_stamps)
                got = hot_stamps[:n].tolist()
            else:
                got = stamps[:n]
            _record_batch(batch[:n], got, size, t_recv, headers, foreign)
        progress[slot] = len(t_recv)


def _record_batch(
    batch: list[bytes], stamps: list[int], size: int, t_recv: list[int], headers: bytearray, foreign: list[int]
) -> None:
    """Append the receive stamps and the 6 header bytes of a batch; messages shorter than a header are
    counted as foreign, probes (``PROBE_ID``) left out. When every message has the run's size (the normal case) numpy cuts the headers out
    of the joined batch; otherwise message by message. A message without a stamp (the receive was
    interrupted between the two) is left out, as the callback path would."""
    hsize = SHORT_HEADER.size
    del batch[len(stamps):]
    if not batch:
        return
    if hsize <= size <= _BLOCK_MAX_SIZE and set(map(len, batch)) == {size}:
        rows = np.frombuffer(b"".join(batch), np.uint8).reshape(len(batch), size)
        if size == hsize:  # probes are 6 bytes long: only here can one be in a batch of the run's size
            keep = (rows[:, 0] != 0xFF) | (rows[:, 1] != 0xFF)  # not PROBE_ID (little-endian)
            if not keep.all():
                headers += rows[keep, :hsize].tobytes()
                t_recv += [t for t, k in zip(stamps, keep.tolist(), strict=True) if k]
                return
        headers += rows[:, :hsize].tobytes()
        t_recv += stamps
        return
    for payload, t in zip(batch, stamps, strict=True):
        if payload[:2] == _PROBE_PREFIX:
            continue
        if len(payload) >= hsize:
            headers += payload[:hsize]  # headers first: an interruption between the two leaves a spare header,
            t_recv.append(t)  # which the consumer ignores, never a stamp without one
        else:
            foreign[0] += 1


def _consumer(spec: WorkerSpec, driver: Any, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    consumer = driver.create_consumer(spec.plan, spec.role)
    def report(n: int) -> None:
        progress[spec.slot] = n

    on_message, t_recv, headers, foreign = _recorder(spec.capacity, spec.consumer_rate, report)
    consumer.start(on_message)
    pull = consumer.receiver(0.05) if spec.consumer_rate is None else None
    status.put(("ready", spec.name))
    try:
        if spec.probe_from:
            if pull is None:
                raise DriverError(f"{spec.system}: the slow-joiner handshake needs a pull-style consumer "
                                  "(Consumer.receiver)")
            recv, timed_out = pull
            started = _await_probes(
                recv, timed_out, spec, status, start, stop,
                lambda msg, t: _record_batch([msg], [t], spec.size, t_recv, headers, foreign),
            )
        else:
            started = _wait_start(start, stop)
        if started:
            if pull is not None:
                recv, timed_out = pull
                _receive_loop(recv, timed_out, stop, progress, spec.slot, t_recv, headers, foreign, spec.size)
            else:
                poll = consumer.poll
                while not stop.is_set():
                    poll(0.05)
                    progress[spec.slot] = len(t_recv)
    except Interrupted:
        pass
    consumer.close()
    n = len(t_recv)
    parsed = np.frombuffer(bytes(headers[: n * SHORT_HEADER.size]), dtype=_HEADER_DTYPE, count=n)
    _save(
        spec.out,
        t_recv=np.array(t_recv, dtype=np.int64),
        producer=parsed["producer"],
        seq=parsed["seq"],
    )
    bad = foreign[0]
    status.put(("done", spec.name, n, f"{bad} foreign messages ignored" if bad else ""))


def _requester(spec: WorkerSpec, driver: Any, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    requester = driver.create_requester(spec.plan, spec.role)
    status.put(("ready", spec.name))
    if not _wait_start(start, stop):
        requester.close()
        return
    buf = _payload(spec)
    pid = spec.role.index
    cap = spec.capacity
    t_send = array("q", bytes(8 * cap))
    t_recv = array("q", bytes(8 * cap))
    schedule = _Schedule.start(spec, start_ns)
    t0, total, deadline, period = schedule.t0, schedule.total, schedule.deadline, schedule.period
    mono = time.monotonic_ns
    request = requester.request
    pack, pack_short = _header_writers(spec)
    timeout = spec.request_timeout
    error = ""
    seq = 0
    try:
        while seq < total:
            if seq == cap:
                t_send.extend(bytes(8 * cap))
                t_recv.extend(bytes(8 * cap))
                cap *= 2
            if period:
                _sleep_until(t0 + int(seq * period))
            t = mono()
            if deadline is not None and t >= deadline:
                break
            if pack is not None:
                pack(buf, 0, pid, seq, t)
            else:
                pack_short(buf, 0, pid, seq)
            reply = request(buf, timeout)
            t_recv[seq] = mono() if reply is not None else -1
            t_send[seq] = t
            seq += 1
            if not seq & 255:
                progress[spec.slot] = seq
                if stop.is_set():
                    error = "stopped by the runner before all requests were made"
                    break
        progress[spec.slot] = seq
    except DriverError as exc:
        error = str(exc)
    except Interrupted:
        seq = _leading_stamps(t_send)
        error = f"interrupted by the runner while waiting for reply {seq}"
    n = seq
    _save(
        spec.out,
        t_send=np.frombuffer(t_send, dtype=np.int64, count=n),
        t_recv=np.frombuffer(t_recv, dtype=np.int64, count=n),
        t_intended=schedule.intended(n),
    )
    status.put(("done", spec.name, n, error))
    _hold_until_stop(stop)
    requester.close()


def _replier(spec: WorkerSpec, driver: Any, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    replier = driver.create_replier(spec.plan, spec.role)
    replier.start()
    status.put(("ready", spec.name))
    served = 0
    try:
        if _wait_start(start, stop):
            while not stop.is_set():
                served += replier.poll(0.05)
                progress[spec.slot] = served
    except Interrupted:
        pass
    replier.close()
    _save(spec.out, served=np.array([served], dtype=np.int64))
    status.put(("done", spec.name, served, ""))
