"""The arithmetic of a crosscheck, without IO: the interleaved order, R, the client-bound label, the rows.

R = harness receiver msg/s ÷ tool receiver msg/s, both measured against one broker instance within the same
minutes. A tool without a consumer (redis-benchmark, a publish loop) is compared with its sender rate, and
the row says so (``rate_kind = "sender"``). Against the tool with the row's settings (``reference =
"matched"``), a row whose R is below ``CLIENT_BOUND`` is labelled client-bound: the harness's client gets less
than half of what the broker serves its own tool. Against the tool at its best (``reference = "best"``), R is
the fraction of the broker's capacity here that the row reached.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.crosscheck._tool import CrossCase, ToolResult
from harness.metrics.crosscheck import CLIENT_BOUND, client_bound, finite, ratio
from harness.runfolder.schema import CROSSCHECK_COLUMNS
from harness.runner.proc import CpuUse


@dataclass(frozen=True)
class Step:
    """One step of the interleaved order: the harness side (``tool`` is None) or one tool, for one variant;
    ``best``: the tool at its best rather than with the variant's settings."""

    repetition: int
    variant: str
    tool: str | None = None
    best: bool = False


def interleaved(repetitions: int, variants: Sequence[str], tools: Sequence[str] | Mapping[str, Sequence[str]],
                best: Mapping[str, str | None] | None = None) -> Iterator[Step]:
    """harness, tool(s), harness, tool(s), ...: for each repetition and variant, the harness case, then each
    tool with the variant's settings, then the variant's tool at its best, so a drift of the shared machine
    touches both sides alike. ``tools``: the tools of every variant, or per variant; ``best``: per variant
    the tool that also runs at its best (None or absent: none)."""
    for rep in range(repetitions):
        for variant in variants:
            yield Step(rep, variant)
            for tool in tools[variant] if isinstance(tools, Mapping) else tools:
                yield Step(rep, variant, tool)
            chosen = (best or {}).get(variant)
            if chosen is not None:
                yield Step(rep, variant, chosen, best=True)


def tool_rate(result: ToolResult) -> tuple[float, str]:
    """The tool's figure R is taken against: (receiver msg/s, "receiver"), or (sender msg/s, "sender")
    when it measured no receiver, or (NaN, "") when it measured neither."""
    if finite(result.receiver_rate):
        return result.receiver_rate, "receiver"
    if finite(result.sender_rate):
        return result.sender_rate, "sender"
    return math.nan, ""


def cpu_seconds(uses: Sequence[CpuUse], broker: bool) -> float:
    """CPU seconds of the broker's entries (``broker``) or of all the others; NaN when there are none."""
    picked = [u.cpu_s for u in uses if (u.role == "broker") == broker]
    return sum(picked) if picked else math.nan


@dataclass(frozen=True)
class HarnessSide:
    """The harness's repetition of one variant: its receiver rate (from the summary) and CPU."""

    variant: str
    client: str
    label: str
    guarantee: str
    repetition: int
    receiver_rate: float
    cpu: Sequence[CpuUse] = ()


MATCHED, BEST = "matched", "best"  # the two references of a row


def row(case: CrossCase, harness: HarnessSide, tool: str, result: ToolResult | None,
        status: str = "ok", note: str = "", reference: str = MATCHED) -> dict[str, Any]:
    """One crosscheck row (``CROSSCHECK_COLUMNS``) of the variant ``case`` was made from, against ``tool``
    with the row's settings (``reference`` "matched") or at its best ("best"). ``result`` None: the tool did
    not give a figure, and ``status``/``note`` say why."""
    rate, kind = tool_rate(result) if result is not None else (math.nan, "")
    r = ratio(harness.receiver_rate, rate)
    out: dict[str, Any] = {
        "system": case.system, "variant": harness.variant, "client": harness.client, "label": harness.label,
        "guarantee": harness.guarantee, "tool": tool, "reference": reference,
        "tool_version": result.tool if result else "", "tool_settings": result.settings if result else "",
        "tool_steady_s": result.steady_s if result else math.nan,
        "size": case.size, "producers": case.producers, "consumers": case.consumers, "window": case.window,
        "messages": case.messages, "repetition": harness.repetition,
        "harness_rate": harness.receiver_rate, "tool_rate": rate, "rate_kind": kind, "R": r,
        "client_bound": reference == MATCHED and client_bound(r),
        "tool_sender_rate": result.sender_rate if result else math.nan,
        "tool_receiver_rate": result.receiver_rate if result else math.nan,
        "tool_lat_p50_us": result.latency_p50_us if result else math.nan,
        "tool_lat_p99_us": result.latency_p99_us if result else math.nan,
        "tool_lat_kind": result.latency_kind if result else "",
        "cpu_tool_s": cpu_seconds(result.cpu, broker=False) if result else math.nan,
        "cpu_broker_tool_s": cpu_seconds(result.cpu, broker=True) if result else math.nan,
        "tool_wall_s": max((u.wall_s for u in result.cpu), default=math.nan) if result else math.nan,
        "cpu_harness_s": cpu_seconds(harness.cpu, broker=False),
        "cpu_broker_harness_s": cpu_seconds(harness.cpu, broker=True),
        "harness_wall_s": max((u.wall_s for u in harness.cpu), default=math.nan),
        "status": status, "note": note or (result.note if result else ""),
        "command": " ".join(result.command) if result else "",
    }
    assert tuple(out) == CROSSCHECK_COLUMNS, "row() and CROSSCHECK_COLUMNS must list the same columns"
    return out


__all__ = ["BEST", "CLIENT_BOUND", "MATCHED", "HarnessSide", "Step", "interleaved", "row", "tool_rate"]
