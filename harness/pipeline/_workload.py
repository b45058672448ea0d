"""The workload tables: what backlog, rate-profile and topic-sweep cases measure beyond the summary row,
from their raw rows (pandas; the cases of other scenarios are not read). A second engine computes the same
three tables from the same raw columns; definitions here:

* ``timeline`` (cases with a ``rate_profile`` or a ``backlog``): per case, repetition and second since the
  case's first intended send (its first send when unscheduled): ``offered`` (intended sends in that second), ``sent`` (by ``t_send``),
  ``received`` (receipts by ``t_recv``), ``e2e_p99_us`` (of the receipts in that second), ``publish_p99_us``
  (of the acknowledgements in that second) and, for backlog cases, ``backlog`` (messages sent x subscribers
  per message - receipts, at the second's end);
* ``backlog`` (backlog cases): per case and repetition, the backlog asked for and built (messages), when
  the consumers were released (``release_s`` since the first send), ``drain_s``: from the release to the
  receipt of the last message sent before it (every subscriber's; the backlog is drained then),
  ``catchup_msgs_per_s``: receipts over the drain, ``producer_msgs_per_s``: sends over the drain,
  ``e2e_p99_us`` / ``publish_p99_us``: of what was received / acknowledged during the drain, and the
  runner's ``note`` (a high-water mark that blocked the producers);
* ``topics`` (topic sweeps, ``series``): per case and repetition, the topic count and the receiver rate per
  topic (``harness.metrics.compute.rate`` over each topic's receipts): lowest, median and highest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.compute import rate
from harness.runfolder import CaseKey, RunFolder
from harness.runfolder.schema import BACKLOG_COLUMNS, CASE_KEYS, TIMELINE_COLUMNS, TOPICS_COLUMNS

_COLUMNS = ["scenario", "pattern", "system", "variant", "size", "rate", "repetition", "producer", "consumer", "seq",
            "warmup", "t_intended", "t_send", "t_ack", "t_recv"]


def workload_tables(runs: Sequence[RunFolder]) -> dict[str, pd.DataFrame]:
    """``timeline``, ``backlog`` and ``topics`` of every workload case of ``runs`` (empty frames when none)."""
    parts: dict[str, list[pd.DataFrame]] = {"timeline": [], "backlog": [], "topics": []}
    for run in runs:
        scenarios = {str(s.get("name")): s for s in run.manifest.get("scenarios") or []}
        wanted = {name for name, s in scenarios.items()
                  if s.get("rate_profile") or s.get("backlog") or s.get("series")}
        if not wanted:
            continue
        cases = {CaseKey.of(c): c for c in run.manifest.get("cases") or []}
        for path in run.raw_files():
            name = str(path).rsplit("/", 1)[-1]
            if name.split("__", 1)[0] not in wanted:
                continue
            raw = run.read_raw(name, _COLUMNS)
            if raw.empty:
                continue
            first = raw.iloc[0]
            scenario = scenarios[str(first["scenario"])]
            key = {k: first[k] for k in CASE_KEYS if k != "run_id"} | {"run_id": run.run_id,
                                                                        "repetition": int(first["repetition"])}
            case = cases.get(CaseKey.of(first), {})
            rows = raw[~raw["warmup"].fillna(False).astype(bool)]
            if scenario.get("rate_profile") or scenario.get("backlog"):
                parts["timeline"].append(timeline(rows, key, scenario, case.get("backlog")))
            if scenario.get("backlog") and case.get("backlog"):
                parts["backlog"].append(backlog_row(rows, key, scenario, case["backlog"]))
            if scenario.get("series"):
                parts["topics"].append(topics_row(rows, key, scenario))
    columns = {"timeline": TIMELINE_COLUMNS, "backlog": BACKLOG_COLUMNS, "topics": TOPICS_COLUMNS}
    return {name: (pd.concat(frames, ignore_index=True)[list(columns[name])] if frames
                   else pd.DataFrame(columns=list(columns[name]))) for name, frames in parts.items()}


def _stamps(rows: pd.DataFrame, column: str) -> np.ndarray:
    return rows[column].dropna().to_numpy(np.int64)


def _fanout(scenario: Mapping[str, Any], rows: pd.DataFrame) -> int:
    """Receipts one message should make: every subscriber of its topic (pubsub), one (queue)."""
    if str(rows["pattern"].iloc[0]) != "pubsub":
        return 1
    return max(1, int(scenario.get("consumers") or 1) // max(1, int(scenario.get("topics") or 1)))


def _p99(values: np.ndarray) -> float:
    return float(np.quantile(values, 0.99)) / 1e3 if len(values) else float("nan")


def timeline(rows: pd.DataFrame, key: Mapping[str, Any], scenario: Mapping[str, Any],
             backlog: Mapping[str, Any] | None) -> pd.DataFrame:
    sent = rows[rows["t_send"].notna()].drop_duplicates(["producer", "seq"])
    got = rows[rows["t_recv"].notna() & rows["t_send"].notna()]
    acked = sent[sent["t_ack"].notna()]
    # seconds from the schedule's start (the first intended send) when there is one, else the first send
    starts = _stamps(sent, "t_intended") if sent["t_intended"].notna().any() else _stamps(sent, "t_send")
    t0 = int(starts.min()) if len(starts) else 0
    ends = [t0, *(int(x.max()) for x in (_stamps(got, "t_recv"), _stamps(sent, "t_send")) if len(x))]
    seconds = int((max(ends) - t0) // 1_000_000_000) + 1
    edges = t0 + np.arange(seconds + 1, dtype=np.int64) * 1_000_000_000

    def per_second(stamps: np.ndarray) -> np.ndarray:
        return np.histogram(stamps, edges)[0]

    def p99_per_second(done: np.ndarray, values: np.ndarray) -> list[float]:
        slot = (done - t0) // 1_000_000_000
        return [_p99(values[slot == s]) for s in range(seconds)]

    got_recv, got_lat = _stamps(got, "t_recv"), (got["t_recv"] - got["t_send"]).to_numpy(np.int64)
    ack_t, ack_lat = _stamps(acked, "t_ack"), (acked["t_ack"] - acked["t_send"]).to_numpy(np.int64)
    out = pd.DataFrame({
        "second": np.arange(seconds, dtype=np.int64),
        "offered": per_second(_stamps(sent, "t_intended")),
        "sent": per_second(_stamps(sent, "t_send")),
        "received": per_second(got_recv),
        "e2e_p99_us": p99_per_second(got_recv, got_lat),
        "publish_p99_us": p99_per_second(ack_t, ack_lat),
    })
    fanout = _fanout(scenario, rows)
    out["backlog"] = (np.cumsum(out["sent"]) * fanout - np.cumsum(out["received"])) if backlog else np.nan
    for k, v in key.items():
        out[k] = v
    return out


def backlog_row(rows: pd.DataFrame, key: Mapping[str, Any], scenario: Mapping[str, Any],
                record: Mapping[str, Any]) -> pd.DataFrame:
    sent = rows[rows["t_send"].notna()].drop_duplicates(["producer", "seq"])
    got = rows[rows["t_recv"].notna() & rows["t_send"].notna()]
    t0 = int(sent["t_send"].min()) if len(sent) else int(record.get("start_ns", 0))
    release = int(record["release_ns"])
    before = got[got["t_send"] < release]
    # the backlog is drained when the last message sent before the release has reached every subscriber
    drained = int(before["t_recv"].max()) if len(before) else release
    drain_ns = max(1, drained - release)
    during = got[(got["t_recv"] >= release) & (got["t_recv"] <= drained)]
    sent_during = sent[(sent["t_send"] >= release) & (sent["t_send"] <= drained)]
    acked = sent_during[sent_during["t_ack"].notna()]
    fanout = _fanout(scenario, rows)
    row = dict(key)
    row.update(
        target=int(record.get("target", 0)), built=int(record.get("built", 0)),
        backlog_messages=int((sent["t_send"] < release).sum()) * fanout,
        release_s=(release - t0) / 1e9, drain_s=drain_ns / 1e9,
        catchup_msgs_per_s=float(rate(np.array([len(during)]), np.array([drain_ns]))[0]),
        producer_msgs_per_s=float(rate(np.array([len(sent_during)]), np.array([drain_ns]))[0]),
        e2e_p99_us=_p99((during["t_recv"] - during["t_send"]).to_numpy(np.int64)),
        publish_p99_us=_p99((acked["t_ack"] - acked["t_send"]).to_numpy(np.int64)),
        note=str(record.get("note") or ""),
    )
    return pd.DataFrame([row])


def topics_row(rows: pd.DataFrame, key: Mapping[str, Any], scenario: Mapping[str, Any]) -> pd.DataFrame:
    topics = max(1, int(scenario.get("topics") or 1))
    got = rows[rows["t_recv"].notna() & (rows["consumer"] >= 0)]
    topic = got["consumer"].to_numpy(np.int64) % topics
    stamps = got["t_recv"].to_numpy(np.int64)
    rates = []
    for t in range(topics):
        mine = stamps[topic == t]
        span = int(mine.max() - mine.min()) if len(mine) else 0
        rates.append(float(rate(np.array([len(mine)]), np.array([span]))[0]))
    values = np.array(rates, dtype=np.float64)
    finite = values[np.isfinite(values)]
    row = dict(key)
    row.update(topics=topics, topics_received=int(len(finite)),
               topic_msgs_per_s_min=float(finite.min()) if len(finite) else float("nan"),
               topic_msgs_per_s_median=float(np.median(finite)) if len(finite) else float("nan"),
               topic_msgs_per_s_max=float(finite.max()) if len(finite) else float("nan"))
    return pd.DataFrame([row])
