"""Options two subcommands share: brokers and their backend (compare, systems), the regression baseline
and reference (regress, baseline)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from harness.commands._terminal import EXIT_INTERRUPTED, fail
from harness.drivers import SYSTEMS
from harness.drivers.base import DriverError
from harness.regression import DEFAULT_REFERENCE
from harness.scenario import ScenarioError

BACKENDS = ("auto", "process", "containers")
DEFAULT_BASELINE = "results/baseline"
T = TypeVar("T")


def add_broker_options(parser: argparse.ArgumentParser) -> None:
    """``--broker NAME=URL`` (repeatable) and ``--backend``."""
    parser.add_argument("--broker", action="append", metavar="NAME=URL", help="use a broker you already run")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="how to start brokers (default auto: containers when a Docker engine answers and the "
                        "broker's image is here or can be pulled, else a local process)")


def add_run_options(parser: argparse.ArgumentParser, default_scenarios: Sequence[str], systems: str) -> None:
    """What a command that runs scenarios takes (compare, crosscheck): scenario files, ``--systems`` (a
    comma-separated subset of ``systems``), ``--out``, ``--repetitions``, the broker options, ``--no-report``."""
    parser.add_argument("scenarios", nargs="*", help=f"scenario YAML files (default: {' '.join(default_scenarios)})")
    parser.add_argument("--systems", help=f"comma-separated subset of: {systems} (default: every ready one)")
    parser.add_argument("--out", default="results", help="folder for run folders (default: results)")
    parser.add_argument("--repetitions", type=int, help="override every scenario's repetitions")
    add_broker_options(parser)
    parser.add_argument("--no-report", action="store_true", help="skip the HTML report at the end")


def parse_systems(text: str | None) -> list[str] | None:
    """``--systems a,b`` -> ``["a", "b"]``; None when the option was not given."""
    return [s.strip() for s in text.split(",") if s.strip()] if text else None


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


def guarded(console: Console, stopped: str, call: Callable[[], T]) -> T | int:
    """``call()`` (a run of scenarios), or an exit status after one sentence: for a user's error (a scenario,
    a broker, a driver) or Ctrl-C, which says that ``stopped`` were stopped and the run marked incomplete."""
    from harness.compare import CompareError, SummaryInterrupted

    try:
        return call()
    except (ScenarioError, CompareError, DriverError) as exc:
        return fail(exc)
    except KeyboardInterrupt as exc:
        said = str(exc) if isinstance(exc, SummaryInterrupted) else \
            f"{stopped} stopped; the run folder is marked incomplete"
        console.print(f"[yellow]interrupted: {escape(said)}[/]")
        return EXIT_INTERRUPTED
