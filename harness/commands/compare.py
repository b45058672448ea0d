"""``mqbench compare``: run scenarios over systems into one results folder, then print the end-of-run table.

The table fits :data:`TABLE_WIDTH` columns: one table per scenario, the median over repetitions of each
case, numbers with scaled units (k/M msg/s, µs/ms/s); the exact figures are in the run folder's summary.
Exit status: 0 complete, 1 the run finished incomplete, 2 unusable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
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
from harness.drivers import SYSTEMS
from harness.metrics.bound import MARK
from harness.runfolder import local_path
from harness.scenario import Scenario, ScenarioError, load_scenarios

NAME = "compare"
DEFAULT_SCENARIOS = ("scenarios/smoke.yaml",)
TABLE_WIDTH = 100

_CASE = ["scenario", "pattern", "label", "variant", "size", "rate"]
_COLUMNS = (Column("system"), *numeric("size", "rate\nmsg/s", "sender\nmsg/s", "receiver\nmsg/s", "p50", "p99",
                                       "p99.9", "max", "lost", "dup", "ooo"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="run scenarios over systems and write a results folder")
    add_run_options(p, DEFAULT_SCENARIOS, ",".join(SYSTEMS))
    p.add_argument("--spark-master", metavar="URL",
                   help="run each case's producers and consumers as one barrier stage on this Spark cluster "
                        "(spark://HOST:PORT; docs/cluster.md) and summarise there")
    p.add_argument("--engine", choices=("auto", "spark", "pandas"),
                   help="what computes the summary: auto (default; $MQBENCH_ENGINE if set) is Spark, pandas where "
                        "no Java runtime exists; pandas is the reference engine (docs/pipeline.md)")
    return p


def load_all(paths: Sequence[str], repetitions: int | None) -> list[Scenario]:
    """Every scenario of ``paths``, with ``repetitions`` overridden; ScenarioError if two share a name."""
    scenarios: list[Scenario] = []
    for path in paths:
        scenarios.extend(load_scenarios(path))
    if repetitions is not None:
        if repetitions < 1:
            raise ScenarioError(f"--repetitions must be >= 1, got {repetitions}")
        scenarios = [s.with_repetitions(repetitions) for s in scenarios]
    names = [s.name for s in scenarios]
    for n in names:
        if names.count(n) > 1:
            raise ScenarioError(f"two scenarios are named {n!r}; names must differ within one run")
    return scenarios


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.compare import compare

    # Everything compare prints (progress, problems, tables) wraps within TABLE_WIDTH columns.
    console = narrow(console, TABLE_WIDTH)
    outcome = guarded(console, "brokers and workers", lambda: compare(
        load_all(args.scenarios or DEFAULT_SCENARIOS, args.repetitions),
        systems=parse_systems(args.systems),
        out_root=local_path(args.out),
        brokers=parse_brokers(args.broker),
        backend=args.backend,
        console=console,
        write_report=not args.no_report,
        spark_master=args.spark_master,
        engine=args.engine,
    ))
    if isinstance(outcome, int):
        return outcome
    tables = end_of_run_tables(outcome.summary)
    for t in tables:
        console.print(t, width=min(console.width, TABLE_WIDTH))
    if not tables:
        console.print("no case produced results")
    return run_footer(console, outcome.run_dir, outcome.complete, outcome.problems)


def _repetitions(counts: pd.Series) -> str:
    low, high = int(counts.min()), int(counts.max())
    text = str(low) if low == high else f"{low}–{high}"
    return f"{text} repetition{'s' if high > 1 else ''}"


def end_of_run_tables(summary: pd.DataFrame) -> list[Table]:
    """One table per scenario: each case's median over repetitions (loss counts summed, max of max)."""
    if summary.empty:
        return []
    frame = summary.copy()
    if "clock_uncertainty_us" not in frame:  # a summary from before runs on a cluster
        frame["clock_uncertainty_us"] = float("nan")
    if "parity" not in frame:  # a summary from before parity labels
        frame["parity"] = ""
    cases = frame.groupby(_CASE, sort=False, dropna=False).agg(
        reps=("repetition", "count"),
        snd=("sender_msgs_per_s", "median"),
        rcv=("receiver_msgs_per_s", "median"),
        p50=("lat_p50_us", "median"),
        p99=("lat_p99_us", "median"),
        p999=("lat_p99_9_us", "median"),
        mx=("lat_max_us", "max"),
        lost=("lost", "sum"),
        dup=("duplicated", "sum"),
        ooo=("out_of_order", "sum"),
        kind=("latency_kind", "first"),
        bound=("client_bound", _mostly_bound),
        clock=("clock_uncertainty_us", "max"),
        parity=("parity", "first"),
    ).reset_index()
    tables = []
    for scenario, rows in cases.groupby("scenario", sort=False):
        first = rows.iloc[0]
        kind = "round-trip" if first["kind"] == "round-trip" else "one-way"
        title = f"{scenario} ({first['pattern']}): median of {_repetitions(rows['reps'])}; {kind} latency"
        if rows["clock"].gt(0).any():  # 0: round trips, or every role on one host
            title += f" between hosts, ±{units.duration_us(rows['clock'].max())} (clock offsets)"
        records: list[dict[str, Any]] = rows.to_dict("records")  # type: ignore[assignment]
        cells = [
            [
                (str(r["label"]) if r["variant"] in ("default", None) else f"{r['label']}/{r['variant']}")
                + (f" {MARK}" if r["bound"] else ""),
                units.size(int(r["size"])),
                units.rate_text(r["rate"], units.count),
                units.count(r["snd"]),
                units.count(r["rcv"]),
                *(units.uncertain_us(r[k], r["clock"], units.duration_us, spread=False) for k in ("p50", "p99", "p999", "mx")),
                *(units.count(r[k]) for k in ("lost", "dup", "ooo")),
            ]
            for r in records
        ]
        notes = [f"{MARK} bound by its own client's CPU (summary.csv: client_bound)"] if rows["bound"].any() else []
        if rows["clock"].gt(0).any():
            notes.append("≤: a latency smaller than the clocks' offset uncertainty (summary.csv: clock_uncertainty_us)")
        notes += parity_notes(records)
        caption = "\n".join(notes) or None
        tables.append(table(_COLUMNS, cells, title=title, caption=caption, width=TABLE_WIDTH))
    return tables


def parity_notes(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per broker row: its shape, what a send waits for and when messages reach the disk, so a reader
    sees which rows are like for like (libraries have no broker: no line)."""
    out = []
    for r in records:
        parity = str(r.get("parity") or "")
        if parity and not parity.startswith("no broker"):
            name = str(r["label"]) if r["variant"] in ("default", None) else f"{r['label']}/{r['variant']}"
            out.append(f"{name}: {parity}")
    return list(dict.fromkeys(out))


def _mostly_bound(labels: pd.Series) -> bool:
    """Whether most repetitions of a case carry the CPU-based client-bound label."""
    marked = labels.fillna("").astype(str) != ""
    return bool(marked.sum() * 2 > len(marked))
