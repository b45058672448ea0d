"""`mqbench`: the command line. Thin: parsing and printing only; the work lives in the packages.

Errors a user can cause end as one line on stderr and exit status 2; Ctrl-C and SIGTERM stop the run,
leave its folder marked incomplete and exit 130.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from harness.drivers import SYSTEMS
from harness.drivers.base import DriverError
from harness.scenario import Scenario, ScenarioError, load_scenarios

DEFAULT_SCENARIOS = ("scenarios/smoke.yaml",)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _err(console: Console, message: str, code: int = EXIT_USAGE) -> int:
    console.print(f"[bold red]mqbench:[/] {message}", highlight=False, soft_wrap=True)
    return code


def _parse_brokers(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise ScenarioError(f"--broker takes NAME=URL (e.g. rabbitmq=amqp://guest:guest@127.0.0.1:5672/), got {item!r}")
        if name not in SYSTEMS:
            raise ScenarioError(f"--broker: unknown system {name!r}; known systems: {', '.join(SYSTEMS)}")
        out[name] = url
    return out


def _load_all(paths: Sequence[str], repetitions: int | None) -> list[Scenario]:
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


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from harness.compare import CompareError, compare

    systems = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None
    try:
        scenarios = _load_all(args.scenarios or DEFAULT_SCENARIOS, args.repetitions)
        brokers = _parse_brokers(args.broker or [])
        outcome = compare(
            scenarios,
            systems=systems,
            out_root=Path(args.out),
            brokers=brokers,
            backend=args.backend,
            console=console,
            write_report=not args.no_report,
        )
    except (ScenarioError, CompareError, DriverError) as exc:
        return _err(console, str(exc))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: brokers and workers stopped; the run folder is marked incomplete[/]")
        return EXIT_INTERRUPTED
    print_summary(outcome.summary, console)
    state = "complete" if outcome.complete else "INCOMPLETE"
    console.print(f"results: {outcome.run_dir}  ({state})")
    for p in outcome.problems:
        console.print(f"  [yellow]-[/] {p.splitlines()[0]}", highlight=False)
    return 0 if outcome.complete else 1


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def print_summary(summary: pd.DataFrame, console: Console) -> None:
    """Median over repetitions per case; loss counts summed. Latency in µs."""
    if summary.empty:
        console.print("no case produced results")
        return
    keys = ["scenario", "pattern", "label", "variant", "size", "rate"]
    df = summary.copy()
    df["rate"] = df["rate"].fillna(-1)
    agg = df.groupby(keys, sort=False).agg(
        reps=("repetition", "count"),
        snd=("sender_msgs_per_s", "median"),
        rcv=("receiver_msgs_per_s", "median"),
        rcv_mb=("receiver_mb_per_s", "median"),
        p50=("lat_p50_us", "median"),
        p99=("lat_p99_us", "median"),
        p999=("lat_p99_9_us", "median"),
        mx=("lat_max_us", "max"),
        lost=("lost", "sum"),
        dup=("duplicated", "sum"),
        ooo=("out_of_order", "sum"),
        kind=("latency_kind", "first"),
    ).reset_index()
    table = Table(title="median over repetitions (latency in µs; reqrep latency is the round trip)")
    for col, justify in [
        ("scenario", "left"), ("system", "left"), ("variant", "left"), ("size B", "right"), ("rate", "right"),
        ("reps", "right"), ("sender msg/s", "right"), ("receiver msg/s", "right"), ("recv MB/s", "right"),
        ("latency", "left"), ("p50", "right"), ("p99", "right"), ("p99.9", "right"), ("max", "right"),
        ("lost", "right"), ("dup", "right"), ("ooo", "right"),
    ]:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    records: list[dict[str, Any]] = agg.to_dict("records")  # type: ignore[assignment]
    for r in records:
        table.add_row(
            str(r["scenario"]), str(r["label"]), str(r["variant"]), _fmt(int(r["size"])),
            "max" if r["rate"] < 0 else _fmt(float(r["rate"])), str(r["reps"]), _fmt(r["snd"]), _fmt(r["rcv"]),
            _fmt(r["rcv_mb"], 1), str(r["kind"]), _fmt(r["p50"], 1), _fmt(r["p99"], 1), _fmt(r["p999"], 1),
            _fmt(r["mx"], 1), _fmt(int(r["lost"])), _fmt(int(r["dup"])), _fmt(int(r["ooo"])),
        )
    console.print(table)


def cmd_systems(args: argparse.Namespace, console: Console) -> int:
    from harness.compare import system_status

    try:
        brokers = _parse_brokers(args.broker or [])
    except ScenarioError as exc:
        return _err(console, str(exc))
    table = Table(title="systems")
    table.add_column("system")
    table.add_column("ready")
    table.add_column("backend")
    table.add_column("detail")
    for system in SYSTEMS:
        st = system_status(system, brokers, args.backend)
        table.add_row(system, "yes" if st.ready else "no", st.backend or "–", st.reason)
    console.print(table)
    return 0


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    try:
        for path in args.scenarios:
            for sc in load_scenarios(path):
                sizes = ", ".join(str(s) for s in sc.message_sizes)
                amount = f"{sc.messages} messages" if sc.messages is not None else f"{sc.duration:g} s"
                console.print(f"{path}: {sc.name}: ok ({sc.pattern.value}; sizes {sizes} B; {amount} per producer)")
    except ScenarioError as exc:
        return _err(console, str(exc))
    return 0


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from harness.pipeline import PipelineError, newest_run
    from harness.report import write_report

    try:
        runs = [Path(r) for r in args.runs] if args.runs else [newest_run(Path(args.results))]
        for r in runs:
            if not (r / "manifest.json").is_file():
                raise PipelineError(f"{r}: not a run folder (no manifest.json); give a folder under results/")
        with console.status(f"summarising {len(runs)} run(s) ({args.engine} engine)…"):
            path = write_report(runs, Path(args.out) if args.out else None, engine=args.engine,
                                spark_master=args.spark_master)
    except PipelineError as exc:
        return _err(console, str(exc))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    console.print(f"report: {path}")
    return 0


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    from harness.runner.calibrate import CalibrationError, calibrate

    if args.size < 1 or args.messages < 2 or args.repetitions < 1:
        return _err(console, "calibrate needs --size >= 1, --messages >= 2 and --repetitions >= 1")
    try:
        return calibrate(args.size, args.messages, args.repetitions, Path(args.out) if args.out else None, console)
    except CalibrationError as exc:
        return _err(console, str(exc), code=1)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqbench", description="Benchmark brokerless and broker messaging.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compare", help="run scenarios over systems and write a results folder")
    p.add_argument("scenarios", nargs="*", help=f"scenario YAML files (default: {' '.join(DEFAULT_SCENARIOS)})")
    p.add_argument("--systems", help=f"comma-separated subset of: {','.join(SYSTEMS)} (default: every ready one)")
    p.add_argument("--out", default="results", help="folder for run folders (default: results)")
    p.add_argument("--repetitions", type=int, help="override every scenario's repetitions")
    p.add_argument("--broker", action="append", metavar="NAME=URL", help="use a broker you already run")
    p.add_argument("--backend", choices=("auto", "process", "containers"), default="auto",
                   help="how to start brokers (default auto: containers if Docker answers, else local process)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report at the end")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("systems", help="say for each system whether it can run here, and how")
    p.add_argument("--broker", action="append", metavar="NAME=URL")
    p.add_argument("--backend", choices=("auto", "process", "containers"), default="auto")
    p.set_defaults(func=cmd_systems)

    p = sub.add_parser("validate", help="check scenario files")
    p.add_argument("scenarios", nargs="+")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("calibrate", help="harness vs a bare pyzmq loop: is the harness what limits the numbers?")
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--messages", type=int, default=300_000)
    p.add_argument("--repetitions", type=int, default=9, help="bare/harness pairs (default 9)")
    p.add_argument("--out", help="keep calibrate.csv and the harness's run folders here (default: not kept)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("report", help="summarise runs (PySpark or pandas) and write the HTML/Markdown report")
    p.add_argument("runs", nargs="*", help="run folders (default: the newest under --results)")
    p.add_argument("--results", default="results", help="where to look for the newest run (default: results)")
    p.add_argument("--out", help="output folder (default: the run folder; a new report-* folder for several)")
    p.add_argument("--engine", choices=("auto", "spark", "pandas"), default="auto",
                   help="auto: pandas for small runs, Spark above a few million rows")
    p.add_argument("--spark-master", help="Spark master URL (default local[*])")
    p.set_defaults(func=cmd_report)

    _add_optional(sub)
    return parser


def _add_optional(sub: Any) -> None:
    """Subcommands whose modules live beside the core (regress, baseline)."""
    try:
        from harness.regress import add_parsers as add_regress
    except ImportError:
        pass
    else:
        add_regress(sub)


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    # Python leaves SIGINT ignored when it was ignored at exec (a job started with `&` by a non-interactive
    # shell, some CI runners); Ctrl-C or `kill -INT` must still stop a run cleanly, so install it always.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Logs and pipes get a wide table instead of rich's 80-column default.
    console = Console(width=None if sys.stdout.isatty() else 160)
    args = build_parser().parse_args(argv)
    code: int = args.func(args, console)
    return code


if __name__ == "__main__":
    sys.exit(main())
