"""Who and where: the text that names systems, versions, host and runs on every figure and page."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterable

import pandas as pd

from harness import units
from harness.pipeline import RunInfo, Summary


def systems_text(summary: Summary) -> str:
    """``"mqcore (mqcore 0.1.0); pyzmq (pyzmq 26.2.0, libzmq 4.3.5)"`` for the systems in the summary."""
    seen: dict[str, str] = {}
    by_id = {run.run_id: run for run in summary.runs}
    pairs = summary.per_repetition[["run_id", "system"]].drop_duplicates()
    for run_id, system in pairs.itertuples(index=False):
        run = by_id.get(str(run_id))
        label = run.label(str(system)) if run else str(system)
        versions = run.versions(str(system)) if run else ""
        seen.setdefault(label, f"{label} ({versions})" if versions else label)
    return "; ".join(seen.values()) or "no systems"


def host_text(run: RunInfo) -> str:
    """``"testhost, Synthetic CPU, 2 CPUs, kernel 6.1.0, Python 3.11.2"`` (what the manifest has)."""
    host = run.host
    parts = [str(host.get("hostname") or "unknown host")]
    if host.get("cpu_model"):
        parts.append(str(host["cpu_model"]))
    if host.get("cpus"):
        parts.append(f"{host['cpus']} CPUs")
    if host.get("kernel"):
        parts.append(f"kernel {host['kernel']}")
    if host.get("python"):
        parts.append(f"Python {host['python']}")
    return ", ".join(parts)


def hosts_text(runs: Iterable[RunInfo]) -> str:
    return "; ".join(dict.fromkeys(host_text(run) for run in runs))


def clock_text(runs: Iterable[RunInfo]) -> str:
    clocks = []
    for run in runs:
        resolution = run.clock_resolution_ns
        res = "" if math.isnan(resolution) else f", resolution {resolution:g} ns"
        clocks.append(f"{run.clock}{res}, client-stamped")
    return "; ".join(dict.fromkeys(clocks))


def footnote(summary: Summary, width: int = 160) -> str:
    """The footnote every figure carries: systems with versions, host, runs, clock."""
    runs = ", ".join(
        f"{run.run_id}{'' if run.complete else ' (INCOMPLETE)'}"
        + (f" @ {run.git_revision[:10]}" if run.git_revision else "")
        for run in summary.runs
    )
    text = (
        f"Systems: {systems_text(summary)}. Host: {hosts_text(summary.runs)}. "
        f"Run: {runs}. Clock: {clock_text(summary.runs)}."
    )
    return "\n".join(textwrap.wrap(text, width))


def rate_text(rate: float) -> str:
    return "max rate" if rate is None or (isinstance(rate, float) and math.isnan(rate)) else f"{units.count(rate)}/s"


def size_text(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


_WORD = re.compile(r"[a-z0-9.]+")


def row_name(label: object, variant: object) -> str:
    """A row's name: its label (system and client) and those words of its variant's name the label does not
    already say, so no word is said twice: ``rabbitmq (pika)`` for the variant ``pika``, ``rabbitmq (java)
    durable`` for ``durable-java``, ``kafka (confluent-kafka) acks-all`` for ``acks-all-confluent``."""
    text = str(label)
    if variant in (None, "", "default"):
        return text
    said = set(_WORD.findall(text.lower()))
    rest = [word for word in re.split(r"[-_\s]+", str(variant)) if word and word.lower() not in said]
    return f"{text} {'-'.join(rest)}" if rest else text


def case_text(row: pd.Series | dict, *, omit: tuple[str, ...] = ()) -> str:
    """Legend text of one case: ``"pyzmq 64 B max rate"``; the variant as :func:`row_name` shows it.

    ``omit`` drops ``"size"`` and/or ``"rate"`` when a figure puts that on an axis.
    """
    parts = [row_name(row["label"], row.get("variant"))]
    if "size" not in omit:
        parts.append(size_text(int(row["size"])))
    if "rate" not in omit:
        parts.append(rate_text(float(row["rate"])))
    return " ".join(parts)
