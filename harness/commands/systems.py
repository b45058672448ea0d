"""``mqbench systems``: for each system, whether it can run here, through which backend, or why not; for each
broker also which backends are ready here (a local process; containers, with the image they would run)."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from rich.console import Console

from harness.commands._options import add_broker_options, parse_brokers
from harness.commands._terminal import EXIT_OK, Column, fail, table
from harness.drivers import CLIENTS, SYSTEMS, driver_class
from harness.drivers.base import DriverError
from harness.scenario import ScenarioError

NAME = "systems"
_COLUMNS = (Column("system"), Column("ready"), Column("backend"), Column("process"), Column("containers"),
            Column("detail"))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="say for each system whether it can run here, and how")
    add_broker_options(p)
    return p


def _client_rows(system: str, system_ready: bool, backend: str) -> list[list[str]]:
    """A row for each further client of ``system`` (``kafka (java)``): ready when the system is and the
    client can run here (a Java client needs java and the JVM worker)."""
    rows = []
    default = driver_class(system).client
    for client in CLIENTS.get(system, {}):
        if client == default:
            continue
        try:
            cls = driver_class(system, client)
            reason = cls.unavailable_reason()
        except DriverError as exc:
            reason = str(exc)
        ready = system_ready and reason is None
        detail = reason or (cls.ready_detail() if cls.runs_in_jvm else f"{client} {_version(client)}")
        rows.append([f"{system} ({client})", "yes" if ready else "no", backend or "–", "", "", detail])
    return rows


def _backends(system: str, reason: str) -> tuple[str, str, str]:
    """For a broker: whether a local process can run it ("yes"/"no"), the image containers would run it in
    (or "no"), and ``reason`` with the why-not of each backend that is not ready and not already in it."""
    from harness.brokers import containers_reason, provisioner
    from harness.brokers._images import choose

    prov = provisioner(system)
    if prov is None:
        return "–", "–", reason
    notes = [reason]
    process_why = prov.process_unavailable_reason()
    if process_why and process_why not in reason:
        notes.append(f"process: {process_why}")
    containers_why = containers_reason(system)
    image = choose(system).image if containers_why is None else None
    if containers_why and containers_why not in reason:
        notes.append(f"containers: {containers_why}")
    return ("no" if process_why else "yes"), (image.name if image is not None else "no"), "; ".join(notes)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.compare import system_status

    try:
        brokers = parse_brokers(args.broker)
    except ScenarioError as exc:
        return fail(exc)
    rows = []
    for system in SYSTEMS:
        st = system_status(system, brokers, args.backend)
        process, containers, detail = _backends(system, st.reason)
        rows.append([system, "yes" if st.ready else "no", st.backend or "–", process, containers, detail])
        rows.extend(_client_rows(system, st.ready, st.backend))
    width = console.width
    console.print(table(_COLUMNS, rows, title="systems", width=width), width=width)
    return EXIT_OK
