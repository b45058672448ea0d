"""Names and numbers a reader sees: each row named by its own system and client (a Java variant of RabbitMQ is
``rabbitmq (java)``, never its system's first label), no word said twice, ratios without exponents, and a
time series only for repetitions long enough to have one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.legend import Legend

from harness import units
from harness.pipeline import Summary, summarize
from harness.report import render_figures
from harness.report._context import row_name
from harness.report._page import sentence
from harness.report.figures import SERIES_MIN_SECONDS, receiver_series
from harness.report.headline import headlines
from harness.report.manifest import variants_table
from tests.harness.pipeline.synthetic import build_run


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    """RabbitMQ through pika, through its Java client, and durable through its Java client, beside pyzmq."""
    run = build_run(tmp_path_factory.mktemp("labels"), "run-labels", scenarios=("queue-2to1", "stream-long"),
                    systems=("zmq", "rabbitmq"))
    return summarize(run, engine="pandas")


def _repeats(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9.]+", text.lower())
    return sorted({w for w in words if words.count(w) > 1})


def test_row_name_says_each_word_once() -> None:
    assert row_name("rabbitmq (pika)", "pika") == "rabbitmq (pika)"
    assert row_name("rabbitmq (java)", "java") == "rabbitmq (java)"
    assert row_name("rabbitmq (java)", "durable-java") == "rabbitmq (java) durable"
    assert row_name("kafka (confluent-kafka)", "acks-all-confluent") == "kafka (confluent-kafka) acks-all"
    assert row_name("kafka (kafka-python)", "kafka-python") == "kafka (kafka-python)"
    assert row_name("rocketmq (rocketmq-python)", "remoting") == "rocketmq (rocketmq-python) remoting"
    assert row_name("pyzmq", "default") == "pyzmq" and row_name("mqcore", "") == "mqcore"


def test_the_variants_table_names_each_variant_by_its_own_client(rabbit: Summary) -> None:
    table = variants_table(rabbit.runs)
    rows = {(r["system"], r["variant"], r["client"]) for r in table.to_dict("records")}
    assert ("rabbitmq (pika)", "pika", "pika") in rows
    assert ("rabbitmq (java)", "java", "java") in rows
    assert ("rabbitmq (java)", "durable-java", "java") in rows
    assert not any(system == "rabbitmq (pika)" and client == "java" for system, _, client in rows)


def test_the_systems_table_names_a_system_of_several_clients_by_itself(rabbit: Summary) -> None:
    from harness.report.manifest import systems_table

    assert set(systems_table(rabbit.runs)["system"]) == {"pyzmq", "rabbitmq"}


def test_per_repetition_labels_follow_the_variant(rabbit: Summary) -> None:
    per = rabbit.per_repetition
    labels = dict(zip(per["variant"], per["label"], strict=False))
    assert labels["pika"] == "rabbitmq (pika)"
    assert labels["java"] == "rabbitmq (java)" and labels["durable-java"] == "rabbitmq (java)"


def test_headline_bars_and_sentences_name_rows_once(rabbit: Summary) -> None:
    head = next(h for h in headlines(rabbit) if h.scenario == "queue-2to1")
    names = sorted(row.name for row in head.rows)
    assert names == ["pyzmq", "rabbitmq (java)", "rabbitmq (java) durable", "rabbitmq (pika)"]
    for name in names:
        assert not _repeats(name), name
    text = sentence(head)
    assert "e+" not in text and "rabbitmq (pika) pika" not in text and "(java) java" not in text


def test_figure_legends_name_rows_once(rabbit: Summary) -> None:
    entries = []
    for fig in render_figures(rabbit).values():
        for ax in fig.axes:
            legend = ax.get_legend()
            if isinstance(legend, Legend):
                entries += [t.get_text() for t in legend.get_texts()]
    assert entries
    assert any(e.startswith("rabbitmq (java)") for e in entries)
    for entry in entries:
        assert "(pika) pika" not in entry and "(java) java" not in entry and "java durable-java" not in entry


def test_legends_stand_beside_the_axes(rabbit: Summary) -> None:
    """A legend inside the plot covers lines: each one starts right of its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for name, fig in render_figures(rabbit).items():
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            if isinstance(legend, Legend) and ax.get_visible():
                assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1 - 1, name


def test_factors_are_written_without_exponents() -> None:
    assert units.factor(290.4) == "290×" and units.factor(2.94) == "2.9×" and units.factor(0.449) == "0.45×"
    assert units.factor(0.0123) == "0.012×" and units.factor(12_345.6) == "12,000×"
    assert units.factor(float("nan")) == units.MISSING


def test_time_series_only_for_repetitions_long_enough(rabbit: Summary) -> None:
    fig = receiver_series(rabbit)
    assert fig is not None
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["stream-long"]  # queue-2to1's cases last a fraction of a second: no line, no panel
    for ax in fig.axes:
        for line in ax.get_lines():
            assert max(line.get_xdata()) >= SERIES_MIN_SECONDS


def test_no_time_series_when_no_case_lasts(tmp_path: Path) -> None:
    run = build_run(tmp_path, "short", scenarios=("queue-2to1",), systems=("zmq",))
    summary = summarize(run, engine="pandas")
    assert receiver_series(summary) is None
    assert "receiver_throughput_over_time" not in render_figures(summary)
