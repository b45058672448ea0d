"""Recovery after a fault, from raw rows: pure functions, no IO (unit-tested on synthetic records).

For each fault that was carried out, the messages it is judged on are those sent between the previous
fault (or the start) and the next fault (or the end), so a broker crash is charged with everything that was
queued in it at that moment. Windows of consecutive faults therefore overlap (the stretch between two faults
belongs to both); give a case one fault to charge each loss to exactly one fault. Within that window:

- ``refused``: sends that raised at the producer, or that the system refused in an outcome it reported later
  (the system told the sender; the runner did not retry);
- ``unconfirmed``: where the producers are told each send's outcome (``acks_tracked``), sends that never
  arrived and whose outcome never came (in flight when a connection or node died): neither accepted nor lost;
- ``accepted``: the other messages of the window (acknowledged where outcomes are told, else the send
  returned normally);
- ``held``: accepted messages that never reached their consumer but that the final read found still in the
  broker (the consumer stalled; the broker kept them);
- ``lost``: accepted messages that never arrived and that the broker no longer held (pubsub: counted per
  subscriber that should have had it);
- ``duplicated``: extra receipts of the window's messages; ``reordered``: first receipts below the highest
  sequence number already received from the same producer (per consumer);
- ``recovery_s``: from the fault to the first receipt once the restarted broker/worker was back (``t_back_ns``;
  for a kill, the first receipt after the fault), NaN if none came;
- ``first_new_s``: from the fault to the first receipt of a message sent at or after the fault;
- ``max_gap_s``: the longest stretch without any receipt from the fault to the last receipt of the window.
The three times look at the faulted consumer's receipts only when the fault was a consumer's.
- ``send_unavailable_s``: from the fault to the first acknowledgement of a message sent at or after it (the
  producers could write again); infinite when none was acknowledged by the window's end (never again within
  the run); NaN where outcomes are not told (a send that returned says nothing);
- ``whole_s``: from the fault to when the cluster passed its readiness check again (node faults);
- ``rate_dip``: the lowest receipt rate in 200 ms bins from the fault until the rate came back
  (``back_rate_s``, else the window's end), as a fraction of the rate in the second before the fault.

Where the fault has an end (``t_back_ns``: the restarted part back, a network fault healed or undone):
- ``back_first_s``: from that end to the first receipt at or after it;
- ``back_rate_s``: from that end to the first 200 ms bin whose receipts reach 90 % of the rate received in
  the second before the fault (NaN when there was no such rate or it never came back);
- ``latency_before_s``, ``latency_during_s``, ``latency_after_s``: median latency (receipt - send) of the
  window's messages sent before the fault, between fault and end, and after the end; with
  ``injected_delay_s`` (a ``delay`` fault's delay) the shift during the fault can be checked against it;
  ``latency_p99_before_s``, ``latency_p99_during_s``, ``latency_p99_after_s``: the 99th percentile of the
  same three sets (the tail a delay or a backlog moves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.compute import delivery, message_keys

RECOVERY_COLUMNS = (
    "fault",
    "action",
    "carried_out_as",
    "at_s",
    "down_s",
    "node",
    "node_role",
    "window_messages",
    "accepted",
    "refused",
    "unconfirmed",
    "held",
    "lost",
    "duplicated",
    "reordered",
    "recovery_s",
    "first_new_s",
    "max_gap_s",
    "producer_saw_errors",
    "back_first_s",
    "back_rate_s",
    "latency_before_s",
    "latency_during_s",
    "latency_after_s",
    "injected_delay_s",
    "latency_p99_before_s",
    "latency_p99_during_s",
    "latency_p99_after_s",
    "send_unavailable_s",
    "whole_s",
    "rate_dip",
    "stall_s",
)
RATE_BIN_NS = 200_000_000
RATE_FRACTION = 0.9


def _stamps(column: pd.Series) -> np.ndarray:
    """int64 stamps with -1 for a missing one (never through float: ns stamps need 63 bits)."""
    return np.asarray(column.to_numpy(dtype=np.int64, na_value=-1))


def recovery_table(
    rows: pd.DataFrame, faults: Sequence[dict[str, Any]], send_errors: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per fault (``RECOVERY_COLUMNS``); faults not carried out get NaN metrics.

    ``rows``: one case's raw rows (RAW_SCHEMA; warmup rows are ignored). ``faults``: dicts with at least
    ``fault``, ``action``, ``carried_out_as``, ``at_s``, ``t_fault_ns`` (None when not carried out).
    ``send_errors``: ``producer``, ``seq``, ``t_ns`` of sends that raised.
    """
    m = rows[~rows["warmup"].to_numpy(dtype=bool)] if "warmup" in rows else rows
    pattern = str(m["pattern"].iloc[0]) if len(m) and "pattern" in m else "queue"
    keys = message_keys(m["producer"].to_numpy(), m["seq"].to_numpy())
    t_send = _stamps(m["t_send"])
    t_recv = _stamps(m["t_recv"])
    t_ack = _stamps(m["t_ack"]) if "t_ack" in m else np.full(len(m), -1, np.int64)
    drained = m["drained"].fillna(False).to_numpy(dtype=bool) if "drained" in m else np.zeros(len(m), bool)
    consumer = m["consumer"].to_numpy()
    if send_errors is not None and len(send_errors):
        err_keys = message_keys(send_errors["producer"].to_numpy(), send_errors["seq"].to_numpy())
        err_t = send_errors["t_ns"].to_numpy(dtype=np.int64)
    else:
        err_keys = np.zeros(0, np.int64)
        err_t = np.zeros(0, np.int64)

    done = sorted((f for f in faults if f.get("t_fault_ns") is not None), key=lambda f: int(f["t_fault_ns"]))
    times = [int(f["t_fault_ns"]) for f in done]
    out = []
    for f in faults:
        base = {k: f.get(k) for k in ("fault", "action", "carried_out_as", "at_s", "down_s")}
        if f.get("t_fault_ns") is None:
            out.append({**base, **{k: math.nan for k in RECOVERY_COLUMNS if k not in base}})
            continue
        t_f = int(f["t_fault_ns"])
        i = times.index(t_f)
        lo = times[i - 1] if i > 0 else -(2**62)
        hi = times[i + 1] if i + 1 < len(times) else 2**62
        back = f.get("t_back_ns")
        t_back = t_f if back is None or (isinstance(back, float) and math.isnan(back)) else int(back)
        # a consumer fault: time the restarted consumer itself, not the others that kept going
        done_as = str(f.get("carried_out_as") or f.get("action") or "")
        only = int(f.get("target") or 0) if done_as.endswith("-consumer") else None
        tracked = bool(_value(f.get("acks_tracked")) or False)
        one = _one(pattern, keys, t_send, t_recv, consumer, err_keys, err_t, t_f, t_back, lo, hi, only,
                   t_ack if tracked else None, drained)
        delay = f.get("delay_s")
        injected = math.nan if delay is None or (isinstance(delay, float) and math.isnan(delay)) else float(delay)
        after = _after(t_send, t_recv, t_f, t_back, lo, hi)
        whole = _value(f.get("t_whole_ns"))
        node = _value(f.get("node"))
        out.append({**base, **one, **after, "injected_delay_s": injected,
                    "node": math.nan if node is None else int(node), "node_role": _value(f.get("node_role")),
                    "send_unavailable_s": _first_ack(t_send, t_ack, t_f, hi) if tracked else math.nan,
                    "whole_s": math.nan if whole is None else (int(whole) - t_f) / 1e9,
                    "rate_dip": _dip(t_recv, t_f, t_back, hi, after["back_rate_s"]),
                    "stall_s": float(_value(f.get("stall_s")) or math.nan)})
    return pd.DataFrame(out, columns=list(RECOVERY_COLUMNS))


def _value(v: Any) -> Any:
    """None for a missing value (None, NaN, pandas NA), else ``v``."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _first_ack(t_send: np.ndarray, t_ack: np.ndarray, t_f: int, hi: int) -> float:
    """Seconds from the fault to the first acknowledgement of a message sent at or after it (inf: none)."""
    acked = (t_send >= t_f) & (t_send < hi) & (t_ack >= 0)
    return (int(t_ack[acked].min()) - t_f) / 1e9 if acked.any() else math.inf


def _dip(t_recv: np.ndarray, t_f: int, t_back: int, hi: int, back_rate_s: float) -> float:
    """The lowest 200 ms receipt rate from the fault until the rate came back, over the rate before it."""
    recv = t_recv[t_recv >= 0]
    before = np.count_nonzero((recv >= t_f - 1_000_000_000) & (recv < t_f)) * RATE_BIN_NS / 1e9
    if not before:
        return math.nan
    end = t_back + int(back_rate_s * 1e9) if not math.isnan(back_rate_s) else min(hi, int(recv.max()) if recv.size else t_f)
    n = max(1, (end - t_f) // RATE_BIN_NS)  # whole bins only: a partial last one would read as a dip
    bins = np.bincount((recv[(recv >= t_f) & (recv < t_f + n * RATE_BIN_NS)] - t_f) // RATE_BIN_NS, minlength=n)
    return float(bins.min()) / before


def _one(
    pattern: str, keys: np.ndarray, t_send: np.ndarray, t_recv: np.ndarray, consumer: np.ndarray,
    err_keys: np.ndarray, err_t: np.ndarray, t_f: int, t_back: int, lo: int, hi: int, only: int | None = None,
    t_ack: np.ndarray | None = None, drained: np.ndarray | None = None,
) -> dict[str, Any]:
    in_window = (t_send >= lo) & (t_send < hi)
    window_keys = np.unique(keys[in_window])
    refused_keys = np.unique(err_keys[(err_t >= lo) & (err_t < hi)])
    accepted_keys = np.setdiff1d(window_keys, refused_keys)
    arrived = t_recv >= 0
    unconfirmed_keys = np.zeros(0, np.int64)
    if t_ack is not None:  # the producers are told outcomes: accepted = acknowledged
        acked = np.unique(keys[in_window & (t_ack >= 0)])
        unconfirmed_keys = np.setdiff1d(np.setdiff1d(accepted_keys, acked), keys[in_window & arrived])
        accepted_keys = np.setdiff1d(accepted_keys, unconfirmed_keys)
    found = in_window & ~arrived & (drained if drained is not None else np.zeros(len(keys), bool))

    lost = held = duplicated = reordered = 0
    if pattern == "pubsub":
        for c in np.unique(consumer[consumer >= 0]):
            mine = (consumer == c) & in_window
            order = np.argsort(t_recv[mine & arrived], kind="stable")
            got = keys[mine & arrived][order]
            kept = np.intersect1d(np.setdiff1d(accepted_keys, got), keys[found & (consumer == c)])
            d = delivery(np.setdiff1d(accepted_keys, kept), got)
            lost += d.lost
            held += kept.size
            duplicated += delivery(window_keys, got).duplicated
            reordered += delivery(window_keys, got).out_of_order
    else:
        sel = in_window & arrived
        order = np.argsort(t_recv[sel], kind="stable")
        got = keys[sel][order]
        kept = np.intersect1d(np.setdiff1d(accepted_keys, got), keys[found])
        lost = delivery(np.setdiff1d(accepted_keys, kept), got).lost
        held = kept.size
        duplicated = delivery(window_keys, got).duplicated
        for c in np.unique(consumer[sel]):
            mine = sel & (consumer == c)
            reordered += delivery(window_keys, keys[mine][np.argsort(t_recv[mine], kind="stable")]).out_of_order

    if only is not None:
        arrived = arrived & (consumer == only)
    after = arrived & (t_send >= t_f) & (t_send < hi)
    first_new_s = (int(t_recv[after].min()) - t_f) / 1e9 if after.any() else math.nan
    back = arrived & (t_recv >= t_back) & (t_send < hi)
    recovery_s = (int(t_recv[back].min()) - t_f) / 1e9 if back.any() else math.nan
    receipts = np.sort(t_recv[arrived & in_window & (t_recv >= t_f)])
    if receipts.size:
        max_gap_s = float(np.diff(np.concatenate(([t_f], receipts))).max()) / 1e9
    else:
        max_gap_s = math.nan
    return {
        "window_messages": int(window_keys.size),
        "accepted": int(accepted_keys.size),
        "refused": int(refused_keys.size),
        "unconfirmed": int(unconfirmed_keys.size),
        "held": int(held),
        "lost": int(lost),
        "duplicated": int(duplicated),
        "reordered": int(reordered),
        "recovery_s": recovery_s,
        "first_new_s": first_new_s,
        "max_gap_s": max_gap_s,
        "producer_saw_errors": bool(refused_keys.size),
    }


def _after(t_send: np.ndarray, t_recv: np.ndarray, t_f: int, t_back: int, lo: int, hi: int) -> dict[str, float]:
    """What the fault's end and window did to timing: see the module docstring."""
    arrived = t_recv >= 0
    recv = np.sort(t_recv[arrived])
    later = recv[recv >= t_back]
    back_first_s = (int(later[0]) - t_back) / 1e9 if later.size else math.nan
    before = np.count_nonzero((recv >= t_f - 1_000_000_000) & (recv < t_f))
    back_rate_s = math.nan
    if before and later.size:
        need = RATE_FRACTION * before * RATE_BIN_NS / 1e9
        bins = (later - t_back) // RATE_BIN_NS
        counts = np.bincount(bins)
        reached = np.flatnonzero(counts >= need)
        if reached.size:
            back_rate_s = float(reached[0] * RATE_BIN_NS + RATE_BIN_NS) / 1e9

    def latency(sel: np.ndarray, q: float) -> float:
        sel = sel & arrived
        return float(np.percentile(t_recv[sel] - t_send[sel], q)) / 1e9 if sel.any() else math.nan

    windows = {
        "before": (t_send >= max(lo, 0)) & (t_send < t_f) & (t_send >= 0),
        "during": (t_send >= t_f) & (t_send < t_back),
        "after": (t_send >= t_back) & (t_send < hi),
    }
    return {
        "back_first_s": back_first_s,
        "back_rate_s": back_rate_s,
        **{f"latency_{name}_s": latency(sel, 50) for name, sel in windows.items()},
        **{f"latency_p99_{name}_s": latency(sel, 99) for name, sel in windows.items()},
    }
