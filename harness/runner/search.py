"""``rate: search``: per system variant and message size, a bisection over short open-loop trials for the
highest offered rate the receiver keeps up with while p99 (from the intended send time) stays under the
scenario's ``p99_bound``. The rule and the bisection are ``harness.metrics.search``'s; each trial is an
ordinary case (its raw records and manifest entry are written like any other, so the summary and the
latency-vs-load chart include it) and prints what it measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from rich.console import Console

from harness import units
from harness.metrics.compute import quantiles, throughput
from harness.metrics.search import fanout, max_sustained, next_rate, sustained
from harness.runfolder import RunFolder
from harness.runner.case import CaseResult, CaseSpec, System, run_cases
from harness.scenario import Scenario, Variant

TRIES = 2  # trials of one rate before it counts as not sustained


def measured(result: CaseResult) -> tuple[float, int, float]:
    """(receipts per second, lost, p99 µs from the intended send time) of a trial's measured rows; sends the
    producer was told failed are not lost."""
    rows = result.rows[~result.rows["warmup"].astype(bool)]
    got = rows["t_recv"].notna()
    failed = 0 if result.send_errors is None else len(result.send_errors)
    lost = max(int((~got).sum()) - failed, 0)
    recv = rows.loc[got, "t_recv"].to_numpy(dtype=np.int64)
    start = rows.loc[got, "t_intended"].fillna(rows.loc[got, "t_send"]).to_numpy(dtype=np.int64)
    p99 = quantiles(recv - start, [0.99])[0] / 1000 if recv.size else float("nan")
    return throughput(recv), lost, p99


def run_searches(
    searches: Sequence[tuple[Scenario, Variant, int]], systems: Mapping[str, System], run: RunFolder,
    console: Console, problems: list[str],
) -> bool:
    """Run every search (``RunPlan.searches``: scenario, variant, size) into ``run``; True when every trial
    completed."""
    complete = True
    for sc, variant, size in searches:
        assert sc.p99_bound is not None
        bound_us = sc.p99_bound * 1e6
        tried: dict[float, bool] = {}
        results: list[CaseResult] = []
        while (rate := next_rate(tried, *sc.search_range)) is not None:
            # A rate that fails is tried once more before the bisection moves below it: one stall of a shared
            # machine (a late wake-up, a page of swap) must not end a search at its lowest rate.
            for attempt in range(TRIES):
                spec = CaseSpec(sc, variant, size, rate, attempt)
                results.clear()
                complete = run_cases([spec], systems, run, console, problems, observe=results.append) and complete
                if not results:  # the trial failed outright: not sustained
                    tried[rate] = False
                    continue
                per_s, lost, p99 = measured(results[0])
                tried[rate] = sustained(rate, per_s / fanout(sc.pattern.value, sc.consumers, sc.topics), lost, p99,
                                        bound_us)
                console.print(
                    f"search {sc.name} {variant.system}/{variant.name} {units.size(size)} @ {units.count(rate)} "
                    f"msgs/s: received {units.count(per_s)} msgs/s, lost {lost}, p99 {units.duration_us(p99)} from "
                    f"intended → {'sustained' if tried[rate] else 'not sustained'}", highlight=False,
                )
                if tried[rate]:
                    break
        best = max_sustained(tried)
        console.print(f"search {sc.name} {variant.system}/{variant.name}: highest sustained rate "
                      f"{units.count(best)} msgs/s (p99 bound {units.duration_us(bound_us)})", highlight=False)
    return complete
