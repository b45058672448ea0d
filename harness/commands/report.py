"""``mqbench report``: summarise one or several runs and write the HTML/Markdown report."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from harness.commands._terminal import EXIT_OK, fail

NAME = "report"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="summarise runs (PySpark or pandas) and write the HTML/Markdown report")
    p.add_argument("runs", nargs="*", help="run folders (default: the newest under --results)")
    p.add_argument("--results", default="results", help="where to look for the newest run (default: results)")
    p.add_argument("--out", help="output folder (default: the run folder; a new report-* folder for several)")
    p.add_argument("--engine", choices=("auto", "spark", "pandas"),
                   help="what computes a summary a run lacks: auto (default; $MQBENCH_ENGINE if set) is Spark, "
                        "pandas where no Java runtime exists; pandas is the reference engine (docs/pipeline.md)")
    p.add_argument("--spark-master", help="Spark master URL (default local[*])")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.pipeline import PipelineError, default_engine, newest_run
    from harness.report import write_report
    from harness.runfolder import local_path

    try:
        engine = args.engine or default_engine()
        runs = [local_path(r) for r in args.runs] if args.runs else [newest_run(local_path(args.results))]
        for r in runs:
            if not (r / "manifest.json").is_file():
                raise PipelineError(f"{r}: not a run folder (no manifest.json); give a folder under results/")
        with console.status(f"summarising {len(runs)} run(s) ({engine} engine)…"):
            path = write_report(runs, local_path(args.out) if args.out else None, engine=engine,
                                spark_master=args.spark_master)
    except PipelineError as exc:
        return fail(exc)
    console.print(f"report: {path}")
    return EXIT_OK
