"""``mqbench images``: make each broker's image usable by the containers backend, and say which it is.

For each broker: its pinned official image when the engine has it or a registry serves it (pulled), else the
image built here from the Debian base and the process backend's packages or jars (``harness.brokers._images``);
an image already here and current is left as it is. Ends with one table: broker, image, id, what was done, time.
Exit status: 0 when every broker asked for has an image, 1 otherwise (each row says why), 2 without an engine.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from harness.commands._options import parse_systems
from harness.commands._terminal import EXIT_OK, Column, fail, table

NAME = "images"
EXIT_MISSING = 1
_COLUMNS = (Column("broker"), Column("image"), Column("id"), Column("done"), Column("s", numeric=True))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="pull or build the brokers' images for the containers backend (`make images`)")
    p.add_argument("--systems", help="comma-separated brokers (default: every broker)")
    p.add_argument("--rebuild", action="store_true", help="build ours again even when a current one is here")
    p.add_argument("--no-pull", action="store_true", help="never pull the official images: build ours")
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    from harness.brokers import _containers, _images

    wanted = parse_systems(args.systems) or list(_images.RECIPES)
    unknown = [s for s in wanted if s not in _images.RECIPES]
    if unknown:
        return fail(f"--systems: {', '.join(unknown)} has no broker image; brokers: {', '.join(_images.RECIPES)}")
    if not _containers.docker_available():
        return fail("no Docker engine answers (DOCKER_HOST or /var/run/docker.sock); start one, e.g. "
                    "`dockerd --iptables=false --ip-forward=false --bridge=none` as `make test` does")
    rows, missing = [], 0
    for system in wanted:
        done = _images.ensure(system, pull=not args.no_pull, rebuild=args.rebuild,
                              log=lambda line: console.print(line, highlight=False))
        image = done.image
        missing += image is None
        rows.append([system, image.name if image else "–", image.id.removeprefix("sha256:")[:12] if image else "–",
                     done.action, f"{done.seconds:.0f}"])
    console.print(table(_COLUMNS, rows, title="broker images", width=console.width), width=console.width)
    return EXIT_OK if not missing else EXIT_MISSING
