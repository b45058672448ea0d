"""``mqbench baseline RUN_DIR``: record a run as the baseline the regression check compares with.

Writes ``summary.csv``, ``ratios.csv`` and ``baseline.json`` into ``--out`` (default
``results/baseline/``), each through a temporary name and a rename; commit the folder. Refuses (exit 2,
one sentence) a run that the check could not use later: incomplete, without the reference system, or
with fewer than five repetitions. ``harness.regress.add_parsers`` registers it on ``mqbench``'s
subparsers (``func=run``, called as ``run(args, console)``); ``main(argv)`` runs it standalone.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from harness.regression._cli import (
    DEFAULT_BASELINE,
    EXIT_OK,
    console,
    fail,
    reference_option,
    split_reference,
)
from harness.regression._errors import RegressionInputError
from harness.regression._files import RunData, environment, read_run, write_baseline
from harness.regression._ratios import METRIC_KEY, describe_key, repetition_ratios, require_repetitions
from harness.regression._stats import MIN_REPETITIONS

COMMAND = "baseline"


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``baseline`` arguments to ``parser``; sets ``func=run``."""
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="run folder with summary.parquet and manifest.json"
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_BASELINE,
        metavar="DIR",
        help="baseline folder to write (default: %(default)s); commit it",
    )
    reference_option(parser)
    parser.set_defaults(func=run)
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``baseline`` on an ``argparse`` subparsers object (``parser.add_subparsers()``)."""
    parser = subparsers.add_parser(
        COMMAND,
        help="record a run as the regression baseline (results/baseline/)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    return configure(parser)


def prepare(run_data: RunData, reference: str) -> pd.DataFrame:
    """The baseline's ratios for a loaded run; RegressionInputError if the check could not use them."""
    if not run_data.manifest.get("complete", False):
        raise RegressionInputError(
            f"{run_data.path}: the run is marked incomplete in its manifest (interrupted?); "
            "a baseline needs a complete run"
        )
    system, variant = split_reference(reference)
    try:
        ratios = repetition_ratios(run_data.summary, system, variant)
    except RegressionInputError as exc:
        raise RegressionInputError(f"run {run_data.path}: {exc}") from None
    require_repetitions(ratios, f"run {run_data.path}", MIN_REPETITIONS)
    return ratios


def _overview(ratios: pd.DataFrame, reference: str) -> Table:
    table = Table(title=f"Baseline ratios to {reference}", title_justify="left")
    for name in ("metric", "median ratio", "min", "max", "repetitions"):
        table.add_column(name, justify="left" if name == "metric" else "right")
    for key, group in ratios.groupby(list(METRIC_KEY), dropna=False, sort=True):
        values = group["ratio"].to_numpy(dtype="float64")
        values = values[np.isfinite(values)]
        table.add_row(
            describe_key(dict(zip(METRIC_KEY, key, strict=True))),
            f"{np.median(values):.3f}",
            f"{values.min():.3f}",
            f"{values.max():.3f}",
            str(values.size),
        )
    return table


def run(args: argparse.Namespace, screen: Console | None = None) -> int:
    """Execute ``mqbench baseline`` for parsed ``args``; returns the exit status (0 or 2).

    Prints to ``screen`` (the CLI's console) or a new stdout console; errors go to stderr.
    """
    out = Path(args.out)
    try:
        run_data = read_run(Path(args.run_dir))
        ratios = prepare(run_data, args.reference)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        write_baseline(out, run_data.summary, ratios, environment(run_data, args.reference, created))
    except RegressionInputError as exc:
        return fail(COMMAND, str(exc))
    except OSError as exc:
        return fail(COMMAND, f"{out}: cannot write the baseline ({exc.strerror or exc}); check the path")
    screen = screen or console()
    screen.print(_overview(ratios, args.reference))
    screen.print(
        f"Baseline written to {out} from run {run_data.run_id}; commit the folder to use it in CI.",
        soft_wrap=True,
        highlight=False,
    )
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    description = __doc__.splitlines()[0] if __doc__ else None
    return configure(argparse.ArgumentParser(prog=f"mqbench {COMMAND}", description=description))


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry: ``python -m harness.regression.baseline RUN_DIR ...``."""
    return int(run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
