"""``mqbench calibrate``: for each brokerless library, the harness vs a bare loop of the same library, in
back-to-back pairs: is the harness what limits the numbers, and does it cost one library more than another?
The measuring is :mod:`harness.calibrate`; this prints its pairs and their summary.
Exit status: 0 measured, 1 a repetition could not be measured, 2 impossible arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from harness import units
from harness.commands._terminal import EXIT_FAILED, EXIT_OK, Column, fail, numeric, table

if TYPE_CHECKING:
    from harness.calibrate import Calibration

NAME = "calibrate"
_COLUMNS = (Column("library"), Column("size"), Column("pairs"),
            *numeric("bare loop\nmsg/s", "harness\nmsg/s", "harness\n÷ bare", "inter-\nquartile", "vs\npyzmq's",
                     "CPU µs/msg\nbare", "CPU µs/msg\nharness", "CPU\n÷ bare", "host\nsteal ms"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from harness.calibrate import LIBRARIES

    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="harness vs a bare loop of each brokerless library: what the harness itself costs")
    p.add_argument("--libraries", default=",".join(LIBRARIES),
                   help=f"comma-separated, of {', '.join(LIBRARIES)} (default all; zmq is pyzmq, the reference)")
    p.add_argument("--sizes", default="100,1KB", help="message sizes, comma-separated (default 100,1KB)")
    p.add_argument("--size", dest="sizes", help=argparse.SUPPRESS)  # one size, as before --sizes
    p.add_argument("--messages", type=int, default=300_000, help="messages per measurement (default 300000)")
    p.add_argument("--repetitions", type=int, default=5, help="bare/harness pairs per library and size (default 5)")
    p.add_argument("--out", help="keep calibrate.csv and the harness's run folders here (default: not kept)")
    return p


def _sizes(text: str) -> list[int] | str:
    """The sizes in bytes, or one sentence saying what is wrong."""
    from harness.scenario import ScenarioError, parse_scenario

    words = [w.strip() for w in str(text).split(",") if w.strip()]
    values: list[Any] = [int(w) if w.isdigit() else w for w in words]
    try:
        sc = parse_scenario({"name": "calibrate", "pattern": "queue", "message_sizes": values, "messages": 2},
                            "--sizes")
    except ScenarioError as exc:
        return str(exc)
    return list(sc.message_sizes)


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.calibrate import LIBRARIES, CalibrationError, calibrate

    libraries = [w.strip() for w in args.libraries.split(",") if w.strip()]
    unknown = [lib for lib in libraries if lib not in LIBRARIES]
    if unknown or not libraries:
        return fail(f"calibrate --libraries takes {', '.join(LIBRARIES)}; got {', '.join(unknown) or 'none'}")
    sizes = _sizes(args.sizes)
    if isinstance(sizes, str):
        return fail(sizes)
    if args.messages < 2 or args.repetitions < 1:
        return fail("calibrate needs --messages >= 2 and --repetitions >= 1")
    try:
        results = calibrate(libraries, sizes, args.messages, args.repetitions,
                            Path(args.out) if args.out else None, console)
    except CalibrationError as exc:
        return fail(exc, EXIT_FAILED)
    console.print(pairs_table(results, args.messages))
    for line in verdicts(results):
        console.print(line, highlight=False)
    return EXIT_OK


def pairs_table(results: Sequence[Calibration], messages: int) -> Table:
    """One row per library and size: medians of the pairs, the paired ratio and its spread, and that ratio
    over pyzmq's at the same size."""
    from harness.calibrate import relative_to_reference

    relative = relative_to_reference(results)
    rows = []
    for c in sorted(results, key=lambda c: (c.size, list(relative).index((c.library, c.size)))):
        low, high = c.quartiles()
        steal = [s for s in c.steal if s is not None]
        rel = relative[(c.library, c.size)]
        rows.append([
            c.name, units.size(c.size), str(len(c.bare)), units.count(statistics.median(c.bare)),
            units.count(statistics.median(c.harness)), f"{c.median_ratio():.2f}", f"{low:.2f}–{high:.2f}",
            "" if math.isnan(rel) else f"{rel:.2f}", _us(c.bare_cpu), _us(c.harness_cpu),
            "" if math.isnan(c.cpu_ratio()) else f"{c.cpu_ratio():.2f}",
            f"{statistics.median(steal):.0f}" if steal else units.MISSING,
        ])
    title = (f"PUSH/PULL receiver throughput, tcp loopback, {messages:,} messages: harness ÷ a bare loop of the "
             "same library (median of the pairs); 'vs pyzmq's' = that ratio ÷ pyzmq's at the same size; CPU: "
             "both processes, every thread, over their loops, per message (medians)")
    return table(_COLUMNS, rows, title=title)


def _us(values: Sequence[float]) -> str:
    kept = [v for v in values if math.isfinite(v)]
    return f"{statistics.median(kept):.2f}" if kept else units.MISSING


def verdicts(results: Sequence[Calibration]) -> list[str]:
    """One sentence per size: what the harness costs each library, against what it costs pyzmq."""
    from harness.calibrate import LIBRARIES, REFERENCE, relative_to_reference

    relative = relative_to_reference(results)
    out = []
    for size in sorted({c.size for c in results}):
        at = [c for c in results if c.size == size]
        parts = [f"{c.name} {c.median_ratio():.2f}" for c in at]
        others = [f"{c.name} {relative[(c.library, size)]:.2f}" for c in at
                  if c.library != REFERENCE and not math.isnan(relative[(c.library, size)])]
        line = f"{units.size(size)}: harness ÷ bare: {', '.join(parts)}"
        if others:
            line += f"; against {LIBRARIES[REFERENCE]}'s: {', '.join(others)} (1.00: the harness costs it what it costs {LIBRARIES[REFERENCE]})"
        out.append(line + ".")
    return out
