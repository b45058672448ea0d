"""The ``search`` summary table: per searched system variant and size, the highest sustained offered rate
and the knee of its latency-vs-load curve, judged from the summary's trials by ``harness.metrics.search``
(the same rule the search applied while it ran)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from harness.metrics.search import fanout, knee, sustained
from harness.runfolder import RunInfo

SEARCH_KEYS = ("run_id", "scenario", "system", "variant", "size")
#: ``p50_at_max_us`` / ``p99_at_max_us``: latency from the intended send time (the actual one when no schedule
#: was recorded) of the sustained trials at the max rate, their median when the rate was tried more than once.
SEARCH_COLUMNS = (*SEARCH_KEYS, "label", "guarantee", "p99_bound_us", "trials", "sustained_trials",
                  "max_sustained_rate", "knee_rate", "p50_at_max_us", "p99_at_max_us")


def search_table(per_repetition: pd.DataFrame, runs: Iterable[RunInfo]) -> pd.DataFrame:
    """One row per (run, ``rate: search`` scenario, system variant, size); empty when nothing searched."""
    searched = {
        (run.run_id, str(sc.get("name"))): sc for run in runs for sc in run.scenarios if sc.get("p99_bound")
    }
    rows = []
    if per_repetition.empty or not searched:
        return pd.DataFrame(columns=list(SEARCH_COLUMNS))
    for key, trials in per_repetition.groupby(list(SEARCH_KEYS), sort=True):
        sc = searched.get((str(key[0]), str(key[1])))
        if sc is None:
            continue
        bound_us = float(sc["p99_bound"]) * 1e6
        share = fanout(str(sc.get("pattern")), int(sc.get("consumers") or 1), int(sc.get("topics") or 1))
        p50 = trials["lat_intended_p50_us"].fillna(trials["lat_p50_us"])
        p99 = trials["lat_intended_p99_us"].fillna(trials["lat_p99_us"])
        ok = [
            sustained(float(rate), float(per_s) / share, int(lost), float(p), bound_us)
            for rate, per_s, lost, p in zip(trials["rate"], trials["receiver_msgs_per_s"], trials["lost"], p99,
                                            strict=True)
        ]
        good = trials["rate"][ok]
        kept = good.index[good == good.max()]  # the sustained trials at the max rate (none: empty)
        rows.append({
            **dict(zip(SEARCH_KEYS, key, strict=True)),
            "label": trials["label"].iloc[0],
            "guarantee": trials["guarantee"].iloc[0],
            "p99_bound_us": bound_us,
            "trials": len(trials),
            "sustained_trials": int(sum(ok)),
            "max_sustained_rate": float(good.max()) if not good.empty else math.nan,
            "knee_rate": knee(list(trials["rate"].astype(float)), list(p99.astype(float))) or math.nan,
            "p50_at_max_us": float(p50[kept].median()) if len(kept) else math.nan,
            "p99_at_max_us": float(p99[kept].median()) if len(kept) else math.nan,
        })
    return pd.DataFrame(rows, columns=list(SEARCH_COLUMNS))
