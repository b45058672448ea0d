"""The measured feature matrix: the seed article's comparison table, with each cell decided by a measurement.

Pure functions over data frames (no IO): the per-repetition summary, the recovery table
(``harness.metrics.recovery``) and which scenario plays which part, which :func:`scenario_roles` reads from
the manifest's scenario descriptions (a scenario with faults is a crash test, one with ``consumer_rate`` a
slow-consumer test, any other a baseline). Every cell starts with the verdict and then gives the number
that decides it, e.g. ``"yes — durable: lost 0 of 612"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

MATRIX_COLUMNS = (
    "system",
    "needs a broker",
    "persistence (broker crash)",
    "confirms / transactions",
    "ordering",
    "loss under slow consumer",
    "recovery after crash",
    "survives a partition without loss",
    "latency under delay",
    "resets, bandwidth limit",
    "throughput",
    "latency",
)
NOT_MEASURED = "not measured"
NETWORK_ACTIONS = ("delay", "bandwidth", "partition", "reset")  # harness.scenario's network fault actions


def scenario_roles(scenarios: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Scenario name -> ``"faults"``, ``"slow-consumer"`` or ``"baseline"``."""
    roles = {}
    for sc in scenarios:
        if sc.get("faults"):
            roles[str(sc.get("name"))] = "faults"
        elif sc.get("consumer_rate"):
            roles[str(sc.get("name"))] = "slow-consumer"
        else:
            roles[str(sc.get("name"))] = "baseline"
    return roles


def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _rows(frame: pd.DataFrame, roles: Mapping[str, str], role: str) -> pd.DataFrame:
    if frame.empty or "scenario" not in frame:
        return frame
    return frame[frame["scenario"].map(lambda s: roles.get(str(s)) == role)]


def _persistence(rec: pd.DataFrame, label: str, brokerless: bool) -> str:
    crash = rec[rec["carried_out_as"] == "restart-broker"].dropna(subset=["lost"])
    if crash.empty:
        peer = rec[rec["carried_out_as"] == "restart-consumer"].dropna(subset=["lost"])
        if brokerless and not peer.empty:
            lost, acc = int(peer["lost"].sum()), int(peer["accepted"].sum())
            return f"no broker to keep messages — restarting the consumer lost {lost} of {acc}"
        return "no broker" if brokerless else NOT_MEASURED
    per = crash.groupby("variant", sort=False)[["lost", "accepted"]].sum()
    durable = set(crash.loc[crash["guarantee"] == "durable", "variant"]) if "guarantee" in crash else set()
    kept = [v for v, r in per.iterrows() if r["lost"] == 0 and r["accepted"] > 0]
    detail = "; ".join(f"{v}: lost {int(r['lost'])} of {int(r['accepted'])}" for v, r in per.iterrows())
    note = " (Tansu stores in memory only; Apache Kafka would persist)" if "tansu" in label else ""
    if any(v in durable for v in kept):
        verdict = "yes"
    elif kept and len(kept) == len(per):
        # nothing lost, but no variant promises durability: the messages sat in client buffers, not the broker
        verdict = "no loss seen, none promised"
    else:
        verdict = "no"
    return f"{verdict} — {detail}{note}"


def _confirms(reps: pd.DataFrame, rec: pd.DataFrame) -> str:
    guarantees: dict[str, str] = {}
    for frame in (reps, rec):  # the recovery rows know each variant's guarantee; summaries may not
        if not frame.empty and "guarantee" in frame:
            guarantees.update(zip(frame["variant"].astype(str), frame["guarantee"].astype(str), strict=False))
    strong = [f"{v} ({g})" for v, g in guarantees.items() if g in ("at-least-once", "durable")]
    crash = rec[rec["carried_out_as"].isin(["restart-broker", "restart-consumer"])].dropna(subset=["lost"])
    told = ""
    if not crash.empty:
        told = (f"; at the crash the producer was told of {int(crash['refused'].sum())} failed sends, "
                f"{int(crash['lost'].sum())} accepted messages were lost silently")
    if strong:
        return f"yes — {', '.join(strong)}{told}"
    if not guarantees:
        return NOT_MEASURED
    return f"no — at-most-once only{told}"


def _ordering(reps: pd.DataFrame) -> str:
    if reps.empty:
        return NOT_MEASURED
    bad, got = int(reps["out_of_order"].fillna(0).sum()), int(reps["received"].fillna(0).sum())
    return f"{'kept' if bad == 0 else 'not kept'} — {bad} of {got:,} arrivals out of order"


def _slow(reps: pd.DataFrame) -> str:
    if reps.empty:
        return NOT_MEASURED
    parts, total = [], 0
    for (variant, pattern), g in reps.groupby(["variant", "pattern"], sort=False):
        lost, exp = int(g["lost"].sum()), int(g["expected"].sum())
        total += lost
        share = 100.0 * lost / exp if exp else float("nan")
        sender = g["sender_msgs_per_s"].median()
        name = f"{pattern}" + ("" if variant == "default" else f"/{variant}")
        parts.append(f"{name}: lost {lost:,} of {exp:,} ({share:.1f} %), sender {_num(sender)} msg/s")
    return f"{'none' if total == 0 else 'drops'} — {'; '.join(parts)}"


def _recovery(rec: pd.DataFrame) -> str:
    done = rec[~rec["carried_out_as"].isin(NETWORK_ACTIONS)].dropna(subset=["lost"])
    if done.empty:
        return NOT_MEASURED
    parts = []
    for (variant, action), g in done.groupby(["variant", "carried_out_as"], sort=False):
        times = g["recovery_s"].dropna()
        back = float(times.median()) if len(times) else math.nan
        what = str(action).replace("restart-", "") + " restart"
        when = "no delivery after it" if math.isnan(back) else f"delivering again {_num(back)} s after the kill"
        parts.append(f"{variant}, {what}: {when}, lost {int(g['lost'].sum())}, dup {int(g['duplicated'].sum())}")
    ok = done["recovery_s"].notna().any()
    return f"{'yes' if ok else 'no'} — {'; '.join(parts)}"


def _network_rows(rec: pd.DataFrame, action: str) -> pd.DataFrame:
    return rec[rec["carried_out_as"] == action].dropna(subset=["lost"])


def _partition(rec: pd.DataFrame) -> str:
    """Loss and duplication across the partition per variant, who was told, and how fast it came back."""
    done = _network_rows(rec, "partition")
    if done.empty:
        return NOT_MEASURED
    parts, kept = [], False
    for variant, g in done.groupby("variant", sort=False):
        lost, acc = int(g["lost"].sum()), int(g["accepted"].sum())
        kept = kept or (lost == 0 and acc > 0)
        told = int(g["refused"].sum())
        first = g["back_first_s"].median() if "back_first_s" in g else math.nan
        rate = g["back_rate_s"].median() if "back_rate_s" in g else math.nan
        parts.append(f"{variant}: lost {lost} of {acc:,}, dup {int(g['duplicated'].sum())}, "
                     f"out of order {int(g['reordered'].sum())}, producer told of {told} failed sends; "
                     f"first delivery {_num(first)} s and pre-fault rate {_num(rate)} s after the heal")
    return f"{'yes' if kept else 'no'} — {'; '.join(parts)}"


def _delay(rec: pd.DataFrame) -> str:
    """The median latency shift while the delay was on, next to the delay injected."""
    done = _network_rows(rec, "delay")
    if done.empty or "latency_during_s" not in done:
        return NOT_MEASURED
    parts = []
    for variant, g in done.groupby("variant", sort=False):
        before, during = g["latency_before_s"].median(), g["latency_during_s"].median()
        injected = g["injected_delay_s"].median()
        parts.append(f"{variant}: p50 +{_num((during - before) * 1e3)} ms with {_num(injected * 1e3)} ms injected "
                     f"(before {_num(before * 1e3)} ms, during {_num(during * 1e3)} ms, "
                     f"after {_num(g['latency_after_s'].median() * 1e3)} ms)")
    return "; ".join(parts)


def _network(rec: pd.DataFrame) -> str:
    parts = []
    for action in ("reset", "bandwidth"):
        for variant, g in _network_rows(rec, action).groupby("variant", sort=False):
            lost, told = int(g["lost"].sum()), int(g["refused"].sum())
            silent = " silently" if lost and not told else ""
            parts.append(f"{action}, {variant}: lost {lost}{silent} of {int(g['accepted'].sum()):,}, "
                         f"dup {int(g['duplicated'].sum())}, producer told of {told} failed sends, "
                         f"back to the pre-fault rate {_num(g['back_rate_s'].median())} s after")
    return "; ".join(parts) if parts else NOT_MEASURED


def _best(reps: pd.DataFrame) -> pd.Series | None:
    if reps.empty:
        return None
    per = reps.groupby(["variant", "size"], sort=False).median(numeric_only=True).reset_index()
    per = per.dropna(subset=["receiver_msgs_per_s"])
    if per.empty:
        return None
    return per.sort_values("receiver_msgs_per_s", kind="stable").iloc[-1]


def _throughput(reps: pd.DataFrame) -> str:
    best = _best(reps)
    if best is None:
        return NOT_MEASURED
    return (f"{_num(best['receiver_msgs_per_s'])} msg/s received, {_num(best['sender_msgs_per_s'])} sent "
            f"({best['variant']}, {int(best['size'])} B)")


def _latency(reps: pd.DataFrame) -> str:
    best = _best(reps)
    if best is None or "lat_p50_us" not in best:
        return NOT_MEASURED
    return f"p50 {_num(best['lat_p50_us'])} µs, p99 {_num(best['lat_p99_us'])} µs ({best['variant']})"


def feature_matrix(
    per_repetition: pd.DataFrame,
    recovery: pd.DataFrame,
    roles: Mapping[str, str],
    brokerless: Mapping[str, bool],
) -> pd.DataFrame:
    """One row per system (in order of appearance), ``MATRIX_COLUMNS``.

    ``per_repetition``: summary rows (``SUMMARY_COLUMNS``); ``recovery``: recovery rows with the case
    columns (``system``, ``variant``, ...); ``roles``: :func:`scenario_roles`; ``brokerless``: system ->
    True when it needs no broker.
    """
    systems = list(dict.fromkeys(per_repetition["system"])) if not per_repetition.empty else []
    if not recovery.empty:
        systems += [s for s in dict.fromkeys(recovery["system"]) if s not in systems]
    out = []
    for system in systems:
        reps = per_repetition[per_repetition["system"] == system] if not per_repetition.empty else per_repetition
        rec = recovery[recovery["system"] == system] if not recovery.empty else pd.DataFrame(
            columns=["variant", "carried_out_as", "lost", "accepted", "refused", "duplicated", "recovery_s"])
        labels = set(reps["label"].astype(str)) if len(reps) and "label" in reps else set()
        # one client: its label; several (rabbitmq through pika and Java): the system, each figure names its variant
        label = labels.pop() if len(labels) == 1 else str(system)
        free = bool(brokerless.get(system, False))
        base = _rows(reps, roles, "baseline")
        out.append({
            "system": label,
            "needs a broker": "no — peers connect directly" if free else "yes",
            "persistence (broker crash)": _persistence(rec, label, free),
            "confirms / transactions": _confirms(reps, rec),
            "ordering": _ordering(pd.concat([base, _rows(reps, roles, "slow-consumer")])),
            "loss under slow consumer": _slow(_rows(reps, roles, "slow-consumer")),
            "recovery after crash": _recovery(rec),
            "survives a partition without loss": _partition(rec),
            "latency under delay": _delay(rec),
            "resets, bandwidth limit": _network(rec),
            "throughput": _throughput(base),
            "latency": _latency(base),
        })
    return pd.DataFrame(out, columns=list(MATRIX_COLUMNS))
