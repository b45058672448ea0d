"""``mqbench baseline RUN_DIR [RUN_DIR ...]``: record one run, or several pooled, as the regression baseline.

Several runs of the same scenario pool their repetitions (renumbered run after run; each ratio still pairs
the two systems of one repetition of one run), so the baseline carries the run-to-run variation of the
machine and its medians do not hang on one lucky or unlucky run. A baseline folder can be one of the
sources: its repetitions are kept, and new runs (made hours or days later) widen what it has seen. Writes ``summary.csv``, ``ratios.csv`` and ``baseline.json`` into ``--out`` (default
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
from harness.regression._compare import scenario_differences
from harness.regression._errors import RegressionInputError
from harness.regression._files import RunData, environment, read_source, write_baseline
from harness.regression._ratios import METRIC_KEY, describe_key, repetition_ratios, require_repetitions
from harness.regression._stats import MIN_REPETITIONS

COMMAND = "baseline"


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``baseline`` arguments to ``parser``; sets ``func=run``."""
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
    made_with = run_data.manifest.get("baseline_reference")
    if made_with is not None and made_with != reference:
        raise RegressionInputError(
            f"{run_data.path}: a baseline made against {made_with!r}, not {reference!r}; "
            f"pool it with --reference {made_with}"
        )
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


def pool(runs: Sequence[RunData]) -> RunData:
    """One run's worth of data from several runs of the same scenario: summaries concatenated with the
    repetitions of each later run numbered after those of the runs before it; the first run's manifest
    with every run's id. RegressionInputError if the runs measured different scenarios."""
    first = runs[0]
    if len(runs) == 1:
        return first
    frames = []
    offset = 0
    for run_data in runs:
        if run_data is not first:
            names = sorted(str(s.get("name")) for s in run_data.manifest.get("scenarios") or [])
            wanted = sorted(str(s.get("name")) for s in first.manifest.get("scenarios") or [])
            differences = scenario_differences(
                first.manifest.get("scenarios") or [], run_data.manifest.get("scenarios") or []
            )
            if names != wanted or differences:
                detail = differences[0] if differences else f"scenarios {names} vs {wanted}"
                raise RegressionInputError(
                    f"{run_data.path}: not the same scenario as {first.path} ({detail}); "
                    "only runs of one scenario can be pooled"
                )
        summary = run_data.summary.copy()
        summary["repetition"] = summary["repetition"].astype("int64") + offset
        offset = int(summary["repetition"].max()) + 1
        frames.append(summary)
    manifest = dict(first.manifest)
    manifest["pooled_runs"] = [name for r in runs for name in (r.manifest.get("pooled_runs") or [r.run_id])]
    return RunData(path=first.path, summary=pd.concat(frames, ignore_index=True), manifest=manifest)


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
        runs = [read_source(Path(d)) for d in args.run_dirs]
        if len(runs) > 1:
            for one in runs:  # each pooled run must be usable on its own (complete, enough repetitions)
                prepare(one, args.reference)
        run_data = pool(runs)
        ratios = prepare(run_data, args.reference)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        write_baseline(out, run_data.summary, ratios, environment(run_data, args.reference, created))
    except RegressionInputError as exc:
        return fail(COMMAND, str(exc))
    except OSError as exc:
        return fail(COMMAND, f"{out}: cannot write the baseline ({exc.strerror or exc}); check the path")
    pooled = list(run_data.manifest.get("pooled_runs") or [run_data.run_id])
    screen = screen or console()
    screen.print(_overview(ratios, args.reference))
    screen.print(
        f"Baseline written to {out} from run{'s' if len(pooled) > 1 else ''} "
        f"{', '.join(pooled)}; commit the folder to use it in CI.",
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
