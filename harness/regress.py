"""CI performance-regression check: the ``mqbench regress`` and ``mqbench baseline`` subcommands.

``harness.cli`` calls :func:`add_parsers` on its subparsers; each subcommand sets ``func`` to a
``run(args, console) -> int`` (exit status 0 ok, 1 regression, 2 unusable input). The statistics, the
ratio tables and the file formats live in :mod:`harness.regression` (pure functions apart from its
``_files`` module); this module only wires them into the command line.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness.regression import baseline, regress


def add_parsers(subparsers: Any) -> list[argparse.ArgumentParser]:
    """Register ``regress`` and ``baseline`` on ``subparsers`` (from ``parser.add_subparsers()``)."""
    return [regress.add_parser(subparsers), baseline.add_parser(subparsers)]


__all__ = ["add_parsers", "baseline", "regress"]
