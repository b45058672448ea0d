"""Latency under load: the knee, the sustained rule, the bisection, the ``rate: search`` scenario fields and
the summary's ``search`` table with its place in the report."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.metrics.search import RESOLUTION, fanout, knee, max_sustained, next_rate, sustained
from harness.pipeline._search import SEARCH_COLUMNS, search_table
from harness.runfolder import RunInfo
from harness.scenario import ScenarioError, parse_scenario

BASE = {"name": "s", "pattern": "queue", "message_sizes": [100], "duration": "1s"}


def test_knee_is_where_latency_bends_upward() -> None:
    rates = [1000, 2000, 4000, 8000, 16000, 32000]
    p99 = [100, 105, 110, 120, 900, 5000]  # flat, then up
    assert knee(rates, p99) == 8000
    assert knee(rates, [100, 101, 102, 103, 104, 105]) is None  # never rises: no knee
    assert knee([1000, 2000], [100, 1000]) is None  # two points cannot bend
    assert knee([1000, 2000, 4000, 8000], [100, 1000, 1100, 1200]) is None  # past the knee from the start
    assert knee(rates, [100, 105, 90, 120, 900, 5000]) == 8000  # a dip is noise


def test_sustained_needs_keeping_up_no_loss_and_p99_under_bound() -> None:
    assert sustained(1000, 990, 0, 400, 5000)
    assert not sustained(1000, 800, 0, 400, 5000)  # the receiver fell behind
    assert not sustained(1000, 1000, 1, 400, 5000)  # lost one
    assert not sustained(1000, 1000, 0, 6000, 5000)  # p99 over the bound
    assert not sustained(1000, math.nan, 0, 400, 5000)
    assert fanout("pubsub", 4, 2) == 2 and fanout("queue", 4, 1) == 1


@pytest.mark.parametrize("capacity", [1500.0, 37_000.0, 250_000.0])
def test_bisection_brackets_the_capacity(capacity: float) -> None:
    tried: dict[float, bool] = {}
    while (rate := next_rate(tried, 1000, 400_000)) is not None:
        assert rate not in tried
        tried[rate] = rate <= capacity
    best = max_sustained(tried)
    above = min(r for r, ok in tried.items() if not ok)
    assert best <= capacity < above and above / best <= RESOLUTION


def test_bisection_ends_at_the_range() -> None:
    tried: dict[float, bool] = {}
    while (rate := next_rate(tried, 1000, 8000)) is not None:
        tried[rate] = True
    assert max(tried) == 8000
    assert next_rate({1000: False}, 1000, 8000) is None and math.isnan(max_sustained({1000: False}))


def test_scenario_fields() -> None:
    sc = parse_scenario({**BASE, "rate": "search", "p99_bound": "5ms", "search_range": [500, 20000]})
    assert sc.searches and sc.rates == () and sc.p99_bound == pytest.approx(0.005)
    assert sc.search_range == (500.0, 20000.0)
    assert sc.as_dict()["p99_bound"] == pytest.approx(0.005)
    assert not parse_scenario({**BASE, "rate": 1000}).searches
    for bad, field in (
        ({"rate": "search"}, "p99_bound"),
        ({"rate": 1000, "p99_bound": "5ms"}, "p99_bound"),
        ({"rate": "search", "p99_bound": "5ms", "search_range": [5000, 100]}, "search_range"),
        ({"rate": "search", "p99_bound": "fast"}, "p99_bound"),
    ):
        with pytest.raises(ScenarioError, match=f"field '{field}'"):
            parse_scenario({**BASE, **bad})


def _trials() -> pd.DataFrame:
    # the last trial is a retry of 5657/s that fell behind: its latency is not the sustained trial's
    rates = [1000.0, 2000.0, 4000.0, 8000.0, 5657.0, 5657.0]
    p99 = [200.0, 220.0, 300.0, 9000.0, 2500.0, 40000.0]
    return pd.DataFrame({
        "run_id": "r", "scenario": "search-queue", "system": "zmq", "variant": "default", "size": 100,
        "label": "pyzmq", "guarantee": "at-most-once", "rate": rates,
        "receiver_msgs_per_s": [r * 0.99 for r in rates[:3]] + [6000.0, 5650.0, 3000.0], "lost": 0,
        "lat_intended_p99_us": p99, "lat_p99_us": p99,
        "lat_intended_p50_us": [p / 4 for p in p99], "lat_p50_us": [p / 4 for p in p99],
    })


def test_search_table_from_the_trials(tmp_path: Path) -> None:
    run = RunInfo(path=tmp_path, run_id="r", complete=True, scenarios=(
        {"name": "search-queue", "pattern": "queue", "consumers": 1, "topics": 1, "p99_bound": 0.005},
    ))
    table = search_table(_trials(), [run])
    assert list(table.columns) == list(SEARCH_COLUMNS) and len(table) == 1
    row = table.iloc[0]
    assert row["max_sustained_rate"] == 5657.0  # 8000 fell behind and broke the bound
    assert row["trials"] == 6 and row["sustained_trials"] == 4 and row["p99_bound_us"] == 5000
    assert row["knee_rate"] == 4000.0
    assert (row["p50_at_max_us"], row["p99_at_max_us"]) == (625.0, 2500.0)  # the sustained trial's
    no_search = RunInfo(path=tmp_path, run_id="r", complete=True, scenarios=({"name": "search-queue"},))
    assert search_table(_trials(), [no_search]).empty


def test_a_searched_scenario_heads_with_its_max_sustained_rates(report_run: Path) -> None:
    from dataclasses import replace

    from harness.pipeline import summarize
    from harness.report._page import sentence
    from harness.report.headline import headlines
    from harness.report.tables import search_results_table

    summary = summarize(report_run, engine="pandas")
    bound = {"pubsub-rates": 1.0}  # 1 s: every trial that kept up is sustained
    runs = tuple(replace(run, scenarios=tuple({**sc, "p99_bound": bound.get(str(sc["name"]))}
                                              for sc in run.scenarios)) for run in summary.runs)
    summary = replace(summary, runs=runs, search=search_table(summary.per_repetition, runs))
    assert set(summary.search["scenario"]) == {"pubsub-rates"}
    head = next(h for h in headlines(summary) if h.scenario == "pubsub-rates")
    assert head.by_search and head.bound_us == 1e6
    expected = dict(zip(summary.search["system"], summary.search["max_sustained_rate"], strict=True))
    assert {row.system: row.msgs for row in head.rows} == {s: (0.0 if math.isnan(r) else r)
                                                           for s, r in expected.items()}
    assert "sustains the most" in sentence(head)
    table = search_results_table(summary)
    assert list(table["scenario"]) == ["pubsub-rates", "pubsub-rates"] and "1s" in set(table["p99 bound"])


def test_figures_show_a_searched_system_at_its_max_sustained_rate_only(tmp_path: Path) -> None:
    """The distribution and time-series figures draw one line per searched system (its trial at the max
    sustained rate), not one per trial; cases of scenarios without a search are all kept."""
    from types import SimpleNamespace

    from harness.report.figures import _at_max_sustained

    run = RunInfo(path=tmp_path, run_id="r", complete=True, scenarios=(
        {"name": "search-queue", "pattern": "queue", "consumers": 1, "topics": 1, "p99_bound": 0.005},
    ))
    summary = SimpleNamespace(search=search_table(_trials(), [run]))
    rows = _trials()[["run_id", "scenario", "system", "variant", "size", "rate"]]
    other = rows.assign(scenario="sweep")
    kept = _at_max_sustained(summary, pd.concat([rows, other], ignore_index=True))  # type: ignore[arg-type]
    assert sorted(kept[kept["scenario"] == "search-queue"]["rate"]) == [5657.0, 5657.0]
    assert len(kept[kept["scenario"] == "sweep"]) == len(other)
