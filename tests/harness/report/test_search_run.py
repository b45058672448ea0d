"""``rate: search`` through the real runner (zmq): the trials are ordinary cases, the bisection stops at the
range's end when every trial is sustained, and the summary's ``search`` table says so."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
from rich.console import Console

from harness.compare import compare
from harness.runner.search import TRIES
from harness.scenario import parse_scenario


def test_search_trials_become_cases_and_a_search_table(tmp_path: Path) -> None:
    scenario = parse_scenario({
        "name": "find", "pattern": "queue", "message_sizes": [100], "messages": 300, "warmup": 50,
        "rate": "search", "p99_bound": "10s", "search_range": [500, 2000],
    }, "test.yaml")
    with open(os.devnull, "w") as sink:
        out = compare([scenario], systems=["zmq"], out_root=tmp_path, console=Console(file=sink),
                      write_report=False)
    assert out.complete, out.problems
    rates = list(out.summary["rate"])
    # doubling up to the range's end; a trial a stall of the shared machine failed is tried once more
    assert sorted(set(rates)) == [500.0, 1000.0, 2000.0] and len(rates) <= 3 * TRIES
    search = pd.read_parquet(out.run_dir / "search.parquet")
    assert len(search) == 1
    row = search.iloc[0]
    assert row["system"] == "zmq" and row["trials"] == len(rates) and row["sustained_trials"] == 3
    assert row["max_sustained_rate"] == 2000.0 and row["p99_bound_us"] == 10e6
