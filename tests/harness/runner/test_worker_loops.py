"""The workers' hot loops, in process: what the block sender puts on the wire and in its record, and what
the batched receiver records, including the edges (deadline, interruption, stop, odd sizes, foreign
messages). Every test runs twice: with the C loops (harness/runner/_hotloop.c) and with the Python loops
that replace them where the extension is not built."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from harness.drivers.base import Role
from harness.runner import _hot, _send
from harness.runner._context import Interrupted, WorkerContext, WorkerSpec
from harness.runner._records import BLOCK_MAX_SIZE as _BLOCK_MAX_SIZE
from harness.runner._records import HEADER, PROBE_ID, Receipts, leading_stamps
from harness.runner._send import NEVER as _NEVER
from harness.runner._send import _send_blocks, probe_until_start
from harness.runner.worker import _pull_batches, await_probes
from tests.harness.runner.hotloop_support import require_hotloop


@pytest.fixture(autouse=True, params=["C", "Python"])
def loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "Python":
        monkeypatch.setattr(_hot, "send_stamped", None)
        monkeypatch.setattr(_hot, "recv_headers", None)
    else:
        require_hotloop()
    return str(request.param)


class _Timeout(Exception):
    pass


class _Flag:
    def __init__(self, value: bool = False) -> None:
        self.value = value

    def is_set(self) -> bool:
        return self.value


class _Wire:
    """A send that copies what it is handed, like pyzmq with copy=True."""

    def __init__(self, fail_at: int | None = None, exc: type[BaseException] = Interrupted) -> None:
        self.sent: list[bytes] = []
        self.fail_at = fail_at
        self.exc = exc

    def __call__(self, msg: Any) -> None:
        if self.fail_at is not None and len(self.sent) == self.fail_at:
            raise self.exc
        self.sent.append(bytes(msg))


class _Record:
    """The stamps a block sender filled (it replaces a list's only item as it grows the array)."""

    def __init__(self, capacity: int) -> None:
        self.box: list[Any] = [np.zeros(capacity, np.int64)]

    @property
    def stamps(self) -> np.ndarray:
        return np.asarray(self.box[0])


_STOPPED = "stopped by the runner before all messages were sent"


def _blast_block(total: int, deadline: int, wire: _Wire, payload: bytearray, pid: int, record: _Record,
                 progress: list[int], stop: _Flag) -> tuple[int, str]:
    return _send_blocks(wire, payload, pid, total, deadline, record.box, progress, 0, stop, _STOPPED)


def _blast(total: int, size: int, *, deadline: int = _NEVER, wire: _Wire | None = None, stop: bool = False,
           capacity: int = 16) -> tuple[int, str, _Wire, _Record, list[int]]:
    wire = wire or _Wire()
    payload = bytearray(range(256)) * (size // 256 + 1)
    record = _Record(capacity)
    progress = [0]
    n, error = _blast_block(total, deadline, wire, bytearray(payload[:size]), 7, record, progress, _Flag(stop))
    return n, error, wire, record, progress


@pytest.mark.parametrize("size", [HEADER.size, 100, 1000, _BLOCK_MAX_SIZE])
@pytest.mark.parametrize("total", [1, 1023, 1024, 2500])
def test_block_sender_puts_header_and_record_in_step(size: int, total: int) -> None:
    before = time.monotonic_ns()
    n, error, wire, record, progress = _blast(total, size)
    after = time.monotonic_ns()
    assert (n, error, progress[0]) == (total, "", total)
    assert len(wire.sent) == total
    assert all(len(m) == size for m in wire.sent)
    headers = [HEADER.unpack_from(m) for m in wire.sent]
    assert [h[0] for h in headers] == [7] * total
    assert [h[1] for h in headers] == list(range(total))
    stamps = record.stamps[:n]
    assert [h[2] for h in headers] == stamps.tolist()  # the stamp on the wire is the one recorded
    assert stamps[0] >= before and stamps[-1] <= after and bool(np.all(np.diff(stamps) >= 0))
    assert leading_stamps(record.stamps) == total  # nothing recorded beyond what was sent
    payload = bytearray(range(256)) * (size // 256 + 1)
    assert all(m[HEADER.size:] == payload[HEADER.size:size] for m in wire.sent)  # the payload is kept


def test_block_sender_hands_bytes_to_a_send_that_wants_them(loops: str) -> None:
    """``Capabilities.send_bytes`` (mqcore): each message arrives as its own bytes object, stamped, the same
    messages as the views the other drivers get."""
    got: list[Any] = []
    payload = bytearray(range(100))
    record = _Record(16)
    n, error = _send_blocks(got.append, payload, 7, 300, _NEVER, record.box, [0], 0, _Flag(False), _STOPPED, True)
    assert (n, error) == (300, "") and all(type(m) is bytes for m in got)
    assert [HEADER.unpack_from(m)[1:] for m in got] == list(zip(range(300), record.stamps[:300].tolist(), strict=True))
    assert all(m[HEADER.size:] == payload[HEADER.size:] for m in got)


def test_block_sender_stops_at_the_deadline_with_an_exact_record(monkeypatch: pytest.MonkeyPatch, loops: str) -> None:
    """A clock that advances 1 us per read: the deadline falls inside the second batch, at message 1500.
    (The C loop reads the system clock itself: the test after this one covers it.)"""
    if loops == "C":
        pytest.skip("a fake clock reaches only the Python loop")
    base = 10**12
    reads = [0]

    def clock() -> int:
        reads[0] += 1
        return base + 1000 * reads[0]

    monkeypatch.setattr(_send.time, "monotonic_ns", clock)
    deadline = base + 1000 * 1500 + 1  # message j is stamped base + 1000 * (j + 1): 0..1499 are before it
    n, error, wire, record, progress = _blast(10**6, 100, deadline=deadline)
    monkeypatch.undo()
    assert (n, error, progress[0]) == (1500, "", 1500)
    assert len(wire.sent) == 1500
    assert record.stamps[:n].tolist() == [base + 1000 * (j + 1) for j in range(1500)]
    assert [HEADER.unpack_from(m)[2] for m in wire.sent] == record.stamps[:n].tolist()
    assert leading_stamps(record.stamps) == 1500


def test_block_sender_stops_at_a_real_deadline_with_an_exact_record() -> None:
    """Message 1500's send waits until the deadline has passed: 1501 messages were handed over (stamped before
    the deadline), none after, and the record holds exactly their stamps. The deadline is a whole second
    after the start, far more than 1500 sends to a list take on a loaded machine."""
    deadline = time.monotonic_ns() + 1_000_000_000

    class SlowWire(_Wire):
        def __call__(self, msg: Any) -> None:
            super().__call__(msg)
            if len(self.sent) == 1501:
                while time.monotonic_ns() <= deadline:
                    time.sleep(0.001)

    n, error, wire, record, progress = _blast(10**6, 100, deadline=deadline, wire=SlowWire())
    assert (n, error, progress[0]) == (1501, "", 1501)
    assert len(wire.sent) == 1501 and leading_stamps(record.stamps) == 1501
    assert [HEADER.unpack_from(m)[2] for m in wire.sent] == record.stamps[:n].tolist()
    assert int(record.stamps[n - 1]) < deadline


def test_block_sender_keeps_the_stamps_of_a_batch_it_was_interrupted_in() -> None:
    with pytest.raises(Interrupted):
        _blast(5000, 100, wire=_Wire(fail_at=1500))
    # the record of the batch cut short survives the interruption: 1500 sent, the 1501st was being sent
    wire = _Wire(fail_at=1500)
    record = _Record(16)
    with pytest.raises(Interrupted):
        _blast_block(5000, _NEVER, wire, bytearray(100), 1, record, [0], _Flag())
    assert leading_stamps(record.stamps) == 1501
    assert [HEADER.unpack_from(m)[2] for m in wire.sent] == record.stamps[:1500].tolist()


def test_block_sender_ends_after_the_batch_when_told_to_stop() -> None:
    n, error, wire, _, _ = _blast(5000, 100, stop=True)
    assert n == len(wire.sent) == 1024
    assert error == "stopped by the runner before all messages were sent"


def test_block_sender_passes_driver_errors_on_with_the_record_kept() -> None:
    class Boom(Exception):
        pass

    record = _Record(4)
    wire = _Wire(fail_at=10, exc=Boom)
    with pytest.raises(Boom):
        _blast_block(100, _NEVER, wire, bytearray(100), 1, record, [0], _Flag())
    assert len(wire.sent) == 10 and leading_stamps(record.stamps) == 11


def _header(pid: int, seq: int, size: int) -> bytes:
    return HEADER.pack(pid, seq, 0)[:6] + bytes(size - 6)


def _record_batch(batch: list[bytes], stamps: list[int], size: int) -> Receipts:
    receipts = Receipts("", 0, mapped_files=False)
    receipts.add_batch(batch, stamps, size)
    return receipts


def _received(batch: list[bytes], size: int) -> Receipts:
    """What the receive loop records of ``batch`` arriving at once, then a receive timeout and the stop: the
    C loop or the Python one, as the fixture chose."""
    queue = list(batch)
    stop = _Flag()

    def recv() -> bytes:
        if not queue:
            stop.value = True
            raise _Timeout
        return queue.pop(0)

    receipts = Receipts("", 0, mapped_files=False)
    _pull_batches((recv, _Timeout), _spec(size=size), _ctx(stop=stop), receipts)
    assert all(a <= b for a, b in zip(receipts.t_recv, receipts.t_recv[1:], strict=False))
    return receipts


def test_receiver_batch_of_run_sized_messages() -> None:
    batch = [_header(3, i, 100) for i in range(50)]
    r = _received(batch, 100)
    assert len(r.t_recv) == 50 and r.foreign == 0
    assert bytes(r.headers) == b"".join(m[:6] for m in batch)


def test_receiver_batch_with_foreign_and_odd_sized_messages() -> None:
    batch = [_header(1, 0, 100), b"xy", _header(1, 1, 40), b"", _header(1, 2, 100)]
    r = _received(batch, 100)
    assert len(r.t_recv) == 3 and r.foreign == 2
    assert bytes(r.headers) == _header(1, 0, 100)[:6] + _header(1, 1, 40)[:6] + _header(1, 2, 100)[:6]


# 6 B: probes have the run's size (the numpy path); otherwise the batch is mixed (the one-by-one path)
@pytest.mark.parametrize("size", [6, 100, _BLOCK_MAX_SIZE * 2])
def test_receiver_batch_leaves_probes_out(size: int) -> None:
    """Probes still in flight at the start (the slow-joiner handshake) are neither messages nor foreign."""
    batch = [_header(0, 0, size), _header(PROBE_ID, 1, 6), _header(0, 1, size), _header(PROBE_ID, 0, 6)]
    r = _received(batch, size)
    assert len(r.t_recv) == 2 and r.foreign == 0
    assert bytes(r.headers) == _header(0, 0, size)[:6] + _header(0, 1, size)[:6]


def _spec(**fields: Any) -> WorkerSpec:
    base: dict[str, Any] = dict(
        kind="consumer", name="consumer-0", slot=0, system="zmq", driver="x:Y", options={}, broker=None, plan={},
        role=Role(0, 0), size=100, payload="fixed", total=None, duration_ns=None, rate=None, capacity=16, out="",
    )
    return WorkerSpec(**{**base, **fields})


def _ctx(**fields: Any) -> WorkerContext:
    base: dict[str, Any] = dict(status=None, start=_Flag(), stop=_Flag(), start_ns=None, progress=[0])
    return WorkerContext(**{**base, **fields})


def test_probing_producer_sends_probes_until_the_start() -> None:
    sent: list[bytes] = []
    start = _Flag()

    class Start:
        def is_set(self) -> bool:
            return start.value

        def wait(self, timeout: float) -> bool:
            start.value = len(sent) >= 3  # the parent starts the run after the third probe
            return start.value

    assert probe_until_start(lambda m: sent.append(bytes(m)), _spec(kind="producer", role=Role(5, 0)),
                             _ctx(start=Start()))
    assert sent == [_header(PROBE_ID, 5, 6)] * 3  # 6 bytes whatever the run's size


def test_consumer_reports_once_every_producer_was_heard_and_keeps_a_message_that_beat_the_start() -> None:
    start, stop = _Flag(), _Flag()
    arrivals: list[bytes | None] = [_header(PROBE_ID, 0, 6), None, _header(PROBE_ID, 0, 6),
                                    _header(PROBE_ID, 2, 6), _header(PROBE_ID, 2, 6), _header(2, 0, 100)]
    status: list[tuple[str, str]] = []

    def recv() -> bytes:
        item = arrivals.pop(0)
        if not arrivals:
            start.value = True  # the run started while the last message was on its way
        if item is None:
            raise _Timeout
        return item

    class Status:
        def put(self, item: tuple[str, str]) -> None:
            status.append(item)

    receipts = Receipts("", 0, mapped_files=False)
    ok = await_probes((recv, _Timeout), _spec(probe_from=(0, 2)), _ctx(status=Status(), start=start, stop=stop),
                      receipts)
    assert ok and status == [("subscribed", "consumer-0")]  # once, after producers 0 and 2 were heard
    assert bytes(receipts.headers) == _header(2, 0, 100)[:6] and len(receipts.t_recv) == 1


def test_consumer_waiting_for_probes_gives_up_when_stopped() -> None:
    def recv() -> bytes:
        raise _Timeout

    assert not await_probes((recv, _Timeout), _spec(probe_from=(0,)), _ctx(stop=_Flag(True)),
                            Receipts("", 0, mapped_files=False))


def test_receiver_batch_drops_a_message_received_but_not_stamped(loops: str) -> None:
    if loops == "C":
        pytest.skip("the C loop stamps a message before it keeps anything of it")
    batch = [_header(2, i, 20) for i in range(3)]
    r = Receipts("", 0, mapped_files=False)
    r.add_batch(batch, [5, 6], 20)
    assert list(r.t_recv) == [5, 6] and bytes(r.headers) == b"".join(m[:6] for m in batch[:2])


def test_receiver_batch_of_large_messages_is_recorded_one_by_one() -> None:
    size = _BLOCK_MAX_SIZE * 2
    batch = [_header(4, i, size) for i in range(3)]
    r = _received(batch, size)
    assert len(r.t_recv) == 3 and bytes(r.headers) == b"".join(m[:6] for m in batch)


def test_receive_loop_records_every_message_across_batches_and_timeouts() -> None:
    """3000 messages arrive in bursts separated by receive timeouts; the loop ends when told to stop."""
    bursts = [1500, 1, 0, 1499]  # first burst spans a batch boundary at 100 B (1024 per batch)
    queue: list[bytes | None] = []
    seq = 0
    for b in bursts:
        for _ in range(b):
            queue.append(_header(9, seq, 100))
            seq += 1
        queue.append(None)  # a timeout
    stop = _Flag()

    def recv() -> bytes:
        if not queue:
            stop.value = True
            raise _Timeout
        item = queue.pop(0)
        if item is None:
            raise _Timeout
        return item

    r = Receipts("", 0, mapped_files=False)
    ctx = _ctx(stop=stop)
    _pull_batches((recv, _Timeout), _spec(size=100), ctx, r)
    assert len(r.t_recv) == 3000 and ctx.progress[0] == 3000 and r.foreign == 0
    assert bytes(r.headers) == b"".join(_header(9, i, 100)[:6] for i in range(3000))
    assert all(a <= b for a, b in zip(r.t_recv, r.t_recv[1:], strict=False))


def test_receive_loop_keeps_the_batch_it_was_interrupted_in() -> None:
    sent = [0]

    def recv() -> bytes:
        if sent[0] == 700:
            raise Interrupted
        sent[0] += 1
        return _header(1, sent[0] - 1, 50)

    r = Receipts("", 0, mapped_files=False)
    with pytest.raises(Interrupted):
        _pull_batches((recv, _Timeout), _spec(size=50), _ctx(), r)
    assert len(r.t_recv) == 700 and bytes(r.headers) == b"".join(_header(1, i, 50)[:6] for i in range(700))


# -- the general send loop with each step, and the mapped records of runs with faults --------------------


class _Value:
    def __init__(self, value: int) -> None:
        self.value = value


class _Producer:
    """A producer that copies what it is handed; ``fail_at``: the sends (counted from 0) that raise."""

    def __init__(self, acks: bool = False, fail_at: tuple[int, ...] = ()) -> None:
        self.acks_synchronously = acks
        self.sent: list[bytes] = []
        self.fail_at, self.calls, self.closed = fail_at, 0, False

    def send(self, payload: Any) -> None:
        self.calls += 1
        if self.calls - 1 in self.fail_at:
            raise ConnectionError("broker gone")
        self.sent.append(bytes(payload))

    def flush(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _sender(tmp_path: Any, **fields: Any) -> tuple[WorkerSpec, WorkerContext]:
    base: dict[str, Any] = dict(kind="producer", name="producer-0", role=Role(3, 0), out=str(tmp_path / "producer-0"))
    spec = _spec(**{**base, **fields})
    return spec, _ctx(start_ns=_Value(time.monotonic_ns()))


def test_paced_send_loop_stamps_each_message_and_its_ack_after_its_intended_time(tmp_path: Any) -> None:
    from harness.runner._records import SendRecord
    from harness.runner._send import Send, send_messages

    spec, ctx = _sender(tmp_path, total=20, rate=2000.0, capacity=8)  # the record grows past 8
    producer = _Producer(acks=True)
    step = Send(producer, copies=False, flushes=True)
    record = SendRecord(spec.out, spec.capacity, step.second, step.keeps_second, mapped_files=False)
    n, schedule, error = send_messages(spec, ctx, step, record)
    record.save(n, schedule.intended(n))
    assert (n, error, ctx.progress[0]) == (20, "", 20)
    with np.load(f"{spec.out}.npz") as saved:
        t_send, t_ack, t_intended = saved["t_send"], saved["t_ack"], saved["t_intended"]
    assert [HEADER.unpack_from(m)[:2] for m in producer.sent] == [(3, i) for i in range(20)]
    assert [HEADER.unpack_from(m)[2] for m in producer.sent] == t_send.tolist()
    assert bool(np.all(t_ack >= t_send)) and bool(np.all(t_send >= t_intended))
    assert t_intended.tolist() == [schedule.t0 + i * 500_000 for i in range(20)]


def test_request_loop_records_the_reply_stamp_or_minus_one(tmp_path: Any) -> None:
    from harness.runner._records import SendRecord
    from harness.runner._send import Request, send_messages

    class Requester:
        def request(self, payload: Any, timeout: float) -> bytes | None:
            seq = HEADER.unpack_from(payload)[1]
            return None if seq % 3 == 2 else bytes(payload)

        def close(self) -> None:
            pass

    spec, ctx = _sender(tmp_path, kind="requester", total=9)
    step = Request(Requester(), 1.0)
    record = SendRecord(spec.out, spec.capacity, step.second, step.keeps_second, mapped_files=False)
    n, _, error = send_messages(spec, ctx, step, record)
    assert (n, error) == (9, "")
    t_send = np.frombuffer(record.t_send, np.int64, count=n)
    t_recv = np.frombuffer(record.t_second, np.int64, count=n)
    assert [int(t) for t in t_recv[2::3]] == [-1, -1, -1]
    assert bool(np.all(np.delete(t_recv, [2, 5, 8]) >= np.delete(t_send, [2, 5, 8])))


def test_reconnecting_send_logs_the_failed_send_and_continues_on_a_new_producer(tmp_path: Any) -> None:
    from harness.runner._records import SendRecord, read_errors
    from harness.runner._resilient import ReconnectingSend
    from harness.runner._send import send_messages

    made: list[_Producer] = []

    def make() -> _Producer:
        made.append(_Producer(fail_at=(4,) if not made else ()))
        return made[-1]

    spec, ctx = _sender(tmp_path, total=10, capacity=10, resilient=True)
    step = ReconnectingSend(make, True, spec, ctx)
    record = SendRecord(spec.out, spec.capacity, step.second, step.keeps_second, mapped_files=True)
    n, _, error = send_messages(spec, ctx, step, record)
    record.save(n, np.zeros(0, np.int64))
    step.close()
    assert (n, error, len(made)) == (10, "", 2)
    assert [HEADER.unpack_from(m)[1] for m in made[0].sent] == [0, 1, 2, 3]
    assert [HEADER.unpack_from(m)[1] for m in made[1].sent] == [5, 6, 7, 8, 9]
    with np.load(f"{spec.out}.npz") as saved:
        t_send = saved["t_send"]
    errors = read_errors(spec.out)
    assert errors[:, 0].tolist() == [4] and errors[0, 1] == t_send[4]  # the failed send keeps its stamp
    # a worker started in this one's place continues its record
    again = SendRecord(spec.out, 20, "t_ack", False, mapped_files=True)
    assert again.start == 10


def test_mapped_receipts_survive_the_worker_and_count_surplus_as_foreign(tmp_path: Any) -> None:
    from harness.runner._records import finalize

    out = str(tmp_path / "consumer-0")
    reports: list[int] = []
    receipts = Receipts(out, 3, mapped_files=True)
    on_message = receipts.callback(None, reports.append)
    for i in range(4):
        on_message(_header(1, i, 20))
    on_message(b"xy")
    assert receipts.count() == 3 and receipts.note() == "2 foreign or surplus messages ignored"
    finalize("consumer", out)  # as after a SIGKILL: from the mapped files alone
    with np.load(f"{out}.npz") as saved:
        assert saved["seq"].tolist() == [0, 1, 2] and saved["producer"].tolist() == [1, 1, 1]
        assert bool(np.all(saved["t_recv"] > 0))
    assert Receipts(out, 6, mapped_files=True).count() == 3  # a restarted consumer continues after them
