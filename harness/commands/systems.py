"""``mqbench systems``: for each system, whether it can run here, through which backend, or why not."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from harness.commands._options import add_broker_options, parse_brokers
from harness.commands._terminal import EXIT_OK, Column, fail, table
from harness.drivers import SYSTEMS
from harness.scenario import ScenarioError

NAME = "systems"
_COLUMNS = (Column("system"), Column("ready"), Column("backend"), Column("detail"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="say for each system whether it can run here, and how")
    add_broker_options(p)
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.compare import system_status

    try:
        brokers = parse_brokers(args.broker)
    except ScenarioError as exc:
        return fail(exc)
    rows = []
    for system in SYSTEMS:
        st = system_status(system, brokers, args.backend)
        rows.append([system, "yes" if st.ready else "no", st.backend or "–", st.reason])
    console.print(table(_COLUMNS, rows, title="systems"))
    return EXIT_OK
