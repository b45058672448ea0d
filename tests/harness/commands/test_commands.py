"""The command line's shared parts: numbers written with scaled units, the one table renderer (the
end-of-run table of `compare` fits 100 columns without cutting a number), the one error printer, and the
wiring of every subcommand."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest
from rich.console import Console

from harness import units
from harness.cli import build_parser
from harness.commands import COMMANDS
from harness.commands._terminal import Column, fail, table
from harness.commands.compare import TABLE_WIDTH, end_of_run_tables
from harness.runfolder.schema import SUMMARY_COLUMNS


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (12, "12"), (5.5, "5.5"), (999.4, "999"), (999.96, "1k"), (5000, "5k"), (12_345, "12.3k"),
     (2_263_512, "2.26M"), (999_950, "1M"), (1.5e12, "1500G"), (None, units.MISSING), (math.nan, units.MISSING)],
)
def test_counts_keep_three_digits_and_scale_their_unit(value: float | None, text: str) -> None:
    assert units.count(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.234, "1.23µs"), (850, "850µs"), (999.7, "1ms"), (4560, "4.56ms"), (1.2e6, "1.2s"), (1.5e9, "1500s"),
     (math.nan, units.MISSING)],
)
def test_durations_scale_from_microseconds(value: float, text: str) -> None:
    assert units.duration_us(value) == text


def test_sizes_are_written_as_a_scenario_writes_them() -> None:
    assert [units.size(n) for n in (100, 1000, 1024, 65536, 12345, 1_048_576)] == [
        "100 B", "1 KB", "1 KiB", "64 KiB", "12345 B", "1 MiB"]


def render(renderable: object, width: int = 200) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable, width=min(width, TABLE_WIDTH))
    return out.getvalue().splitlines()


def summary(labels: list[str]) -> pd.DataFrame:
    """Worst-case cells: long names, a large size, numbers at the widest their units allow."""
    rows = []
    for i, label in enumerate(labels):
        for rep in range(3):
            row: dict[str, object] = {c: math.nan for c in SUMMARY_COLUMNS}
            row.update(scenario="a-scenario-with-a-long-name", pattern="queue", system=label.split()[0],
                       variant="acks-all-and-fsync" if i else "default", label=label, size=12345,
                       rate=12_345.0 if i else math.nan, repetition=rep, latency_kind="one-way",
                       sender_msgs_per_s=123_456.0, receiver_msgs_per_s=1_234_567.0, lat_p50_us=12.345,
                       lat_p99_us=4_567.0, lat_p99_9_us=123_456.0, lat_max_us=12_345_678.0,
                       lost=33_333, duplicated=44_444, out_of_order=55_555)
            rows.append(row)
    return pd.DataFrame(rows)


def test_the_end_of_run_table_fits_100_columns_and_keeps_numbers_whole() -> None:
    labels = ["kafka (confluent-kafka, Apache Kafka 4.1 via KRaft)", "rabbitmq (pika)"]
    (only,) = end_of_run_tables(summary(labels))
    lines = render(only)
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    assert "a-scenario-with-a-long-name (queue): median of 3 repetitions" in lines[0]
    body = [line for line in lines if "12345 B" in line]
    assert len(body) == 2  # one line per row
    for line in body:
        for cell in ("123k", "1.23M", "12.3µs", "4.57ms", "123ms", "12.3s", "100k", "133k", "167k"):
            assert cell in line.split(), (cell, line)
    assert "12.3k" in body[1].split() and "max" in body[0].split()
    # Long names are shortened, never the numbers.
    assert body[0].startswith("kafka (confluent-") and body[1].startswith("rabbitmq (pika)/")
    assert all("…" in line for line in body)


def test_a_short_table_is_not_padded_to_the_width_and_shows_brackets() -> None:
    lines = render(table([Column("system"), Column("n", numeric=True)], [["zmq", "1"], ["mqcore[tuned]", "2"]]))
    assert max(len(line) for line in lines) < 20
    assert lines[-1].split() == ["mqcore[tuned]", "2"]  # a variant in brackets is text, not markup


def test_no_results_give_no_table() -> None:
    assert end_of_run_tables(pd.DataFrame()) == []


def test_the_error_printer_writes_one_line_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail(ValueError("x.yaml: field 'rate':\n  must be a number")) == 2
    assert fail("stalled", 1) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["mqbench: x.yaml: field 'rate':; must be a number", "mqbench: stalled"]


def test_every_subcommand_is_wired_in_help_order() -> None:
    parser = build_parser()
    assert [c.NAME for c in COMMANDS] == ["compare", "crosscheck", "systems", "images", "validate", "calibrate",
                                         "report", "history", "regress", "baseline"]
    for command in COMMANDS:
        argv = [command.NAME, "x"] if command.NAME in ("validate", "regress", "baseline") else [command.NAME]
        assert parser.parse_args(argv).run is command.run


def test_systems_lists_every_client_of_a_system_with_its_own_row() -> None:
    """`mqbench systems` names each further client (kafka (java), kafka (confluent-kafka), ...) in a row of
    its own, ready or with the reason, within the terminal's width."""
    import argparse

    from harness.commands import systems
    from harness.drivers import CLIENTS

    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False)
    assert systems.run(argparse.Namespace(broker=[], backend="auto"), console) == 0
    lines = out.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100
    firsts = [line.split("  ")[0].strip() for line in lines]
    for system, clients in CLIENTS.items():
        for client in clients:
            if client not in ("kafka-python",):
                assert f"{system} ({client})" in firsts, (system, client)


def test_systems_says_which_backends_are_ready_and_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per broker: a local process ready or not, and the image containers would run (or no), beside the
    backend auto chose."""
    import argparse

    from harness.brokers import _containers, _images
    from harness.commands import systems

    image = _images.Image("nats", "mqbench/nats:2.9.10-debian", "sha256:" + "cd" * 32, "built here", {"binary": "x"})
    monkeypatch.setattr(_containers, "docker_available", lambda: True)
    monkeypatch.setattr(_images, "choose", lambda system: _images.ImageChoice(
        image if system == "nats" else None, "built here" if system == "nats" else f"no {system} image: none here"))
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    assert systems.run(argparse.Namespace(broker=[], backend="auto"), console) == 0
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.strip()}
    assert "process" in rows["system"] and "containers" in rows["system"]
    assert rows["nats"].split()[2] == "containers" and "mqbench/nats:2.9.10-debian" in rows["nats"]
    redis = rows["redis"].split()
    assert redis[4] == "no" and "no redis image: none here" in rows["redis"]  # containers: why not
    assert rows["zmq"].split()[3:5] == ["–", "–"]


def test_images_without_an_engine_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.brokers import _containers
    from harness.cli import main

    monkeypatch.setattr(_containers, "docker_available", lambda: False)
    assert main(["images", "--systems", "nats"]) == 2
    assert capsys.readouterr().err.startswith("mqbench: no Docker engine answers")
    assert main(["images", "--systems", "nope"]) == 2
    assert "nope has no broker image" in capsys.readouterr().err


def test_a_ctrl_c_says_what_it_left_behind() -> None:
    """A Ctrl-C while cases run leaves the run folder marked incomplete; one while a finished run is being
    summarised leaves its measurements complete, and the sentence says so and how to summarise them."""
    from harness.commands._options import guarded
    from harness.commands._terminal import EXIT_INTERRUPTED
    from harness.compare import SummaryInterrupted

    def stopped_by(exc: BaseException) -> tuple[object, str]:
        out = io.StringIO()

        def call() -> None:
            raise exc

        code = guarded(Console(file=out, width=200), "brokers and workers", call)
        return code, out.getvalue()

    code, said = stopped_by(KeyboardInterrupt())
    assert code == EXIT_INTERRUPTED
    assert said.strip() == "interrupted: brokers and workers stopped; the run folder is marked incomplete"
    code, said = stopped_by(SummaryInterrupted("the run's measurements are complete in results/r [1] but not "
                                               "summarised; `mqbench report results/r` summarises them"))
    assert code == EXIT_INTERRUPTED
    assert said.strip() == ("interrupted: the run's measurements are complete in results/r [1] but not summarised; "
                            "`mqbench report results/r` summarises them")
