"""The HTML/Markdown report and its figures, for full, incomplete, reqrep-only, single-system and
multi-run inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.text import Text

from harness.pipeline import summarize
from harness.report import render_figures, write_report
from harness.report._context import footnote
from tests.harness.pipeline.synthetic import build_run

PNG = b"\x89PNG\r\n\x1a\n"


def _images(html: str) -> list[str]:
    return re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)


def test_report_is_self_contained_with_figures(report_html: Path) -> None:
    assert report_html == report_html.parent / "report.html"
    html = report_html.read_text(encoding="utf-8")
    assert len(_images(html)) >= 3
    assert "src='http" not in html and "<link" not in html  # nothing fetched from elsewhere
    figures = sorted(p.name for p in (report_html.parent / "figures").glob("*.png"))
    assert figures == [
        "headline_pubsub-rates.png",
        "headline_queue-2to1.png",
        "headline_reqrep.png",
        "latency_nines.png",
        "latency_vs_rate.png",
        "throughput_vs_size.png",  # no receipts over time: every case lasts under a second
        "workload_publish_latency.png",  # the queue scenario's producers were told of acknowledgements
    ]
    assert "Publish latency beside end-to-end latency" in html
    assert all((report_html.parent / "figures" / f).read_bytes().startswith(PNG) for f in figures)
    for needle in ("run-report", "testhost", "0123456789abcdef", "queue-2to1", "pyzmq 26.2.0", "round-trip"):
        assert needle in html, needle


def test_incomplete_run_has_banner_and_lost_rows_highlighted(report_html: Path) -> None:
    html = report_html.read_text(encoding="utf-8")
    assert "class='banner'" in html and "INCOMPLETE" in html
    assert html.count('<tr class="problem">') >= 2  # queue fault + pubsub loss, in the delivery table


def test_markdown_and_tables_written(report_html: Path) -> None:
    out = report_html.parent
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "| system | scenario |" in md and "## Delivery" in md and "INCOMPLETE" in md
    for name in ("summary", "aggregate", "series", "distribution"):
        assert (out / f"{name}.parquet").is_file() and (out / f"{name}.csv").is_file()
    assert not [p for p in out.rglob(".*.tmp")]


def test_every_figure_names_systems_versions_and_host(report_run: Path) -> None:
    summary = summarize(report_run, engine="pandas")
    note = footnote(summary)
    assert "pyzmq (pyzmq 26.2.0, libzmq 4.3.5)" in note and "testhost" in note
    for name, fig in render_figures(summary).items():
        texts = " ".join(t.get_text() for t in fig.findobj(Text))
        assert "testhost" in texts and "libzmq 4.3.5" in texts, name


def test_reqrep_only_single_system_run(tmp_path: Path) -> None:
    run = build_run(tmp_path, "rr", scenarios=("reqrep",), systems=("zmq",))
    html = write_report([run]).read_text(encoding="utf-8")
    assert len(_images(html)) == 2  # headline, nines (no time series: the cases last under a second)
    assert "round-trip" in html and "class='banner'" not in html
    assert "only pyzmq (at-most-once) ran" in html
    # one size and no rate sweep: no size chart, no latency-vs-rate chart
    assert not (run / "figures" / "latency_vs_rate.png").exists()
    assert not (run / "figures" / "throughput_vs_size.png").exists()


def test_many_runs_go_to_a_new_report_folder(tmp_path: Path) -> None:
    a = build_run(tmp_path, "run-a", scenarios=("queue-2to1",), systems=("mqcore",))
    b = build_run(tmp_path, "run-b", scenarios=("queue-2to1",), systems=("kafka",), seed=11)
    path = write_report([a, b])
    assert path.parent.parent == tmp_path and path.parent.name.startswith("report-")
    html = path.read_text(encoding="utf-8")
    assert "run-a" in html and "run-b" in html and "kafka (tansu)" in html


def test_explicit_out_dir_and_bad_input(tmp_path: Path, report_run: Path) -> None:
    from harness.pipeline import PipelineError

    path = write_report([report_run], tmp_path / "elsewhere")
    assert path == tmp_path / "elsewhere" / "report.html" and path.is_file()
    with pytest.raises(PipelineError):
        write_report([tmp_path / "missing"])
