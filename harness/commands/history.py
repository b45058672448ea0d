"""``mqbench history``: how the headline figures and in-run ratios moved across runs and commits.

Indexes every run under ``--results`` that the results lake lacks (summarising one that has no summary
yet, with Spark), then reads the lake's ``summary`` and ``runs`` tables and writes ``<results>/history/``:
``history.csv`` (one row per run, case and metric), ``figures/history.png`` and ``history.html``; prints
per case and metric its first and last value. Exit status: 0 written, 2 unusable input.
"""

from __future__ import annotations

import argparse
import base64
import html
from typing import Any

from rich.console import Console

from harness import units
from harness.commands._options import add_reference_option
from harness.commands._terminal import EXIT_OK, Column, fail, numeric, table

NAME = "history"
_COLUMNS = (Column("case"), Column("metric"), *numeric("runs", "first", "last", "last/first"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="how each system's rate, p99 and ratios moved across the runs in the results lake")
    p.add_argument("--results", default="results", help="the folder of the run folders and the lake (default: results)")
    p.add_argument("--out", help="output folder (default: RESULTS/history)")
    p.add_argument("--scenario", action="append", default=[], metavar="NAME", help="only these scenarios (repeatable)")
    p.add_argument("--engine", choices=("auto", "spark", "pandas"),
                   help="for runs without a summary yet: auto (default; $MQBENCH_ENGINE if set) is Spark, pandas "
                        "without Java")
    p.add_argument("--spark-master", help="Spark master URL (default local[*])")
    add_reference_option(p)
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.pipeline import PipelineError, default_engine, index_results, summarise_run
    from harness.report.figures import png_bytes
    from harness.report.history import history_figure, history_table, moves
    from harness.runfolder import local_path, write_frame

    results = local_path(args.results)
    try:
        engine = args.engine or default_engine()
        with console.status("indexing runs into the results lake…"):
            lake, added, skipped = index_results(
                results, lambda path: summarise_run(path, engine=engine, spark_master=args.spark_master))
    except PipelineError as exc:
        return fail(exc)
    for line in skipped:
        console.print(f"[yellow]not in the lake[/]: {line}", highlight=False)
    summary, runs = lake.read("summary"), lake.read("runs")
    if args.scenario:
        summary = summary[summary["scenario"].isin(args.scenario)] if not summary.empty else summary
    if summary.empty:
        return fail(f"{lake.root}: no summarised runs{' of ' + ', '.join(args.scenario) if args.scenario else ''}; "
                    "run `make compare` first")
    reference = str(args.reference).partition(":")[0]
    frame = history_table(summary, runs, reference)
    out = local_path(args.out) if args.out else results / NAME
    write_frame(frame, out / "history.parquet", csv=True)
    fig = history_figure(frame, f"History of {frame['run_id'].nunique()} runs (results lake {lake.root})")
    png = png_bytes(fig) if fig is not None else b""
    if png:
        (out / "figures").mkdir(parents=True, exist_ok=True)
        (out / "figures" / "history.png").write_bytes(png)
    (out / "history.html").write_text(_page(frame, png), encoding="utf-8")
    console.print(f"lake: {lake.root} ({len(lake.run_ids())} runs, {len(added)} added now)", highlight=False)
    moved = moves(frame)
    cells = [[f"{r['scenario']} {r['label']}/{r['variant']} {units.size(int(r['size']))}", r["metric"],
              str(r["runs"]), units.count(r["first"]), units.count(r["last"]), f"{r['last/first']:.3f}"]
             for r in moved.to_dict("records")]
    if cells:
        console.print(table(_COLUMNS, cells, title="first and last run of each case"))
    console.print(f"history: {out / 'history.html'}", highlight=False)
    return EXIT_OK


def _page(frame: Any, png: bytes) -> str:
    runs = frame.drop_duplicates("run_id")
    figure = (f"<img alt='history' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>"
              if png else "<p>One run only: a history needs two or more.</p>")
    rows = "".join(f"<tr><td>{html.escape(str(r.run_id))}</td><td>{html.escape(str(r.started))}</td>"
                   f"<td>{html.escape(str(r.git_revision)[:10])}</td></tr>" for r in runs.itertuples())
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>mqbench history</title></head><body>"
            f"<h1>mqbench history: {len(runs)} runs</h1>{figure}"
            "<p>Each system's receiver msgs/s and p99 latency (median over the run's repetitions) and the in-run "
            "ratios to the reference (the regression check's ratios, median per run). Data: history.csv.</p>"
            f"<table><tr><th>run</th><th>started</th><th>commit</th></tr>{rows}</table></body></html>")
