"""``mqbench calibrate``: harness vs a bare pyzmq loop, in back-to-back pairs: is the harness what limits
the numbers? The measuring is :mod:`harness.calibrate`; this prints its pairs and their summary.
Exit status: 0 measured, 1 a repetition could not be measured, 2 impossible arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from harness import units
from harness.commands._terminal import EXIT_FAILED, EXIT_OK, Column, fail, numeric, table

if TYPE_CHECKING:
    from harness.calibrate import Calibration

NAME = "calibrate"
_COLUMNS = (Column("repetition"),
            *numeric("bare loop msg/s", "harness msg/s", "harness / bare", "host steal ms"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="harness vs a bare pyzmq loop: is the harness what limits the numbers?")
    p.add_argument("--size", type=int, default=100, help="message size in bytes (default 100)")
    p.add_argument("--messages", type=int, default=300_000, help="messages per measurement (default 300000)")
    p.add_argument("--repetitions", type=int, default=9, help="bare/harness pairs (default 9)")
    p.add_argument("--out", help="keep calibrate.csv and the harness's run folders here (default: not kept)")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.calibrate import CalibrationError, calibrate

    if args.size < 1 or args.messages < 2 or args.repetitions < 1:
        return fail("calibrate needs --size >= 1, --messages >= 2 and --repetitions >= 1")
    try:
        result = calibrate(args.size, args.messages, args.repetitions, Path(args.out) if args.out else None,
                           console)
    except CalibrationError as exc:
        return fail(exc, EXIT_FAILED)
    console.print(pairs_table(result, args.size, args.messages))
    low, high = result.quartiles()
    console.print(
        f"harness / bare: median of the {args.repetitions} paired ratios [bold]{result.median_ratio():.2f}[/] "
        f"(interquartile {low:.2f}–{high:.2f}); ratio of the medians {result.ratio_of_medians():.2f}"
    )
    return EXIT_OK


def pairs_table(result: Calibration, size: int, messages: int) -> Table:
    """One row per pair, then the medians."""
    rows = [
        [str(i + 1), units.count(b), units.count(h), f"{h / b:.2f}", units.MISSING if s is None else f"{s:.0f}"]
        for i, (b, h, s) in enumerate(zip(result.bare, result.harness, result.steal, strict=True))
    ]
    rows.append(["median", units.count(statistics.median(result.bare)),
                 units.count(statistics.median(result.harness)), f"{result.median_ratio():.2f}", ""])
    title = f"pyzmq PUSH/PULL receiver throughput, {units.size(size)}, tcp loopback, {messages:,} messages"
    return table(_COLUMNS, rows, title=title)
