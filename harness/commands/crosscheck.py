"""``mqbench crosscheck``: each broker's own benchmark tool against the broker the harness measures.

Prints one table (median over repetitions of each variant x tool; the per-repetition rows are in the run
folder's ``crosscheck.csv``) within :data:`TABLE_WIDTH` columns. Exit status: 0 complete, 1 a tool failed
(or, with CI=true, was missing), 2 unusable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from harness import units
from harness.commands._options import add_run_options, guarded, parse_brokers, parse_systems
from harness.commands._terminal import (
    Column,
    narrow,
    numeric,
    run_footer,
    table,
)
from harness.commands.compare import load_all
from harness.drivers import BROKERLESS, SYSTEMS

NAME = "crosscheck"
DEFAULT_SCENARIOS = ("scenarios/crosscheck.yaml",)
TABLE_WIDTH = 100
_COLUMNS = (Column("system/variant"), Column("tool"), Column("tool\nas"), *numeric("harness\nmsg/s", "tool\nmsg/s", "R"),
            Column("vs"), *numeric("tool\np50", "tool\np99"), Column("bound"))
_LATENCY = {"one-way": "1-way", "round trip": "rtt"}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="run each broker's own benchmark tool beside the harness and report harness ÷ tool (R)")
    add_run_options(p, DEFAULT_SCENARIOS, ",".join(s for s in SYSTEMS if s not in BROKERLESS))
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.crosscheck.run import crosscheck

    console = narrow(console, TABLE_WIDTH)
    outcome = guarded(console, "brokers and tools", lambda: crosscheck(
        load_all(args.scenarios or DEFAULT_SCENARIOS, args.repetitions),
        systems=parse_systems(args.systems), out_root=Path(args.out), brokers=parse_brokers(args.broker),
        backend=args.backend, console=console, strict=os.environ.get("CI") == "true",
        write_report=not args.no_report,
    ))
    if isinstance(outcome, int):
        return outcome
    console.print(crosscheck_table(outcome.rows), width=TABLE_WIDTH)
    for line in capacity(outcome.rows):
        console.print(line, highlight=False, markup=False)
    for line in not_measured(outcome.rows):
        console.print(line, highlight=False)
    return run_footer(console, outcome.run_dir, outcome.complete, outcome.problems)


def crosscheck_table(rows: pd.DataFrame) -> Table:
    """Median over repetitions per variant x tool x reference; R < 0.5 against the tool with the row's
    settings marked client-bound; against the tool at its best, R is the fraction of the broker's capacity."""
    from harness.metrics.crosscheck import CLIENT_BOUND, median_rows

    medians = median_rows(rows.to_dict("records")) if not rows.empty else []
    cells = []
    for m in medians:
        variant = m["system"] if m["variant"] in ("default", "", None) else f"{m['system']}/{m['variant']}"
        tool, way = str(m["tool"]), "best" if m["reference"] == "best" else "row"
        if m["status"] != "ok":
            cells.append([variant, tool, way, "", "", "", "", "", "", m["status"]])
            continue
        cells.append([
            variant, tool, way, units.count(m["harness_rate"]), units.count(m["tool_rate"]), _r(m["R"]),
            "send" if m["rate_kind"] == "sender" else "recv",
            " ".join(x for x in (units.duration_us(m["tool_lat_p50_us"]),
                                 _LATENCY.get(m["tool_lat_kind"], m["tool_lat_kind"])) if x),
            units.duration_us(m["tool_lat_p99_us"]), "client" if m["client_bound"] else "",
        ])
    reps = max((m["reps"] for m in medians), default=0)
    title = (f"crosscheck: median of {reps} repetitions; R = harness receiver msg/s ÷ tool's (receiver, or "
             f"sender where vs = send); tool p50 with its kind (1-way, rtt); tool as: row = with the row's settings, best = at its best on the broker, "
             f"where R is the fraction of the broker's capacity the row reached; bound = client: R < {CLIENT_BOUND:g} against the tool with the row's "
             "settings, the row measures its client")
    return table(_COLUMNS, cells, title=title, width=TABLE_WIDTH)


def capacity(rows: pd.DataFrame) -> list[str]:
    """Per row variant, in words: the fraction of the broker's capacity it reached, and R."""
    from harness.metrics.crosscheck import capacity_sentences, median_rows
    from harness.report._context import row_name

    return capacity_sentences(median_rows(rows.to_dict("records")), row_name) if not rows.empty else []


def not_measured(rows: pd.DataFrame) -> list[str]:
    """One line per tool that gave no figure: what is missing or what failed, and what to do."""
    if rows.empty:
        return []
    bad = rows[rows["status"] != "ok"].drop_duplicates(["system", "tool", "note"])
    return [f"{r.system}: {r.tool}: {r.status}: {r.note}" for r in bad.itertuples()]


def _r(value: float) -> str:
    return "" if not math.isfinite(value) else f"{value:.2f}"
