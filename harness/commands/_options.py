"""Options two subcommands share: brokers and their backend (compare, systems), the regression baseline
and reference (regress, baseline)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from harness.drivers import SYSTEMS
from harness.regression import DEFAULT_REFERENCE
from harness.scenario import ScenarioError

BACKENDS = ("auto", "process", "containers")
DEFAULT_BASELINE = "results/baseline"


def add_broker_options(parser: argparse.ArgumentParser) -> None:
    """``--broker NAME=URL`` (repeatable) and ``--backend``."""
    parser.add_argument("--broker", action="append", metavar="NAME=URL", help="use a broker you already run")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="how to start brokers (default auto: containers if Docker answers, else local process)")


def parse_brokers(items: Sequence[str] | None) -> dict[str, str]:
    """``["rabbitmq=amqp://…"]`` -> ``{"rabbitmq": "amqp://…"}``; ScenarioError naming a malformed item."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise ScenarioError(f"--broker takes NAME=URL (e.g. rabbitmq=amqp://guest:guest@127.0.0.1:5672/), got {item!r}")
        if name not in SYSTEMS:
            raise ScenarioError(f"--broker: unknown system {name!r}; known systems: {', '.join(SYSTEMS)}")
        out[name] = url
    return out


def add_reference_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference",
        default=DEFAULT_REFERENCE,
        metavar="SYSTEM[:VARIANT]",
        help="system every other system is divided by, measured in the same run (default: %(default)s)",
    )
