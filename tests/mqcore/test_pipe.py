"""Pipe protocol: batching (one wake-up per batch), HWM/LWM, delayed termination."""

from __future__ import annotations

from typing import Any

from mqcore.pipe import Pipe, lwm_for, make_conflating, pipe_pair


class Recorder:
    """A fake owner + mailbox that records the commands a pipe sends."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, Pipe]] = []

    def post(self, fn: Any, *args: Any) -> None:
        self.commands.append((fn.__name__, *args))

    def _pipe_activate_read(self, pipe: Pipe) -> None: ...
    def _pipe_activate_write(self, pipe: Pipe) -> None: ...
    def _pipe_terminated(self, pipe: Pipe) -> None: ...
    def _pipe_hiccuped(self, pipe: Pipe) -> None: ...


def make(hwm_a: int = 0, hwm_b: int = 0) -> tuple[Pipe, Pipe, Recorder, Recorder]:
    ra, rb = Recorder(), Recorder()
    a, b = pipe_pair(ra, ra, hwm_a, rb, rb, hwm_b)  # type: ignore[arg-type]
    return a, b, ra, rb


def test_messages_flow_in_order_both_ways() -> None:
    a, b, _, _ = make()
    for i in range(5):
        assert a.send([b"%d" % i])
    b.send([b"back"])
    assert [b.read() for _ in range(5)] == [[b"%d" % i] for i in range(5)]
    assert a.read() == [b"back"]
    assert b.read() is None


def test_reader_is_woken_once_per_batch_and_only_when_asleep() -> None:
    a, b, _, rb = make()
    a.send([b"1"])  # reader awake: no command
    assert rb.commands == []
    assert b.read() == [b"1"]
    assert b.read() is None  # reader goes to sleep
    for i in range(100):
        a.write([b"%d" % i])
    a.flush()
    a.flush()
    assert rb.commands == [("_pipe_activate_read", b)]
    assert len([m for m in iter(b.read, None)]) == 100


def test_check_read_arms_wake_up() -> None:
    a, b, _, rb = make()
    assert not b.check_read()
    a.send([b"x"])
    assert rb.commands == [("_pipe_activate_read", b)]
    assert b.check_read()


def test_hwm_blocks_writer_until_low_water_mark() -> None:
    a, b, ra, _ = make(hwm_a=4)
    assert [a.send([b"m"]) for _ in range(5)] == [True] * 4 + [False]
    assert lwm_for(4) == 2
    b.read()  # backlog 3 > lwm: writer stays blocked
    assert ra.commands == []
    b.read()  # backlog 2 == lwm: writer re-activated once
    assert ra.commands == [("_pipe_activate_write", a)]
    assert a.check_write()


def test_zero_hwm_is_unlimited() -> None:
    a, _, _, _ = make(hwm_a=0)
    assert all(a.send([b"m"]) for _ in range(10000))


def test_terminate_notifies_peer_and_keeps_queued_messages() -> None:
    a, b, _, rb = make()
    a.send([b"last words"])
    a.terminate()
    assert ("_pipe_terminated", b) in rb.commands
    assert b.peer_terminated and not b.check_write()
    assert b.read() == [b"last words"]
    assert not a.check_write()


def test_drop_inbound_reactivates_writer() -> None:
    a, b, ra, _ = make(hwm_a=2)
    a.send([b"1"])
    a.send([b"2"])
    assert not a.check_write()
    assert b.drop_inbound() == 2
    assert ("_pipe_activate_write", a) in ra.commands


def test_write_batch_stops_at_the_hwm_like_single_writes() -> None:
    a, b, ra, _ = make(hwm_a=4)
    assert a.write_batch([[b"1"], [b"2"], [b"3"]]) == 3
    assert a.write_batch([[b"4"], [b"5"], [b"6"]]) == 1  # one more fits under the HWM of 4
    assert a.write_batch([[b"5"]]) == 0 and not a.out_active  # full: armed like check_write
    assert [b.read() for _ in range(2)] == [[b"1"], [b"2"]]  # down to the low-water mark
    assert ("_pipe_activate_write", a) in ra.commands
    assert a.write_batch([[b"5"], [b"6"], [b"7"]]) == 2
    assert [b.read() for _ in range(5)] == [[b"3"], [b"4"], [b"5"], [b"6"], None]


def test_write_batch_refused_after_termination() -> None:
    a, b, _, _ = make()
    b.terminate()
    assert a.write_batch([[b"x"]]) == 0


def test_conflating_write_batch_keeps_only_the_newest() -> None:
    a, b, _, _ = make()
    make_conflating(a, b)
    assert a.write_batch([[b"old"], [b"new"]]) == 2
    assert [b.read(), b.read()] == [[b"new"], None]


def test_read_batch_takes_up_to_a_size_in_order_and_reactivates_the_writer_once() -> None:
    a, b, ra, rb = make(hwm_a=10)
    sent = [[b"%d" % i, b"x" * 10] for i in range(10)]
    for msg in sent:
        assert a.send(msg)
    assert not a.send([b"over"])  # at the HWM: the writer waits for activate_write
    first = b.read_batch(30)  # stops after the message that reaches 30 bytes
    assert first == sent[:3]
    assert ra.commands == []  # 7 still queued: above the low-water mark (5)
    assert b.read_batch(1 << 20) == sent[3:]
    assert ra.commands == [("_pipe_activate_write", a)]  # once, for the whole batch
    assert b.read_batch(1 << 20) == []  # empty: armed, so the next send wakes the reader
    assert a.send([b"next"])
    assert rb.commands == [("_pipe_activate_read", b)]
    assert b.read_batch(1) == [[b"next"]]
