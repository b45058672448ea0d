"""The headline (ranked systems, ratios, sentences), the manifest as tables, and charts that carry
information: all computed from the synthetic run's known numbers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from harness import units
from harness.pipeline import Summary, summarize
from harness.report import render_figures
from harness.report._page import sentence
from harness.report.figures import captions
from harness.report.headline import headlines
from tests.harness.pipeline.synthetic import build_run


@pytest.fixture(scope="module")
def summary(report_run: Path) -> Summary:
    return summarize(report_run, engine="pandas")


def test_one_headline_per_scenario_on_its_headline_case(summary: Summary) -> None:
    heads = {head.scenario: head for head in headlines(summary)}
    assert sorted(heads) == ["pubsub-rates", "queue-2to1", "reqrep"]
    queue = heads["queue-2to1"]
    assert queue.size == 64 and math.isnan(queue.rate) and not queue.by_latency  # smallest size, full speed
    pubsub = heads["pubsub-rates"]
    assert pubsub.rate == 2000 and pubsub.by_latency  # no max rate: the highest offered one, ranked by p99
    assert "intended" in pubsub.latency


def test_rows_are_ranked_with_ratios_to_zmq(summary: Summary) -> None:
    agg = summary.aggregate
    for head in headlines(summary):
        assert head.reference == "pyzmq"  # zmq ran, so it is the reference
        if head.by_latency:
            assert [r.p99_us for r in head.rows] == sorted(r.p99_us for r in head.rows)
        else:
            assert [r.msgs for r in head.rows] == sorted((r.msgs for r in head.rows), reverse=True)
        for row in head.rows:
            case = agg[(agg["scenario"] == head.scenario) & (agg["system"] == row.system)
                       & (agg["size"] == head.size)]
            case = case[case["rate"].isna()] if math.isnan(head.rate) else case[case["rate"] == head.rate]
            assert row.msgs == pytest.approx(float(case["receiver_msgs_per_s_mean"].iloc[0]))
            assert row.ratio == pytest.approx(row.msgs / next(r.msgs for r in head.rows if r.system == "zmq"))
        assert {r.guarantee for r in head.rows} == {"at-most-once"}


def test_sentences_state_the_numbers(summary: Summary) -> None:
    for head in headlines(summary):
        text = sentence(head)
        assert text.startswith(f"{head.scenario} (") and text.endswith(".")
        assert units.duration_us(head.rows[0].p99_us) in text
        assert "at-most-once" in text and "2 repetitions" in text
        for row in head.rows:
            assert row.name in text
    queue = next(h for h in headlines(summary) if h.scenario == "queue-2to1")
    assert "mqcore lost messages" in sentence(queue)  # the injected loss is named


def test_reference_is_the_first_system_without_zmq(tmp_path: Path) -> None:
    run = build_run(tmp_path, "nozmq", scenarios=("queue-2to1",), systems=("mqcore", "kafka"))
    head = headlines(summarize(run, engine="pandas"))[0]
    assert head.reference == "mqcore"
    assert next(r for r in head.rows if r.system == "mqcore").ratio == pytest.approx(1.0)


def test_no_json_in_report_or_summary(report_html: Path) -> None:
    for path in (report_html, report_html.parent / "summary.md"):
        text = re.sub(r"<style>.*?</style>", "", path.read_text(encoding="utf-8"), flags=re.S)
        assert not re.search(r"[{\[]\s*\"", text), path.name  # no {"key" or ["item"
        assert "queue-2to1" in text and "64 B, 1 KiB" in text  # the scenario as table cells
        assert "pyzmq 26.2.0, libzmq 4.3.5" in text


def test_headline_comes_first(report_html: Path) -> None:
    html = report_html.read_text(encoding="utf-8")
    assert html.index("id='headline'") < html.index("<h2>")
    md = (report_html.parent / "summary.md").read_text(encoding="utf-8")
    assert md.index("## Headline") < md.index("## Run ") < md.index("## Results")


def test_rate_axes_start_at_zero_and_captions_count_repetitions(summary: Summary) -> None:
    fig = render_figures(summary)["throughput_vs_size"]
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["queue-2to1", "queue-2to1"]  # the only scenario with two sizes
    for ax in fig.axes:
        if ax.get_visible():
            assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    for name, text in captions(summary).items():
        assert "2 repetitions" in text, name
