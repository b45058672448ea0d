"""``mqbench validate``: check scenario files; one line per scenario, or one sentence naming the field."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from harness.commands._terminal import EXIT_OK, fail
from harness.scenario import ScenarioError, load_scenarios

NAME = "validate"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help="check scenario files")
    p.add_argument("scenarios", nargs="+", help="scenario YAML files")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        for path in args.scenarios:
            for sc in load_scenarios(path):
                sizes = ", ".join(str(s) for s in sc.message_sizes)
                amount = f"{sc.messages} messages" if sc.messages is not None else f"{sc.duration:g} s"
                console.print(f"{path}: {sc.name}: ok ({sc.pattern.value}; sizes {sizes} B; {amount} per producer)")
    except ScenarioError as exc:
        return fail(exc)
    return EXIT_OK
