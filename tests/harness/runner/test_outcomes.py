"""Outcomes: what a producer is told of each send later (confirms, acks) reaches the records as ``t_ack`` and
refusals, on the right sequence numbers, from the client's own thread; a producer that cannot tell says so."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.drivers.base import Producer
from harness.runner._outcomes import Outcomes
from harness.runner._records import SendRecord, finalize, read_errors, tracked


class Confirming(Producer):
    """Acknowledges sends in windows of 3 from another thread; refuses its 5th send (index 4)."""

    def __init__(self) -> None:
        self.report: Callable[[int, int, bool], None] | None = None
        self.sent = 0
        self.threads: list[threading.Thread] = []

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        self.report = report
        return True

    def send(self, payload: bytearray) -> None:
        self.sent += 1
        if self.sent % 3 == 0:
            first = self.sent - 3
            assert self.report is not None
            report = self.report

            def answer(first: int = first) -> None:
                for i in range(first, first + 3):
                    report(i, 1, i != 4)

            t = threading.Thread(target=answer)
            t.start()
            self.threads.append(t)

    def close(self) -> None:
        for t in self.threads:
            t.join()


class Silent(Producer):
    def send(self, payload: bytearray) -> None:
        pass

    def close(self) -> None:
        pass


def test_outcomes_land_on_their_sequence_numbers(tmp_path: Path) -> None:
    out = str(tmp_path / "producer-0")
    outcomes = Outcomes(out, mapped_files=False)
    producer = Confirming()
    assert outcomes.watch(producer, first_seq=10)  # a producer made again after seq 9 failed
    for _ in range(7):
        producer.send(bytearray(8))
    producer.close()
    acks = outcomes.stamps(20)
    assert [s for s in range(20) if acks[s]] == [10, 11, 12, 13, 15]  # 14 refused, 16 never answered
    errors = read_errors(out)
    assert errors[:, 0].tolist() == [14]
    outcomes.close()


def test_records_say_whether_the_producer_was_told(tmp_path: Path) -> None:
    told, silent = str(tmp_path / "told"), str(tmp_path / "silent")
    for out, producer in ((told, Confirming()), (silent, Silent())):
        outcomes = Outcomes(out, mapped_files=False)
        watched = outcomes.watch(producer, 0)
        record = SendRecord(out, 8, "t_ack", keeps_second=False, mapped_files=False)
        for seq in range(6):
            record.t_send[seq] = 1_000 + seq
            producer.send(bytearray(8))
        producer.close()
        record.save(6, np.zeros(0, np.int64), outcomes.stamps(6) if watched else None)
        outcomes.close()
    assert tracked(told) and not tracked(silent)
    with np.load(f"{told}.npz") as rec:
        assert [bool(t) for t in rec["t_ack"]] == [True, True, True, True, False, True]


def test_a_killed_producer_leaves_its_outcomes_behind(tmp_path: Path) -> None:
    """Runs with faults: acknowledgements go to ``<out>.acks`` as they come, so ``finalize`` of a producer the
    runner killed before it saved still knows which sends were acknowledged."""
    out = str(tmp_path / "producer-0")
    record = SendRecord(out, 8, "t_ack", keeps_second=False, mapped_files=True)
    outcomes = Outcomes(out, mapped_files=True)
    producer = Confirming()
    outcomes.watch(producer, 0)
    for seq in range(6):
        record.t_send[seq] = 1_000 + seq
        producer.send(bytearray(8))
    producer.close()
    outcomes.close()  # the process dies here: nothing saved
    finalize("producer", out)
    assert tracked(out)
    with np.load(f"{out}.npz") as rec:
        assert rec["t_send"].size == 6
        assert [bool(t) for t in rec["t_ack"]] == [True, True, True, True, False, True]
    assert read_errors(out)[:, 0].tolist() == [4]
