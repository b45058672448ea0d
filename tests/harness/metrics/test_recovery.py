"""Recovery maths on synthetic raw rows: windows between faults, refused vs lost, duplicates, reordering,
time to the first delivery after the restarted part was back."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.metrics.recovery import RECOVERY_COLUMNS, recovery_table

S = 1_000_000_000  # one second in ns


def rows(pattern: str, sends: list[int], receipts: dict[int, list[tuple[int, int]]], consumers: int = 1) -> pd.DataFrame:
    """One producer sending seq i at ``sends[i]``; ``receipts[consumer] = [(seq, t_recv), ...]``; messages a
    consumer never got get a row with a null t_recv (pubsub: per consumer; queue: consumer -1)."""
    out = []
    got_any: set[int] = set()
    for c in range(consumers):
        mine = receipts.get(c, [])
        got = {s for s, _ in mine}
        got_any |= got
        out += [(c, s, sends[s], t) for s, t in mine]
        if pattern == "pubsub":
            out += [(c, s, sends[s], None) for s in range(len(sends)) if s not in got]
    if pattern == "queue":
        out += [(-1, s, sends[s], None) for s in range(len(sends)) if s not in got_any]
    df = pd.DataFrame(out, columns=["consumer", "seq", "t_send", "t_recv"])
    df["producer"] = 0
    df["pattern"] = pattern
    df["warmup"] = False
    df["t_send"] = df["t_send"].astype("Int64")
    df["t_recv"] = df["t_recv"].astype("Int64")
    return df


def fault(t: int | None, back: int | None = None, index: int = 0, action: str = "restart-broker") -> dict:
    return {"fault": index, "action": action, "carried_out_as": action, "at_s": 1.0, "t_fault_ns": t,
            "t_back_ns": back}


def test_no_loss_and_recovery_time_after_restart() -> None:
    sends = [i * S // 10 for i in range(40)]  # 10 msgs/s for 4 s
    # consumer gets everything 1 ms after sending, except a 1 s outage from t=2 s: those arrive at 3.5 s
    receipts = [(i, t + 1_000_000) if not 2 * S <= t < 3 * S else (i, int(3.5 * S) + i) for i, t in enumerate(sends)]
    table = recovery_table(rows("queue", sends, {0: receipts}), [fault(2 * S, back=3 * S)])
    r = table.iloc[0]
    assert list(table.columns) == list(RECOVERY_COLUMNS)
    assert (r["window_messages"], r["accepted"], r["refused"], r["lost"]) == (40, 40, 0, 0)
    assert r["duplicated"] == 0
    assert r["recovery_s"] == pytest.approx(1.0 + 0.001, abs=1e-6)  # first receipt after t_back (msg 30 at 3.0 s)
    assert r["first_new_s"] == pytest.approx(1.001, abs=1e-6)  # msgs 20-29 wait for the burst at 3.5 s
    assert r["max_gap_s"] == pytest.approx(1.001, abs=1e-6)  # nothing arrives from the fault until 3.001 s
    assert not r["producer_saw_errors"]


def test_refused_sends_are_not_counted_as_lost() -> None:
    sends = [i * S // 10 for i in range(20)]
    receipts = [(i, t + 1000) for i, t in enumerate(sends) if i not in (5, 6, 7, 8)]
    errors = pd.DataFrame({"producer": [0, 0], "seq": [5, 6], "t_ns": [sends[5], sends[6]]})
    r = recovery_table(rows("queue", sends, {0: receipts}), [fault(sends[5])], errors).iloc[0]
    assert (r["refused"], r["accepted"], r["lost"]) == (2, 18, 2)  # 7 and 8 were accepted and are gone
    assert r["producer_saw_errors"]


def test_windows_split_at_the_next_fault() -> None:
    sends = [i * S for i in range(10)]
    receipts = [(i, t + 10) for i, t in enumerate(sends) if i not in (3, 7)]
    table = recovery_table(rows("queue", sends, {0: receipts}), [fault(2 * S + 1, index=0), fault(6 * S + 1, index=1)])
    # each fault is judged on what was sent from the previous fault to the next: seqs 0-6 | 3-9
    assert list(table["window_messages"]) == [7, 7]
    assert list(table["lost"]) == [1, 2]


def test_duplicates_and_reordering_after_redelivery() -> None:
    sends = [i * S // 10 for i in range(10)]
    order = [0, 1, 2, 3, 4, 2, 3, 5, 6, 8, 7, 9]  # 2 and 3 redelivered, 7 after 8
    receipts = [(s, S + k * 1000) for k, s in enumerate(order)]
    r = recovery_table(rows("queue", sends, {0: receipts}), [fault(int(0.45 * S))]).iloc[0]
    assert (r["lost"], r["duplicated"], r["reordered"]) == (0, 2, 1)


def test_pubsub_counts_per_subscriber() -> None:
    sends = [i * S // 10 for i in range(10)]
    all_ = [(i, t + 5) for i, t in enumerate(sends)]
    some = [(i, t + 5) for i, t in enumerate(sends) if i < 4]  # consumer 1 was restarted and missed 6
    r = recovery_table(rows("pubsub", sends, {0: all_, 1: some}, consumers=2), [fault(int(0.35 * S), action="restart-consumer")]).iloc[0]
    assert (r["window_messages"], r["lost"]) == (10, 6)


def test_fault_not_carried_out_gives_nan_metrics() -> None:
    sends = [0, S]
    table = recovery_table(rows("queue", sends, {0: [(0, 5), (1, S + 5)]}), [fault(None)])
    assert math.isnan(table.iloc[0]["lost"])


def test_nothing_after_the_fault_means_no_recovery() -> None:
    sends = [i * S // 10 for i in range(10)]
    receipts = [(i, t + 5) for i, t in enumerate(sends) if i < 5]
    r = recovery_table(rows("queue", sends, {0: receipts}), [fault(sends[5], back=sends[5] + S)]).iloc[0]
    assert r["lost"] == 5 and math.isnan(r["recovery_s"]) and math.isnan(r["first_new_s"])
    assert np.isnan(r["max_gap_s"])


def test_consumer_fault_times_the_restarted_consumer_only() -> None:
    sends = [i * S // 10 for i in range(20)]
    steady = [(i, t + 5) for i, t in enumerate(sends)]
    restarted = [(i, t + 5) for i, t in enumerate(sends) if i < 5 or i >= 12]  # gone 0.5 s .. 1.2 s
    f = {**fault(sends[5], back=sends[5] + S // 2, action="restart-consumer"), "target": 1}
    r = recovery_table(rows("pubsub", sends, {0: steady, 1: restarted}, consumers=2), [f]).iloc[0]
    assert r["lost"] == 7
    assert r["recovery_s"] == pytest.approx(0.7, abs=1e-6)  # consumer 1's first receipt after the fault
    assert r["max_gap_s"] == pytest.approx(0.7, abs=1e-6)


def test_network_fault_end_rate_and_latency_before_during_after() -> None:
    sends = [i * S // 100 for i in range(400)]  # 100 msgs/s for 4 s
    # 1 ms latency, but 21 ms for messages sent while a 20 ms delay was on (1 s .. 2 s)
    receipts = [(i, t + (21 if S <= t < 2 * S else 1) * 1_000_000) for i, t in enumerate(sends)]
    f = {**fault(S, back=2 * S, action="delay"), "delay_s": 0.02}
    r = recovery_table(rows("queue", sends, {0: receipts}), [f]).iloc[0]
    assert r["latency_before_s"] == pytest.approx(0.001)
    assert r["latency_during_s"] == pytest.approx(0.021)
    assert r["latency_after_s"] == pytest.approx(0.001)
    assert r["injected_delay_s"] == pytest.approx(0.02)
    assert r["back_first_s"] == pytest.approx(0.001, abs=1e-6)  # the message sent at 1.99 s arrives at 2.011 s
    assert r["back_rate_s"] == pytest.approx(0.2)  # the first 200 ms bin after the end has the full rate


def test_latency_p99_before_during_after_sees_the_tail_the_median_hides() -> None:
    sends = [i * S // 100 for i in range(400)]
    # during the fault (1 s .. 2 s) every 50th message waits 500 ms: the median stays, the p99 moves
    receipts = [(i, t + (500 if S <= t < 2 * S and i % 50 == 0 else 1) * 1_000_000) for i, t in enumerate(sends)]
    r = recovery_table(rows("queue", sends, {0: receipts}), [fault(S, back=2 * S, action="delay")]).iloc[0]
    assert r["latency_during_s"] == pytest.approx(0.001)
    assert r["latency_p99_during_s"] > 0.1
    assert r["latency_p99_before_s"] == pytest.approx(0.001) and r["latency_p99_after_s"] == pytest.approx(0.001)


def test_no_rate_after_a_partition_that_never_healed() -> None:
    sends = [i * S // 100 for i in range(300)]
    receipts = [(i, t + 1_000_000) for i, t in enumerate(sends) if t < S]  # nothing after the cut at 1 s
    r = recovery_table(rows("queue", sends, {0: receipts}), [fault(S, back=2 * S, action="partition")]).iloc[0]
    assert r["lost"] == 200
    assert math.isnan(r["back_first_s"]) and math.isnan(r["back_rate_s"])
    assert math.isnan(r["latency_during_s"]) and math.isnan(r["injected_delay_s"])


def _with(df: pd.DataFrame, **columns: object) -> pd.DataFrame:
    return df.assign(**columns)


def test_unacknowledged_sends_are_unconfirmed_and_found_ones_are_held_not_lost() -> None:
    """Producers told of outcomes: 10 sends, acks for 0-5; 6-7 never acknowledged nor arrived (in flight when the
    leader died): unconfirmed; 8 acknowledged but never arrived, found by the final read: held; 9 acknowledged
    and never anywhere: lost."""
    sends = [i * S // 10 for i in range(10)]
    got = [(i, sends[i] + 1000) for i in range(6)]
    df = rows("queue", sends, {0: got})
    ack = [sends[i] + 500 if i in (0, 1, 2, 3, 4, 5, 8, 9) else None for i in df["seq"]]
    df = _with(df, t_ack=pd.array(ack, "Int64"), drained=[s == 8 for s in df["seq"]])
    f = {**fault(int(0.55 * S)), "acks_tracked": True}
    r = recovery_table(df, [f]).iloc[0]
    assert (r["window_messages"], r["accepted"], r["unconfirmed"], r["held"], r["lost"]) == (10, 8, 2, 1, 1)
    # the first acknowledgement of a message sent at or after the fault: seq 8's, 0.8 s + 500 ns
    assert r["send_unavailable_s"] == pytest.approx(0.8 + 500e-9 - 0.55, abs=1e-6)
    # without outcomes the same rows count every unrefused send as accepted: 6, 7 and 9 lost
    plain = recovery_table(df, [fault(int(0.55 * S))]).iloc[0]
    assert (plain["accepted"], plain["unconfirmed"], plain["held"], plain["lost"]) == (10, 0, 1, 3)
    assert math.isnan(plain["send_unavailable_s"])


def test_writes_never_acknowledged_again_are_infinite_and_named() -> None:
    """Acknowledgements stop at the fault and never come back within the run: writes were unavailable past
    the fault's end (infinite, "never"), and the report names the row."""
    from harness.report.evaluation import unavailable_past_end

    sends = [i * S // 10 for i in range(10)]
    df = rows("queue", sends, {0: [(i, sends[i] + 1000) for i in range(5)]})
    df = _with(df, t_ack=pd.array([sends[i] + 500 if i < 5 else None for i in df["seq"]], "Int64"))
    f = {**fault(int(0.45 * S), action="restart-node"), "acks_tracked": True}
    r = recovery_table(df, [f]).iloc[0]
    assert r["send_unavailable_s"] == math.inf and r["accepted"] == 5
    assert unavailable_past_end(pd.concat([r, pd.Series({"guarantee": "durable"})]))


def test_node_fault_columns_whole_again_and_the_rate_dip() -> None:
    sends = [i * S // 100 for i in range(400)]  # 100 msgs/s for 4 s
    # nothing arrives between 2.0 and 2.6 s; what was sent then arrives at 2.6 s
    receipts = [(i, t + 1000 if not 2 * S <= t < int(2.6 * S) else int(2.6 * S) + i) for i, t in enumerate(sends)]
    f = {**fault(2 * S, back=int(2.5 * S), action="pause-node"), "node": 1, "node_role": "leader",
         "t_whole_ns": 3 * S, "down_s": 0.5, "stall_s": float("nan")}
    r = recovery_table(rows("queue", sends, {0: receipts}), [f]).iloc[0]
    assert (r["node"], r["node_role"], r["down_s"]) == (1, "leader", 0.5)
    assert r["whole_s"] == pytest.approx(1.0)
    assert r["rate_dip"] == 0.0  # at least one 200 ms bin after the fault had no receipt at all
    unaffected = recovery_table(rows("queue", sends, {0: [(i, t + 1000) for i, t in enumerate(sends)]}),
                                [fault(2 * S, back=int(2.5 * S))]).iloc[0]
    assert unaffected["rate_dip"] == pytest.approx(1.0, abs=0.11)
