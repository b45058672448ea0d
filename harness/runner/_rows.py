"""Raw rows of one case: producer and consumer records joined per message (see harness.runfolder.schema).

Every message a producer recorded gets one row per consumer that should have had it (pub/sub: every
consumer of its topic; queue: the one that got it, or one row with consumer -1 when none did); stamps a
side did not record are null.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.drivers.base import Pattern
from harness.runner.worker import WorkerSpec

if TYPE_CHECKING:
    from harness.runner.case import Case

NULL = -1  # stamp sentinel before rows are built: monotonic_ns() is never negative


def _load(path: str) -> dict[str, np.ndarray] | None:
    try:
        with np.load(f"{path}.npz") as data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        return None


def assemble_rows(
    case: Case, producers: list[WorkerSpec], consumers: list[WorkerSpec], work_dir: Path
) -> pd.DataFrame:
    """Join producer and consumer records into raw rows (see harness.runfolder.schema)."""
    sc = case.scenario
    sent: dict[int, dict[str, np.ndarray]] = {}
    for spec in producers:
        rec = _load(spec.out)
        if rec is not None:
            sent[spec.role.index] = rec
    parts: list[dict[str, np.ndarray]] = []

    def part(producer: np.ndarray, consumer: np.ndarray, seq: np.ndarray, t_recv: np.ndarray) -> None:
        n = seq.size
        t_send = np.full(n, NULL, dtype=np.int64)
        t_int = np.full(n, NULL, dtype=np.int64)
        t_ack = np.full(n, NULL, dtype=np.int64)
        for p, rec in sent.items():
            mask = producer == p
            idx = seq[mask]
            ok = idx < rec["t_send"].size
            sel = np.flatnonzero(mask)[ok]
            t_send[sel] = rec["t_send"][idx[ok]]
            if "t_intended" in rec and rec["t_intended"].size:
                t_int[sel] = rec["t_intended"][idx[ok]]
            if "t_ack" in rec and rec["t_ack"].size:
                t_ack[sel] = rec["t_ack"][idx[ok]]
        parts.append(
            dict(producer=producer, consumer=consumer, seq=seq, t_intended=t_int, t_send=t_send, t_ack=t_ack,
                 t_recv=t_recv)
        )

    if sc.pattern is Pattern.REQREP:
        for p, rec in sent.items():
            n = rec["t_send"].size
            part(np.full(n, p), np.full(n, p), np.arange(n), rec["t_recv"].astype(np.int64))
    else:
        received: dict[int, dict[str, np.ndarray]] = {}
        for spec in consumers:
            rec = _load(spec.out)
            if rec is not None:
                received[spec.role.index] = rec
        topic_of = {s.role.index: s.role.topic for s in producers}
        all_keys = {p: np.arange(rec["t_send"].size) for p, rec in sent.items()}
        got_any: dict[int, set[int]] = {p: set() for p in sent}
        for spec in consumers:
            rec = received.get(spec.role.index)
            if rec is None:
                continue
            prod = rec["producer"].astype(np.int64)
            seq = rec["seq"].astype(np.int64)
            part(prod, np.full(prod.size, spec.role.index), seq, rec["t_recv"].astype(np.int64))
            for p in np.unique(prod):
                if p in got_any:
                    got_any[int(p)].update(seq[prod == p].tolist())
            if sc.pattern is Pattern.PUBSUB:  # what this consumer should have had and did not
                for p, keys in all_keys.items():
                    if topic_of.get(p) != spec.role.topic:
                        continue
                    missing = np.setdiff1d(keys, seq[prod == p])
                    part(np.full(missing.size, p), np.full(missing.size, spec.role.index), missing,
                         np.full(missing.size, NULL))
        if sc.pattern is Pattern.QUEUE:
            for p, keys in all_keys.items():
                missing = np.setdiff1d(keys, np.fromiter(got_any[p], dtype=np.int64))
                part(np.full(missing.size, p), np.full(missing.size, -1), missing, np.full(missing.size, NULL))

    cols = {k: np.concatenate([pt[k] for pt in parts]) if parts else np.zeros(0, np.int64) for k in
            ("producer", "consumer", "seq", "t_intended", "t_send", "t_ack", "t_recv")}
    n = cols["seq"].size
    df = pd.DataFrame(
        {
            "run_id": case.run_id,
            "scenario": sc.name,
            "pattern": sc.pattern.value,
            "system": case.variant.system,
            "variant": case.variant.name,
            "repetition": np.full(n, case.repetition, dtype=np.int32),
            "size": np.full(n, case.size, dtype=np.int32),
            "rate": np.full(n, np.nan if case.rate is None else case.rate),
            "producer": cols["producer"].astype(np.int32),
            "consumer": cols["consumer"].astype(np.int32),
            "seq": cols["seq"].astype(np.int64),
            "warmup": cols["seq"] < sc.warmup,
            "t_intended": _nullable(cols["t_intended"]),
            "t_send": _nullable(cols["t_send"]),
            "t_ack": _nullable(cols["t_ack"]),
            "t_recv": _nullable(cols["t_recv"]),
        }
    )
    return df


def _nullable(values: np.ndarray) -> Any:
    """int64 stamps with the NULL sentinel -> a nullable Int64 array (no float on the way: ns need 63 bits)."""
    arr = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(arr.copy(), arr == NULL)
