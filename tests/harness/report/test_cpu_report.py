"""CPU figures and the CPU-based client-bound mark in the report and the terminal table, on a synthetic run
whose CPU table says: kafka's producer saturated a core while the broker idled (client-bound), zmq's
producer saturated one (sender-bound, no broker)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from harness.commands.compare import TABLE_WIDTH, end_of_run_tables
from harness.metrics.bound import MARK, RULE
from harness.pipeline import Summary, summarize
from harness.report import write_report
from harness.report._page import caption, sentence
from harness.report.headline import figure, headlines
from harness.report.tables import cpu_table, results_table
from harness.runfolder import RunFolder
from harness.runfolder.schema import CPU, CPU_TABLE_COLUMNS
from tests.harness.pipeline.synthetic import SCENARIOS, build_run

PCT = {"kafka": {"harness": 4.0, "broker": 30.0, "producer-0": 97.0, "producer-1": 50.0, "consumer-0": 60.0},
       "zmq": {"harness": 4.0, "producer-0": 95.0, "producer-1": 50.0, "consumer-0": 70.0}}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_run(tmp_path_factory.mktemp("cpu-run"), "run-cpu", scenarios=("queue-2to1",),
                     systems=("zmq", "kafka"))
    spec = SCENARIOS["queue-2to1"]
    rows = [
        {"run_id": "run-cpu", "scenario": "queue-2to1", "pattern": "queue", "system": system, "variant": "default",
         "size": size, "rate": math.nan, "repetition": rep, "case": f"{system}-{size}-{rep}", "role": role,
         "cpu_s": pct / 100, "wall_s": 1.0, "core_pct": pct, "note": ""}
        for system, roles in PCT.items() for size in spec["sizes"] for rep in range(spec["repetitions"])
        for role, pct in roles.items()
    ]
    RunFolder.open(path).write_table(CPU, pd.DataFrame(rows, columns=list(CPU_TABLE_COLUMNS)), csv=True)
    return path


@pytest.fixture(scope="module")
def summary(run: Path) -> Summary:
    return summarize(run, engine="pandas")


def test_the_summary_carries_the_cpu_figures_and_labels(summary: Summary) -> None:
    per = summary.per_repetition.set_index("system")
    assert (per.loc["kafka", "broker_cpu_pct"] == 30.0).all() and (per.loc["kafka", "client_cpu_pct"] == 97.0).all()
    assert per.loc["kafka", "client_bound"].str.startswith("client-bound: producer-0 used 97%").all()
    assert per.loc["zmq", "client_bound"].str.startswith("sender-bound: producer-0 used 95%").all()
    agg = summary.aggregate.set_index("system")
    assert (agg.loc["kafka", "client_cpu_pct_mean"] == 97.0).all()
    assert agg.loc["kafka", "client_bound"].str.startswith("client-bound").all()


def test_headline_marks_bound_bars_with_the_two_figures(summary: Summary) -> None:
    (head,) = headlines(summary)
    rows = {row.system: row for row in head.rows}
    assert rows["kafka"].bound and (rows["kafka"].client_cpu, rows["kafka"].broker_cpu) == (97.0, 30.0)
    text = sentence(head)
    assert f"{MARK} bound by its own client's CPU" in text and "client 97% · broker 30%" in text
    assert RULE in caption(head)
    fig = figure(summary, head)
    bars = fig.axes[0]
    hatched = [p for p in bars.patches if p.get_hatch()]
    assert len(hatched) == 2  # both rows are bound (kafka by its client, zmq by its sender)
    labels = [t.get_text() for t in bars.texts]
    assert any("client 97% · broker 30%" in t for t in labels)
    assert MARK in bars.get_xlabel()


def test_tables_and_pages_show_the_cpu_columns(run: Path, summary: Summary) -> None:
    results = results_table(summary)
    assert {"broker CPU", "client CPU"} <= set(results.columns)
    assert results["system"].str.endswith(MARK).all()
    cpu = cpu_table(summary)
    kafka = cpu[cpu["system"].str.startswith("kafka")]
    assert list(kafka["broker CPU"]) == ["30%", "30%"] and list(kafka["client CPU"]) == ["97%", "97%"]
    assert (cpu.loc[cpu["system"] == "pyzmq", "broker CPU"] == "–").all()
    html = write_report([run]).read_text()
    assert "CPU per case" in html and "client-bound: producer-0 used 97%" in html
    assert "CPU per case" in (run / "summary.md").read_text()


def test_the_terminal_table_marks_bound_rows_within_100_columns(summary: Summary) -> None:
    (only,) = end_of_run_tables(summary.per_repetition)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(only, width=TABLE_WIDTH)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    marked = [line for line in lines if f" {MARK} " in line or line.rstrip().endswith(MARK)]
    assert len(marked) >= 4  # every row (2 systems x 2 sizes), and the caption
