"""Bits both subcommands share: option parsing and the one-sentence error exit."""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console

#: Exit statuses of both subcommands.
EXIT_OK, EXIT_REGRESSION, EXIT_UNUSABLE = 0, 1, 2

DEFAULT_BASELINE = "results/baseline"
DEFAULT_REFERENCE = "zmq"


def reference_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference",
        default=DEFAULT_REFERENCE,
        metavar="SYSTEM[:VARIANT]",
        help="system every other system is divided by, measured in the same run (default: %(default)s)",
    )


def split_reference(text: str) -> tuple[str, str | None]:
    """``"zmq"`` -> ("zmq", None); ``"zmq:tuned"`` -> ("zmq", "tuned")."""
    system, _, variant = text.partition(":")
    return system, (variant or None)


#: Table width when stdout is not a terminal (CI logs) and COLUMNS is unset; rich would pick 80.
LOG_WIDTH = 160


def console() -> Console:
    """A console for stdout that does not squeeze the table to 80 columns in CI logs."""
    out = Console()
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(width=LOG_WIDTH)
    return out


def fail(command: str, message: str) -> int:
    """Print ``message`` (one sentence) to stderr and return the unusable-input status."""
    print(f"mqbench {command}: {message}", file=sys.stderr)
    return EXIT_UNUSABLE
