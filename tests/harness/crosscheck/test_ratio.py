"""R, the client-bound label, the interleaved order and the rows, without any broker."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest

from harness.crosscheck._tool import CrossCase, ToolResult
from harness.crosscheck.ratio import HarnessSide, Step, interleaved, row, tool_rate
from harness.crosscheck.tools import TOOLS, ToolUnavailable, load_tool, tool_keys
from harness.metrics.crosscheck import CLIENT_BOUND, client_bound, median_rows, ratio
from harness.runfolder.schema import CROSSCHECK_COLUMNS
from harness.runner.proc import CpuUse


def test_interleaving_alternates_harness_and_tools_per_repetition() -> None:
    steps = list(interleaved(3, ["pika"], ["perftest", "loop"]))
    assert [s.tool for s in steps] == [None, "perftest", "loop"] * 3
    assert [s.repetition for s in steps] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    two = list(interleaved(1, ["a", "b"], ["t"]))
    assert two == [Step(0, "a"), Step(0, "a", "t"), Step(0, "b"), Step(0, "b", "t")]


def test_each_variant_runs_its_own_tools_then_its_tool_at_its_best() -> None:
    steps = list(interleaved(2, ["core", "js"], {"core": ["bench"], "js": ["js-bench"]},
                             {"core": "bench", "js": None}))
    assert steps[:5] == [Step(0, "core"), Step(0, "core", "bench"), Step(0, "core", "bench", best=True),
                         Step(0, "js"), Step(0, "js", "js-bench")]
    assert len(steps) == 10 and steps[5].repetition == 1


def test_tool_rate_prefers_the_receiver_and_says_when_it_falls_back() -> None:
    assert tool_rate(ToolResult("t", [], receiver_rate=10.0, sender_rate=20.0)) == (10.0, "receiver")
    assert tool_rate(ToolResult("t", [], sender_rate=20.0)) == (20.0, "sender")
    rate, kind = tool_rate(ToolResult("t", []))
    assert math.isnan(rate) and kind == ""


def test_ratio_and_client_bound() -> None:
    assert ratio(400.0, 1000.0) == pytest.approx(0.4)
    assert client_bound(ratio(400.0, 1000.0)) and not client_bound(ratio(600.0, 1000.0))
    assert not client_bound(CLIENT_BOUND)
    for harness, tool in ((math.nan, 1.0), (1.0, math.nan), (1.0, 0.0)):
        assert math.isnan(ratio(harness, tool)) and not client_bound(ratio(harness, tool))


def _side(rep: int, rate: float) -> HarnessSide:
    return HarnessSide("default", "redis-py", "redis (redis-py)", "at-most-once", rep, rate,
                       [CpuUse("harness", 2.0, 4.0), CpuUse("broker", 1.0, 4.0)])


def test_row_has_the_schema_columns_and_the_figures() -> None:
    result = ToolResult("redis-benchmark 7", ["redis-benchmark", "-P", "1"], sender_rate=2000.0,
                        latency_p50_us=20.0, latency_p99_us=90.0, latency_kind="round trip",
                        cpu=[CpuUse("tool", 0.5, 1.0), CpuUse("broker", 0.7, 1.0)])
    r = row(CrossCase("redis", 100, 5000, window=1), _side(1, 500.0), "redis-benchmark -P 1", result)
    assert tuple(r) == CROSSCHECK_COLUMNS
    assert (r["R"], r["rate_kind"], r["client_bound"], r["repetition"]) == (0.25, "sender", True, 1)
    assert r["reference"] == "matched"
    # against the tool at its best, R is the fraction of capacity: never the client-bound label
    best = row(CrossCase("redis", 100, 5000, window=1), _side(1, 500.0), "redis-benchmark -P window", result,
               reference="best")
    assert best["R"] == 0.25 and best["reference"] == "best" and not best["client_bound"]
    assert (r["cpu_tool_s"], r["cpu_broker_tool_s"], r["cpu_harness_s"], r["cpu_broker_harness_s"]) == (0.5, 0.7, 2.0, 1.0)
    assert r["command"] == "redis-benchmark -P 1" and r["status"] == "ok"


def test_a_missing_tool_gives_a_row_with_its_reason() -> None:
    r = row(CrossCase("nats", 100, 5000), _side(0, 500.0), "nats bench", None, "missing", "run make brokers")
    assert r["status"] == "missing" and r["note"] == "run make brokers"
    assert math.isnan(r["R"]) and not r["client_bound"]


def test_medians_over_repetitions() -> None:
    tool = ToolResult("t", [], receiver_rate=1000.0)
    rows = [row(CrossCase("nats", 100, 10), _side(i, rate), "nats bench", tool)
            for i, rate in enumerate((300.0, 600.0, 450.0))]
    (med,) = median_rows(rows)
    assert med["reps"] == 3 and med["harness_rate"] == 450.0 and med["R"] == 0.45 and med["client_bound"]


def test_capacity_is_said_in_words_with_r_beside_it() -> None:
    from harness.metrics.crosscheck import capacity_sentences

    matched = ToolResult("PerfTest 2.22.1", [], receiver_rate=1000.0, settings="-x 1 -y 1 -s 100 -a")
    best = ToolResult("PerfTest 2.22.1", [], receiver_rate=4000.0, settings="-x 2 -y 2 -s 100 -a")
    side = HarnessSide("pika", "pika", "rabbitmq (pika)", "at-most-once", 0, 800.0)
    case = CrossCase("rabbitmq", 100)
    rows = [row(case, side, "PerfTest", matched), row(case, side, "PerfTest", best, reference="best")]
    from harness.report._context import row_name

    (said,) = capacity_sentences(median_rows(rows), row_name)
    assert said == ("rabbitmq (pika), 100 B: 0.20 of what the broker carries here — PerfTest at its best "
                    "(-x 2 -y 2 -s 100 -a) moved 4k msg/s (receiver), the row 800; against the tool with the row's "
                    "settings R = 0.80 (PerfTest).")


def test_every_system_with_a_broker_has_a_tool_and_a_missing_adapter_is_one_sentence(monkeypatch) -> None:
    for system in ("rabbitmq", "kafka", "rocketmq", "nats", "mqtt", "redis", "activemq"):
        assert tool_keys(system), system
    assert tool_keys("redis") == ["redis/unpipelined", "redis"]
    monkeypatch.setitem(TOOLS, "nats/none", "harness.crosscheck.tools.not_written_yet:Nothing")
    with pytest.raises(ToolUnavailable, match="not built yet"):
        load_tool("nats/none")
    with pytest.raises(ToolUnavailable, match="no crosscheck tool"):
        load_tool("nope")


def test_a_tool_whose_output_holds_no_figure_gives_a_failed_row_not_a_traceback(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from rich.console import Console

    from harness.crosscheck._tool import Tool
    from harness.crosscheck.run import _tool_run

    class Cut(Tool):
        system, name = "redis", "cut-short"

        def missing(self) -> str | None:
            return None

        def run(self, case: CrossCase, endpoint: Any, workdir: Path, broker_pids: list[int]) -> ToolResult:
            raise ValueError("no closing line")

    problems: list[str] = []
    pending = _tool_run("s", Cut(), CrossCase("redis", 100, 10), _side(0, 1.0), None,  # type: ignore[arg-type]
                        SimpleNamespace(work_dir=tmp_path), [], Console(file=io.StringIO()), problems, "redis")
    assert pending.status == "failed" and "no closing line" in pending.note
    assert problems and "cut-short" in problems[0]


def _rows(matched_rate: float, best_rate: float, harness_rate: float) -> list[dict[str, Any]]:
    matched = ToolResult("PerfTest 2.22.1", [], receiver_rate=matched_rate, settings="-x 1 -y 1 -s 100 -a")
    best = ToolResult("PerfTest 2.22.1", [], receiver_rate=best_rate, settings="-x 2 -y 2 -s 100 -a")
    side = HarnessSide("java", "java", "rabbitmq (java)", "at-most-once", 0, harness_rate)
    case = CrossCase("rabbitmq", 100)
    return [row(case, side, "PerfTest", matched), row(case, side, "PerfTest", best, reference="best")]


def _sentence(matched_rate: float, best_rate: float, harness_rate: float) -> str:
    from harness.metrics.crosscheck import capacity_sentences
    from harness.report._context import row_name

    (said,) = capacity_sentences(median_rows(_rows(matched_rate, best_rate, harness_rate)), row_name)
    return said


def test_a_row_above_the_tool_at_its_best_gets_no_fraction_of_capacity() -> None:
    """A crosscheck here: RabbitMQ's Java row 86,200 msg/s, PerfTest at its best 66,900: not 1.26 of capacity."""
    said = _sentence(70_000.0, 66_900.0, 86_200.0)
    assert "of what the broker carries" not in said and "1.29" not in said
    assert said.startswith("rabbitmq (java), 100 B: moved 86.2k msg/s, more than the broker's own tool did here")
    assert "with the row's settings 70k" in said and "not known" in said
    import pandas as pd

    from harness.report.crosscheck import view

    table = view(pd.DataFrame(_rows(70_000.0, 66_900.0, 86_200.0)))
    assert list(table["label"]) == ["", "above the tool's best"]


def test_the_tool_with_the_rows_settings_counts_when_it_moved_more_than_at_its_best() -> None:
    said = _sentence(70_000.0, 66_900.0, 63_000.0)
    assert said.startswith("rabbitmq (java), 100 B: 0.90 of what the broker carries here — PerfTest with the row's "
                           "settings moved 70k msg/s (receiver), more than at its best (-x 2 -y 2 -s 100 -a: 66.9k)")


def test_capacity_is_the_most_the_tool_moved_in_any_repetition() -> None:
    """The crosscheck of 2026-11-28 05:36: RabbitMQ's Java row moved 57.4k, 69.4k and 59.8k msg/s (median 59.8k)
    and PerfTest, interleaved with it, 46.7k, 59.3k, 57.2k with the row's settings and 52.5k, 62.7k, 57.4k at its
    best. Against the medians the row was "above the tool's best"; the broker carried 62.7k in one repetition,
    so the row reached 0.95 of that, and the report's table no longer labels it above."""
    from harness.metrics.crosscheck import capacity_sentences
    from harness.report._context import row_name

    rows = []
    for rep, (harness, matched, best) in enumerate(((57_380.0, 46_676.0, 52_527.0), (69_421.0, 59_276.0, 62_716.0),
                                                    (59_797.0, 57_199.0, 57_376.0))):
        side = HarnessSide("java", "java", "rabbitmq (java)", "at-most-once", rep, harness)
        case = CrossCase("rabbitmq", 100)
        rows += [row(case, side, "PerfTest", ToolResult("PerfTest 2.22.1", [], receiver_rate=matched,
                                                        settings="-x 1 -y 1 -s 100 -a")),
                 row(case, side, "PerfTest", ToolResult("PerfTest 2.22.1", [], receiver_rate=best,
                                                        settings="-x 2 -y 2 -s 100 -a"), reference="best")]
    medians = median_rows(rows)
    (best,) = [m for m in medians if m["reference"] == "best"]
    assert best["tool_rate"] == 57_376.0 and best["tool_rate_max"] == 62_716.0
    assert (best["capacity"], best["capacity_from"]) == (62_716.0, "best")
    (said,) = capacity_sentences(medians, row_name)
    assert said.startswith("rabbitmq (java), 100 B: 0.95 of what the broker carries here — PerfTest at its best "
                           "(-x 2 -y 2 -s 100 -a) moved 62.7k msg/s (the most of its repetitions, receiver)")
    import pandas as pd

    from harness.report.crosscheck import view

    assert list(view(pd.DataFrame(rows))["label"]) == ["", ""]
