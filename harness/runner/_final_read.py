"""The final read: before anything is counted as lost, what the broker still holds is read and counted.

After a case of an acknowledging broker variant (at-least-once or durable) in which accepted messages never
reached their consumer, fresh consumers with the roles of those that are missing messages (the same group,
queue or subscription; for a queue, one per topic) read until nothing more comes. What they find was not
lost by the broker: it is *held*, and the consumer that did not get it *stalled* (``stalls``: how long each
consumer went without a receipt before the case ended). What nobody found is lost. Jepsen checks a queue the
same way, with a final drain before the checker counts.

The read runs in worker processes like the case's own consumers (``_workers.Workers``), reconnecting
(runs with faults) and with mapped records; its receipts become the ``drained`` rows of the run folder.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.drivers.base import Driver, Guarantee, Pattern
from harness.runner import _workers
from harness.runner._context import Case, WorkerSpec
from harness.runner._records import finalize

FINAL_IDLE = 5.0  # seconds without a new receipt before the read ends
FINAL_MAX = 60.0  # at most this long in all
STALL_MIN = 1.0  # a consumer whose last receipt came this long before the case ended (while messages were missing) stalled


def missing(rows: pd.DataFrame, send_errors: pd.DataFrame | None, acks_tracked: bool) -> pd.DataFrame:
    """Rows of accepted measured messages that never arrived (``t_recv`` null): not refused, and acknowledged
    where the producers were told outcomes."""
    m = rows[~rows["warmup"].to_numpy(dtype=bool) & rows["t_recv"].isna().to_numpy()]
    if send_errors is not None and len(send_errors):
        told = pd.MultiIndex.from_frame(send_errors[["producer", "seq"]].astype("int64"))
        m = m[~pd.MultiIndex.from_frame(m[["producer", "seq"]].astype("int64")).isin(told)]
    if acks_tracked:
        m = m[m["t_ack"].notna()]
    return m


def needs_final_read(driver: Driver, case: Case) -> bool:
    return (driver.needs_broker and case.scenario.pattern is not Pattern.REQREP
            and driver.guarantee() is not Guarantee.AT_MOST_ONCE)


def final_read(producers: list[WorkerSpec], consumers: list[WorkerSpec], absent: pd.DataFrame,
               work_dir: Path) -> pd.DataFrame:
    """Read what the broker still holds for the consumers that miss ``absent`` rows; their receipts as
    (producer, seq, consumer, t_ns), consumer being the role read for."""
    if absent.empty:
        return _receipts([])
    work_dir.mkdir(parents=True, exist_ok=True)
    pattern = consumers[0].plan["topology"]["pattern"] if consumers else "queue"
    if pattern == Pattern.PUBSUB.value:
        wanted = sorted(set(absent["consumer"].astype(int)))
        readers = [s for s in consumers if s.role.index in wanted]
    else:
        topic_of = {s.role.index: s.role.topic for s in producers}
        topics = {topic_of.get(int(p), 0) for p in set(absent["producer"].astype(int))}
        readers = [next(s for s in consumers if s.role.topic == t) for t in sorted(topics)
                   if any(s.role.topic == t for s in consumers)]
    # Readers are launched as the case's consumers were (launch_all): grouped where those were, else each
    # in a process of its own that reconnects and maps its records (``resilient``). A reader per topic, each
    # a process (a JVM for the Java clients), was some 1,000 processes at once after a 1,000-topic RocketMQ
    # case, more than the machine's memory.
    alone = not _workers.grouped(readers)
    specs = [replace(s, name=f"final-read-{s.role.index}", slot=i, out=str(work_dir / f"final-read-{s.role.index}"),
                     consumer_rate=None, resilient=s.resilient or alone, probe_from=(),
                     capacity=max(1024, 2 * len(absent)))
             for i, s in enumerate(readers)]
    w = _workers.Workers(len(specs))
    try:
        _workers.launch_all(w, [], specs)
        w.wait_ready([s.name for s in specs])
        w.start_ns.value = time.monotonic_ns()
        w.start.set()
        began = last_change = time.monotonic()
        last = -1
        while time.monotonic() - began < FINAL_MAX and time.monotonic() - last_change < FINAL_IDLE:
            w.drain(0.2)
            total = sum(w.progress)
            if total != last:
                last, last_change = total, time.monotonic()
    finally:
        w.shutdown(grace=3.0)
    found = []
    for spec in specs:
        finalize("consumer", spec.out)
        try:
            with np.load(f"{spec.out}.npz") as rec:
                found.append((spec.role.index, rec["producer"], rec["seq"], rec["t_recv"]))
        except FileNotFoundError:
            continue
    return _receipts(found)


def _receipts(found: list[tuple[int, Any, Any, Any]]) -> pd.DataFrame:
    if not found:
        return pd.DataFrame({"producer": [], "seq": [], "consumer": [], "t_ns": []}, dtype="int64")
    return pd.DataFrame({
        "producer": np.concatenate([p for _, p, _, _ in found]).astype(np.int64),
        "seq": np.concatenate([s for _, _, s, _ in found]).astype(np.int64),
        "consumer": np.concatenate([np.full(len(s), c) for c, _, s, _ in found]).astype(np.int64),
        "t_ns": np.concatenate([t for _, _, _, t in found]).astype(np.int64),
    })


def stalls(rows: pd.DataFrame, absent: pd.DataFrame, ended_ns: int, start_ns: int,
           consumers: Sequence[int] = ()) -> dict[int, float]:
    """Per consumer missing messages: seconds from its last receipt (or the start) to the end of the case,
    when that is at least ``STALL_MIN``. A queue's message nobody got (consumer -1) was any of the case's
    ``consumers``' to take: each of them that stopped receiving is a stall."""
    out: dict[int, float] = {}
    got = rows[rows["t_recv"].notna()]
    missing_for = set(absent["consumer"].astype(int))
    if -1 in missing_for:
        missing_for = (missing_for - {-1}) | set(consumers)
    for consumer in sorted(missing_for):
        mine = got[got["consumer"] == consumer]["t_recv"]
        last = int(mine.max()) if len(mine) else start_ns
        seconds = (ended_ns - last) / 1e9
        if seconds >= STALL_MIN:
            out[consumer] = seconds
    return out
