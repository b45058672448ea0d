"""``mqbench baseline RUN_DIR [RUN_DIR ...]``: record one run, or several pooled, as the regression baseline.

Writes ``summary.csv``, ``ratios.csv`` and ``baseline.json`` into ``--out`` (default ``results/baseline/``),
each through a temporary name and a rename; commit the folder. A baseline folder among the sources is
extended with the new runs. Refuses (exit 2, one sentence) a run that the check could not use later:
incomplete, without the reference system, or with fewer than five repetitions.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from harness.commands._options import DEFAULT_BASELINE, add_reference_option
from harness.commands._terminal import EXIT_OK, Column, fail, numeric, table
from harness.regression import METRIC_KEY, RegressionInputError, describe_key, record_baseline

NAME = "baseline"
_COLUMNS = (Column("metric"), *numeric("median ratio", "min", "max", "repetitions"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="record a run as the regression baseline (results/baseline/)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folder with summary.parquet and manifest.json; several runs of the same scenario are pooled; "
        "a baseline folder among them adds its repetitions (extends that baseline with new runs)",
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_BASELINE,
        metavar="DIR",
        help="baseline folder to write (default: %(default)s); commit it",
    )
    add_reference_option(parser)
    return parser


def run(args: argparse.Namespace, console: Console) -> int:
    out = Path(args.out)
    try:
        recorded = record_baseline([Path(d) for d in args.run_dirs], out, args.reference)
    except RegressionInputError as exc:
        return fail(exc)
    except OSError as exc:
        return fail(f"{out}: cannot write the baseline ({exc.strerror or exc}); check the path")
    console.print(ratios_table(recorded.ratios, args.reference))
    runs = recorded.runs
    console.print(
        f"Baseline written to {out} from run{'s' if len(runs) > 1 else ''} {', '.join(runs)}; "
        "commit the folder to use it in CI.",
        soft_wrap=True,
        highlight=False,
    )
    return EXIT_OK


def ratios_table(ratios: pd.DataFrame, reference: str) -> Table:
    """Per metric: the median, smallest and largest ratio recorded, and from how many repetitions."""
    rows = []
    for key, group in ratios.groupby(list(METRIC_KEY), dropna=False, sort=True):
        values = group["ratio"].to_numpy(dtype="float64")
        values = values[np.isfinite(values)]
        rows.append([
            describe_key(dict(zip(METRIC_KEY, key, strict=True))),
            f"{np.median(values):.3f}",
            f"{values.min():.3f}",
            f"{values.max():.3f}",
            str(values.size),
        ])
    return table(_COLUMNS, rows, title=f"Baseline ratios to {reference}")
