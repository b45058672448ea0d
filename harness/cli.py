"""`mqbench`: the command line. Wires the subcommands of :mod:`harness.commands`, one module each.

Errors a user can cause end as one line on stderr and exit status 2; Ctrl-C and SIGTERM stop the command
(a run leaves its folder marked incomplete) and exit 130.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from harness.commands import COMMANDS
from harness.commands._terminal import EXIT_INTERRUPTED, console


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqbench", description="Benchmark brokerless and broker messaging.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(run=command.run)
    return parser


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    # Python leaves SIGINT ignored when it was ignored at exec (a job started with `&` by a non-interactive
    # shell, some CI runners); Ctrl-C or `kill -INT` must still stop a run cleanly, so install it always.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args, console())
    except KeyboardInterrupt:  # commands that run cases say what they stopped themselves
        console().print(f"[yellow]interrupted: mqbench {args.command} stopped before it finished; run it again "
                        "to finish it[/]")
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
